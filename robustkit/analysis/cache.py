"""Parquet cache of per-run analysis results, keyed by what they were computed from.

The key hashes the analysis name, its parameters and the sha256 of every checkpoint file it
reads (from the run's manifest): a second call is a file read, and a retrained or changed
checkpoint gives a new key, so stale results are never returned. Files live under
``<store>/.cache/<analysis>/<run_id>-<key>.parquet``; they can be deleted at any time.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable

import pandas as pd

from robustkit.errors import StoreError
from robustkit.store import atomic_write_parquet, read_manifest

CACHE_DIR = ".cache"


def cache_key(run_dir: Path, analysis: str, params: dict, checkpoints: list[str]) -> str:
    """Hash of the analysis, its parameters and the checkpoints' file hashes."""
    saved = read_manifest(run_dir).get("checkpoints", {})
    missing = [name for name in checkpoints if name not in saved]
    if missing:
        raise StoreError(f"run {Path(run_dir).name!r} has no checkpoint {missing[0]!r} (has: {', '.join(sorted(saved)) or 'none'})")
    material = {"analysis": analysis, "params": params, "checkpoints": {name: saved[name]["files"] for name in checkpoints}}
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:16]


def cached(
    run_dir: str | Path, analysis: str, params: dict, checkpoints: list[str], compute: Callable[[], pd.DataFrame]
) -> pd.DataFrame:
    """The cached result of ``compute()`` for this run, computing and storing it if absent.

    Parameters
    ----------
    run_dir : path
        The run's folder; the cache goes in its store's ``.cache`` folder.
    analysis : str
        Name of the analysis (a folder name).
    params : dict
        Everything besides the checkpoints that changes the result (JSON-serialisable).
    checkpoints : list of str
        Names of the run's checkpoints the analysis reads (``step-0``, ``best``, ...).
    compute : callable
        Returns the run's result as a DataFrame.
    """
    run_dir = Path(run_dir)
    key = cache_key(run_dir, analysis, params, checkpoints)
    path = run_dir.parent / CACHE_DIR / analysis / f"{run_dir.name}-{key}.parquet"
    if path.exists():
        return pd.read_parquet(path)
    frame = compute()
    atomic_write_parquet(path, frame)
    return frame
