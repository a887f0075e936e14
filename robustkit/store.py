"""The run store: one folder per run, written so that nothing is lost when a process dies.

Layout::

    <store>/<run_id>/
        manifest.json          config, versions, asset hashes, status, trainable parameters,
                               checkpoints with the sha256 of each file, final metrics
        history.parquet        one row per eval step x split x metric (and train loss per step)
        gradnorms.parquet      one row per step x layer group: L2 norm of the gradient
        checkpoints/<name>/    model.safetensors (+ optimizer.safetensors, state.json for `last`)
        .lock                  held (flock) by the process training the run

Checkpoint names: ``step-0`` (theta_0, the state before tuning), ``best``, ``last`` and
``tsp-<N>`` (task-specific pretraining runs). A checkpoint is valid only if the manifest lists
it with the sha256 of every file: files are written under a temporary name and renamed, and the
manifest is rewritten (atomically) after the rename, so a crash at any point leaves either the
old or the new checkpoint, never a mix.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import warnings
from pathlib import Path
from typing import Iterator

import pandas as pd
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from robustkit.errors import DamagedRunError, RunLockedError, StoreError
from robustkit.methods.registry import identity_columns, option_columns
from robustkit.spec import SPEC_DEFAULTS, SPEC_FIELDS, RunSpec, TspSpec

MANIFEST = "manifest.json"
HISTORY = "history.parquet"
GRADNORMS = "gradnorms.parquet"
CHECKPOINTS = "checkpoints"
MODEL_FILE = "model.safetensors"

# A run's ``status`` in its manifest. ``running`` (or interrupted: resumable), ``failed`` (an
# exception; resumable), ``complete`` (trained to the end), ``diverged`` (stopped at a non-finite
# loss, gradient norm or weights: its last finite state kept, its outcome ``diverged``,
# :mod:`robustkit.collapse`). Complete and diverged runs are finished: never trained again, and
# analysed (a diverged run is counted as such, never averaged in as a result).
COMPLETE, DIVERGED = "complete", "diverged"
FINISHED = (COMPLETE, DIVERGED)
STATUSES = ("running", "failed", COMPLETE, DIVERGED)
# A run folder that cannot be trusted (robustkit.verify): shown with this status, never analysed.
DAMAGED = "damaged"
# Where `robustkit verify --repair` moves damaged runs (hidden, like .cache: not a run folder).
DAMAGED_DIR = ".damaged"


# ---------------------------------------------------------------------------------------------
# atomic files


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _create_temporary(path: Path) -> tuple[int, str]:
    """A new empty file beside ``path`` (``.<name>.<random>``), open for writing.

    Created as ``open()`` creates files, mode 0666 less the umask (and the folder's default
    ACL), not 0600 as ``tempfile.mkstemp`` makes them: in a store shared by a lab group under a
    group umask (0002, 0027) every member can read every run.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}"
        try:
            return os.open(tmp, flags, 0o666), str(tmp)
        except FileExistsError:  # 2^32 names: another writer picked this one, pick again
            continue


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = _create_temporary(path)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_json(path: Path, obj: dict) -> None:
    atomic_write_bytes(path, json.dumps(obj, indent=2, sort_keys=True, default=str).encode())


def atomic_write_parquet(path: Path, frame: pd.DataFrame) -> None:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    atomic_write_bytes(path, buffer.getvalue())


# ---------------------------------------------------------------------------------------------
# store and runs


def open_store(store: str | Path, create: bool = True) -> Path:
    """Check (and create) a store folder.

    Raises
    ------
    StoreError
        If the path is a file, or does not exist and ``create`` is False.
    """
    path = Path(store).expanduser()
    if path.exists() and not path.is_dir():
        raise StoreError(f"store path {str(store)!r} is a file, not a folder of runs")
    if not path.exists():
        if not create:
            raise StoreError(f"store {str(store)!r} does not exist")
        path.mkdir(parents=True)
    return path


def run_dirs(store: str | Path) -> list[Path]:
    """Every run folder (one holding a manifest) in the store, sorted by name."""
    root = open_store(store, create=False)
    return sorted(p.parent for p in root.glob(f"*/{MANIFEST}") if not p.parent.name.startswith("."))


# What a run folder holds besides its manifest: left without one, the folder is damaged.
_RUN_FILES = (CHECKPOINTS, HISTORY, GRADNORMS)


def run_folders(store: str | Path) -> list[Path]:
    """Every folder of the store that holds a run or what is left of one (a manifest, or
    checkpoints or logs without it), sorted by name. Hidden folders (``.cache``, ``.damaged``,
    ``.slurm``) are not runs; a folder holding only a ``.lock`` (a run that never started) is
    not either."""
    root = open_store(store, create=False)
    return sorted(
        p for p in root.iterdir()
        if p.is_dir() and not p.name.startswith(".") and any((p / n).exists() for n in (MANIFEST, *_RUN_FILES))
    )


def repair_hint(run_dir: Path) -> str:
    """What to do about a damaged run (the advice of :class:`DamagedRunError`)."""
    root = Path(run_dir).parent
    return (f"`robustkit verify {root} --repair` moves it to {root / DAMAGED_DIR}/ and the next sweep "
            "trains it again")


def read_manifest(run_dir: Path) -> dict:
    """The run's manifest, checked against the schema (:func:`manifest_problem`).

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


# ---------------------------------------------------------------------------------------------
# the manifest schema

_SHA256 = re.compile(r"[0-9a-f]{64}")
_SPECS = {"finetune": RunSpec, "tsp": TspSpec}
_JSON_TYPES = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,), "None": (type(None),)}


def _field_types(spec_class) -> dict[str, tuple[type, ...] | None]:
    """The JSON types each spec field may hold, from its annotation (None: not checked)."""
    types = {}
    for f in dataclasses.fields(spec_class):
        names = [part.strip() for part in str(f.type).split("|")]
        types[f.name] = (tuple(t for name in names for t in _JSON_TYPES[name])
                         if all(name in _JSON_TYPES for name in names) else None)
    return types


_SPEC_TYPES = {kind: _field_types(spec_class) for kind, spec_class in _SPECS.items()}
_SPEC_ANNOTATIONS = {kind: {f.name: str(f.type) for f in dataclasses.fields(c)} for kind, c in _SPECS.items()}


def _is(value, types: tuple[type, ...]) -> bool:
    """isinstance, with JSON's true/false not counting as numbers."""
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def _nested(value, depth: int) -> bool:
    """A dict of dicts ``depth`` levels deep (final: checkpoint -> split -> metric -> value)."""
    return isinstance(value, dict) and (depth == 1 or all(_nested(v, depth - 1) for v in value.values()))


# Optional top-level keys that the store's readers rely on: key -> (check, expected).
_OPTIONAL = {
    "status": (lambda v: v in STATUSES, f"one of {', '.join(STATUSES)}"),
    "main_metric": (lambda v: v is None or isinstance(v, str), "a metric name"),
    "trainable": (lambda v: isinstance(v, dict) and (v.get("count") is None or _is(v["count"], (int,))),
                  "an object whose count is an integer"),
    "splits": (lambda v: v is None or (isinstance(v, dict) and all(_is(n, (int,)) for n in v.values())),
               "split -> number of examples"),
    "final": (lambda v: _nested(v, 3), "checkpoint -> split -> metric -> value"),
    "outcome": (lambda v: v is None or _nested(v, 2), "checkpoint -> split -> outcome"),
    "data": (lambda v: isinstance(v, dict) and isinstance(v.get("fingerprint"), str), "an object with a fingerprint"),
    "tsp_run": (lambda v: v is None or isinstance(v, str), "a run id"),
    "error": (lambda v: v is None or isinstance(v, str), "a message"),
}


def manifest_problem(manifest, folder: str | None = None) -> str | None:
    """What is wrong with a manifest's shape, or None: the schema every reader relies on.

    Required: ``run_id`` (the folder's name when ``folder`` is given), ``kind`` (``finetune`` or
    ``tsp``) and ``spec`` (an object of the kind's spec fields, each of its annotated type);
    where present, ``status`` is a known status, ``checkpoints`` maps names to ``{"step": int,
    "files": {file: sha256}}``, and the keys of :data:`_OPTIONAL` have their shapes. Other keys
    are free (newer robustkit versions may add some). ``unknown`` lists the spec fields of an
    imported run that nobody recorded (:mod:`robustkit.importing`): those hold null.
    """
    if not isinstance(manifest, dict):
        return f"a JSON {type(manifest).__name__} ({json.dumps(manifest)[:40]}), not an object"
    for key in ("run_id", "kind", "spec"):
        if key not in manifest:
            return f"no {key!r}"
    run_id, kind, spec = manifest["run_id"], manifest["kind"], manifest["spec"]
    if not isinstance(run_id, str) or not run_id:
        return f"run_id is {run_id!r}, not a run id"
    if folder is not None and run_id != folder:
        return f"run_id {run_id!r} is not the name of its folder {folder!r}"
    if kind not in _SPECS:
        return f"kind is {kind!r}, expected 'finetune' or 'tsp'"
    if not isinstance(spec, dict):
        return f"spec is {spec!r}, not an object of run settings"
    types = _SPEC_TYPES[kind]
    unknown = manifest.get("unknown", [])
    if not (isinstance(unknown, list) and all(name in types for name in unknown)):
        return f"unknown is {json.dumps(unknown, default=str)[:60]}, expected a list of spec fields"
    for name, value in spec.items():
        if name not in types:
            return f"spec has an unknown field {name!r}"
        if value is None and name in unknown:  # an imported run's setting nobody recorded
            continue
        if types[name] is not None and not _is(value, types[name]):
            return f"spec field {name!r} is {value!r}, expected {_SPEC_ANNOTATIONS[kind][name]}"
    for key, (check, expected) in _OPTIONAL.items():
        if key in manifest and not check(manifest[key]):
            return f"{key} is {json.dumps(manifest[key], default=str)[:60]}, expected {expected}"
    checkpoints = manifest.get("checkpoints", {})
    if not isinstance(checkpoints, dict):
        return f"checkpoints is {checkpoints!r}, not an object"
    for name, entry in checkpoints.items():
        if not (isinstance(entry, dict) and _is(entry.get("step"), (int,)) and isinstance(entry.get("files"), dict)
                and entry["files"]):
            return f"checkpoint {name!r} is {json.dumps(entry, default=str)[:60]}, expected {{step, files}}"
        for file_name, digest in entry["files"].items():
            if "/" in file_name or file_name in ("", ".", "..") or not (isinstance(digest, str) and _SHA256.fullmatch(digest)):
                return f"checkpoint {name!r} lists file {file_name!r} with {digest!r}, not a sha256"
    return None


def inspect_run(run_dir: Path) -> tuple[dict | None, str | None]:
    """A run folder's manifest, or why the folder is damaged, from the manifest alone (nothing
    is hashed).

    Damaged: a manifest that cannot be read or has the wrong shape, or none while checkpoints or
    logs are left (training writes the manifest first: only a deleted one gives that).

    Returns
    -------
    (dict or None, str or None)
        ``(manifest, None)`` for a readable run, ``(None, problem)`` for a damaged one and
        ``(None, None)`` for a folder with nothing of a run in it (or no folder).
    """
    run_dir = Path(run_dir)
    try:
        return read_manifest(run_dir), None
    except DamagedRunError as error:
        return None, error.problem
    except StoreError:  # no manifest
        left = [f"{n}/" if n == CHECKPOINTS else n for n in _RUN_FILES if (run_dir / n).exists()]
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


def checkpoint_problems(run_dir: Path, names: list[str] | None = None, manifest: dict | None = None) -> list[str]:
    """Re-hash checkpoint files against the manifest's sha256 (nothing is loaded).

    Parameters
    ----------
    names : list of str, optional
        Checkpoints to check (one the manifest lacks is a problem); default: every one listed.

    Returns
    -------
    list of str
        One line per missing checkpoint, missing file or file whose sha256 differs.
    """
    manifest = read_manifest(run_dir) if manifest is None else manifest
    entries = manifest.get("checkpoints", {})
    problems = []
    for name in entries if names is None else names:
        if name not in entries:
            problems.append(f"checkpoint {name!r} is not in the manifest (has: {', '.join(sorted(entries)) or 'none'})")
            continue
        found = _file_problems(checkpoint_dir(run_dir, name), entries[name]["files"])
        backup = checkpoint_dir(run_dir, f".{name}.old")  # a save under way or killed: what readers take
        if found and not (backup.is_dir() and not _file_problems(backup, entries[name]["files"])):
            problems += [f"{CHECKPOINTS}/{name}/{line}" for line in found]
    return problems


def _file_problems(folder: Path, files: dict[str, str]) -> list[str]:
    """One line per file of ``files`` (name -> sha256) missing from ``folder`` or hashing to
    another sha256."""
    problems = []
    for file_name, expected in files.items():
        path = folder / file_name
        if not path.is_file():
            problems.append(f"{file_name} is missing")
        elif (actual := sha256_file(path)) != expected:
            problems.append(f"{file_name} is corrupt or truncated (sha256 {actual[:12]}... is not the manifest's "
                            f"{expected[:12]}...)")
    return problems


def finished_state(run_dir: Path) -> tuple[bool, str | None]:
    """Whether a sweep may count the run as finished, and what is damaged if anything.

    A finished (complete or diverged) fine-tuning run counts only once its ``best`` and ``last``
    files hash to the manifest's sha256 (hashed, not loaded: ~0.3 s for a full minilm-l6 run).
    Unfinished runs are not hashed: their resume verifies ``last`` itself (and another process
    may be writing it right now).

    Returns
    -------
    (bool, str or None)
        ``(True, None)``: finished and intact; ``(False, None)``: to train or resume;
        ``(False, problem)``: damaged, not to be trained over (see :func:`repair_hint`).
    """
    manifest, problem = inspect_run(run_dir)
    if manifest is None:
        return False, problem
    if manifest.get("status") not in FINISHED:
        return False, None
    names = ["best", "last"] if manifest["kind"] == "finetune" else None
    problems = checkpoint_problems(run_dir, names, manifest)
    return (False, "; ".join(problems)) if problems else (True, None)


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


@contextlib.contextmanager
def run_lock(run_dir: Path, wait: bool = False) -> Iterator[None]:
    """Hold the run's lock for the duration.

    Fails at once if another process holds it, or with ``wait`` blocks until it is free.
    ``flock`` locks die with their process, so a killed run leaves no stale lock behind.
    """
    path = Path(run_dir) / ".lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise RunLockedError(f"run {Path(run_dir).name!r} is being trained by another process") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ---------------------------------------------------------------------------------------------
# checkpoints


def checkpoint_dir(run_dir: Path, name: str) -> Path:
    return Path(run_dir) / CHECKPOINTS / name


def save_checkpoint(
    run_dir: Path,
    name: str,
    tensors: dict[str, torch.Tensor],
    metadata: dict[str, str],
    step: int,
    extra: dict[str, bytes] | None = None,
) -> dict:
    """Write a checkpoint folder atomically and record it in the manifest.

    Parameters
    ----------
    tensors : dict of str to Tensor
        What the run trains (adapter runs) or the whole model (full runs), by parameter name.
    metadata : dict of str to str
        Stored in the safetensors header (base model fingerprint, method, ...).
    step : int
        Optimisation step the checkpoint was taken at.
    extra : dict of str to bytes, optional
        Further files of the checkpoint (optimizer state, trainer state), also hashed.

    Returns
    -------
    dict
        The manifest entry: ``{"step": step, "files": {file name: sha256}}``.
    """
    files = {MODEL_FILE: _canonical_safetensors(save_safetensors(_contiguous(tensors), metadata=metadata))}
    files.update(extra or {})
    final = checkpoint_dir(run_dir, name)
    staging = final.with_name(f".{name}.tmp")
    backup = final.with_name(f".{name}.old")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for file_name, data in files.items():
        atomic_write_bytes(staging / file_name, data)
    if final.exists():
        shutil.rmtree(backup, ignore_errors=True)
        final.rename(backup)
    staging.rename(final)
    entry = {"step": step, "files": {f: sha256_bytes(d) for f, d in files.items()}}
    manifest = read_manifest(run_dir)
    manifest.setdefault("checkpoints", {})[name] = entry
    write_manifest(run_dir, manifest)
    shutil.rmtree(backup, ignore_errors=True)
    return entry


def _contiguous(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().contiguous() for k, v in tensors.items()}


def _canonical_safetensors(data: bytes) -> bytes:
    """The same safetensors file with its metadata's keys in sorted order.

    safetensors writes the metadata in a random order (a Rust HashMap), so two saves of the same
    tensors with the same metadata gave different bytes, hence different sha256 in the manifest:
    a resumed run's checkpoints could not be shown identical to an uninterrupted run's. Sorting
    keeps the header's length, so the tensor data stays where it is.
    """
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    if isinstance(header.get("__metadata__"), dict):
        header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    if len(text) != len(data[8 : 8 + size].rstrip(b" ")):  # not the writer's formatting: keep its bytes
        return data
    return data[:8] + text.ljust(size) + data[8 + size :]


def recover_checkpoints(run_dir: Path) -> None:
    """Undo what a crash in the middle of :func:`save_checkpoint` or :func:`atomic_write_bytes`
    left behind (call it holding the run's lock: it removes what a live writer would be writing).

    A checkpoint folder whose files do not match the manifest is dropped, and the previous one
    (``.<name>.old``) is restored if it matches; half-written staging folders and the temporary
    files of the run's manifest and logs (``.<name>.<random>``, never renamed) are removed.
    """
    for name in (MANIFEST, HISTORY, GRADNORMS):
        for temporary in Path(run_dir).glob(f".{name}.*"):
            temporary.unlink(missing_ok=True)
    folder = Path(run_dir) / CHECKPOINTS
    if not folder.is_dir():
        return
    entries = read_manifest(run_dir).get("checkpoints", {})
    for staging in folder.glob(".*.tmp"):
        shutil.rmtree(staging)
    for backup in folder.glob(".*.old"):
        name = backup.name[1:-4]
        final = folder / name
        if final.exists() and _matches(final, entries.get(name)):
            shutil.rmtree(backup)
        else:
            shutil.rmtree(final, ignore_errors=True)
            backup.rename(final)


def _matches(folder: Path, entry: dict | None) -> bool:
    return bool(entry) and not _file_problems(folder, entry["files"])


def read_checkpoint_file(run_dir: Path, name: str, file_name: str) -> bytes:
    """Bytes of one checkpoint file, verified against the manifest's sha256.

    While a save of the checkpoint is under way, or after one was killed (:func:`save_checkpoint`),
    the files the manifest lists may be in its backup folder ``.<name>.old``: they are read from
    there. A save that ends between reading the manifest and the file is read again.

    Raises
    ------
    StoreError
        Missing checkpoint, or a file whose sha256 differs from the manifest (corrupt or
        truncated).
    """
    for _ in range(2):
        entry = read_manifest(run_dir).get("checkpoints", {}).get(name)
        if entry is None or file_name not in entry["files"]:
            known = ", ".join(sorted(read_manifest(run_dir).get("checkpoints", {}))) or "none"
            raise StoreError(f"run {Path(run_dir).name!r} has no checkpoint {name!r} (has: {known})")
        path = checkpoint_dir(run_dir, name) / file_name
        data = _read_or_none(path)
        if data is not None and sha256_bytes(data) == entry["files"][file_name]:
            return data
        old = _read_or_none(path.parent.with_name(f".{name}.old") / file_name)
        if old is not None and sha256_bytes(old) == entry["files"][file_name]:
            return old
    if data is None:
        raise StoreError(f"checkpoint file {str(path)!r} is missing")
    raise StoreError(
        f"checkpoint file {str(path)!r} is corrupt or truncated: sha256 {sha256_bytes(data)[:16]}... "
        f"does not match the manifest's {entry['files'][file_name][:16]}..."
    )


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None


def load_checkpoint(run_dir: Path, name: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Tensors and safetensors metadata of a checkpoint, after its sha256 check."""
    data = read_checkpoint_file(run_dir, name, MODEL_FILE)
    return load_safetensors(data), _safetensors_metadata(data)


def _safetensors_metadata(data: bytes) -> dict[str, str]:
    header_size = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + header_size]).get("__metadata__", {})


# ---------------------------------------------------------------------------------------------
# tidy DataFrames

# Every field of the run spec is an identity column, so that analyses and figures can see every
# setting in which two runs differ (and refuse to pool them: robustkit.analysis.pooling); the
# nine that name a run come first. ``data_dir`` says where data was read, not what was run.
# ``method_options`` is one column per option of every method (``lora.r``, ``prefix.length``;
# missing for runs of other methods), so that no analysis pools runs of different options.
_NAMING = ["model", "task", "method", "seed", "tsp_step", "lr", "train_size", "adapter_size"]
OPTION_COLUMNS = option_columns()
IDENTITY = ["run_id", *_NAMING, *(f for f in SPEC_FIELDS if f not in _NAMING and f not in ("data_dir", "method_options")),
            *OPTION_COLUMNS]
# What an identity column holds for a run stored before it existed (None: missing).
_COLUMN_DEFAULTS = {**SPEC_DEFAULTS, **dict.fromkeys(OPTION_COLUMNS)}


class DamagedRunWarning(UserWarning):
    """Damaged runs were left out of what was read (:func:`load_runs`)."""


def load_runs(store: str | Path, include_tsp: bool = False, include_damaged: bool = False) -> pd.DataFrame:
    """One row per run: identity columns, status, trainable parameters and final metrics.

    Damaged runs (:func:`damage`: a missing, unreadable or misshapen manifest) are left out
    with a :class:`DamagedRunWarning` naming them and the reason, so that one bad run never
    blocks the rest of the store; ``robustkit verify`` lists and repairs them.

    Parameters
    ----------
    store : path
        A run store.
    include_tsp : bool
        Also list task-specific pretraining runs (``kind == "tsp"``).
    include_damaged : bool
        List damaged runs too (no warning), as rows of status ``damaged`` with the ``problem``,
        their folder name as ``run_id`` and no settings.

    Returns
    -------
    DataFrame
        Columns ``run_id, kind`` + every field of the run's spec and one column per method
        option (:data:`IDENTITY`; ``lora.r`` holds r for LoRA runs, nothing for others) +
        ``status`` (``complete``, ``diverged``, ``running``, ``failed``: see :data:`FINISHED`),
        ``main_metric, trainable_params, path``, ``n_<split>`` (examples per split),
        one column per final metric, named ``<checkpoint>/<split>/<metric>`` (e.g.
        ``best/test/accuracy``; ``top_class_share`` is the share of the most predicted class),
        and ``outcome/<checkpoint>/<split>`` (``ok``, ``collapsed`` or ``diverged``, see
        :mod:`robustkit.collapse`; absent for runs trained before outcomes were recorded). A
        diverged run's final metrics are those of the finite checkpoints it kept, and its
        outcome is ``diverged`` on every checkpoint and split. Runs put in the store by
        ``robustkit import`` have ``imported_from`` (the folder they came from; None for runs
        trained here) and ``unknown`` (the settings nobody recorded, e.g. ``("seed", "lr")``),
        whose columns hold None for them.
    """
    rows, damaged = [], []
    for run_dir in run_folders(store):
        manifest, problem = inspect_run(run_dir)
        if problem:
            damaged.append({"run_id": run_dir.name, "kind": None, "status": DAMAGED, "problem": problem, "path": str(run_dir)})
            continue
        if manifest.get("kind") == "tsp" and not include_tsp:
            continue
        row = {"run_id": manifest["run_id"], "kind": manifest.get("kind")}
        spec = dict(manifest.get("spec", {}))
        row.update(identity_columns(spec.get("method"), spec.pop("method_options", None)))
        row.update(spec)
        row["unknown"] = tuple(manifest.get("unknown", ()))
        row["imported_from"] = manifest.get("import", {}).get("source")
        row["status"] = manifest.get("status")
        row["main_metric"] = manifest.get("main_metric")
        row["trainable_params"] = manifest.get("trainable", {}).get("count")
        row.update({f"n_{split}": size for split, size in (manifest.get("splits") or {}).items()})
        row.update(_flatten_final(manifest.get("final", {})))
        row.update({f"outcome/{checkpoint}/{split}": value for checkpoint, splits in (manifest.get("outcome") or {}).items()
                    for split, value in splits.items()})
        row["path"] = str(run_dir)
        rows.append(row)
    frame = pd.DataFrame(rows)
    if damaged and not include_damaged:
        listed = "; ".join(f"{row['run_id']}: {row['problem']}" for row in damaged)
        warnings.warn(f"{len(damaged)} damaged run(s) of {store} left out ({listed}); `robustkit verify {store}` "
                      "lists them and what to do", DamagedRunWarning, stacklevel=2)
    if frame.empty:
        frame = pd.DataFrame(columns=["run_id", "kind", *IDENTITY[1:], "status", "trainable_params", "path"])
    else:
        # runs stored before a spec field existed hold its default (a None default stays missing)
        frame = frame.assign(**{f: frame[f].fillna(_COLUMN_DEFAULTS[f]) if f in frame and _COLUMN_DEFAULTS[f] is not None
                                else frame.get(f, _COLUMN_DEFAULTS[f]) for f in IDENTITY[1:]})
        for name in {name for unknown in frame["unknown"] for name in unknown}:  # not guessed: missing
            frame[name] = frame[name].mask(frame["unknown"].map(lambda u, n=name: n in u))
    if damaged and include_damaged:  # after the defaults: a damaged run's settings are unknown
        frame = pd.concat([frame, pd.DataFrame(damaged)], ignore_index=True).sort_values("run_id", ignore_index=True)
    return frame


def _flatten_final(final: dict) -> dict:
    return {
        f"{checkpoint}/{split}/{metric}": value
        for checkpoint, splits in final.items()
        for split, metrics in splits.items()
        for metric, value in metrics.items()
    }


def load_history(store: str | Path, include_tsp: bool = False) -> pd.DataFrame:
    """One row per run x step x split x metric: the training history of every run.

    Returns
    -------
    DataFrame
        Identity columns + ``step, epoch, split, metric, value``.
    """
    return _load_table(store, HISTORY, include_tsp)


def load_gradnorms(store: str | Path, include_tsp: bool = False) -> pd.DataFrame:
    """One row per run x step x layer group: L2 gradient norm before clipping.

    Returns
    -------
    DataFrame
        Identity columns + ``step, layer, value`` (``layer`` is ``embeddings``, ``layer.<i>``,
        ``pooler``, ``classifier`` or ``mlm_head``).
    """
    return _load_table(store, GRADNORMS, include_tsp)


def _load_table(store: str | Path, file_name: str, include_tsp: bool) -> pd.DataFrame:
    runs = load_runs(store, include_tsp=include_tsp)
    frames = []
    for _, run in runs.iterrows():
        path = Path(run["path"]) / file_name
        if path.exists():
            frame = pd.read_parquet(path)
            for column in reversed(IDENTITY):
                frame.insert(0, column, run.get(column))
            frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=IDENTITY)
    return pd.concat(frames, ignore_index=True)
