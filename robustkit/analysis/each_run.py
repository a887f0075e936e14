"""The per-run loop every analysis shares: selected runs -> cached result -> identity columns.

An analysis computes one DataFrame per run from the run's folder (its checkpoints); this
module does the rest, the same way for every analysis:

1. the runs come from :func:`robustkit.analysis.select.select_runs` (or a group of them);
2. each run's result is cached under ``<store>/.cache/<analysis>/<run_id>-<key>.<ext>``, the key
   hashing the analysis, its parameters and the sha256 of every checkpoint it reads
   (:func:`robustkit.analysis.cache.cache_key`): a changed checkpoint or parameter is a new key,
   so a stale result is never returned; a cache file that does not match its own sha256 is
   computed again (:func:`robustkit.analysis.cache.read_frame`);
3. a run whose checkpoint fails its sha256 check when it is loaded
   (:class:`robustkit.errors.DamagedRunError`) is left out with a
   :class:`robustkit.store.DamagedRunWarning` naming it, as ``load_runs`` leaves out the damaged
   runs it sees: one bad run never stops the analysis of a store;
4. the run's identity columns are put in front (:func:`robustkit.analysis.select.with_identity`).

A *resumable* analysis (an attack, example by example) appends to its own cache file as it goes
(JSON lines): it receives the file's path and returns the run's whole result, so a killed
analysis resumes where it stopped.

Provenance
    How a result was computed but not what it is (the device, torch's version) is kept out of the
    key: a frame computed on the GPU is the one a CPU call gets back. It is recorded instead with
    the cached frame (``frame.attrs["provenance"]``, which parquet keeps in the file's metadata)
    and gathered per run by :func:`collect_provenance`, which
    :meth:`robustkit.analysis.registry.Analysis.run` wraps around every analysis: its frame's
    ``attrs["provenance"]`` maps each run to where its result was computed (``{}`` for a file
    cached before provenance was recorded).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pandas as pd

from robustkit.analysis.cache import CACHE_DIR, cache_key, read_frame, write_frame
from robustkit.analysis.select import with_identity
from robustkit.errors import DamagedRunError
from robustkit.store.tables import DamagedRunWarning

log = logging.getLogger(__name__)


def cache_path(run_dir: str | Path, analysis: str, params: dict, checkpoints: Sequence[str], suffix: str = ".parquet",
               label: str | None = None) -> Path:
    """Where the run's result for these parameters and checkpoints is cached:
    ``<store>/.cache/<analysis>/<run_id>[-<label>]-<key><suffix>`` (``label`` only names the file
    for people, e.g. the attacker; the key already hashes every parameter)."""
    run_dir = Path(run_dir)
    key = cache_key(run_dir, analysis, params, list(checkpoints))
    name = f"{run_dir.name}-{label}-{key}" if label else f"{run_dir.name}-{key}"
    return run_dir.parent / CACHE_DIR / analysis / f"{name}{suffix}"


# The runs' provenance gathered by the innermost collect_provenance() block; None outside one.
_COLLECTED: contextvars.ContextVar[dict | None] = contextvars.ContextVar("provenance", default=None)


@contextlib.contextmanager
def collect_provenance() -> Iterator[dict[str, dict]]:
    """A dict that fills, inside the block, with ``{run (or pair) id: provenance}`` of every
    result :func:`each_run` (or :func:`record_provenance`) returns."""
    collected: dict[str, dict] = {}
    token = _COLLECTED.set(collected)
    try:
        yield collected
    finally:
        _COLLECTED.reset(token)


def record_provenance(key: str, provenance: dict) -> None:
    """Add one result's provenance to the enclosing :func:`collect_provenance` (if any)."""
    collected = _COLLECTED.get()
    if collected is not None:
        collected[key] = dict(provenance)


def read_cached(path: Path, key: str) -> pd.DataFrame | None:
    """A cached result (:func:`robustkit.analysis.cache.read_frame`: None where there is none, or
    it fails its sha256), its provenance recorded (:func:`record_provenance`)."""
    frame = read_frame(path)
    if frame is not None:
        record_provenance(key, frame.attrs.get("provenance", {}))
    return frame


def write_cached(path: Path, frame: pd.DataFrame, key: str, provenance: dict | None) -> None:
    """Cache a result with its provenance (in the parquet file's metadata) and record it."""
    frame.attrs["provenance"] = dict(provenance or {})
    write_frame(path, frame)
    record_provenance(key, frame.attrs["provenance"])


def each_run(
    runs: pd.DataFrame,
    analysis: str,
    params: dict,
    checkpoints: Sequence[str],
    compute: Callable[..., pd.DataFrame],
    resumable: bool = False,
    on_done: Callable[[], None] | None = None,
    label: str | None = None,
    provenance: dict | None = None,
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
    provenance : dict, optional
        How a result computed now is computed (:func:`robustkit.provenance.computed_on`: the
        device...), stored with it; a resumable analysis records its own.

    Returns
    -------
    DataFrame
        The runs' results, one after the other, identity columns in front.
    """
    frames, damaged = [], []
    for _, row in runs.iterrows():
        try:
            if resumable:
                frame = compute(row, cache_path(row["path"], analysis, params, checkpoints, ".jsonl", label))
            else:
                path = cache_path(row["path"], analysis, params, checkpoints, label=label)
                frame = read_cached(path, row["run_id"])
                if frame is None:
                    log.debug("%s %s: computing", analysis, row["run_id"])
                    frame = compute(row)
                    write_cached(path, frame, row["run_id"], provenance)
                else:
                    log.debug("%s %s: cached (%s)", analysis, row["run_id"], path.name)
        except DamagedRunError as error:
            damaged.append(f"{row['run_id']}: {error.problem}")
            continue
        finally:
            if on_done is not None:
                on_done()
        frames.append(with_identity(frame, row))
    if damaged:
        warn_damaged(damaged, analysis, Path(runs["path"].iloc[0]).parent)
    # a run with no rows (nothing to measure) must not turn the others' integer columns to float
    kept = [frame for frame in frames if not frame.empty] or frames
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()


def warn_damaged(damaged: list[str], analysis: str, store: Path) -> None:
    """Warn (:class:`DamagedRunWarning`) that the runs of ``damaged`` (``"<run_id>: <problem>"``)
    were left out of ``analysis`` because a checkpoint failed its sha256 check as it was loaded."""
    warnings.warn(f"{len(damaged)} damaged run(s) of {store} left out of {analysis} ({'; '.join(damaged)}); "
                  f"`robustkit verify {store} --repair` moves them aside", DamagedRunWarning, stacklevel=3)
