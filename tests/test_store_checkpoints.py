"""Tests of :mod:`robustkit.store.checkpoints`: sha256-checked checkpoints and crash recovery."""

import pytest
import torch
from conftest import new_run

from robustkit.errors import StoreError
from robustkit.store import checkpoints
from robustkit.store.atomic import sha256_file
from robustkit.store.checkpoints import load_checkpoint, recover_checkpoints, save_checkpoint
from robustkit.store.manifest import read_manifest


def test_checkpoint_roundtrip_with_sha_in_manifest(tmp_path):
    run_dir = new_run(tmp_path)
    tensors = {"a.weight": torch.arange(6.0).reshape(2, 3)}
    entry = save_checkpoint(run_dir, "best", tensors, {"base_fingerprint": "x"}, step=7)
    assert read_manifest(run_dir)["checkpoints"]["best"] == entry
    assert entry["files"]["model.safetensors"] == sha256_file(run_dir / "checkpoints/best/model.safetensors")
    loaded, meta = load_checkpoint(run_dir, "best")
    assert torch.equal(loaded["a.weight"], tensors["a.weight"]) and meta["base_fingerprint"] == "x"


def test_corrupt_or_truncated_checkpoint_is_named(tmp_path):
    run_dir = new_run(tmp_path)
    save_checkpoint(run_dir, "last", {"w": torch.ones(100)}, {}, step=1)
    path = run_dir / "checkpoints/last/model.safetensors"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(StoreError, match="corrupt or truncated"):
        load_checkpoint(run_dir, "last")


def test_missing_checkpoint_lists_what_exists(tmp_path):
    run_dir = new_run(tmp_path)
    save_checkpoint(run_dir, "step-0", {"w": torch.ones(1)}, {}, step=0)
    with pytest.raises(StoreError, match="no checkpoint 'best'.*step-0"):
        load_checkpoint(run_dir, "best")


def test_crash_between_rename_and_manifest_restores_the_old_checkpoint(tmp_path, monkeypatch):
    run_dir = new_run(tmp_path)
    save_checkpoint(run_dir, "last", {"w": torch.zeros(3)}, {}, step=1)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoints, "write_manifest", crash)  # where save_checkpoint looks it up
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(run_dir, "last", {"w": torch.ones(3)}, {}, step=2)
    monkeypatch.undo()
    recover_checkpoints(run_dir)
    tensors, _ = load_checkpoint(run_dir, "last")
    assert torch.equal(tensors["w"], torch.zeros(3))
    assert not list((run_dir / "checkpoints").glob(".*"))
