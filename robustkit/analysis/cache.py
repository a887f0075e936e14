"""The cache key of per-run analysis results: what they were computed from.

The key hashes the analysis name, its parameters and the sha256 of every checkpoint file it
reads (from the run's manifest): a second call is a file read, and a retrained or changed
checkpoint gives a new key, so stale results are never returned. Files live under
``<store>/.cache/<analysis>/<run_id>-<key>.<ext>`` (written by
:func:`robustkit.analysis.each_run.each_run`); they can be deleted at any time.

Why not a maintained memoiser (``joblib.Memory``, installed with scikit-learn, or
``diskcache``): the key here is what the result was computed from, the checkpoints' content
hashes the store already records, so nothing is hashed again; ``joblib.Memory`` also keys on
the function's source, so an edited docstring would drop hours of attack results, and both
store pickles, where these files are parquet (any tool reads them, any pandas version) or, for
a resumable attack, JSON lines appended example by example, which neither supports.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from robustkit.errors import StoreError
from robustkit.store.manifest import read_manifest

CACHE_DIR = ".cache"


def cache_key(run_dir: Path, analysis: str, params: dict, checkpoints: list[str]) -> str:
    """Hash of the analysis, its parameters and the checkpoints' file hashes."""
    saved = read_manifest(run_dir).get("checkpoints", {})
    missing = [name for name in checkpoints if name not in saved]
    if missing:
        raise StoreError(f"run {Path(run_dir).name!r} has no checkpoint {missing[0]!r} (has: {', '.join(sorted(saved)) or 'none'})")
    material = {"analysis": analysis, "params": params, "checkpoints": {name: saved[name]["files"] for name in checkpoints}}
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()[:16]
