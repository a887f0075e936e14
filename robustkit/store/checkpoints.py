"""Checkpoints: written atomically and recorded in the manifest with the sha256 of each file,
read back only after that check, recovered after a crash in the middle of a save."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from robustkit.errors import DamagedRunError, RunLacksError, StoreError
from robustkit.store import integrity
from robustkit.store.atomic import atomic_write_bytes, sha256_bytes
from robustkit.store.folders import CHECKPOINTS, GRADNORMS, HISTORY, MANIFEST, MODEL_FILE, repair_hint
from robustkit.store.manifest import inspect_run, read_manifest, write_manifest
from robustkit.store.schema import FINISHED


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
    """Undo what a crash in the middle of :func:`save_checkpoint` or :func:`robustkit.store.atomic.atomic_write_bytes`
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
    return bool(entry) and not integrity.file_problems(folder, entry["files"])


def read_checkpoint_file(run_dir: Path, name: str, file_name: str) -> bytes:
    """Bytes of one checkpoint file, verified against the manifest's sha256.

    While a save of the checkpoint is under way, or after one was killed (:func:`save_checkpoint`),
    the files the manifest lists may be in its backup folder ``.<name>.old``: they are read from
    there. A save that ends between reading the manifest and the file is read again.

    Raises
    ------
    RunLacksError
        No such checkpoint in the manifest (a :class:`StoreError`).
    DamagedRunError
        A file that is missing or whose sha256 differs from the manifest (corrupt or truncated):
        the run is damaged (the readers' verification cache is told, so that ``load_runs`` says
        so from now on, :mod:`robustkit.store.integrity`).
    """
    for _ in range(2):
        entry = read_manifest(run_dir).get("checkpoints", {}).get(name)
        if entry is None or file_name not in entry["files"]:
            known = ", ".join(sorted(read_manifest(run_dir).get("checkpoints", {}))) or "none"
            raise RunLacksError(Path(run_dir).name, f"checkpoint {name!r} (has: {known})")
        path = checkpoint_dir(run_dir, name) / file_name
        data = _read_or_none(path)
        if data is not None and sha256_bytes(data) == entry["files"][file_name]:
            return data
        old = _read_or_none(path.parent.with_name(f".{name}.old") / file_name)
        if old is not None and sha256_bytes(old) == entry["files"][file_name]:
            return old
    integrity.forget_file(run_dir, path)  # a change no stat showed (bit rot): hashed at the next read
    if data is None:
        problem = f"checkpoint file {str(path)!r} is missing"
    else:
        problem = (
            f"checkpoint file {str(path)!r} is corrupt or truncated: sha256 {sha256_bytes(data)[:16]}... "
            f"does not match the manifest's {entry['files'][file_name][:16]}..."
        )
    raise DamagedRunError(Path(run_dir).name, problem, repair_hint(Path(run_dir)))


def _read_or_none(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except PermissionError:
        raise StoreError(f"checkpoint file {str(path)!r} cannot be read: permission denied") from None


def load_checkpoint(run_dir: Path, name: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Tensors and safetensors metadata of a checkpoint, after its sha256 check."""
    data = read_checkpoint_file(run_dir, name, MODEL_FILE)
    return load_safetensors(data), _safetensors_metadata(data)


def _safetensors_metadata(data: bytes) -> dict[str, str]:
    header_size = int.from_bytes(data[:8], "little")
    return json.loads(data[8 : 8 + header_size]).get("__metadata__", {})


def checkpoint_problems(run_dir: Path, names: list[str] | None = None, manifest: dict | None = None) -> list[str]:
    """Re-hash checkpoint files against the manifest's sha256 (nothing is loaded; see
    :func:`robustkit.store.integrity.checkpoint_problems`).

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
    return integrity.checkpoint_problems(Path(run_dir), manifest, names)


def finished_state(run_dir: Path) -> tuple[bool, str | None]:
    """Whether a sweep may count the run as finished, and what is damaged if anything.

    A finished (complete or diverged) run counts only once every file it lists passes the
    readers' check (:func:`robustkit.store.manifest.inspect_run`) and, for a fine-tuning run, its
    ``best`` and ``last`` files hash to the manifest's sha256 now (hashed, not loaded: ~0.3 s for
    a full minilm-l6 run). Unfinished runs are not hashed: their resume verifies ``last`` itself
    (and another process may be writing it right now).

    Returns
    -------
    (bool, str or None)
        ``(True, None)``: finished and intact; ``(False, None)``: to train or resume;
        ``(False, problem)``: damaged, not to be trained over (see :func:`robustkit.store.folders.repair_hint`).
    """
    manifest, problem = inspect_run(run_dir)
    if manifest is None:
        return False, problem
    if manifest.get("status") not in FINISHED:
        return False, None
    names = ["best", "last"] if manifest["kind"] == "finetune" else None
    problems = checkpoint_problems(run_dir, names, manifest)
    return (False, "; ".join(problems)) if problems else (True, None)
