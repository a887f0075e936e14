"""Damaged runs (issue #13 item 3): manifests are checked on every read; a bad one is a
``damaged`` run, named with its reason and left out of listings, analyses and sweeps instead of
blocking the store; ``robustkit verify`` re-hashes every checkpoint, and ``--repair`` moves
damaged runs aside so that the next sweep trains them again."""

import dataclasses
import json
import shutil

import pytest
from conftest import TINY_RTE, write_rte

from robustkit.analysis.verify import verify_store
from robustkit.cli import main
from robustkit.errors import DamagedRunError
from robustkit.specs.spec import RunSpec
from robustkit.store.checkpoints import checkpoint_problems, finished_state, save_checkpoint
from robustkit.store.folders import run_folders
from robustkit.store.manifest import read_manifest, write_manifest
from robustkit.store.tables import DamagedRunWarning, load_history, load_runs
from robustkit.sweeps.grid import run_sweep


class _RecordingExecutor:
    """Trains nothing: records the jobs it is given and answers ``complete``."""

    def __init__(self):
        self.jobs = []

    def run(self, jobs):
        self.jobs = list(jobs)
        return [{"run_id": job.run_id, "status": "complete", "error": None} for job in jobs]


def _spec(tiny_store, method: str) -> RunSpec:
    """The spec of a run of the tiny_store fixture (its id is the run's folder)."""
    return dataclasses.replace(TINY_RTE, method=method, data_dir=str(tiny_store.parent / "glue")).resolved()


def _cli(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert "Traceback" not in output
    return code, output


@pytest.fixture
def half_damaged(tiny_store, tmp_path):
    """A store with the intact houlsby run of tiny_store and the full run's folder, whose
    manifest each test replaces (its checkpoints are not copied: a bad manifest is enough)."""
    root = tmp_path / "runs"
    good, bad = _spec(tiny_store, "houlsby"), _spec(tiny_store, "full")
    shutil.copytree(tiny_store / good.run_id, root / good.run_id)
    (root / bad.run_id).mkdir()
    shutil.copy(tiny_store / bad.run_id / "manifest.json", root / bad.run_id / "manifest.json")
    return root, good, bad


def _without(manifest: dict, key: str) -> dict:
    return {k: v for k, v in manifest.items() if k != key}


# (change to a good manifest, words of the reason)
SHAPES = {
    "empty object": (lambda m: {}, "no 'run_id'"),
    "list": (lambda m: [], "a JSON list"),
    "string": (lambda m: "x", "a JSON str"),
    "no spec": (lambda m: _without(m, "spec"), "no 'spec'"),
    "no kind": (lambda m: _without(m, "kind"), "no 'kind'"),
    "unknown kind": (lambda m: {**m, "kind": "lora"}, "kind is 'lora'"),
    "spec not an object": (lambda m: {**m, "spec": [1]}, "spec is"),
    "seed a string": (lambda m: {**m, "spec": {**m["spec"], "seed": "0"}}, "'seed' is '0'"),
    "unknown spec field": (lambda m: {**m, "spec": {**m["spec"], "colour": "red"}}, "unknown field 'colour'"),
    "status a number": (lambda m: {**m, "status": 3}, "status is 3"),
    "final a list": (lambda m: {**m, "final": []}, "final is"),
    "checkpoints a list": (lambda m: {**m, "checkpoints": []}, "checkpoints is"),
    "bad sha256": (
        lambda m: {**m, "checkpoints": {"best": {"step": 1, "files": {"model.safetensors": "abc"}}}},
        "not a sha256",
    ),
    "another run's id": (lambda m: {**m, "run_id": "rt-other"}, "not the name of its folder"),
    "not JSON": (None, "not JSON"),
}


@pytest.mark.parametrize("shape", SHAPES)
def test_a_manifest_of_the_wrong_shape_is_a_damaged_run_and_blocks_nothing(half_damaged, shape, capsys):
    root, good, bad = half_damaged
    change, reason = SHAPES[shape]
    path = root / bad.run_id / "manifest.json"
    path.write_text("{broken" if change is None else json.dumps(change(json.loads(path.read_text()))))
    with pytest.raises(DamagedRunError, match=reason) as error:
        read_manifest(path.parent)
    assert "--repair" in str(error.value)
    # listing and analyses: the other run, with a warning naming the damaged one
    with pytest.warns(DamagedRunWarning, match=bad.run_id):
        assert list(load_runs(root).run_id) == [good.run_id]
    from robustkit.analysis.select import select_runs

    with pytest.warns(DamagedRunWarning):
        assert list(select_runs(root).run_id) == [good.run_id]
    with pytest.warns(DamagedRunWarning):
        assert set(load_history(root).run_id) == {good.run_id}
    listed = load_runs(root, include_damaged=True).set_index("run_id")
    assert listed.loc[bad.run_id, "status"] == "damaged" and reason in listed.loc[bad.run_id, "problem"]
    # `runs` shows it, with its reason and what to do
    code, output = _cli(capsys, "runs", str(root))
    assert code == 0 and f"DAMAGED {bad.run_id}" in output and "verify" in output and good.run_id in output
    # the sweep skips the intact run, refuses the damaged one (no training over it)
    executor = _RecordingExecutor()
    results = run_sweep([good, bad], root, executor=executor).set_index("run_id")
    assert executor.jobs == []
    assert results.loc[good.run_id, "status"] == "skipped" and results.loc[bad.run_id, "status"] == "damaged"
    assert "--repair" in results.loc[bad.run_id, "error"]
    # verify names it; the exit status says damage is left
    code, output = _cli(capsys, "verify", str(root))
    assert code == 1 and f"DAMAGED {bad.run_id}" in output and "1 ok, 1 damaged" in output


def test_verify_passes_an_intact_store(tiny_store, capsys):
    table = verify_store(tiny_store)
    assert set(table.status) == {"ok"} and len(table) == 2
    assert table.files.min() >= 5  # step-0, best, last (model, optimizer, state)
    code, output = _cli(capsys, "verify", str(tiny_store))
    assert code == 0 and "2 ok" in output


def test_verify_of_a_missing_store_is_an_error_not_a_traceback(tmp_path, capsys):
    code, output = _cli(capsys, "verify", str(tmp_path / "nowhere"))
    assert code == 2 and "does not exist" in output


@pytest.mark.parametrize("damage", ["flip a byte of last", "truncate best", "delete last"])
def test_a_damaged_checkpoint_of_a_complete_run_is_found_repaired_and_retrained_to_the_same_bytes(
    tmp_path, damage, capsys
):
    root = tmp_path / "runs"
    spec = dataclasses.replace(TINY_RTE, epochs=1, data_dir=str(write_rte(tmp_path / "glue"))).resolved()
    assert list(run_sweep([spec], root, progress=False).status) == ["complete"]
    run_dir = root / spec.run_id
    intact = {name: (run_dir / "checkpoints" / name / "model.safetensors").read_bytes() for name in ("best", "last")}
    name = "best" if "best" in damage else "last"
    path = run_dir / "checkpoints" / name / "model.safetensors"
    if damage.startswith("flip"):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
    elif damage.startswith("truncate"):
        path.write_bytes(path.read_bytes()[:-100])
    else:
        path.unlink()
    assert finished_state(run_dir)[0] is False
    table = verify_store(root)
    assert list(table.status) == ["damaged"] and f"checkpoints/{name}/model.safetensors" in table.problem[0]
    # not counted complete, not trained over: reported, with what to do
    results = run_sweep([spec], root, progress=False)
    assert list(results.status) == ["damaged"] and "--repair" in results.error[0]
    code, output = _cli(capsys, "verify", str(root), "--repair")
    assert code == 0 and f"MOVED {spec.run_id}" in output
    assert not run_dir.exists() and len(list((root / ".damaged").iterdir())) == 1
    assert verify_store(root).empty
    # the next sweep trains it again, to the bytes it had
    assert list(run_sweep([spec], root, progress=False).status) == ["complete"]
    assert {n: (run_dir / "checkpoints" / n / "model.safetensors").read_bytes() for n in intact} == intact
    assert list(run_sweep([spec], root, progress=False).status) == ["skipped"]


def test_a_deleted_manifest_is_reported_and_its_checkpoints_never_trained_over(tiny_store, tmp_path, capsys):
    from robustkit.train import train

    root = tmp_path / "runs"
    spec = _spec(tiny_store, "houlsby")
    run_dir = shutil.copytree(tiny_store / spec.run_id, root / spec.run_id)
    (run_dir / "manifest.json").unlink()
    checkpoints = {p: p.stat().st_mtime_ns for p in (run_dir / "checkpoints").rglob("*")}
    with pytest.warns(DamagedRunWarning, match="manifest.json is missing"):
        assert load_runs(root).empty
    results = run_sweep([spec], root, executor=_RecordingExecutor())
    assert list(results.status) == ["damaged"] and "manifest.json is missing" in results.error[0]
    with pytest.raises(DamagedRunError, match="manifest.json is missing"):
        train(spec, root, progress=False)
    assert {p: p.stat().st_mtime_ns for p in (run_dir / "checkpoints").rglob("*")} == checkpoints
    assert not (run_dir / "manifest.json").exists()
    code, output = _cli(capsys, "verify", str(root))
    assert code == 1 and "put its manifest.json back" in output
    code, output = _cli(capsys, "verify", str(root), "--repair")
    assert code == 0 and not run_dir.exists()
    executor = _RecordingExecutor()
    assert list(run_sweep([spec], root, executor=executor).status) == ["complete"]
    assert [job.run_id for job in executor.jobs] == [spec.run_id]  # handed to training again


def test_a_complete_run_without_best_or_last_is_not_complete(half_damaged):
    root, good, _ = half_damaged
    manifest = read_manifest(root / good.run_id)
    del manifest["checkpoints"]["last"]
    write_manifest(root / good.run_id, manifest)
    finished, problem = finished_state(root / good.run_id)
    assert not finished and "checkpoint 'last' is not in the manifest" in problem


def test_folders_that_are_not_runs_are_not_damaged(tiny_store, tmp_path):
    root = tmp_path / "runs"
    (root / ".cache" / "curves").mkdir(parents=True)
    (root / "never-started").mkdir()
    (root / "never-started" / ".lock").write_text("")  # a run whose lock was taken, nothing more
    assert run_folders(root) == [] and verify_store(root).empty


def test_a_checkpoint_whose_save_was_killed_is_not_damage_while_its_backup_matches(tmp_path):
    import torch

    run_dir = tmp_path / "run-a"
    run_dir.mkdir()
    write_manifest(run_dir, {"run_id": "run-a", "kind": "finetune", "spec": {}, "checkpoints": {}})
    save_checkpoint(run_dir, "last", {"w": torch.zeros(3)}, {}, step=1)
    folder = run_dir / "checkpoints"
    (folder / "last").rename(folder / ".last.old")  # killed between the two renames of a save
    (folder / "last").mkdir()
    (folder / "last" / "model.safetensors").write_bytes(b"half a new file")
    assert checkpoint_problems(run_dir) == []  # readers take the backup; recover_checkpoints restores it
    shutil.rmtree(folder / ".last.old")
    assert "corrupt or truncated" in checkpoint_problems(run_dir)[0]


class _Killed(BaseException):
    """Stands for a kill: not an ``Exception``, so the run stays resumable (not ``failed``)."""


def test_an_interrupted_run_whose_last_is_corrupt_says_what_to_do_and_trains_after_repair(
    tmp_path, monkeypatch, capsys
):
    """Before, each re-run failed on the corrupt `last` the same way, with no hint."""
    from robustkit.train import train
    from robustkit.train.loop import _Loop

    root = tmp_path / "runs"
    spec = dataclasses.replace(TINY_RTE, epochs=1, data_dir=str(write_rte(tmp_path / "glue")))
    original = _Loop.step

    def step(self, model, batch, optimiser, factor, step, max_grad_norm):
        if step == 3:
            raise _Killed
        return original(self, model, batch, optimiser, factor, step, max_grad_norm)

    monkeypatch.setattr(_Loop, "step", step)
    with pytest.raises(_Killed):
        train(spec, root, progress=False)
    monkeypatch.setattr(_Loop, "step", original)
    run_dir = root / spec.run_id
    path = run_dir / "checkpoints" / "last" / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DamagedRunError, match="'last'.*corrupt or truncated.*verify .* --repair"):
        train(spec, root, progress=False)
    code, output = _cli(capsys, "verify", str(root), "--repair")
    assert code == 0 and f"MOVED {spec.run_id}" in output
    assert read_manifest(train(spec, root, progress=False))["status"] == "complete"
