"""Tests of :mod:`robustkit.store.manifest`: a corrupt manifest is named, and its run left out."""

import pytest
from conftest import new_run

from robustkit.errors import StoreError
from robustkit.store.manifest import read_manifest
from robustkit.store.tables import DamagedRunWarning, load_runs


def test_corrupt_manifest_is_named(tmp_path):
    run_dir = new_run(tmp_path)
    (run_dir / "manifest.json").write_text("{not json")
    with pytest.raises(StoreError, match="corrupt manifest"):
        read_manifest(run_dir)
    with pytest.warns(DamagedRunWarning, match="run-a: corrupt manifest"):
        assert load_runs(tmp_path).empty
