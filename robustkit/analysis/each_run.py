"""The per-run loop every analysis shares: selected runs -> cached result -> identity columns.

An analysis computes one DataFrame per run from the run's folder (its checkpoints); this
module does the rest, the same way for every analysis:

1. the runs come from :func:`robustkit.analysis.select.select_runs` (or a group of them);
2. each run's result is cached under ``<store>/.cache/<analysis>/<run_id>-<key>.<ext>``, the key
   hashing the analysis, its parameters and the sha256 of every checkpoint it reads
   (:func:`robustkit.analysis.cache.cache_key`): a changed checkpoint or parameter is a new key,
   so a stale result is never returned;
3. the run's identity columns are put in front (:func:`robustkit.analysis.select.with_identity`).

A *resumable* analysis (an attack, example by example) appends to its own cache file as it goes
(JSON lines): it receives the file's path and returns the run's whole result, so a killed
analysis resumes where it stopped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from robustkit.analysis.cache import CACHE_DIR, cache_key
from robustkit.analysis.select import with_identity
from robustkit.store.atomic import atomic_write_parquet


def cache_path(run_dir: str | Path, analysis: str, params: dict, checkpoints: Sequence[str], suffix: str = ".parquet",
               label: str | None = None) -> Path:
    """Where the run's result for these parameters and checkpoints is cached:
    ``<store>/.cache/<analysis>/<run_id>[-<label>]-<key><suffix>`` (``label`` only names the file
    for people, e.g. the attacker; the key already hashes every parameter)."""
    run_dir = Path(run_dir)
    key = cache_key(run_dir, analysis, params, list(checkpoints))
    name = f"{run_dir.name}-{label}-{key}" if label else f"{run_dir.name}-{key}"
    return run_dir.parent / CACHE_DIR / analysis / f"{name}{suffix}"


def each_run(
    runs: pd.DataFrame,
    analysis: str,
    params: dict,
    checkpoints: Sequence[str],
    compute: Callable[..., pd.DataFrame],
    resumable: bool = False,
    on_done: Callable[[], None] | None = None,
    label: str | None = None,
) -> pd.DataFrame:
    """``compute`` for every run of ``runs``, cached, with the runs' identity columns.

    Parameters
    ----------
    runs : DataFrame
        Rows of :func:`robustkit.analysis.select.select_runs` (``path`` and identity columns).
    analysis : str
        The analysis's name: its cache folder.
    params : dict
        Everything besides the checkpoints that changes a run's result (JSON-serialisable).
    checkpoints : sequence of str
        The checkpoints of each run the analysis reads (``step-0``, ``best``, ``last``).
    compute : callable
        ``compute(run_row) -> DataFrame`` (one run's result, no identity columns); for a
        resumable analysis ``compute(run_row, cache_file) -> DataFrame``, appending to
        ``cache_file`` (JSON lines) as it goes.
    resumable : bool
        The analysis keeps its own partial results (see above) instead of a parquet file.
    on_done : callable, optional
        Called after each run (e.g. a progress bar's update).
    label : str, optional
        A readable part of the cache file names (:func:`cache_path`).

    Returns
    -------
    DataFrame
        The runs' results, one after the other, identity columns in front.
    """
    frames = []
    for _, row in runs.iterrows():
        if resumable:
            frame = compute(row, cache_path(row["path"], analysis, params, checkpoints, ".jsonl", label))
        else:
            path = cache_path(row["path"], analysis, params, checkpoints, label=label)
            if path.exists():
                frame = pd.read_parquet(path)
            else:
                frame = compute(row)
                atomic_write_parquet(path, frame)
        frames.append(with_identity(frame, row))
        if on_done is not None:
            on_done()
    # a run with no rows (nothing to measure) must not turn the others' integer columns to float
    kept = [frame for frame in frames if not frame.empty] or frames
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()
