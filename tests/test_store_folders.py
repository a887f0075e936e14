"""Tests of :mod:`robustkit.store.folders`: the store folder."""

import pytest

from robustkit.errors import StoreError
from robustkit.store.folders import open_store


def test_store_path_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / "runs"
    path.write_text("not a folder")
    with pytest.raises(StoreError, match="is a file"):
        open_store(path)
