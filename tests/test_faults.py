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

A killed sweep (its parent process) is tested in ``test_sweep.py``. The other faults of issue
#39 live beside the code they exercise: one dead worker of a sweep (``test_sweep.py``), data
edited or moved after training (``test_analysis_data_check.py``), unbounded or empty inputs
(``test_bounded_inputs.py``) and a read-only store (``test_read_only_store.py``); resume checks,
CPU capabilities, cache binding and refused imports are here.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import random
import re
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

from robustkit.specs.spec import RunSpec
from robustkit.store import atomic, checkpoints
from robustkit.store.checkpoints import read_checkpoint_file
from robustkit.store.folders import GRADNORMS, HISTORY, MANIFEST
from robustkit.store.manifest import read_manifest
from robustkit.store.tables import load_runs
from robustkit.train import finetuning, loop, train

TESTS = Path(__file__).parent
SPEC = dataclasses.replace(TINY_RTE, method="houlsby", seed=0, lr=3e-3)  # `best` improves once: replaced
WRITE_MODES = ("before", "torn", "unrenamed", "after")
# What this module's tests did, printed at its end (run with -s to see it): faults injected and
# survived bit-identically (the resumed run is the uninterrupted one), bad inputs tried and
# rejected cleanly (exit 2, one line, no folder). A test counts only what it has checked.
TALLY = {
    "faults injected": 0,
    "survived bit-identically": 0,
    "unreadable runs met": 0,
    "reported and skipped": 0,
    "bad inputs tried": 0,
    "rejected cleanly": 0,
}


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
        for name, real, fault in (
            ("atomic_write_bytes", real_write, write),
            ("save_checkpoint", real_save, save_checkpoint),
            ("gradient_norms", real_norms, gradient_norms),
            ("evaluate", real_evaluate, evaluate),
            ("save_safetensors", real_serialise, serialise),
        ):
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
    found = [
        module
        for key, module in sorted(sys.modules.items())
        if key.startswith(("robustkit.store.", "robustkit.train.")) and getattr(module, name, None) is value
    ]
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
        root,
        run_dir,
        read_manifest(run_dir),
        {table: pd.read_parquet(run_dir / table) for table in (HISTORY, GRADNORMS)},
        _tree(run_dir),
        _runs(root),
        injector.events,
        injector.saved,
        entries,
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
    TALLY["survived bit-identically"] += 1


def _kill_and_resume(spec: RunSpec, ref: Reference, root: Path, monkeypatch, index: int, how: str) -> None:
    injector = Injector(root, fire_at=index, how=how)
    injector.install(monkeypatch.setattr)
    with pytest.raises(_Killed):
        train(spec, root, progress=False)
    TALLY["faults injected"] += 1
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
FAST = (
    "first-manifest-torn",
    "last-model-unrenamed",
    "last-backup-made-staging-not-renamed",
    "better-best-listing-torn",
    "complete-manifest-torn",
)
SEEDS = range(3)  # mid-step kills at seeded-random steps
RANDOM = range(8)  # kills at seeded-random fault points, in a seeded-random way


@pytest.mark.parametrize(
    "name", [name if name in FAST else pytest.param(name, marks=pytest.mark.slow) for name in TARGETED]
)
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
    from robustkit.specs.spec import RunSpec
    from robustkit.train import train
    Injector(sys.argv[1], fire_at={index}, how={how!r}, kill=_sigkill_self).install(setattr)
    train(RunSpec(**{spec}), sys.argv[1], progress=False)
    """
)

# what each SIGKILL hits: a seeded-random fault point among those whose label contains this
SIGKILLED = {
    "step": ("step", "before"),
    "checkpoint-write": (".tmp/", "unrenamed"),
    "manifest-write": ("manifest.json", "torn"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SIGKILLED))
def test_sigkill_at_a_random_point_then_resume(name, spec, reference, tmp_path):
    match, how = SIGKILLED[name]
    hits = [i for i, label in enumerate(reference.events) if match in label]
    index = random.Random(f"sigkill-{name}").choice(hits)
    script = _KILLED_RUN.format(
        threads=torch.get_num_threads(), tests=str(TESTS), index=index, how=how, spec=repr(spec.to_dict())
    )
    killed = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    TALLY["faults injected"] += 1
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
    from robustkit.sweeps.grid import run_sweep

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


@pytest.mark.parametrize(
    "change, named",
    [
        (lambda manifest: manifest.update(device="cuda:0"), ["cuda:0", "cpu"]),
        (lambda manifest: manifest["spec"].pop("threads"), ["unrecorded", "with 1"]),
    ],
)
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

    from robustkit.models.pretrained import load_classifier

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
    from robustkit.train.importing import import_run

    sources = _bad_sources(tmp_path / "sources")
    store = tmp_path / "runs"
    refused = {}
    for name, folder in sources.items():
        with pytest.raises(RobustkitError) as error:
            import_run(folder, "bert-tiny", "rt", store)
        refused[name] = str(error.value)
        assert "\n" not in refused[name], (name, refused[name])
        # no folder at all (#39 item 7): not the run's, and not the store the import would have made
        assert not store.exists(), (name, sorted(p.name for p in store.rglob("*")))
    assert not (tmp_path / "sources" / "payload-ran").exists()  # the pickle's code never ran
    assert "3 labels" in refused["three-labels"] and "roberta" in refused["other-architecture"]
    assert "shape" in refused["shape-mismatch"] or "size mismatch" in refused["shape-mismatch"], refused[
        "shape-mismatch"
    ]
    assert "protobuf" not in " ".join(refused.values())
    assert len(refused) == 8


# --- a damaged file makes its run damaged everywhere (issue #27, item 1) -------------------------
#
# Every kind of file a result is read from is damaged three ways (one flipped bit, truncated,
# deleted) in the houlsby run of a copy of tiny_store; the full run stays intact. Each fault must
# be found by `verify`, naming the file, and make the run `damaged` for load_runs, `runs`,
# `stats` and the landscape analysis (it loads weights), which go on with the intact run.
# Each test prints its counts (`pytest -s` shows them; the closing note quotes them).

import json as _json  # noqa: E402
import shutil as _shutil  # noqa: E402
import warnings as _warnings  # noqa: E402

from robustkit.analysis import cache as _frame_cache  # noqa: E402
from robustkit.analysis import landscape as _landscape  # noqa: E402
from robustkit.analysis.registry import get as _analysis  # noqa: E402
from robustkit.analysis.verify import verify_cache as _verify_cache  # noqa: E402
from robustkit.analysis.verify import verify_store as _verify_store  # noqa: E402
from robustkit.cli import main as _cli  # noqa: E402
from robustkit.store import integrity as _integrity  # noqa: E402
from robustkit.store.tables import DamagedRunWarning as _DamagedRunWarning  # noqa: E402

_ALPHAS = "0,1"  # the landscape at theta_0 and theta_1 only: it loads both checkpoints, in a second
# file kind -> its path in a run folder
_FILE_KINDS = {
    "manifest": MANIFEST,
    "history": HISTORY,
    "gradnorms": GRADNORMS,
    "model tensors (best)": "checkpoints/best/model.safetensors",
    "theta_0 tensors (step-0)": "checkpoints/step-0/model.safetensors",
    "optimizer state": "checkpoints/last/optimizer.safetensors",
    "trainer state (state.json)": "checkpoints/last/state.json",
}
_FAULTS = ("bit flip", "truncation", "deletion")


def _manifest_content(data: bytes, keys: set[str] | None = None) -> dict | None:
    """What readers take from manifest bytes (its own sha256 left out; with ``keys``, keys the
    original lacks too, such as a flipped name of that sha256's key), None if not JSON."""
    try:
        content = _json.loads(data)
    except ValueError:
        return None
    if not isinstance(content, dict):
        return None
    return {k: v for k, v in content.items() if k != "manifest_sha256" and (keys is None or k in keys)}


def _harmless(original: bytes, changed: bytes) -> bool:
    """A manifest flip that changes nothing readers take (in the name of its own sha256's key,
    or ``1e-05`` -> ``1E-05``): not damage."""
    before = _manifest_content(original)
    return before is not None and _manifest_content(changed, set(before)) == before


def _flip(path: Path, rng: random.Random) -> tuple[int, int]:
    """Flip one seeded-random bit of ``path`` that changes what a reader takes (every bit of a
    binary file; a manifest's harmless flips are drawn again). Writes a new file: the old inode
    may be a hard link into tiny_store."""
    data = path.read_bytes()
    while True:
        position, bit = rng.randrange(len(data)), rng.randrange(8)
        changed = bytearray(data)
        changed[position] ^= 1 << bit
        if path.name != MANIFEST or not _harmless(data, bytes(changed)):
            break
    path.unlink()
    path.write_bytes(bytes(changed))
    return position, bit


def _damage(path: Path, fault: str, rng: random.Random) -> None:
    if fault == "bit flip":
        _flip(path, rng)
    elif fault == "truncation":
        data = path.read_bytes()
        path.unlink()
        path.write_bytes(data[: rng.randrange(len(data))])
    else:
        path.unlink()


@pytest.fixture(scope="module")
def _primed_store(tiny_store, tmp_path_factory) -> Path:
    """A copy of tiny_store's runs (not its cache: other modules cache their own landscapes in
    it) with the full run's landscape cached (the houlsby run's is computed when asked)."""
    store = tmp_path_factory.mktemp("primed") / "runs"
    for run_dir in (p for p in tiny_store.iterdir() if not p.name.startswith(".")):
        _shutil.copytree(run_dir, store / run_dir.name, ignore=_shutil.ignore_patterns(".lock"))
    _analysis("landscape").run(store, ["method=full"], alphas=_ALPHAS, progress=False)
    return store


def _store_copy(source: Path, root: Path) -> tuple[Path, Path, Path]:
    """A copy of the primed store: (store, houlsby run, full run). The full run's tensors are hard
    links (never written here: every damage writes a new file); its landscape frame is copied."""
    store = root / "runs"
    for run_dir in (p for p in source.iterdir() if not p.name.startswith(".")):
        link = "-full-" in run_dir.name
        _shutil.copytree(
            run_dir,
            store / run_dir.name,
            ignore=_shutil.ignore_patterns(".lock"),
            copy_function=lambda a, b, link=link: (
                os.link(a, b) if link and a.endswith(".safetensors") else _shutil.copy2(a, b)
            ),
        )
    _shutil.copytree(source / ".cache" / "landscape", store / ".cache" / "landscape")
    (houlsby,) = store.glob("*-houlsby-*")
    (full,) = store.glob("*-full-*")
    return store, houlsby, full


def _cli_run(capsys, *argv) -> tuple[int, str]:
    code = _cli(list(argv))
    captured = capsys.readouterr()
    output = captured.out + captured.err
    assert "Traceback" not in output
    return code, output


def _warned(caught: list, run_id: str) -> bool:
    return any(issubclass(w.category, _DamagedRunWarning) and run_id in str(w.message) for w in caught)


def _seen_damaged(store: Path, bad: Path, good: Path, capsys) -> dict[str, bool]:
    """Whether each reader treats ``bad`` as damaged, naming it, and goes on with ``good``."""
    seen = {}
    verified = _verify_store(store).set_index("run_id")
    seen["verify"] = verified.loc[bad.name, "status"] == "damaged" and verified.loc[good.name, "status"] == "ok"
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        listed = load_runs(store)
    seen["load_runs"] = _warned(caught, bad.name) and list(listed.run_id) == [good.name]
    everything = load_runs(store, include_damaged=True).set_index("run_id")
    seen["load_runs"] &= everything.loc[bad.name, "status"] == "damaged"
    code, output = _cli_run(capsys, "runs", str(store))
    seen["runs"] = code == 0 and f"DAMAGED {bad.name}" in output
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        code, output = _cli_run(capsys, "stats", str(store), "--no-aso")
    # the intact run alone: the table says its one method once, above it
    seen["stats"] = code == 0 and _warned(caught, bad.name) and "houlsby" not in output and "method=full" in output
    with _warnings.catch_warnings(record=True) as caught:
        _warnings.simplefilter("always")
        frame = _analysis("landscape").run(store, alphas=_ALPHAS, progress=False)
    seen["landscape"] = _warned(caught, bad.name) and set(frame.run_id) == {good.name}
    return seen


@pytest.mark.parametrize("kind", _FILE_KINDS)
def test_a_damaged_file_of_each_kind_makes_its_run_damaged_everywhere(kind, _primed_store, tmp_path, capsys):
    rng = random.Random(f"damaged-{kind}")
    counts = {"injected": 0}
    for fault in _FAULTS:
        store, houlsby, full = _store_copy(_primed_store, tmp_path / fault.replace(" ", "-"))
        path = houlsby / _FILE_KINDS[kind]
        _damage(path, fault, rng)
        counts["injected"] += 1
        verified = _verify_store(store).set_index("run_id")
        assert _FILE_KINDS[kind].split("/")[-1] in verified.loc[houlsby.name, "problem"], (
            fault,
            verified.problem.tolist(),
        )
        seen = _seen_damaged(store, houlsby, full, capsys)
        for reader, found in seen.items():
            counts[reader] = counts.get(reader, 0) + int(found)
        assert all(seen.values()), (kind, fault, seen)
    with capsys.disabled():
        print(
            f"\n{kind}: {counts.pop('injected')} faults injected ({', '.join(_FAULTS)}); treated as damaged by "
            + ", ".join(f"{reader} {n}" for reader, n in counts.items())
        )


def test_verify_finds_a_flipped_bit_in_a_history_and_a_gradient_norm_file(_primed_store, tmp_path, capsys):
    """The issue's demonstration: before, `verify` said "2 ok" here."""
    store, houlsby, full = _store_copy(_primed_store, tmp_path)
    rng = random.Random("verify-demonstration")
    flips = {
        houlsby.name: (HISTORY, _flip(houlsby / HISTORY, rng)),
        full.name: (GRADNORMS, _flip(full / GRADNORMS, rng)),
    }
    code, output = _cli_run(capsys, "verify", str(store))
    assert code == 1
    assert f"DAMAGED {houlsby.name}: {HISTORY} does not match its sha256" in output
    assert f"DAMAGED {full.name}: {GRADNORMS} does not match its sha256" in output
    repaired_code, repaired = _cli_run(capsys, "verify", str(store), "--repair")
    assert repaired_code == 0 and f"MOVED {houlsby.name}" in repaired and f"MOVED {full.name}" in repaired
    with capsys.disabled():
        print(
            "\n"
            + "\n".join(
                f"flipped bit {bit} of byte {position} of {run}/{name}"
                for run, (name, (position, bit)) in flips.items()
            )
        )
        print(
            f"$ robustkit verify {store}   (exit {code})\n{output}$ robustkit verify {store} --repair   "
            f"(exit {repaired_code})\n{repaired}"
        )


def test_a_change_no_stat_shows_is_found_by_the_loader_and_the_run_left_out(_primed_store, tmp_path):
    """Bit rot: a byte of a checkpoint changes with no write, so the readers' cache cannot see it
    (simulated by giving the cache the file's new stat). The analysis that loads it leaves the run
    out with a warning instead of aborting, and from then on every reader sees the damage."""
    store, houlsby, full = _store_copy(_primed_store, tmp_path)
    assert list(load_runs(store).run_id) == sorted([houlsby.name, full.name])  # hashed and remembered
    path = houlsby / "checkpoints" / "best" / "model.safetensors"
    _flip(path, random.Random("bit-rot"))
    cache = _integrity.VerificationCache(houlsby)
    key = "checkpoints/best/model.safetensors"
    stat = os.stat(path)
    cache.entries[key] = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, cache.entries[key][3]]
    cache.changed = True
    cache.save()
    with _warnings.catch_warnings():
        _warnings.simplefilter("error", _DamagedRunWarning)
        assert len(load_runs(store)) == 2  # the readers' cache cannot see it: that is verify's job
    with pytest.warns(_DamagedRunWarning, match=f"{houlsby.name}: .*best/model.safetensors.* corrupt or truncated"):
        frame = _analysis("landscape").run(store, alphas=_ALPHAS, progress=False)
    assert set(frame.run_id) == {full.name}
    with pytest.warns(_DamagedRunWarning, match=houlsby.name):
        assert list(load_runs(store).run_id) == [full.name]  # the loader told the readers


def test_readers_hash_a_file_once_per_change_and_verify_every_time(_primed_store, tmp_path, monkeypatch):
    store, houlsby, full = _store_copy(_primed_store, tmp_path)
    hashed = []
    real = _integrity.sha256_file

    def counting(path):
        hashed.append(Path(path))
        return real(path)

    monkeypatch.setattr(_integrity, "sha256_file", counting)
    listed = {run: len(_integrity.run_problems(run, read_manifest(run), lambda p: "x" * 64)) for run in (houlsby, full)}
    load_runs(store)
    assert len(hashed) == sum(listed.values()) > 0  # every listed file once
    hashed.clear()
    load_runs(store)
    assert hashed == []  # nothing changed: nothing hashed
    history = houlsby / HISTORY
    data = history.read_bytes()
    history.unlink()
    history.write_bytes(data)  # the same bytes, rewritten: hashed again, still intact
    assert len(load_runs(store)) == 2 and hashed == [history]
    hashed.clear()
    _verify_store(store)
    assert len(hashed) == sum(listed.values())  # verify hashes everything, whatever is remembered
    hashed.clear()
    cache_file = _integrity.cache_file(full)
    text = bytearray(cache_file.read_bytes())
    text[len(text) // 2] ^= 0x04
    cache_file.write_bytes(bytes(text))  # a damaged cache is not trusted: the run is hashed again
    assert len(load_runs(store)) == 2 and len(hashed) == listed[full]


def test_a_damaged_cached_frame_is_found_by_verify_and_computed_again(_primed_store, tmp_path, monkeypatch, capsys):
    calls = []
    real = _landscape.interpolate

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(_landscape, "interpolate", counting)
    rng = random.Random("cached-frames")
    found = injected = 0
    for fault in (*_FAULTS, "bit flip of its sha256"):
        store, houlsby, full = _store_copy(_primed_store, tmp_path / fault.replace(" ", "-"))
        (frame_path,) = _frame_cache.frame_files(store)
        reference = _analysis("landscape").run(store, ["method=full"], alphas=_ALPHAS, progress=False)
        assert calls == []  # read from the cache
        target = frame_path.with_name(frame_path.name + ".sha256") if "sha256" in fault else frame_path
        _damage(target, "bit flip" if "flip" in fault else fault, rng)
        injected += 1
        if fault != "deletion":  # a deleted frame is a cache miss, not damage
            table = _verify_cache(store)
            assert list(table.file) == [str(frame_path)] and list(table.status) == ["damaged"], fault
            found += 1
        again = _analysis("landscape").run(store, ["method=full"], alphas=_ALPHAS, progress=False)
        assert len(calls) == 1, fault  # computed again, never read
        pd.testing.assert_frame_equal(again, reference)
        assert _verify_cache(store).empty and _frame_cache.read_frame(frame_path) is not None  # rewritten whole
        calls.clear()
    # --repair removes a damaged frame
    _flip(frame_path, rng)
    code, output = _cli_run(capsys, "verify", str(store), "--repair")
    assert code == 0 and f"REMOVED cached frame {frame_path}" in output and not frame_path.exists()
    with capsys.disabled():
        print(
            f"\ncached frames: {injected} faults injected ({', '.join(_FAULTS)}, bit flip of its sha256 file); "
            f"{found} of the {injected - 1} damaged ones found by verify (a deleted frame is a miss); "
            f"{injected} of {injected} computed again, identical"
        )


@pytest.mark.parametrize("flips", [2000, pytest.param(None, marks=pytest.mark.slow, id="all")])
def test_every_single_bit_flip_of_a_manifest_is_found_or_changes_nothing(flips, _primed_store, tmp_path, capsys):
    """Each single-bit flip of a manifest (``flips`` seeded-random ones, or all 8 x size: ~4 min)
    is refused by read_manifest (not JSON, wrong shape, or its own sha256), or changes nothing a
    reader takes."""
    from robustkit.errors import DamagedRunError

    store, houlsby, _ = _store_copy(_primed_store, tmp_path)
    path = houlsby / MANIFEST
    original = path.read_bytes()
    every = [(position, bit) for position in range(len(original)) for bit in range(8)]
    chosen = every if flips is None else random.Random("manifest-flips").sample(every, flips)
    found = harmless = 0
    for position, bit in chosen:
        changed = bytearray(original)
        changed[position] ^= 1 << bit
        path.write_bytes(bytes(changed))
        try:
            read_manifest(houlsby)
        except DamagedRunError:
            found += 1
            continue
        assert _harmless(original, bytes(changed)), (
            position,
            bit,
            bytes(changed[max(0, position - 20) : position + 20]),
        )
        harmless += 1
    path.write_bytes(original)
    assert found + harmless == len(chosen) and found > 0.95 * len(chosen)
    with capsys.disabled():
        print(
            f"\nmanifest: {len(chosen)} single-bit flips injected (of {len(every)}); {found} found by read_manifest, "
            f"{harmless} change nothing a reader takes (all in the name of its own sha256's key), 0 read silently"
        )


def test_a_changed_line_of_an_attack_cache_is_dropped_and_its_example_attacked_again(tmp_path):
    """An attack's cached frame is JSON lines appended as it goes: each line carries its own
    sha256, so a changed byte drops that line (its example is attacked again), never read."""
    from robustkit.analysis import attack_cache

    def line(example: int) -> str:
        record = {
            "attacker": "pwws",
            "example": example,
            "idx": 10 + example,
            "label": 1,
            "prediction": 1,
            "original": "a fine film",
            "adversarial": None,
            "success": False,
            "queries": 17,
            "forward_passes": 17,
            "modified_words": 0,
            "words": 3,
            "seconds": 0.25,
        }
        return _json.dumps({**record, attack_cache.LINE_SHA256: attack_cache.line_sha256(record, path)}) + "\n"

    path = tmp_path / "cache.jsonl"
    legacy = _json.dumps({"example": 3, "success": True}) + "\n"  # without a sha256: never read (#39 item 4)
    path.write_text(line(0) + line(1).replace('"queries": 17', '"queries": 97') + line(2) + legacy + line(4)[:-9])
    assert attack_cache.done_examples(path) == {
        0,
        2,
    }  # the changed line, the unhashed one, the one cut short: attacked again
    attack_cache.keep_intact_lines(path)
    assert [_json.loads(text)["example"] for text in path.read_text().splitlines()] == [0, 2]
    assert attack_cache.done_examples(path) == {0, 2}


# --- no traceback, bounded and honest (issue #27, items 5-7) -------------------------------------
#
# robustkit.cli.main is where every error meets the user: Ctrl-C is one line and exit 130 (the run
# resumes bit-identically), a closed stdout is quiet, folders and files this user may not read are
# reported and skipped by every command, and bad command lines exit 2 in one line, leaving no
# folder behind. The counts go to TALLY, printed at the end of the module.

import contextlib  # noqa: E402 - this section's own imports, kept with it
import ctypes  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402

from robustkit.cli import main  # noqa: E402

INTERRUPTED = "robustkit: interrupted; runs resume from their last checkpoint when the command is run again"
# A tqdm bar line ("runs:  50%|█████     | 1/2 [00:01<00:01, ...]"), after escape codes are removed.
_BAR = re.compile(r"^[^|]*\d+%\|.*\| *\d+/\d+ ")
_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _messages(stderr: str) -> list[str]:
    """The lines of ``stderr`` that are not progress bars (tqdm redraws with ``\\r``)."""
    lines = (line.strip() for line in re.split(r"[\r\n]", _ESCAPE.sub("", stderr)))
    return [line for line in lines if line and not _BAR.match(line)]


def _cli_flags(spec: RunSpec) -> list[str]:
    """The `robustkit train` flags of ``spec`` (a bert-tiny houlsby run on a local RTE)."""
    return [
        "--model",
        spec.model,
        "--task",
        spec.task,
        "--method",
        spec.method,
        "--seed",
        str(spec.seed),
        "--lr",
        repr(spec.lr),
        "--epochs",
        str(spec.epochs),
        "--batch-size",
        str(spec.batch_size),
        "--max-length",
        str(spec.max_length),
        "--adapter-size",
        str(spec.adapter_size),
        "--eval-every",
        str(spec.eval_every),
        "--data-dir",
        spec.data_dir,
    ]


# `python -m robustkit ARGS...` (runpy, as the interpreter runs it) that stops in the middle of
# its run's {step}th step (after its backward pass, before its update) and waits there for Ctrl-C,
# having touched the file sys.argv[1].
_INTERRUPTED_CLI = textwrap.dedent(
    """
    import pathlib, runpy, sys, time
    from robustkit.train import loop
    real, seen, ready = loop.gradient_norms, [], pathlib.Path(sys.argv[1])

    def gradient_norms(*args, **kwargs):
        norms = real(*args, **kwargs)
        seen.append(None)
        if len(seen) == {step}:
            ready.touch()
            time.sleep(600)
        return norms

    loop.gradient_norms = gradient_norms
    sys.argv = ["robustkit", *sys.argv[2:]]
    runpy.run_module("robustkit", run_name="__main__", alter_sys=True)
    """
)


@pytest.mark.slow
def test_ctrl_c_is_one_line_exit_130_and_the_run_resumes_bit_identically(spec, reference, tmp_path):
    """SIGINT to `python -m robustkit train` in the middle of a step: one line on stderr besides
    the progress bars, exit status 130, the run left resumable; resumed, it is the uninterrupted
    run bit for bit."""
    step = random.Random("ctrl-c").randrange(2, reference.events.count("step") + 1)
    ready = tmp_path / "ready"
    argv = ["train", *_cli_flags(spec), "--store", str(tmp_path / "runs")]
    process = subprocess.Popen(
        [sys.executable, "-c", _INTERRUPTED_CLI.format(step=step), str(ready), *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), f"the run never reached step {step}: {process.poll()}"
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    TALLY["faults injected"] += 1
    assert process.returncode == 130, err[-3000:]
    # one line of its own (the sweep's info line "1 run(s) to train ..." may come before it, and
    # a redirected stderr carries the run's timestamped start and evaluation lines, #38 item 5)
    event = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")
    messages = [m for m in _messages(err) if "run(s) to train" not in m and not event.match(m)]
    assert "Traceback" not in err and messages == [INTERRUPTED], err[-3000:]
    run_dir = tmp_path / "runs" / reference.run_dir.name  # the flags name the reference's run
    assert read_manifest(run_dir)["status"] == "running"
    train(spec, tmp_path / "runs", progress=False)
    _check_like_reference(tmp_path / "runs", reference)


def test_a_closed_stdout_ends_quietly(reference):
    """`robustkit runs | head`: the reader is gone before robustkit writes; no traceback, no
    "Exception ignored" at exit, exit status 1 (the Python documentation's recipe)."""
    for argv in (["runs", str(reference.root)], ["verify", str(reference.root)]):
        read_end, write_end = os.pipe()
        os.close(read_end)  # every write to the pipe fails: EPIPE
        try:
            done = subprocess.run(
                [sys.executable, "-m", "robustkit", *argv],
                stdout=write_end,
                stderr=subprocess.PIPE,
                text=True,
                timeout=300,
            )
        finally:
            os.close(write_end)
        assert done.returncode == 1 and done.stderr == "", (argv, done.returncode, done.stderr[-3000:])


def test_an_unexpected_error_is_one_line_naming_how_to_see_the_traceback(tmp_path, capsys, monkeypatch):
    from robustkit.cli import runs as runs_verb

    def crash(args):
        raise ValueError("something\nunexpected")

    def denied(args):
        raise PermissionError(13, "Permission denied", str(tmp_path / "store" / "run"))

    for command, expected in (
        (
            crash,
            "robustkit: unexpected ValueError: something unexpected (run again with "
            "ROBUSTKIT_TRACEBACK=1 for the traceback)",
        ),
        (denied, f"robustkit: error: Permission denied: '{tmp_path / 'store' / 'run'}'"),
    ):
        monkeypatch.setattr(runs_verb, "run", command)
        monkeypatch.delenv("ROBUSTKIT_TRACEBACK", raising=False)
        assert main(["runs", str(tmp_path)]) == 1
        assert capsys.readouterr().err.splitlines() == [expected]
        monkeypatch.setenv("ROBUSTKIT_TRACEBACK", "1")
        with pytest.raises((ValueError, PermissionError)):
            main(["runs", str(tmp_path)])


# --- folders and files this user may not read ----------------------------------------------------


def _file_modes_apply() -> Callable[[], None] | None:
    """A ``preexec_fn`` after which file modes hold for the child: None for a user they hold for
    already; for root, dropping the two capabilities that let it ignore them (CAP_DAC_OVERRIDE,
    CAP_DAC_READ_SEARCH) from the bounding set, so that the child, and what it executes, is held
    to a folder's mode as an unprivileged owner is. (Not ``os.setuid``: an unprivileged uid may not
    reach this interpreter, e.g. under /root.) Skips the test where neither is possible."""
    if not hasattr(os, "geteuid"):
        pytest.skip("no POSIX file permissions on this platform")
    if os.geteuid() != 0:
        return None
    if not sys.platform.startswith("linux"):
        pytest.skip("running as root, and dropping root's file capabilities needs Linux's prctl")
    libc = ctypes.CDLL(None, use_errno=True)

    def drop() -> None:
        for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")

    return drop


def _as_user_held_to_modes(commands: list[list[str]], preexec, cwd: Path) -> list[dict]:
    """Each command line through :func:`robustkit.cli.main`, in one subprocess held to file modes:
    ``code``, ``out`` and ``err`` (warnings included) of each. An exception escaping main ends the
    subprocess with its traceback: the caller's assertion shows it."""
    script = textwrap.dedent(
        """
        import contextlib, io, json, sys, warnings
        from robustkit.cli import main
        results = []
        for argv in json.loads(sys.argv[1]):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
                warnings.simplefilter("always")
                try:
                    code = main(argv)
                except SystemExit as exit_:
                    code = exit_.code
            results.append({"argv": argv, "code": code, "out": out.getvalue(), "err": err.getvalue()})
        print(json.dumps(results))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(commands)],
        preexec_fn=preexec,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def _mode(*paths_and_modes: tuple[Path, int]):
    """chmod each path for the block, then back (so that the test's folder can be removed)."""
    before = [(path, path.stat().st_mode & 0o7777) for path, _ in paths_and_modes]
    try:
        for path, mode in paths_and_modes:
            path.chmod(mode)
        yield
    finally:
        for path, mode in reversed(before):
            path.chmod(mode)


@pytest.mark.slow
def test_unreadable_run_folders_and_checkpoints_are_reported_and_skipped_by_every_command(spec, reference, tmp_path):
    """A run folder (mode 000) and a checkpoint file (mode 000) this user may not read: `runs`,
    `verify` (with `--repair`: never moved), `sweep`, `stats` and the analyses name them and go
    on with the other runs; no traceback, no PermissionError."""
    preexec = _file_modes_apply()
    store = tmp_path / "runs"
    shutil.copytree(reference.run_dir, store / reference.run_dir.name)
    closed, broken = (train(dataclasses.replace(spec, seed=seed), store, progress=False) for seed in (1, 2))
    probe = tmp_path / "probe"
    probe.mkdir()
    with _mode((probe, 0)):
        seen = subprocess.run(
            [sys.executable, "-c", "import os, sys; os.listdir(sys.argv[1])", str(probe)],
            preexec_fn=preexec,
            capture_output=True,
            text=True,
        )
    if seen.returncode == 0:
        pytest.skip("cannot make a process that file modes hold for (it read a folder of mode 000)")
    grid = tmp_path / "grid.toml"
    base = {
        "model": spec.model,
        "task": spec.task,
        "method": spec.method,
        "lr": spec.lr,
        "epochs": spec.epochs,
        "batch_size": spec.batch_size,
        "max_length": spec.max_length,
        "adapter_size": spec.adapter_size,
        "eval_every": spec.eval_every,
        "data_dir": spec.data_dir,
    }
    grid.write_text(
        "[base]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in base.items()) + "[grid]\nseed = [0, 1, 2]\n"
    )
    commands = [
        ["runs", str(store)],
        ["verify", str(store)],
        ["verify", str(store), "--repair"],
        ["sweep", str(grid), "--store", str(store)],
        ["stats", str(store), "--no-aso"],
        *(["analyze", name, str(store)] for name in ("tradeoff", "curves", "gradnorm")),
    ]
    with _mode((broken / "checkpoints" / "best" / "model.safetensors", 0), (closed, 0)):
        results = _as_user_held_to_modes(commands, preexec, Path(__file__).parents[1])
    named = {
        closed.name: "cannot read the run folder: permission denied",
        broken.name: "cannot read checkpoints/best/model.safetensors: permission denied",
    }
    expected_codes = {"runs": 0, "verify": 1, "sweep": 1, "stats": 0, "analyze": 0}
    for result in results:
        text = result["out"] + result["err"]
        TALLY["unreadable runs met"] += len(named)
        assert result["code"] == expected_codes[result["argv"][0]], result
        assert "Traceback" not in text and "PermissionError" not in text, result
        for run_id, problem in named.items():  # on one line: the run and why it was left out
            assert any(run_id in line and problem in line for line in text.splitlines()), (result["argv"], run_id, text)
        TALLY["reported and skipped"] += len(named)
    verified = {" ".join(r["argv"][:1] + r["argv"][2:]): r["out"] for r in results if r["argv"][0] == "verify"}
    for out in verified.values():
        assert f"UNREADABLE {closed.name}" in out and f"UNREADABLE {broken.name}" in out and "1 ok, 2 unreadable" in out
    assert closed.is_dir() and broken.is_dir() and not (store / ".damaged").exists()  # --repair moved nothing
    sweep = next(r for r in results if r["argv"][0] == "sweep")
    assert "0 trained, 1 already complete" in sweep["out"] and "2 damaged" in sweep["out"], sweep
    # the readable run is still analysed
    # (its table names what all its rows share, the one run's settings, above the rows)
    analysed = next(r for r in results if r["argv"][:2] == ["analyze", "gradnorm"])["out"]
    assert f"seed={reference.manifest['spec']['seed']}" in analysed and "classifier" in analysed, analysed


def test_verify_reports_an_interrupted_run_as_stale_and_a_locked_one_as_busy(reference, tmp_path, capsys):
    from robustkit.store.locks import run_lock
    from robustkit.store.manifest import write_manifest

    run_dir = tmp_path / reference.run_dir.name
    shutil.copytree(reference.run_dir, run_dir)
    manifest = read_manifest(run_dir)
    write_manifest(run_dir, {**manifest, "status": "running"})  # interrupted: nobody holds its lock
    assert main(["verify", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"STALE {run_dir.name}: its manifest says running, but no process is training it" in out and "1 stale" in out
    with run_lock(run_dir):  # a live trainer: not stale
        assert main(["verify", str(tmp_path)]) == 0
    assert f"BUSY {run_dir.name}" in capsys.readouterr().out


# --- bounded and honest --------------------------------------------------------------------------


def test_a_run_another_process_finished_meanwhile_is_not_counted_as_trained(
    spec, reference, tmp_path, monkeypatch, capsys
):
    """Two sweeps of one grid: the second looked at the store before the first finished the run,
    then took its lock after. It reports the run as skipped (trained elsewhere), not as its own."""
    from robustkit.cli.common import report
    from robustkit.store import checkpoints as store_checkpoints
    from robustkit.sweeps.grid import run_sweep
    from robustkit.sweeps.jobs import TRAINED_ELSEWHERE

    shutil.copytree(reference.run_dir, tmp_path / "runs" / reference.run_dir.name)
    # what the second sweep saw when it looked: the run not finished yet
    monkeypatch.setattr(store_checkpoints, "finished_state", lambda run_dir: (False, None))
    results = run_sweep([spec], tmp_path / "runs", progress=False)
    assert results.to_dict("records") == [
        {"run_id": reference.run_dir.name, "status": "skipped", "error": TRAINED_ELSEWHERE}
    ]
    assert report(results, tmp_path / "runs") == 0
    assert (
        "1 run: 0 trained, 1 already complete (1 of them finished by another process meanwhile)"
        in capsys.readouterr().out
    )
    assert read_manifest(tmp_path / "runs" / reference.run_dir.name) == reference.manifest  # and it was not touched


GOOD_GRID = '[base]\nmodel = "bert-tiny"\ntask = "rte"\nepochs = 1\n[grid]\nseed = [0, 1]\n'


def _grid_file(folder: Path, text: str) -> str:
    path = folder / "grid.toml"
    path.write_text(text)
    return str(path)


def _tiny(glue: Path) -> list[str]:
    return ["train", "--model", "bert-tiny", "--task", "rte", "--data-dir", str(glue), "--epochs", "1"]


# (name, command line: a function of the test's folder and a GLUE folder in it, what its one line names)
BAD_COMMAND_LINES = [
    (
        "epochs = 2**63 - 1",
        lambda t, g: [*_tiny(g), "--epochs", "9223372036854775807"],
        "epochs must be between 1 and 10000",
    ),
    ("seed 2**32", lambda t, g: [*_tiny(g), "--seed", "4294967296"], "seed must be between 0 and 4294967295"),
    ("seed -1", lambda t, g: [*_tiny(g), "--seed", "-1"], "seed must be between 0 and 4294967295, got -1"),
    ("seed range", lambda t, g: [*_tiny(g), "--seed", "0-9"], "expected comma-separated integers"),
    (
        "10,001 seeds",
        lambda t, g: [*_tiny(g), "--seed", ",".join(map(str, range(10_001)))],
        "has 10,001 runs, more than 10,000",
    ),
    ("batch size 0", lambda t, g: [*_tiny(g), "--batch-size", "0"], "batch_size must be between 1 and 65536"),
    (
        "batch size 10**9",
        lambda t, g: [*_tiny(g), "--batch-size", "1000000000"],
        "batch_size must be between 1 and 65536",
    ),
    ("max length 10**6", lambda t, g: [*_tiny(g), "--max-length", "1000000"], "max_length must be between 1 and 65536"),
    ("train size 0", lambda t, g: [*_tiny(g), "--train-size", "0"], "train_size must be between 1 and 1000000000"),
    ("eval every 0", lambda t, g: [*_tiny(g), "--eval-every", "0"], "eval_every must be between 1 and 1000000000"),
    ("threads 0", lambda t, g: [*_tiny(g), "--threads", "0"], "threads must be between 1 and 1024"),
    ("threads 10**5", lambda t, g: [*_tiny(g), "--threads", "100000"], "threads must be between 1 and 1024"),
    (
        "tsp steps 10**8",
        lambda t, g: [*_tiny(g), "--tsp-steps", "100000000"],
        "tsp_step must be between 0 and 10000000",
    ),
    ("adapter size 0", lambda t, g: [*_tiny(g), "--adapter-size", "0"], "adapter_size"),
    (
        "lora r = 2**63 - 1",
        lambda t, g: [*_tiny(g), "--method", "lora", "--method-option", "r=9223372036854775807"],
        "option 'r' must be an integer >= 1 and <= 1048576",
    ),
    ("unknown method option", lambda t, g: [*_tiny(g), "--method-option", "bogus=1"], "'bogus'"),
    ("method option without =", lambda t, g: [*_tiny(g), "--method-option", "r"], "--method-option expects NAME=VALUE"),
    ("unknown method", lambda t, g: [*_tiny(g), "--method", "nosuch"], "'nosuch'"),
    ("unknown task", lambda t, g: [*_tiny(g), "--task", "nosuch"], "'nosuch'"),
    ("lr not a number", lambda t, g: [*_tiny(g), "--lr", "fast"], "invalid float value: 'fast'"),
    ("lr -1", lambda t, g: [*_tiny(g), "--lr", "-1"], "lr must be > 0, got -1"),
    ("max grad norm nan", lambda t, g: [*_tiny(g), "--max-grad-norm", "nan"], "max_grad_norm must be a finite number"),
    ("mixout 1", lambda t, g: [*_tiny(g), "--mixout", "1"], "mixout must be < 1"),
    ("warmup 2", lambda t, g: [*_tiny(g), "--warmup-ratio", "2"], "warmup_ratio must be between 0 and 1"),
    (
        "jobs 0",
        lambda t, g: [*_tiny(g), "--jobs", "0"],
        "jobs (runs trained at once) must be an integer between 1 and 1024",
    ),
    ("jobs 10**5", lambda t, g: [*_tiny(g), "--jobs", "100000"], "between 1 and 1024, got 100000"),
    ("device bogus", lambda t, g: [*_tiny(g), "--device", "bogus"], "unknown device 'bogus'"),
    ("model folder missing", lambda t, g: [*_tiny(g), "--model", str(t / "no-model")], "no-model"),
    (
        "a 10,200-run grid",
        lambda t, g: [
            "sweep",
            _grid_file(t, f'[base]\nmodel = "bert-tiny"\n[grid]\nseed = {list(range(200))}\nlr = {[1e-4] * 51}\n'),
        ],
        "has 10,200 runs, more than 10,000: pass --yes",
    ),
    (
        "grid epochs = 2**63 - 1",
        lambda t, g: ["sweep", _grid_file(t, GOOD_GRID.replace("epochs = 1", "epochs = 9223372036854775807"))],
        "epochs must be between 1 and 10000",
    ),
    (
        "grid unknown key",
        lambda t, g: ["sweep", _grid_file(t, GOOD_GRID + "epoch = [1]\n")],
        "unknown key(s) ['epoch']",
    ),
    ("grid file missing", lambda t, g: ["sweep", str(t / "missing.toml")], "does not exist"),
    (
        "sweep jobs 5000",
        lambda t, g: ["sweep", _grid_file(t, GOOD_GRID), "--jobs", "5000"],
        "between 1 and 1024, got 5000",
    ),
    (
        "slurm arg without =",
        lambda t, g: ["sweep", _grid_file(t, GOOD_GRID), "--slurm-arg", "account"],
        "--slurm-arg expects key=value",
    ),
    ("runs of no store", lambda t, g: ["runs", str(t / "runs")], "does not exist"),
    ("verify of no store", lambda t, g: ["verify", str(t / "runs")], "does not exist"),
    ("stats of no store", lambda t, g: ["stats", str(t / "runs")], "does not exist"),
    ("analyze of no store", lambda t, g: ["analyze", "tradeoff", str(t / "runs")], "does not exist"),
    (
        "import of no folder",
        lambda t, g: ["import", str(t / "no-model"), "--base", "bert-tiny", "--task", "rte"],
        "no-model",
    ),
    ("unknown command", lambda t, g: ["trian"], "invalid choice: 'trian'"),
]


def test_bad_command_lines_exit_2_in_one_line_and_leave_no_folder(tmp_path, capsys, monkeypatch):
    """Each bad command line: exit status 2, one line on stderr naming what is wrong, no traceback,
    and nothing made in the test's folder (no store, no run folder, no `.lock`)."""
    from robustkit.sweeps import executors

    def no_training(self, jobs):
        raise AssertionError(f"a bad command line reached training ({len(jobs)} jobs)")

    monkeypatch.setattr(executors.LocalExecutor, "run", no_training)  # if one got through: fail, not train
    glue = write_rte(tmp_path / "glue")
    assert len(BAD_COMMAND_LINES) >= 30
    failures = []
    for name, argv, named in BAD_COMMAND_LINES:
        folder = tmp_path / re.sub(r"\W+", "-", name)
        folder.mkdir()
        argv = argv(folder, glue)
        if argv[0] in ("train", "sweep", "import"):
            argv += ["--store", str(folder / "runs")]
        before = sorted(folder.rglob("*"))
        started = time.monotonic()
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse
            code = exit_.code
        seconds = time.monotonic() - started
        out, err = capsys.readouterr()
        TALLY["bad inputs tried"] += 1
        problems = [
            problem
            for problem, bad in (
                (f"exit status {code}", code != 2),
                (f"stderr is not one line: {err!r}", len(err.strip().splitlines()) != 1),
                (f"{named!r} not in {err.strip()!r}", named not in err),
                ("a traceback", "Traceback" in out + err),
                (f"made {sorted(set(folder.rglob('*')) - set(before))}", sorted(folder.rglob("*")) != before),
                (f"took {seconds:.1f} s", seconds > 15),
            )
            if bad
        ]
        if problems:
            failures.append(f"{name}: {'; '.join(problems)}")
        else:
            TALLY["rejected cleanly"] += 1
    assert not failures, "\n".join(failures)


def test_a_million_run_grid_is_refused_at_once_with_its_size(tmp_path):
    """`robustkit sweep` of a 10**6-run grid: refused within seconds (expanding it took minutes),
    naming its size, exit 2, no store."""
    grid = _grid_file(
        tmp_path, f'[base]\nmodel = "bert-tiny"\n[grid]\nseed = {list(range(1000))}\nlr = {[1e-4] * 1000}\n'
    )
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "robustkit", "sweep", grid, "--store", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    seconds = time.monotonic() - started
    TALLY["bad inputs tried"] += 1
    assert done.returncode == 2 and done.stdout == "", (done.stdout[-2000:], done.stderr[-2000:])
    assert done.stderr.splitlines() == [
        f"robustkit: error: the grid file {grid!r} has 1,000,000 runs, more than 10,000: "
        "pass --yes to expand and train them all, or shorten its axes"
    ]
    assert not (tmp_path / "runs").exists() and seconds < 60, seconds
    TALLY["rejected cleanly"] += 1


def test_the_grid_limit_is_inclusive_and_confirmed_with_yes():
    from robustkit.errors import SweepError
    from robustkit.specs.limits import MAX_GRID_RUNS
    from robustkit.sweeps.grid import check_size, grid_size

    check_size(MAX_GRID_RUNS, "grid")
    check_size(10**9, "grid", max_runs=None)  # --yes
    with pytest.raises(SweepError, match="10,001 runs, more than 10,000"):
        check_size(MAX_GRID_RUNS + 1, "grid")
    assert grid_size({"grid": {"seed": list(range(1000)), "lr": [1e-4] * 1000}}) == 10**6


def test_every_integer_run_setting_has_stated_bounds():
    from robustkit.specs.spec import INT_BOUNDS, SpecError

    integers = {f.name for f in dataclasses.fields(RunSpec) if "int" in str(f.type).split(" | ")}
    assert integers == set(INT_BOUNDS)
    for name, (low, high) in INT_BOUNDS.items():
        method = "topk" if name == "top_k" else "houlsby"
        for value in (low, high):  # the bounds themselves are accepted
            RunSpec(model="bert-tiny", task="rt", method=method, **{name: value}).resolved()
        for value in (low - 1, high + 1):
            with pytest.raises(SpecError, match=f"{name} must be between {low} and {high}, got {value}"):
                RunSpec(model="bert-tiny", task="rt", method=method, **{name: value}).resolved()


@pytest.fixture(scope="module", autouse=True)
def _print_tally():
    """The module's counts, at its end (run with -s to see them)."""
    yield
    print(
        f"\nfault suite: {TALLY['faults injected']} faults injected, {TALLY['survived bit-identically']} runs "
        f"resumed bit-identically; {TALLY['unreadable runs met']} unreadable runs met by commands, "
        f"{TALLY['reported and skipped']} reported and skipped; {TALLY['bad inputs tried']} bad inputs tried, "
        f"{TALLY['rejected cleanly']} rejected cleanly (exit 2, one line, no folder)"
    )


def test_a_run_refused_inside_its_lock_leaves_no_folder(spec, tmp_path, monkeypatch):
    """A run that fails after its lock is taken but before it writes anything (here: its data
    changed under it) leaves neither its folder (with only a `.lock` in it) nor a new store."""
    from robustkit.errors import DataChangedError
    from robustkit.train import runs

    class Refused:
        def __init__(self, *args, **kwargs):
            pass

        def run(self):
            raise DataChangedError("the data changed")

    monkeypatch.setattr(runs, "_Finetune", Refused)
    with pytest.raises(DataChangedError):
        train(spec, tmp_path / "new" / "runs", progress=False)
    assert list(tmp_path.iterdir()) == []


# --- resuming checks the logs it resumes from (issue #39, item 1) ------------------------------


def _killed_run(spec: RunSpec, root: Path) -> Path:
    """The run of ``spec`` killed in its last step (its `last` at an earlier evaluation)."""
    injector = Injector(root)
    with pytest.MonkeyPatch.context() as patch:
        injector.install(patch.setattr)
        injector.fire_at = None
        events = []

        def count(*args, **kwargs):  # the last step: killed after its backward pass
            events.append(1)
            if len(events) == total:
                raise _Killed
            return real(*args, **kwargs)

        real, total = loop.gradient_norms, 6  # 24 examples, batches of 8, 2 epochs
        patch.setattr(loop, "gradient_norms", count)
        with pytest.raises(_Killed):
            train(spec, root, progress=False)
    return root / spec.resolved().run_id


@pytest.fixture(scope="module")
def killed(spec, tmp_path_factory) -> tuple[Path, Path]:
    """Two killed runs (seeds 0 and 1), each resumable from its `last`."""
    root = tmp_path_factory.mktemp("killed")
    return _killed_run(spec, root / "a"), _killed_run(dataclasses.replace(spec, seed=1), root / "b")


def _edit_history(run_dir: Path, other: Path) -> None:
    frame = pd.read_parquet(run_dir / HISTORY)
    frame.loc[frame.split == "validation", "value"] = 0.123
    frame.to_parquet(run_dir / HISTORY, index=False)


def _times_100(run_dir: Path, other: Path) -> None:
    frame = pd.read_parquet(run_dir / GRADNORMS)
    frame["value"] *= 100
    frame.to_parquet(run_dir / GRADNORMS, index=False)


def _flip_history(run_dir: Path, other: Path) -> None:
    data = bytearray((run_dir / HISTORY).read_bytes())
    data[len(data) // 3] ^= 0x10
    (run_dir / HISTORY).write_bytes(bytes(data))


_LOG_DAMAGE = {
    "history-edited": (_edit_history, HISTORY),
    "history-deleted": (lambda run_dir, other: (run_dir / HISTORY).unlink(), HISTORY),
    "history-swapped": (lambda run_dir, other: _shutil.copy2(other / HISTORY, run_dir / HISTORY), HISTORY),
    "history-bit-flipped": (_flip_history, HISTORY),
    "gradnorms-times-100": (_times_100, GRADNORMS),
}


@pytest.mark.parametrize("damage", _LOG_DAMAGE)
def test_resuming_from_a_changed_log_is_refused_naming_it(damage, spec, killed, tmp_path, capsys):
    """A killed run's log edited, deleted, swapped in from another killed run or bit-flipped:
    resuming would finish the run with the log's values (a best validation score it never had, a
    collapsed or diverged outcome, gradient norms x100). Refused, naming the file and the repair;
    verify finds the run damaged, and after --repair the run trains again from the start."""
    from robustkit.errors import DamagedRunError

    change, name = _LOG_DAMAGE[damage]
    store = tmp_path / "runs"
    run_dir = store / killed[0].name
    _shutil.copytree(killed[0], run_dir)
    change(run_dir, killed[1])
    with pytest.raises(DamagedRunError) as error:
        train(spec, store, progress=False)
    message = str(error.value)
    assert name in message and "verify" in message and "--repair" in message and "\n" not in message, message
    assert read_manifest(run_dir)["status"] == "failed"  # nothing trained on; the refusal recorded
    verified = _verify_store(store).set_index("run_id")
    assert verified.loc[run_dir.name, "status"] == "damaged" and name in verified.loc[run_dir.name, "problem"]


def test_a_killed_run_with_intact_logs_resumes_like_the_uninterrupted_one(spec, reference, killed, tmp_path):
    """The check refuses changed logs only: the killed run, untouched, resumes bit-identically."""
    store = tmp_path / "runs"
    _shutil.copytree(killed[0], store / killed[0].name)
    assert _verify_store(store)["status"].tolist() == ["stale"]
    train(spec, store, progress=False)
    _check_like_reference(store, reference)


def test_a_kill_between_the_log_writes_still_resumes(spec, reference, tmp_path, monkeypatch):
    """Training records the logs' sha256 before it writes them, and keeps them with `last`: a kill
    after the history is written and before the gradient norms are leaves each log hashing to
    one of the two, and the run resumes (bit-identically)."""
    _kill_and_resume(
        spec,
        reference,
        tmp_path,
        monkeypatch,
        reference.index(f"write {reference.run_dir.name}/{GRADNORMS}", -2),
        "before",
    )


# --- a run's kernels: recorded, a hybrid resume refused (issue #39, item 2) ----------------------


def _edited_copy(source: Path, store: Path, change) -> Path:
    from robustkit.store.manifest import write_manifest

    run_dir = store / source.name
    _shutil.copytree(source, run_dir, ignore=_shutil.ignore_patterns(".lock"))
    manifest = read_manifest(run_dir)
    change(manifest)
    write_manifest(run_dir, manifest)
    return run_dir


def test_a_run_records_the_cpu_capability_and_torch_version_it_started_under(reference):
    manifest = reference.manifest
    assert manifest["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert manifest["versions"]["torch"] == torch.__version__
    assert "avx" not in reference.run_dir.name.lower()  # not in the run id: see robustkit.train.provenance


@pytest.mark.parametrize(
    "change, named",
    [
        (
            lambda manifest: manifest.update(
                cpu_capability="AVX2" if torch.backends.cpu.get_cpu_capability() != "AVX2" else "DEFAULT"
            ),
            ["CPU capability", "ATEN_CPU_CAPABILITY"],
        ),
        (lambda manifest: manifest["versions"].update(torch="1.13.1"), ["torch 1.13.1", f"torch {torch.__version__}"]),
    ],
    ids=["cpu-capability", "torch-version"],
)
def test_resuming_under_other_kernels_is_refused_naming_both(change, named, spec, killed, tmp_path):
    """A run killed under one kernel set (or torch) and resumed under another would finish as a
    hybrid whose bytes match neither: refused, one line naming both values and what to do."""
    run_dir = _edited_copy(killed[0], tmp_path, change)
    started = read_manifest(run_dir)
    with pytest.raises(loop.ResumeMismatch) as error:
        train(spec, tmp_path, progress=False)
    message = str(error.value)
    assert all(word in message for word in named) and "\n" not in message and "aside" in message, message
    if "capability" in message:
        assert started["cpu_capability"] in message and torch.backends.cpu.get_cpu_capability() in message


def test_a_run_killed_under_one_capability_is_refused_under_another_for_real(spec, killed, tmp_path):
    """The same in a process whose kernels ATEN_CPU_CAPABILITY lowers (as a requeue onto another
    node type does): the CLI prints one line and exits 1, and the run is not trained on."""
    store = tmp_path / "runs"
    _shutil.copytree(killed[0], store / killed[0].name, ignore=_shutil.ignore_patterns(".lock"))
    other = "avx2" if torch.backends.cpu.get_cpu_capability() == "AVX512" else "default"
    if other.upper() == torch.backends.cpu.get_cpu_capability():
        pytest.skip("this CPU runs the default kernels only")
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(TESTS)!r})
        from robustkit.cli import main
        from robustkit.specs.spec import RunSpec
        sys.exit(main(["train", "--data-dir", {spec.data_dir!r}, "--model", "bert-tiny", "--task", "rte",
                       "--method", "houlsby", "--seed", "0", "--lr", "3e-3", "--epochs", "2", "--batch-size", "8",
                       "--max-length", "32", "--adapter-size", "16", "--eval-every", "2",
                       "--threads", "{spec.threads}", "--store", {str(store)!r}, "-q"]))
    """)
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env={**os.environ, "ATEN_CPU_CAPABILITY": other}
    )
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in output, output[-2000:]
    assert "CPU capability" in output and other.upper() in output, output[-2000:]
    assert read_manifest(store / killed[0].name)["checkpoints"] == read_manifest(killed[0])["checkpoints"]


def test_a_run_from_before_kernels_were_recorded_resumes_and_records_them(spec, reference, killed, tmp_path):
    def legacy(manifest):
        manifest.pop("cpu_capability")
        manifest["versions"].pop("torch")

    run_dir = _edited_copy(killed[0], tmp_path, legacy)
    with pytest.warns(UserWarning, match="did not record cpu_capability or torch; recorded now") as caught:
        train(spec, tmp_path, progress=False)
    assert sum("recorded now" in str(w.message) for w in caught) == 1  # said once
    manifest = read_manifest(run_dir)
    assert manifest["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert manifest["versions"]["torch"] == torch.__version__
    _check_like_reference(tmp_path, reference)


def test_a_run_finished_under_another_capability_stays_valid(spec, reference, tmp_path):
    run_dir = _edited_copy(reference.run_dir, tmp_path, lambda manifest: manifest.update(cpu_capability="DEFAULT"))
    assert train(spec, tmp_path, progress=False) == run_dir  # finished: returned as it is
    assert _verify_store(tmp_path)["status"].tolist() == ["ok"]


# --- caches are bound to their run and key (issue #39, item 4) ----------------------------------


def test_a_cached_frame_copied_over_another_runs_is_found_and_computed_again(_primed_store, tmp_path, capsys):
    """The full run's cached landscape and its .sha256 copied over the houlsby run's: verify finds
    it damaged, and the houlsby run's landscape is computed again, never read as the full run's."""
    store, houlsby, full = _store_copy(_primed_store, tmp_path)
    own = _analysis("landscape").run(store, alphas=_ALPHAS, progress=False).set_index("run_id")
    frames = {path.name.split("-")[1]: path for path in _frame_cache.frame_files(store)}
    assert set(frames) == {"houlsby", "full"}
    for source in (frames["full"], frames["full"].with_name(frames["full"].name + ".sha256")):
        target = (
            frames["houlsby"]
            if source.suffix == ".parquet"
            else frames["houlsby"].with_name(frames["houlsby"].name + ".sha256")
        )
        _shutil.copy2(source, target)
    assert _frame_cache.read_frame(frames["houlsby"]) is None
    table = _verify_cache(store)
    assert list(table.file) == [str(frames["houlsby"])] and list(table.status) == ["damaged"]
    code, output = _cli_run(capsys, "verify", str(store))
    assert "1 damaged" in output, output
    again = _analysis("landscape").run(store, alphas=_ALPHAS, progress=False).set_index("run_id")
    pd.testing.assert_frame_equal(again.loc[houlsby.name], own.loc[houlsby.name])
    assert not again.loc[houlsby.name].equals(own.loc[full.name].reset_index(drop=True))


def _attack_line(path: Path, example: int, success: bool = False, hashed: bool = True) -> str:
    from robustkit.analysis import attack_cache

    record = {
        "attacker": "pwws",
        "example": example,
        "idx": example,
        "label": 1,
        "prediction": 1,
        "original": "a fine film",
        "adversarial": None,
        "success": success,
        "queries": 17,
        "forward_passes": 17,
        "modified_words": 0,
        "words": 3,
        "seconds": 0.25,
    }
    return (
        _json.dumps({**record, attack_cache.LINE_SHA256: attack_cache.line_sha256(record, path)} if hashed else record)
        + "\n"
    )


def test_attack_cache_lines_from_another_run_or_without_a_sha256_are_never_read(tmp_path):
    """An attack cache (.jsonl) copied whole from the other seed's, one line copied from it, or a
    line without its sha256 (its `success` flipped): each dropped and its example attacked again."""
    from robustkit.analysis import attack_cache

    folder = tmp_path / ".cache" / "attack"
    folder.mkdir(parents=True)
    seed0 = folder / "rte-houlsby-bert-tiny-s0-tsp0-aaaa-pwws-0123456789abcdef.jsonl"
    seed1 = folder / "rte-houlsby-bert-tiny-s1-tsp0-bbbb-pwws-fedcba9876543210.jsonl"
    seed1.write_text("".join(_attack_line(seed1, i, success=True) for i in range(3)))
    assert attack_cache.done_examples(seed1) == {0, 1, 2}
    _shutil.copy2(seed1, seed0)  # the whole file
    assert attack_cache.done_examples(seed0) == set()
    seed0.write_text(_attack_line(seed0, 0) + _attack_line(seed1, 1, success=True))  # one line
    assert attack_cache.done_examples(seed0) == {0}
    seed0.write_text(_attack_line(seed0, 0) + _attack_line(seed0, 1, success=True, hashed=False))  # unhashed
    assert attack_cache.done_examples(seed0) == {0} and [r["success"] for r in attack_cache.records(seed0)] == [False]


def _as_a_pypi_cuda_wheel(monkeypatch) -> str:
    """torch as PyPI's CUDA wheel reports itself: metadata without the build tag, the module with it."""
    from importlib import metadata as importlib_metadata

    public = torch.__version__.split("+")[0]
    real = importlib_metadata.version
    monkeypatch.setattr(importlib_metadata, "version", lambda name: public if name == "torch" else real(name))
    monkeypatch.setattr(torch, "__version__", f"{public}+cu130")
    return public


def test_a_pypi_cuda_wheel_records_the_version_it_compares_on_resume(monkeypatch):
    """CI's Python 3.12 has PyPI's CUDA torch: metadata ``2.13.0``, ``torch.__version__``
    ``2.13.0+cu130``. A run recorded one and resumed comparing the other, and every killed run was
    refused as started under another torch."""
    from robustkit.train.provenance import kernel_identity, package_versions

    _as_a_pypi_cuda_wheel(monkeypatch)
    assert package_versions()["torch"] == kernel_identity()["torch"] == torch.__version__


def test_a_run_that_recorded_the_metadata_version_resumes_under_the_same_install(
    monkeypatch, spec, reference, killed, tmp_path
):
    """A manifest from before the fix holds the metadata version: the same install, so it resumes."""
    public = _as_a_pypi_cuda_wheel(monkeypatch)
    _edited_copy(killed[0], tmp_path, lambda manifest: manifest["versions"].update(torch=public))
    train(spec, tmp_path, progress=False)
    _check_like_reference(tmp_path, reference)
