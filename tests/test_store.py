
import pandas as pd
import pytest
import torch

from robustkit import store
from robustkit.errors import StoreError


def _new_run(tmp_path, name="run-a", **manifest):
    run_dir = tmp_path / name
    run_dir.mkdir()
    store.write_manifest(run_dir, {"run_id": name, "kind": "finetune", "spec": {"task": "rt"}, "checkpoints": {}, **manifest})
    return run_dir


def test_store_path_that_is_a_file_is_refused(tmp_path):
    path = tmp_path / "runs"
    path.write_text("not a folder")
    with pytest.raises(StoreError, match="is a file"):
        store.open_store(path)


def test_checkpoint_roundtrip_with_sha_in_manifest(tmp_path):
    run_dir = _new_run(tmp_path)
    tensors = {"a.weight": torch.arange(6.0).reshape(2, 3)}
    entry = store.save_checkpoint(run_dir, "best", tensors, {"base_fingerprint": "x"}, step=7)
    assert store.read_manifest(run_dir)["checkpoints"]["best"] == entry
    assert entry["files"]["model.safetensors"] == store.sha256_file(run_dir / "checkpoints/best/model.safetensors")
    loaded, meta = store.load_checkpoint(run_dir, "best")
    assert torch.equal(loaded["a.weight"], tensors["a.weight"]) and meta["base_fingerprint"] == "x"


def test_corrupt_or_truncated_checkpoint_is_named(tmp_path):
    run_dir = _new_run(tmp_path)
    store.save_checkpoint(run_dir, "last", {"w": torch.ones(100)}, {}, step=1)
    path = run_dir / "checkpoints/last/model.safetensors"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(StoreError, match="corrupt or truncated"):
        store.load_checkpoint(run_dir, "last")


def test_missing_checkpoint_lists_what_exists(tmp_path):
    run_dir = _new_run(tmp_path)
    store.save_checkpoint(run_dir, "step-0", {"w": torch.ones(1)}, {}, step=0)
    with pytest.raises(StoreError, match="no checkpoint 'best'.*step-0"):
        store.load_checkpoint(run_dir, "best")


def test_crash_between_rename_and_manifest_restores_the_old_checkpoint(tmp_path, monkeypatch):
    run_dir = _new_run(tmp_path)
    store.save_checkpoint(run_dir, "last", {"w": torch.zeros(3)}, {}, step=1)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "write_manifest", crash)
    with pytest.raises(KeyboardInterrupt):
        store.save_checkpoint(run_dir, "last", {"w": torch.ones(3)}, {}, step=2)
    monkeypatch.undo()
    store.recover_checkpoints(run_dir)
    tensors, _ = store.load_checkpoint(run_dir, "last")
    assert torch.equal(tensors["w"], torch.zeros(3))
    assert not list((run_dir / "checkpoints").glob(".*"))


def test_lock_refuses_a_second_holder(tmp_path):
    run_dir = _new_run(tmp_path)
    with store.run_lock(run_dir):
        with pytest.raises(StoreError, match="another process"):
            with store.run_lock(run_dir):
                pass
    with store.run_lock(run_dir):  # released
        pass


def test_corrupt_manifest_is_named(tmp_path):
    run_dir = _new_run(tmp_path)
    (run_dir / "manifest.json").write_text("{not json")
    with pytest.raises(StoreError, match="corrupt manifest"):
        store.read_manifest(run_dir)
    with pytest.warns(store.DamagedRunWarning, match="run-a: corrupt manifest"):
        assert store.load_runs(tmp_path).empty


def test_tidy_loaders(tmp_path):
    run_dir = _new_run(tmp_path, final={"best": {"test": {"accuracy": 0.8}}}, status="complete")
    pd.DataFrame({"step": [1, 2], "epoch": [0.5, 1.0], "split": "validation", "metric": "accuracy", "value": [0.6, 0.7]}).to_parquet(run_dir / "history.parquet")
    runs = store.load_runs(tmp_path)
    assert runs.loc[0, "best/test/accuracy"] == 0.8 and runs.loc[0, "status"] == "complete"
    history = store.load_history(tmp_path)
    assert list(history.columns[:3]) == ["run_id", "model", "task"] and len(history) == 2


def test_empty_store_gives_empty_frames(tmp_path):
    assert store.load_runs(tmp_path).empty and "run_id" in store.load_history(tmp_path).columns
