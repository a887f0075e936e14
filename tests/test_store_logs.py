"""Training logs are hashed like checkpoints (issue #27, item 1): a flipped bit or a deleted
log file is found by `verify`, moved aside by `--repair`, and left out of every loader with a
warning naming the run, never read silently."""

from __future__ import annotations

import shutil

import pytest

from robustkit.analysis.verify import verify_store
from robustkit.store import DamagedRunWarning, load_gradnorms, load_history
from robustkit.store.atomic import sha256_file
from robustkit.store.folders import GRADNORMS, HISTORY
from robustkit.store.logs import log_problems
from robustkit.store.manifest import read_manifest


@pytest.fixture
def store(tiny_store, tmp_path):
    copy = tmp_path / "runs"
    shutil.copytree(tiny_store, copy, ignore=shutil.ignore_patterns(".cache"))
    return copy


def _run(store, method):
    return next(p for p in store.iterdir() if f"-{method}-" in p.name)


def test_training_records_the_logs_sha256(store):
    for run_dir in (_run(store, "full"), _run(store, "houlsby")):
        logs = read_manifest(run_dir)["logs"]
        assert logs == {name: sha256_file(run_dir / name) for name in (HISTORY, GRADNORMS)}
        assert log_problems(run_dir, read_manifest(run_dir)) == []
    assert set(verify_store(store)["status"]) == {"ok"}


@pytest.mark.parametrize("name", [HISTORY, GRADNORMS])
def test_a_flipped_bit_in_a_log_is_found_and_left_out(store, name):
    run_dir = _run(store, "full")
    data = bytearray((run_dir / name).read_bytes())
    data[len(data) // 2] ^= 0x01
    (run_dir / name).write_bytes(bytes(data))
    report = verify_store(store).set_index("run_id")
    assert report.loc[run_dir.name, "status"] == "damaged"
    assert f"{name} does not match its sha256" in report.loc[run_dir.name, "problem"]
    loader = load_history if name == HISTORY else load_gradnorms
    with pytest.warns(DamagedRunWarning, match=run_dir.name):
        frame = loader(store)
    assert run_dir.name not in set(frame["run_id"]) and len(frame)  # the intact run is still read
    moved = verify_store(store, repair=True).set_index("run_id").loc[run_dir.name]
    assert moved["status"] == "moved" and not run_dir.exists()


def test_a_deleted_log_is_found(store):
    run_dir = _run(store, "houlsby")
    (run_dir / GRADNORMS).unlink()
    report = verify_store(store).set_index("run_id")
    assert (
        report.loc[run_dir.name, "status"] == "damaged"
        and "gradnorms.parquet is missing" in report.loc[run_dir.name, "problem"]
    )
    with pytest.warns(DamagedRunWarning, match="gradnorms.parquet is missing"):
        assert run_dir.name not in set(load_gradnorms(store)["run_id"])


def test_a_running_run_and_an_old_run_are_not_checked(store):
    run_dir = _run(store, "full")
    manifest = read_manifest(run_dir)
    assert log_problems(run_dir, {**manifest, "status": "running", "logs": {HISTORY: "0" * 64}}) == []
    assert log_problems(run_dir, {k: v for k, v in manifest.items() if k != "logs"}) == []
