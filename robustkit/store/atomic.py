"""Atomic file writes (a temporary file in the same folder, fsync, rename) and sha256 digests.

A reader never sees half a file: a crash at any point leaves the old file or the new one, and at
worst a hidden temporary file (``.<name>.<random>``) that
:func:`robustkit.store.checkpoints.recover_checkpoints` removes.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import secrets
from pathlib import Path

import pandas as pd


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
