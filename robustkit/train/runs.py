"""The entry points of training: :func:`train` (one supervised run) and :func:`pretrain` (one
TSP run at the steps asked for), each under its run's lock, never training a finished run again."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from robustkit.data import tasks
from robustkit.errors import RobustkitError
from robustkit.specs import preflight
from robustkit.specs.spec import RunSpec, TspSpec, data_identity
from robustkit.store.folders import MANIFEST, new_store, open_store
from robustkit.store.locks import remove_unstarted, run_lock
from robustkit.store.manifest import read_manifest, refuse_damaged
from robustkit.store.run_data import keep_in_store
from robustkit.store.schema import DIVERGED, FINISHED
from robustkit.train.divergence import Diverged
from robustkit.train.finetuning import _Finetune
from robustkit.train.loop import torch_threads
from robustkit.train.pretraining import _Pretrain


def train(spec: RunSpec, store_path: str | Path, progress: bool = True, device: str | None = None) -> Path:
    """Train one supervised run into the store (resuming it if it was interrupted).

    A run whose manifest says ``complete`` is returned as it is, never trained again.

    ``device`` (``cpu``, ``cuda``, ``cuda:1``; default: the GPU if there is one) is where it
    trains; it is recorded in the manifest but is not part of the run's identity.

    Returns
    -------
    Path
        The run's folder.
    """
    return train_counted(spec, store_path, progress, device)[0]


def train_counted(
    spec: RunSpec, store_path: str | Path, progress: bool = True, device: str | None = None
) -> tuple[Path, bool]:
    """:func:`train`, telling whether this call trained the run.

    Returns
    -------
    (Path, bool)
        The run's folder, and False if the run was finished already: before the call, or by
        another process that held its lock meanwhile (a sweep counts it as skipped, not as its
        own).
    """
    spec = spec.resolved()  # once: the resolved spec is passed on, never resolved again
    root = Path(store_path).expanduser()
    if root.exists():
        open_store(root, create=False)  # a file is refused now, not after the checks below
    run_dir = root / spec.run_id
    if _is_complete(run_dir):
        return run_dir, False
    task = tasks.get_task(spec.task, spec.data_dir)
    # a bad model, device or data (or a top_k beyond the model's layers) fails here, before any
    # folder is made; data loaded to check it is the data the TSP run and the run train on
    splits = preflight.check_run(spec, device)
    with new_store(root) as root:
        spec = keep_in_store(root, spec)  # data of this process only (a notebook's DataFrame) kept
        tsp_dir = None
        if spec.tsp_step:
            tsp_dir = _pretrain(spec.tsp_spec(), [spec.tsp_step], root, spec.data_dir, progress, device, splits)
        with run_lock(run_dir):
            if _is_complete(run_dir):
                return run_dir, False
            try:
                refuse_damaged(run_dir)  # never train over the checkpoints of a run without a manifest
                with torch_threads(spec.threads):
                    _Finetune(spec, task, run_dir, tsp_dir, progress, device, splits).run()
            except BaseException:
                remove_unstarted(run_dir)  # refused before it wrote anything: no folder left
                raise
    return run_dir, True


def pretrain(
    spec: TspSpec,
    steps: list[int],
    store_path: str | Path,
    data_dir: str | None = None,
    progress: bool = True,
    device: str | None = None,
) -> Path:
    """Masked-LM pretraining on the task's training text, keeping ``tsp-<N>`` for each N in steps.

    Waits for another process that holds the same TSP run, then uses what it saved.

    A spec without a ``data_fingerprint`` gets the one of the data ``data_dir`` gives (as
    :meth:`RunSpec.resolved` does), which may name another folder than ``spec.run_id``.

    Returns
    -------
    Path
        The TSP run's folder.
    """
    spec = dataclasses.replace(spec, data_fingerprint=data_identity(spec.task, data_dir, spec.data_fingerprint))
    with new_store(store_path) as root:
        return _pretrain(spec, steps, root, data_dir, progress, device)


def _pretrain(
    spec: TspSpec,
    steps: list[int],
    root: Path,
    data_dir: str | None,
    progress: bool,
    device: str | None,
    splits: dict | None = None,
) -> Path:
    """:func:`pretrain` of a spec whose ``data_fingerprint`` is resolved (that of a resolved
    :class:`RunSpec`'s :meth:`~robustkit.specs.spec.RunSpec.tsp_spec`, or set by :func:`pretrain`), into
    the store folder ``root``.

    ``splits`` are the task's splits (:func:`robustkit.data.tasks.load_splits` of the spec's task,
    ``data_dir``, ``train_size`` and ``split_seed``) where the caller has loaded them already;
    None: loaded here if the run trains.
    """
    wanted = sorted({int(s) for s in steps if int(s) > 0})
    if any(s < 0 for s in map(int, steps)):
        raise RobustkitError(f"TSP steps must be >= 0, got {steps}")
    run_dir = root / spec.run_id
    if not wanted or _has_checkpoints(run_dir, wanted):
        return run_dir
    # before the run's folder is made; the data it loads to check it (if any) is the data trained on
    checked = preflight.check_run(spec, device, data_dir=data_dir)
    splits = checked if checked is not None else splits
    with run_lock(run_dir, wait=True):
        if not _has_checkpoints(run_dir, wanted):
            try:
                refuse_damaged(run_dir)
                _refuse_diverged_steps(run_dir, wanted)
                with torch_threads(spec.threads):
                    _Pretrain(spec, wanted, run_dir, data_dir, progress, device, splits).run()
            except BaseException:
                remove_unstarted(run_dir)
                raise
    return run_dir


def _refuse_diverged_steps(run_dir: Path, wanted: list[int]) -> None:
    """Raise :class:`Diverged` for a TSP step the run diverged before reaching.

    Training is deterministic: it would diverge again at the same step, so it is not retried.
    Steps before the divergence that were never requested can still be trained.
    """
    if not (run_dir / MANIFEST).exists():
        return
    manifest = read_manifest(run_dir)
    diverged = manifest.get("diverged")
    if manifest.get("status") != DIVERGED or not diverged:
        return
    saved = manifest.get("checkpoints", {})
    lost = [s for s in wanted if f"tsp-{s}" not in saved and s >= diverged["step"]]
    if lost:
        stop = Diverged(diverged["step"], f"{diverged['reason']}; no tsp-{', tsp-'.join(map(str, lost))}")
        raise stop.named(run_dir.name)


def _is_complete(run_dir: Path) -> bool:
    """Whether the run is finished (:data:`robustkit.FINISHED`: complete, or diverged),
    so that a train() or sweep never trains it again."""
    return (run_dir / MANIFEST).exists() and read_manifest(run_dir).get("status") in FINISHED


def _has_checkpoints(run_dir: Path, steps: list[int]) -> bool:
    if not (run_dir / MANIFEST).exists():
        return False
    saved = read_manifest(run_dir).get("checkpoints", {})
    return all(f"tsp-{s}" in saved for s in steps)
