"""The cache of per-run analysis results: its key (what they were computed from) and its files,
checked on read.

The key hashes the analysis name, its parameters and the sha256 of every checkpoint file it
reads (from the run's manifest): a second call is a file read, and a retrained or changed
checkpoint gives a new key, so stale results are never returned. Files live under
``<store>/.cache/<analysis>/<run_id>-<key>.<ext>`` (written by
:func:`robustkit.analysis.each_run.each_run`); they can be deleted at any time.

A cached frame is written with a sha256 beside it (``<file>.sha256``, :func:`write_frame`) and
read only if it matches (:func:`read_frame`): a changed byte in a cache file (parquet does not
check its own pages) makes the frame computed again, never read. The sha256 is of the file's
name (``<run_id>-<key>``: the run and the cache key) with its bytes (:func:`bound_sha256`), so a
frame and its ``.sha256`` copied over another run's or another key's do not match there either:
one run's landscape never becomes another's. A ``.sha256`` of the bytes alone (written before
names were hashed with them) is never read; the frame is computed again.

A store this user cannot write (a lab's shared, read-only store) is analysed all the same: the
results are computed and returned, not cached, and that is said once per store
(:func:`cannot_cache`).

Why not a maintained memoiser (``joblib.Memory``, installed with scikit-learn, or
``diskcache``): the key here is what the result was computed from, the checkpoints' content
hashes the store already records, so nothing is hashed again; ``joblib.Memory`` also keys on
the function's source, so an edited docstring would drop hours of attack results, and both
store pickles, where these files are parquet (any tool reads them, any pandas version) or, for
a resumable attack, JSON lines appended example by example, which neither supports.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
from pathlib import Path

import pandas as pd

from robustkit.errors import RunLacksError
from robustkit.store.atomic import atomic_write_bytes, sha256_bytes
from robustkit.store.folders import CACHE_DIR
from robustkit.store.manifest import read_manifest

__all__ = [
    "CACHE_DIR",
    "bound_sha256",
    "cache_key",
    "cannot_cache",
    "frame_problem",
    "frame_files",
    "read_frame",
    "write_frame",
]

log = logging.getLogger(__name__)
_SAID_READ_ONLY: set[str] = set()  # stores whose cache could not be written, said once each


def cannot_cache(path: Path, error: OSError) -> None:
    """Say once per store that its analysis cache cannot be written (``path``: a cache file,
    ``<store>/.cache/<analysis>/<file>``): results are computed and returned, not kept."""
    store = str(Path(path).parent.parent.parent)
    if store not in _SAID_READ_ONLY:
        _SAID_READ_ONLY.add(store)
        log.warning(
            f"store {store} cannot be written ({error.strerror or error}): analyses are computed, "
            "not cached (each run computes them again)"
        )


def cache_key(run_dir: Path, analysis: str, params: dict, checkpoints: list[str]) -> str:
    """Hash of the analysis, its parameters and the checkpoints' file hashes."""
    saved = read_manifest(run_dir).get("checkpoints", {})
    missing = [name for name in checkpoints if name not in saved]
    if missing:
        raise RunLacksError(
            Path(run_dir).name, f"checkpoint {missing[0]!r} (has: {', '.join(sorted(saved)) or 'none'})"
        )
    material = {
        "analysis": analysis,
        "params": params,
        "checkpoints": {name: saved[name]["files"] for name in checkpoints},
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:16]


def bound_sha256(name: str, data: bytes) -> str:
    """sha256 (hex) of a cache file's ``name`` (which holds the run id and the cache key) and its
    ``data``: the content bound to the run and key it was computed for.

    Parameters
    ----------
    name : str
        The cache file's name (``<run_id>[-<label>]-<key><suffix>``, :func:`robustkit.analysis.each_run.cache_path`).
    data : bytes
        Its content (a frame's parquet bytes, an attack cache line's JSON).
    """
    return sha256_bytes(name.encode() + b"\0" + data)


def _sha256_file_of(path: Path) -> Path:
    return path.with_name(f"{path.name}.sha256")


def write_frame(path: Path, frame: pd.DataFrame) -> None:
    """Cache ``frame`` at ``path`` (parquet), with its sha256 bound to the file's name beside it
    (:func:`bound_sha256`; written second: a kill between the two leaves a frame that is computed
    again)."""
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    data = buffer.getvalue()
    atomic_write_bytes(path, data)
    atomic_write_bytes(_sha256_file_of(path), bound_sha256(path.name, data).encode())


def read_frame(path: Path) -> pd.DataFrame | None:
    """The frame cached at ``path``, or None: none there, or a file that does not match its
    sha256 bound to its name (changed, truncated, copied from another run's or key's file; its
    sha256 file missing or of the bytes alone: written before frames were hashed with their
    name, or a kill between the two writes).

    Returns
    -------
    DataFrame or None
    """
    try:
        data, recorded = path.read_bytes(), _sha256_file_of(path).read_bytes()
    except OSError:
        return None
    if bound_sha256(path.name, data).encode() != recorded:
        return None
    return pd.read_parquet(io.BytesIO(data))


def frame_files(store: str | Path) -> list[Path]:
    """Every cached frame of a store (``<store>/.cache/<analysis>/*.parquet``), sorted."""
    return sorted(Path(store).joinpath(CACHE_DIR).glob("*/*.parquet"))


def frame_problem(path: Path) -> str | None:
    """Why a cached frame does not match the sha256 written beside it, or None (it does; or has
    none, or one of its bytes alone: a frame from before frames were hashed (with their name),
    computed again when read all the same)."""
    try:
        recorded = _sha256_file_of(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"its sha256 file cannot be read ({error.strerror or error})"
    try:
        data = path.read_bytes()
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    if recorded in (bound_sha256(path.name, data).encode(), sha256_bytes(data).encode()):
        return None
    return "does not match its sha256 (changed, or copied from another run's or key's cache)"
