"""A run's manifest: read (schema-checked), written and updated atomically; damaged run folders;
the run's spec read back from it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from robustkit.errors import DamagedRunError, StoreError
from robustkit.spec import SPEC_DEFAULTS, RunSpec
from robustkit.store.atomic import atomic_write_json
from robustkit.store.folders import CHECKPOINTS, MANIFEST, RUN_FILES, repair_hint, unreadable
from robustkit.store.schema import manifest_problem


def read_manifest(run_dir: Path) -> dict:
    """The run's manifest, checked against the schema (:func:`robustkit.store.schema.manifest_problem`).

    Raises
    ------
    StoreError
        No manifest (no run there).
    DamagedRunError
        A manifest that cannot be read, is not JSON, or is of the wrong shape (the reason named).
    """
    path = Path(run_dir) / MANIFEST
    name = os.path.basename(os.path.abspath(run_dir))
    try:
        manifest = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise StoreError(f"no run at {str(run_dir)!r}: {MANIFEST} is missing") from None
    except (OSError, ValueError) as error:  # a folder, unreadable; not JSON or not UTF-8
        problem = (f"corrupt manifest: {MANIFEST} is not JSON ({error})" if isinstance(error, ValueError)
                   else f"cannot read {MANIFEST}: {error.strerror or error}")
        raise DamagedRunError(name, problem, repair_hint(run_dir)) from None
    problem = manifest_problem(manifest, name)
    if problem:
        raise DamagedRunError(name, f"{MANIFEST}: {problem}", repair_hint(run_dir))
    return manifest


def inspect_run(run_dir: Path) -> tuple[dict | None, str | None]:
    """A run folder's manifest, or why the folder is damaged, from the manifest alone (nothing
    is hashed).

    Damaged: a folder or file in it that this process may not read
    (:func:`robustkit.store.folders.unreadable`), a manifest that cannot be read or has the wrong
    shape, or none while checkpoints or logs are left (training writes the manifest first: only
    a deleted one gives that).

    Returns
    -------
    (dict or None, str or None)
        ``(manifest, None)`` for a readable run, ``(None, problem)`` for a damaged one and
        ``(None, None)`` for a folder with nothing of a run in it (or no folder).
    """
    run_dir = Path(run_dir)
    denied = unreadable(run_dir)
    if denied:
        return None, denied
    try:
        return read_manifest(run_dir), None
    except DamagedRunError as error:
        return None, error.problem
    except StoreError:  # no manifest
        left = [f"{n}/" if n == CHECKPOINTS else n for n in RUN_FILES if (run_dir / n).exists()]
        return None, (f"{MANIFEST} is missing but {', '.join(left)} {'is' if len(left) == 1 else 'are'} left"
                      if left else None)


def damage(run_dir: Path) -> str | None:
    """Why a run folder is damaged (see :func:`inspect_run`), or None."""
    return inspect_run(run_dir)[1]


def refuse_damaged(run_dir: Path) -> None:
    """Raise :class:`DamagedRunError` for a damaged run folder (see :func:`damage`), so that
    training never starts over the checkpoints of a run whose manifest is gone."""
    problem = damage(run_dir)
    if problem:
        raise DamagedRunError(Path(run_dir).name, problem, repair_hint(run_dir))


def read_spec(run_dir: str | Path) -> RunSpec:
    """The :class:`robustkit.spec.RunSpec` of the fine-tuning run in ``run_dir`` (the one place
    a run's settings are read back from its manifest).

    Raises
    ------
    StoreError
        No run there, a corrupt manifest, or a run that is not a fine-tuning run (a TSP run).
    """
    manifest = read_manifest(Path(run_dir))
    if manifest.get("kind") != "finetune":
        raise StoreError(f"{Path(run_dir).name!r} is not a fine-tuning run")
    # An imported run's unknown settings (seed, lr, ...) take their defaults here only so that a
    # spec can rebuild the model: every tensor it needs comes from the checkpoint, none from an
    # init seed. What the store reports (load_runs) keeps them unknown.
    unknown = {name: SPEC_DEFAULTS[name] for name in manifest.get("unknown", []) if manifest["spec"].get(name) is None}
    return RunSpec(**{**manifest["spec"], **unknown})


def write_manifest(run_dir: Path, manifest: dict) -> None:
    atomic_write_json(Path(run_dir) / MANIFEST, manifest)


def update_manifest(run_dir: Path, **changes) -> dict:
    """Read, change the given top-level keys, and write the manifest back atomically."""
    manifest = read_manifest(run_dir)
    manifest.update(changes)
    write_manifest(run_dir, manifest)
    return manifest
