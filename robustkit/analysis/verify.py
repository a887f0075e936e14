"""``robustkit verify``: check every run of a store against its manifest, list the damaged ones
and what to do, and with ``repair`` move them aside so that the next sweep trains them again.

A run is damaged when its manifest is missing while checkpoints or logs are left, cannot be
read, is not JSON, has the wrong shape (:func:`robustkit.store.schema.manifest_problem`) or does
not match its own sha256, when a checkpoint file or a training log it lists
(:mod:`robustkit.store.logs`) is missing or does not hash to its sha256 (an interrupted run's
logs: to the manifest's or its ``last`` checkpoint's, what resuming accepts), or when a finished
fine-tuning run lacks ``best`` or ``last`` (:func:`robustkit.store.integrity.run_problems`).
Every file is hashed, never loaded, whatever the readers' verification cache remembers; the
hashes are remembered there for them.

Cached analysis frames (``<store>/.cache/<analysis>/*.parquet``) are checked against the sha256
written beside them, of the file's name (run id, cache key) with its bytes
(:func:`robustkit.analysis.cache.frame_problem`): a damaged one, or one copied over another
run's or key's, is never read (it is computed again), and repair removes it.

A run folder this process may not read (a folder or file without read permission) is reported
``unreadable``, never moved: nothing in it is wrong that moving it would mend. A run whose
manifest says ``running`` while no process holds its lock was interrupted: it is reported
``stale`` (the next sweep, or ``robustkit train`` with its settings, resumes it).

Repair moves a damaged run folder whole to ``<store>/.damaged/<run_id>-<time>``: nothing is
deleted (a lost manifest can be put back by hand), and the run's id is free again, so the next
sweep trains it from the start. Training is deterministic, so a retrained run has the same bytes
as the intact one had.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from robustkit.errors import RunLockedError, StoreError
from robustkit.store.folders import DAMAGED_DIR, MANIFEST, open_store, repair_hint, run_folders, unreadable
from robustkit.store.integrity import forget_run, verified_run_problems
from robustkit.store.locks import run_lock
from robustkit.store.manifest import inspect_run
from robustkit.store.schema import DAMAGED, RUNNING

COLUMNS = ["run_id", "kind", "status", "files", "problem", "advice", "moved_to"]
OK, DAMAGED, MOVED, BUSY, STALE, UNREADABLE = "ok", DAMAGED, "moved", "busy", "stale", "unreadable"
CACHE_COLUMNS = ["file", "status", "problem"]
REMOVED = "removed"


def verify_store(store_path: str | Path, repair: bool = False, run_ids: list[str] | None = None) -> pd.DataFrame:
    """Re-hash every checkpoint file of every run of a store against its manifest.

    Parameters
    ----------
    store_path : path
        A run store.
    repair : bool
        Move each damaged run to ``<store>/.damaged/<run_id>-<YYYYmmddTHHMMSS>``.
    run_ids : list of str, optional
        Only these runs (as any table prints them); default every run folder.

    Returns
    -------
    DataFrame
        One row per run folder (:data:`COLUMNS`): ``run_id`` (the folder's name), ``kind``
        (``finetune``, ``tsp``, or None when the manifest cannot tell), ``status`` (``ok``;
        ``damaged``; ``moved`` once repaired; ``busy`` if another process is training it: not
        checked; ``stale``: intact, but its manifest says ``running`` and no process holds its lock;
        ``unreadable``: this process may not read it, not checked), ``files`` (checkpoint files hashed), ``problem``
        (every problem found, ``; ``
        separated), ``advice`` (what to do) and ``moved_to``.

    Raises
    ------
    StoreError
        The store does not exist or is a file.
    """
    root = open_store(store_path, create=False)
    rows = []
    folders = run_folders(root)
    if run_ids is not None:
        unknown = sorted(set(run_ids) - {f.name for f in folders})
        if unknown:
            raise StoreError(f"no run {', '.join(map(repr, unknown))} in {store_path}")
        folders = [f for f in folders if f.name in set(run_ids)]
    for run_dir in folders:
        row = {"run_id": run_dir.name, "kind": None, "files": 0, "problem": None, "advice": None, "moved_to": None}
        denied = unreadable(run_dir)
        if denied:  # before the lock: it lives in the folder
            rows.append({**row, "status": UNREADABLE, "problem": denied, "advice": repair_hint(run_dir)})
            continue
        try:
            with run_lock(run_dir):
                row.update(_check(run_dir))
                if repair and row["status"] == DAMAGED:
                    row.update(
                        status=MOVED,
                        moved_to=str(_move_aside(root, run_dir)),
                        advice="moved aside; the next sweep (or `robustkit train`) trains it again",
                    )
        except RunLockedError:
            row.update(status=BUSY, advice="being trained by another process: verify it once that is done")
        rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


def verify_cache(store_path: str | Path, repair: bool = False) -> pd.DataFrame:
    """Check every cached analysis frame of a store against the sha256 beside it.

    Parameters
    ----------
    store_path : path
        A run store.
    repair : bool
        Remove each damaged frame (and its sha256 file): it is computed again when next asked for.

    Returns
    -------
    DataFrame
        One row per damaged frame (:data:`CACHE_COLUMNS`): ``file`` (its path), ``status``
        (``damaged``, or ``removed`` once repaired) and ``problem``; ``attrs["checked"]`` is the
        number of frames checked.
    """
    from robustkit.analysis.cache import frame_files, frame_problem

    files = frame_files(open_store(store_path, create=False))
    rows = []
    for path in files:
        problem = frame_problem(path)
        if problem is None:
            continue
        status = DAMAGED
        if repair:
            for part in (path, path.with_name(f"{path.name}.sha256")):
                part.unlink(missing_ok=True)
            status = REMOVED
        rows.append({"file": str(path), "status": status, "problem": problem})
    table = pd.DataFrame(rows, columns=CACHE_COLUMNS)
    table.attrs["checked"] = len(files)
    return table


def _check(run_dir: Path) -> dict:
    """Status, kind, number of files hashed, problems and advice of one run folder."""
    manifest, problem = inspect_run(run_dir, check_files=False)
    if problem:
        missing = not (run_dir / MANIFEST).exists()
        return {"status": DAMAGED, "problem": problem, "advice": _advice(run_dir, missing)}
    problems = verified_run_problems(run_dir, manifest)
    files = sum(len(entry["files"]) for entry in manifest.get("checkpoints", {}).values())
    if not problems and manifest.get("status") == RUNNING:  # checked under its lock: nobody trains it
        return {
            "status": STALE,
            "kind": manifest["kind"],
            "files": files,
            "problem": "its manifest says running, but no process is training it (interrupted)",
            "advice": "the next sweep, or `robustkit train` with its settings, resumes it from its last checkpoint",
        }
    if not problems:
        return {"status": OK, "kind": manifest["kind"], "files": files}
    return {
        "status": DAMAGED,
        "kind": manifest["kind"],
        "files": files,
        "problem": "; ".join(problems),
        "advice": _advice(run_dir, False, manifest["kind"]),
    }


def _advice(run_dir: Path, missing_manifest: bool, kind: str | None = None) -> str:
    root = run_dir.parent
    text = (
        f"`robustkit verify {root} --repair` moves it to {root / DAMAGED_DIR}/; the next sweep "
        "trains it again from the start (same settings, same bytes)"
    )
    if missing_manifest:
        text = f"put its {MANIFEST} back if you have a copy; else " + text
    if kind == "tsp":
        text += "; fine-tuning runs that started from it stay valid"
    return text


def _move_aside(root: Path, run_dir: Path) -> Path:
    """Rename a run folder into ``<store>/.damaged/`` under a name that is not taken yet."""
    target_dir = root / DAMAGED_DIR
    target_dir.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    target, n = target_dir / f"{run_dir.name}-{stamp}", 1
    while target.exists():
        n += 1
        target = target_dir / f"{run_dir.name}-{stamp}-{n}"
    run_dir.rename(target)
    forget_run(run_dir)  # the id is free: a retrained run's files are hashed afresh
    return target


def summary(table: pd.DataFrame) -> str:
    """One line: how many runs are ok, damaged, unreadable, stale, moved aside, busy."""
    counts = table["status"].value_counts()
    parts = [
        f"{counts.get(status, 0)} {status}"
        for status in (OK, DAMAGED, UNREADABLE, STALE, MOVED, BUSY)
        if counts.get(status, 0)
    ]
    return f"{len(table)} runs: " + (", ".join(parts) if parts else "none")
