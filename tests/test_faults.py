"""Fault injection (issue #13): kill a run at chosen and at seeded-random points, then resume.

Every kill is at one *fault point* of a training run, numbered in the order the run passes
them (:class:`Injector`): a store write (:func:`robustkit.store.atomic.atomic_write_bytes`: manifest,
history, gradient norms and every checkpoint file), a checkpoint folder's rename, a training
step (after its backward pass, before its update), an evaluation, and the serialisation of the
optimizer state. A write is killed before it starts, half-way (a torn temporary file left
behind), after its temporary file is complete but before its rename, or just after the rename.

In-process kills raise :class:`_Killed` (a ``BaseException``, as a kill leaves no ``failed``
status behind: the run stays resumable); subprocess kills are a real SIGKILL. After each kill:

- readers see only whole files: the manifest parses, every checkpoint it lists passes its sha256
  check and is the uninterrupted run's checkpoint of that step, the logs parse;
- nothing is lost beyond the last checkpoint: the manifest's ``last`` is at least the newest one
  whose save had returned;

and after the resume the run is bit-identical to an uninterrupted one (manifest metrics,
history, gradient norms, the sha256 of every checkpoint file), with no temporary file, staging
or backup folder or unlisted checkpoint left in its folder.

A killed sweep (its parent process) is tested in ``test_sweep.py``.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import torch
from conftest import TINY_RTE, write_rte

from robustkit.spec import RunSpec
from robustkit.store import atomic, checkpoints
from robustkit.store.checkpoints import read_checkpoint_file
from robustkit.store.folders import GRADNORMS, HISTORY, MANIFEST
from robustkit.store.manifest import read_manifest
from robustkit.store.tables import load_runs
from robustkit.train import finetuning, loop, train

TESTS = Path(__file__).parent
SPEC = dataclasses.replace(TINY_RTE, method="houlsby", seed=0, lr=3e-3)  # `best` improves once: replaced
WRITE_MODES = ("before", "torn", "unrenamed", "after")


class _Killed(BaseException):
    """A simulated kill: not an ``Exception``, so the run is left resumable (not ``failed``)."""


def _raise_killed() -> None:
    raise _Killed


def _sigkill_self() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _leave_temp(path: Path, data: bytes) -> None:
    """What a kill inside :func:`robustkit.store.atomic.atomic_write_bytes` leaves: its temporary
    file (named as it names them), with ``data`` in it, never renamed nor removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, _ = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(handle, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())


class Injector:
    """Numbers the fault points a run passes (``events``: one label each) and kills it at one.

    Parameters
    ----------
    root : path
        The store: labels name paths relative to it, and renames elsewhere are not counted.
    fire_at : int, optional
        The fault point (index into ``events``) to kill at; None only records.
    how : str
        For a write: ``before``, ``torn``, ``unrenamed`` or ``after`` (see the module docstring).
    kill : callable
        The kill: raise :class:`_Killed` (default), or a real SIGKILL (:func:`_sigkill_self`).
    """

    def __init__(self, root, fire_at: int | None = None, how: str = "before", kill=_raise_killed):
        self.root, self.fire_at, self.how, self.kill = Path(root), fire_at, how, kill
        self.events: list[str] = []
        # (name, step, manifest entry, fault points passed) of each checkpoint save that returned
        self.saved: list[tuple[str, int, dict, int]] = []
        self.fired: str | None = None

    def install(self, setattr) -> None:
        """Patch the fault points in with ``setattr`` (``monkeypatch.setattr``, or the builtin)."""
        real_write, real_save = atomic.atomic_write_bytes, checkpoints.save_checkpoint
        real_rename, real_norms = pathlib.Path.rename, loop.gradient_norms
        real_evaluate, real_serialise = finetuning.evaluate, loop.save_safetensors
        injector = self

        def write(path, data):
            if self._point(f"write {Path(path).relative_to(self.root)}"):
                if self.how == "after":
                    real_write(path, data)
                elif self.how in ("torn", "unrenamed"):
                    _leave_temp(Path(path), data if self.how == "unrenamed" else data[: len(data) // 2])
                self.kill()
            return real_write(path, data)

        def save_checkpoint(run_dir, name, tensors, metadata, step, extra=None):
            entry = real_save(run_dir, name, tensors, metadata, step, extra)
            self.saved.append((name, step, entry, len(self.events)))
            return entry

        def rename(path, target):
            inside = Path(path).is_relative_to(injector.root)
            if inside and injector._point(f"rename {path.relative_to(injector.root)} -> {Path(target).name}"):
                injector.kill()
            return real_rename(path, target)

        def gradient_norms(*args, **kwargs):
            norms = real_norms(*args, **kwargs)  # the step's forward and backward are done, its update is not
            if self._point("step"):
                self.kill()
            return norms

        def evaluate(*args, **kwargs):
            if self._point("evaluate"):
                self.kill()
            return real_evaluate(*args, **kwargs)

        def serialise(*args, **kwargs):
            if self._point("serialise"):
                self.kill()
            return real_serialise(*args, **kwargs)

        # each module imports the names it calls: patch every store and training module that binds one
        for name, real, fault in (("atomic_write_bytes", real_write, write), ("save_checkpoint", real_save, save_checkpoint),
                                  ("gradient_norms", real_norms, gradient_norms), ("evaluate", real_evaluate, evaluate),
                                  ("save_safetensors", real_serialise, serialise)):
            for module in _bound_in(name, real):
                setattr(module, name, fault)
        setattr(pathlib.Path, "rename", rename)

    def _point(self, label: str) -> bool:
        self.events.append(label)
        if self.fire_at is not None and len(self.events) - 1 == self.fire_at:
            self.fired = label
            return True
        return False

    def disarm(self) -> None:
        self.fire_at = None


def _bound_in(name: str, value) -> list:
    """The modules of ``robustkit.store`` and ``robustkit.train`` whose global ``name`` is ``value``
    (where a call to it is looked up)."""
    found = [module for key, module in sorted(sys.modules.items())
             if key.startswith(("robustkit.store.", "robustkit.train.")) and getattr(module, name, None) is value]
    assert found, f"no store or training module binds {name}"
    return found


@dataclasses.dataclass
class Reference:
    """The uninterrupted run, and the fault points it passed."""

    root: Path
    run_dir: Path
    manifest: dict
    tables: dict[str, pd.DataFrame]
    tree: set[str]
    runs: pd.DataFrame
    events: list[str]
    saved: list[tuple[str, int, dict, int]]  # every checkpoint save: Injector.saved
    entries: dict[tuple[str, int], dict]  # every checkpoint it saved, by (name, step)

    def index(self, match: str, nth: int) -> int:
        """The fault point: the ``nth`` (negative: from the end) whose label contains ``match``."""
        hits = [i for i, label in enumerate(self.events) if match in label]
        assert hits, f"the reference run passes no fault point {match!r}: {sorted(set(self.events))}"
        return hits[nth]


def _tree(run_dir: Path) -> set[str]:
    return {str(path.relative_to(run_dir)) for path in run_dir.rglob("*")}


def _runs(root: Path) -> pd.DataFrame:
    return load_runs(root).drop(columns="path")


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> RunSpec:
    return dataclasses.replace(SPEC, data_dir=str(write_rte(tmp_path_factory.mktemp("faults-glue"))))


@pytest.fixture(scope="module")
def reference(spec, tmp_path_factory) -> Reference:
    root = tmp_path_factory.mktemp("faults-reference")
    injector = Injector(root)
    with pytest.MonkeyPatch.context() as patch:
        injector.install(patch.setattr)
        run_dir = train(spec, root, progress=False)
    entries = {(name, step): entry for name, step, entry, _ in injector.saved}
    assert len(entries) == len(injector.saved)  # one checkpoint per name and step
    return Reference(
        root, run_dir, read_manifest(run_dir),
        {table: pd.read_parquet(run_dir / table) for table in (HISTORY, GRADNORMS)},
        _tree(run_dir), _runs(root), injector.events, injector.saved, entries,
    )


def _check_after_kill(root: Path, ref: Reference, saved: list[tuple[str, int, dict, int]]) -> None:
    """What readers see right after the kill: whole files, the reference's checkpoints only,
    and nothing lost before the newest ``last`` whose save returned."""
    run_dir = root / ref.run_dir.name
    if not (run_dir / MANIFEST).exists():
        assert not saved and load_runs(root).empty
        return
    manifest = read_manifest(run_dir)
    assert manifest["status"] in ("running", "complete")
    for name, entry in manifest["checkpoints"].items():
        for file_name in entry["files"]:
            read_checkpoint_file(run_dir, name, file_name)  # on disk: the bytes it lists
        assert entry == ref.entries[(name, entry["step"])], f"checkpoint {name} differs from the reference's"
    for name in {name for name, _, _, _ in saved}:  # every save that returned is kept, or a newer one
        newest = max(step for saved_name, step, _, _ in saved if saved_name == name)
        assert manifest["checkpoints"][name]["step"] >= newest, f"checkpoint {name} at step {newest} was lost"
    assert load_runs(root).run_id.tolist() == [ref.run_dir.name]
    for table in (HISTORY, GRADNORMS):
        if (run_dir / table).exists():
            pd.read_parquet(run_dir / table)


def _check_like_reference(root: Path, ref: Reference) -> None:
    """The resumed run is the uninterrupted one, bit for bit, and its folder holds nothing else."""
    run_dir = root / ref.run_dir.name
    manifest = read_manifest(run_dir)
    for key in ("status", "final", "best_step", "outcome", "checkpoints", "spec", "trainable", "splits"):
        assert manifest[key] == ref.manifest[key], key
    for name, entry in manifest["checkpoints"].items():
        for file_name in entry["files"]:
            read_checkpoint_file(run_dir, name, file_name)  # the sha256 the reference's has
    for table, frame in ref.tables.items():
        pd.testing.assert_frame_equal(pd.read_parquet(run_dir / table), frame, check_exact=True)
    assert _tree(run_dir) == ref.tree, "left behind: temporary files, staging/backup or unlisted folders"
    pd.testing.assert_frame_equal(_runs(root), ref.runs, check_exact=True)


def _kill_and_resume(spec: RunSpec, ref: Reference, root: Path, monkeypatch, index: int, how: str) -> None:
    injector = Injector(root, fire_at=index, how=how)
    injector.install(monkeypatch.setattr)
    with pytest.raises(_Killed):
        train(spec, root, progress=False)
    assert injector.fired == ref.events[index]
    _check_after_kill(root, ref, injector.saved)
    injector.disarm()
    train(spec, root, progress=False)
    _check_like_reference(root, ref)


# (fault point label contains, its nth occurrence, how a write is killed); steps come from a seed
TARGETED = {
    "first-manifest-before": ("manifest.json", 0, "before"),
    "first-manifest-torn": ("manifest.json", 0, "torn"),
    "step-0-file-unrenamed": (".step-0.tmp/model", 0, "unrenamed"),
    "step-0-folder-renamed-not-listed": ("manifest.json", 1, "before"),
    "step-0-staging-rename": ("rename", 0, "before"),
    "best-file-torn": (".best.tmp/model", 0, "torn"),
    "best-listed": ("manifest.json", 2, "after"),
    "history-unrenamed": ("history.parquet", 0, "unrenamed"),
    "gradnorms-torn": ("gradnorms.parquet", 1, "torn"),
    "last-model-unrenamed": (".last.tmp/model", 0, "unrenamed"),
    "last-optimizer-torn": (".last.tmp/optimizer", 1, "torn"),
    "last-state-after": (".last.tmp/state.json", 1, "after"),
    "last-to-backup-rename": ("last -> .last.old", 0, "before"),
    "last-backup-made-staging-not-renamed": (".last.tmp -> last", 1, "before"),
    "better-best-to-backup-rename": ("best -> .best.old", 0, "before"),
    "better-best-backup-made-staging-not-renamed": (".best.tmp -> best", 1, "before"),
    "better-best-listing-torn": ("manifest.json", 5, "torn"),
    "final-last-listing-unrenamed": ("manifest.json", -2, "unrenamed"),
    "complete-manifest-before": ("manifest.json", -1, "before"),
    "complete-manifest-torn": ("manifest.json", -1, "torn"),
    "optimizer-state-serialisation": ("serialise", 1, "before"),
    "first-evaluation": ("evaluate", 0, "before"),
    "final-test-evaluation": ("evaluate", -1, "before"),
}
# one kill of each kind runs in `make test-fast`; all of them in `make test`
FAST = ("first-manifest-torn", "last-model-unrenamed", "last-backup-made-staging-not-renamed", "better-best-listing-torn",
        "complete-manifest-torn")
SEEDS = range(3)  # mid-step kills at seeded-random steps
RANDOM = range(8)  # kills at seeded-random fault points, in a seeded-random way


@pytest.mark.parametrize("name", [name if name in FAST else pytest.param(name, marks=pytest.mark.slow) for name in TARGETED])
def test_kill_at_a_chosen_point_then_resume(name, spec, reference, tmp_path, monkeypatch):
    match, nth, how = TARGETED[name]
    _kill_and_resume(spec, reference, tmp_path, monkeypatch, reference.index(match, nth), how)


@pytest.mark.parametrize("seed", [seed if seed == 0 else pytest.param(seed, marks=pytest.mark.slow) for seed in SEEDS])
def test_kill_in_the_middle_of_a_random_step_then_resume(seed, spec, reference, tmp_path, monkeypatch):
    steps = reference.events.count("step")
    step = random.Random(f"step-{seed}").randrange(steps)
    _kill_and_resume(spec, reference, tmp_path, monkeypatch, reference.index("step", step), "before")


@pytest.mark.slow
@pytest.mark.parametrize("seed", RANDOM)
def test_kill_at_a_random_point_then_resume(seed, spec, reference, tmp_path, monkeypatch):
    rng = random.Random(f"point-{seed}")
    index = rng.randrange(len(reference.events))
    how = rng.choice(WRITE_MODES) if reference.events[index].startswith("write") else "before"
    _kill_and_resume(spec, reference, tmp_path, monkeypatch, index, how)


# --- real SIGKILL ------------------------------------------------------------------------------

_KILLED_RUN = textwrap.dedent(
    """
    import sys
    import torch
    torch.set_num_threads({threads})  # the reference's thread count: reductions stay bit-identical
    sys.path.insert(0, {tests!r})
    from test_faults import Injector, _sigkill_self
    from robustkit.spec import RunSpec
    from robustkit.train import train
    Injector(sys.argv[1], fire_at={index}, how={how!r}, kill=_sigkill_self).install(setattr)
    train(RunSpec(**{spec}), sys.argv[1], progress=False)
    """
)

# what each SIGKILL hits: a seeded-random fault point among those whose label contains this
SIGKILLED = {"step": ("step", "before"), "checkpoint-write": (".tmp/", "unrenamed"),
             "manifest-write": ("manifest.json", "torn")}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SIGKILLED))
def test_sigkill_at_a_random_point_then_resume(name, spec, reference, tmp_path):
    match, how = SIGKILLED[name]
    hits = [i for i, label in enumerate(reference.events) if match in label]
    index = random.Random(f"sigkill-{name}").choice(hits)
    script = _KILLED_RUN.format(threads=torch.get_num_threads(), tests=str(TESTS), index=index, how=how,
                                spec=repr(spec.to_dict()))
    killed = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    # the saves of the uninterrupted run that had returned before that fault point
    saved = [save for save in reference.saved if save[3] <= index]
    _check_after_kill(tmp_path, reference, saved)
    train(spec, tmp_path, progress=False)
    _check_like_reference(tmp_path, reference)




# --- what a run's bytes depend on (issue #27) ----------------------------------------------------

def _checkpoint_hashes(run_dir: Path) -> dict:
    return {name: entry["files"] for name, entry in read_manifest(run_dir)["checkpoints"].items()}


def test_a_run_trains_the_same_bytes_whatever_the_jobs_and_the_process_threads(spec, reference, tmp_path):
    """A run trains with its own ``threads`` (1 by default), so ``--jobs 1`` in a process with
    torch at 2 threads and ``--jobs 2`` (a worker per run) give the reference's bytes; a run set to
    2 threads is another run (another id), whose bytes differ."""
    from robustkit.sweep import run_sweep

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        run_sweep([spec], tmp_path / "jobs1", jobs=1, progress=False)
        assert torch.get_num_threads() == 2  # set back after the run
    finally:
        torch.set_num_threads(before)
    two = dataclasses.replace(spec, threads=2)
    run_sweep([spec, two], tmp_path / "jobs2", jobs=2, progress=False)
    run_id = reference.run_dir.name
    assert _checkpoint_hashes(tmp_path / "jobs1" / run_id) == _checkpoint_hashes(reference.run_dir)
    assert _checkpoint_hashes(tmp_path / "jobs2" / run_id) == _checkpoint_hashes(reference.run_dir)
    assert two.run_id != run_id
    assert read_manifest(tmp_path / "jobs2" / two.run_id)["spec"]["threads"] == 2
    assert _checkpoint_hashes(tmp_path / "jobs2" / two.run_id)["last"] != _checkpoint_hashes(reference.run_dir)["last"]


@pytest.mark.parametrize("change, named", [
    (lambda manifest: manifest.update(device="cuda:0"), ["cuda:0", "cpu"]),
    (lambda manifest: manifest["spec"].pop("threads"), ["unrecorded", "with 1"]),
])
def test_resuming_under_other_settings_is_refused_with_both_named(change, named, spec, reference, tmp_path):
    """An interrupted run resumed on another device type, or one started before thread counts
    were recorded, would finish as a hybrid of two settings: refused, naming both."""
    import shutil

    from robustkit.store.manifest import write_manifest

    run_dir = tmp_path / reference.run_dir.name
    shutil.copytree(reference.run_dir, run_dir)
    manifest = read_manifest(run_dir)
    manifest["status"] = "running"  # interrupted
    change(manifest)
    write_manifest(run_dir, manifest)
    with pytest.raises(loop.ResumeMismatch) as error:
        train(spec, tmp_path, progress=False)
    assert all(word in str(error.value) for word in named), str(error.value)


# --- failed imports leave nothing behind (issue #27, item 3) -------------------------------------

class _Payload:
    """A pickle that runs code when loaded: it would create ``path``."""

    def __init__(self, path: str):
        self.path = path

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


def _bad_sources(root: Path) -> dict[str, Path]:
    """Model folders that cannot be imported onto bert-tiny / rte, one per way an import fails."""
    import json

    from robustkit.models import load_classifier

    good = load_classifier("bert-tiny", 2, seed=0)
    sources = {}

    def saved(name: str, model=good) -> Path:
        folder = root / name
        model.save_pretrained(folder)
        sources[name] = folder
        return folder

    saved("three-labels", load_classifier("bert-tiny", 3, seed=0))
    config = json.loads((saved("other-architecture") / "config.json").read_text())
    (root / "other-architecture" / "config.json").write_text(json.dumps({**config, "model_type": "roberta"}))
    folder = saved("shape-mismatch")
    config["hidden_size"], config["intermediate_size"] = 64, 256
    (folder / "config.json").write_text(json.dumps(config))
    (saved("bad-config") / "config.json").write_text("{not json")
    (saved("garbage-weights") / "model.safetensors").write_bytes(os.urandom(4096))
    folder = saved("truncated-weights")
    weights = (folder / "model.safetensors").read_bytes()
    (folder / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    folder = saved("pickle-payload")
    (folder / "model.safetensors").unlink()
    torch.save({"weights": _Payload(str(root / "payload-ran"))}, folder / "pytorch_model.bin")
    folder = saved("pickle-garbage")
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04not a pickle at all")
    return sources


def test_a_failed_import_leaves_no_folder_and_runs_no_pickle(tmp_path):
    from robustkit.errors import RobustkitError
    from robustkit.importing import import_run

    sources = _bad_sources(tmp_path / "sources")
    store = tmp_path / "runs"
    refused = {}
    for name, folder in sources.items():
        with pytest.raises(RobustkitError) as error:
            import_run(folder, "bert-tiny", "rt", store)
        refused[name] = str(error.value)
        assert "\n" not in refused[name], (name, refused[name])
        assert not [p for p in store.iterdir() if not p.name.startswith(".")], (name, list(store.iterdir()))
    assert not (tmp_path / "sources" / "payload-ran").exists()  # the pickle's code never ran
    assert "3 labels" in refused["three-labels"] and "roberta" in refused["other-architecture"]
    assert "shape" in refused["shape-mismatch"] or "size mismatch" in refused["shape-mismatch"], refused["shape-mismatch"]
    assert "protobuf" not in " ".join(refused.values())
    assert len(refused) == 8
