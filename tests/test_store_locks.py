"""Tests of :mod:`robustkit.store.locks`: one process trains a run at a time."""

import pytest
from conftest import new_run

from robustkit.errors import StoreError
from robustkit.store.locks import run_lock


def test_lock_refuses_a_second_holder(tmp_path):
    run_dir = new_run(tmp_path)
    with run_lock(run_dir):
        with pytest.raises(StoreError, match="another process"):
            with run_lock(run_dir):
                pass
    with run_lock(run_dir):  # released
        pass
