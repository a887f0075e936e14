"""A run's manifest: read (schema- and sha256-checked), written and updated atomically; damaged
run folders; the run's spec read back from it.

A manifest carries the sha256 of its own content (:data:`SELF_SHA256`): every other file of a
run is checked against the manifest, and the manifest against itself, so that a changed byte in
a final metric or a setting is found as surely as one in a checkpoint. The hash is of the
parsed content (sorted keys, compact JSON), not of the bytes: a manifest written by hand with
other spacing still reads. Manifests written before it existed have none and are not checked.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from robustkit.errors import DamagedRunError, StoreError
from robustkit.specs.spec import SPEC_DEFAULTS, RunSpec
from robustkit.store.atomic import atomic_write_json
from robustkit.store.folders import CHECKPOINTS, MANIFEST, RUN_FILES, repair_hint, unreadable
from robustkit.store.integrity import cached_run_problems
from robustkit.store.schema import manifest_problem

# The key of a manifest's own sha256 (of the rest of it: :func:`_content_sha256`).
SELF_SHA256 = "manifest_sha256"


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
        problem = (
            f"corrupt manifest: {MANIFEST} is not JSON ({error})"
            if isinstance(error, ValueError)
            else f"cannot read {MANIFEST}: {error.strerror or error}"
        )
        raise DamagedRunError(name, problem, repair_hint(run_dir)) from None
    problem = manifest_problem(manifest, name)
    if problem:
        raise DamagedRunError(name, f"{MANIFEST}: {problem}", repair_hint(run_dir))
    recorded = manifest.pop(SELF_SHA256, None)
    if recorded is not None and recorded != _content_sha256(manifest):
        raise DamagedRunError(name, f"{MANIFEST} does not match its own sha256 (a changed byte)", repair_hint(run_dir))
    return manifest


def _content_sha256(manifest: dict) -> str:
    """sha256 of a manifest's content (without :data:`SELF_SHA256`), as JSON with sorted keys."""
    return hashlib.sha256(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def inspect_run(run_dir: Path, check_files: bool = True) -> tuple[dict | None, str | None]:
    """A run folder's manifest, or why the folder is damaged.

    Damaged: a folder or file in it that this process may not read
    (:func:`robustkit.store.folders.unreadable`), a manifest that cannot be read, has the wrong shape or does not
    match its own
    sha256, or none while checkpoints or logs are left (training writes the manifest first: only a
    deleted one gives that); with ``check_files``, also a finished run whose checkpoint files or
    logs are missing or differ from the manifest's sha256, as every reader sees it (presence and
    size of every file on every call, sha256 once per change:
    :func:`robustkit.store.integrity.cached_run_problems`).

    Parameters
    ----------
    check_files : bool
        Check the files the manifest lists too (False: the manifest alone, for ``verify``, which
        hashes every file itself).

    Returns
    -------
    (dict or None, str or None)
        ``(manifest, None)`` for a readable run, ``(None, problem)`` for a damaged one (problems
        ``; ``-separated, each naming its file) and ``(None, None)`` for a folder with nothing of
        a run in it (or no folder).
    """
    run_dir = Path(run_dir)
    denied = unreadable(run_dir)
    if denied:
        return None, denied
    try:
        manifest = read_manifest(run_dir)
    except DamagedRunError as error:
        return None, error.problem
    except StoreError:  # no manifest
        left = [f"{n}/" if n == CHECKPOINTS else n for n in RUN_FILES if (run_dir / n).exists()]
        return None, (
            f"{MANIFEST} is missing but {', '.join(left)} {'is' if len(left) == 1 else 'are'} left" if left else None
        )
    problems = cached_run_problems(run_dir, manifest) if check_files else []
    return (None, "; ".join(problems)) if problems else (manifest, None)


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
    """The :class:`robustkit.specs.spec.RunSpec` of the fine-tuning run in ``run_dir`` (the one place
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
    """Write the manifest atomically, with the sha256 of its content (:data:`SELF_SHA256`)."""
    content = json.loads(json.dumps({k: v for k, v in manifest.items() if k != SELF_SHA256}, default=str))
    atomic_write_json(Path(run_dir) / MANIFEST, {**content, SELF_SHA256: _content_sha256(content)})


def update_manifest(run_dir: Path, **changes) -> dict:
    """Read, change the given top-level keys, and write the manifest back atomically."""
    manifest = read_manifest(run_dir)
    manifest.update(changes)
    write_manifest(run_dir, manifest)
    return manifest
