"""The per-run loop every analysis shares: selected runs -> cached result -> identity columns.

An analysis computes one DataFrame per run from the run's folder (its checkpoints); this
module does the rest, the same way for every analysis:

1. the runs come from :func:`robustkit.analysis.select.select_runs` (or a group of them);
2. each run's result is cached under ``<store>/.cache/<analysis>/<run_id>-<key>.<ext>``, the key
   hashing the analysis, its parameters and the sha256 of every checkpoint it reads
   (:func:`robustkit.analysis.cache.cache_key`);
3. a run whose checkpoint fails its sha256 check (:class:`robustkit.errors.DamagedRunError`) is
   left out with a :class:`robustkit.store.DamagedRunWarning` naming it;
4. a run without what the analysis reads (:class:`robustkit.errors.RunLacksError`) is left out
   and named with what it lacks (:func:`leave_out`); none left is an error naming them;
5. the run's identity columns are put in front (:func:`robustkit.analysis.select.with_identity`).

A *resumable* analysis (an attack) appends to its own cache file (JSON lines) as it goes. How a
result was computed (the device, torch's version) stays out of the key and is recorded with the
cached frame (``frame.attrs["provenance"]``, gathered by :func:`collect_provenance`).

Each step and the provenance in full: ``docs/analyses.md``, "robustkit/analysis/each_run.py".
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import re
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pandas as pd

from robustkit.analysis import reuse
from robustkit.analysis.cache import CACHE_DIR, cache_key, cannot_cache, read_frame, write_frame
from robustkit.analysis.select import with_identity
from robustkit.errors import DamagedRunError, DataChangedError, RobustkitError, RunLacksError
from robustkit.progress import heartbeat
from robustkit.store.manifest import read_manifest
from robustkit.store.tables import DamagedRunWarning

log = logging.getLogger(__name__)


def cache_path(
    run_dir: str | Path,
    analysis: str,
    params: dict,
    checkpoints: Sequence[str],
    suffix: str = ".parquet",
    label: str | None = None,
) -> Path:
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
    try:
        write_frame(path, frame)
    except OSError as error:  # a read-only store is analysed all the same, uncached
        cannot_cache(path, error)
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
        How a result computed now is computed (:func:`robustkit.train.provenance.computed_on`: the
        device...), stored with it; a resumable analysis records its own.

    Returns
    -------
    DataFrame
        The runs' results, one after the other, identity columns in front.
    """
    results, damaged, lacking = {}, [], []
    # runs whose data changed since training go first, unannounced: an analysis that reads the
    # data refuses them (DataChangedError) before any run is computed or said to be
    changed = _data_changed(runs)
    for position in [*changed, *(p for p in range(len(runs)) if p not in changed)]:
        row = runs.iloc[position]
        where = f"{analysis} {position + 1}/{len(runs)} {row['run_id']}"
        said = not changed.get(position)
        try:
            if resumable:
                path = cache_path(row["path"], analysis, params, checkpoints, ".jsonl", label)
                # complete before (its record written): read back, not said to compute, unless it takes long
                with _said(where, said) if not reuse.record_path(path).exists() else heartbeat(where):
                    frame = compute(row, path)
            else:
                path = cache_path(row["path"], analysis, params, checkpoints, label=label)
                frame = read_cached(path, row["run_id"])
                if frame is None:
                    log.debug("%s %s: computing", analysis, row["run_id"])
                    with _said(where, said):
                        frame = compute(row)
                    write_cached(path, frame, row["run_id"], provenance)
                else:
                    log.debug("%s %s: cached (%s)", analysis, row["run_id"], path.name)
            reuse.record(analysis, path, row["path"], checkpoints)  # complete: at what it was computed
        except DataChangedError as error:  # one line, short hashes (changed runs go first: nothing computed)
            raise DataChangedError(f"{analysis}: {short_hashes(str(error))}") from None
        except DamagedRunError as error:
            damaged.append(f"{row['run_id']}: {error.problem}")
            continue
        except RunLacksError as error:
            lacking.append((row["run_id"], error.lacks))
            continue
        finally:
            if on_done is not None:
                on_done()
        results[position] = with_identity(frame, row)
    frames = [results[position] for position in sorted(results)]
    if damaged:
        warn_damaged(damaged, analysis, Path(runs["path"].iloc[0]).parent)
    if lacking:
        leave_out(lacking, analysis, len(runs) - len(damaged))
    # a run with no rows (nothing to measure) must not turn the others' integer columns to float
    kept = [frame for frame in frames if not frame.empty] or frames
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()


def each_pair(
    pairs: Sequence[tuple[pd.Series, pd.Series]],
    analysis: str,
    params: dict,
    checkpoint: str,
    compute: Callable[[pd.Series, pd.Series, Path], pd.DataFrame],
    provenance: dict | None = None,
    on_done: Callable[[], None] | None = None,
) -> pd.DataFrame:
    """:func:`each_run` for analyses of two runs (A, B): ``compute`` for every pair, cached under
    A's run with B's id and checkpoint hashes in the key, A's identity columns in front and B's
    ``run_id_b`` and ``seed_b`` after them.

    Parameters
    ----------
    pairs : sequence of (Series, Series)
        Rows of :func:`robustkit.analysis.select.select_runs`.
    checkpoint : str
        The checkpoint of both runs the analysis reads.
    compute : callable
        ``compute(a, b, cache_file) -> DataFrame`` (the pair's result, no identity columns);
        ``cache_file`` is where it will be cached, beside which it may keep its own state.

    Returns
    -------
    DataFrame
        The pairs' results; empty (no columns) when every pair was left out. A pair with a damaged
        run, or a run lacking the checkpoint, is left out and named as :func:`each_run` does.
    """
    frames, damaged, lacking = [], [], {}
    for i, (a, b) in enumerate(pairs, start=1):
        pair = f"{a['run_id']}+{b['run_id']}"
        try:
            other = read_manifest(Path(b["path"]))["checkpoints"].get(checkpoint, {}).get("files")
            if other is None:
                raise RunLacksError(b["run_id"], f"checkpoint {checkpoint!r}")
            path = cache_path(
                a["path"],
                analysis,
                {**params, "other": b["run_id"], "other_files": other},
                [checkpoint],
                label=b["run_id"],
            )
            frame = read_cached(path, pair)
            if frame is None:
                with _said(f"{analysis} {i}/{len(pairs)} {a['run_id']} and {b['run_id']}"):
                    frame = compute(a, b, path)
                write_cached(path, frame, pair, provenance)
            reuse.record(analysis, path, a["path"], [checkpoint], pair=True)
        except DamagedRunError as error:  # the pair is left out, the others are measured
            damaged.append(f"{error.run} (pair {a['run_id']} / {b['run_id']}): {error.problem}")
            continue
        except RunLacksError as error:
            lacking[error.run] = error.lacks
            continue
        finally:
            if on_done is not None:
                on_done()
        frames.append(with_identity(frame, a).assign(run_id_b=b["run_id"], seed_b=b["seed"]))
    if damaged:
        warn_damaged(damaged, analysis, Path(pairs[0][0]["path"]).parent)
    if lacking:
        runs = {run["run_id"] for pair in pairs for run in pair}
        # no pair left to measure is an error, as no run left is for each_run
        leave_out(list(lacking.items()), analysis, len(runs) if frames else len(lacking))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def short_hashes(text: str) -> str:
    """``text`` with each 64-hex sha256 cut to its first 12 digits and an ellipsis."""
    return _SHA256.sub(lambda match: match.group(0)[:12] + "…", text)


_SHA256 = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


def _data_changed(runs: pd.DataFrame) -> dict[int, str]:
    """Position -> why, of the runs whose local data is not what they were trained on (the
    ``data_changed`` column of :func:`robustkit.store.tables.load_runs`: one line, the file and
    short hashes)."""
    if "data_changed" not in runs:
        return {}
    return {p: str(why) for p, why in enumerate(runs["data_changed"]) if isinstance(why, str) and why}


@contextlib.contextmanager
def _said(what: str, announced: bool = True) -> Iterator[None]:
    """One timestamped line as a run's computation starts and one as it ends, with its time
    (:func:`robustkit.progress.event`: in a redirected log, not over a terminal's bars), and
    between them a line every few seconds (:func:`robustkit.progress.heartbeat`), so that a long
    analysis is never silent."""
    from robustkit.progress import elapsed, event, heartbeat

    start = time.perf_counter()
    if announced:  # not for a run whose data changed: the analysis may refuse it at once
        event(f"{what}: computing")
    with heartbeat(what):
        yield
    event(f"{what}: done in {elapsed(time.perf_counter() - start)}")


def leave_out(lacking: Sequence[tuple[str, str]], analysis: str, selected: int) -> None:
    """Say which runs ``analysis`` leaves out for lacking what it reads: a warning (logged) naming
    each run and what it lacks, or, when that is every one of the ``selected`` runs, an error.

    Parameters
    ----------
    lacking : sequence of (run_id, what it lacks)
        ``what`` reads after "has no" (``gradient norms``, ``checkpoint 'step-500' (has: best)``).
    analysis : str
        The analysis's name, for the message.
    selected : int
        How many runs the analysis was given (damaged ones aside).

    Raises
    ------
    RobustkitError
        Every selected run lacks something: there is nothing to analyse.
    """
    named = "; ".join(f"{run} has no {what}" for run, what in lacking[:MOST_NAMED])
    more = f" and {len(lacking) - MOST_NAMED} more" if len(lacking) > MOST_NAMED else ""
    if len(lacking) >= selected:
        raise RobustkitError(
            f"{analysis}: none of the {selected} selected run(s) has what it reads ({named}{more}); "
            "select runs that have it"
        )
    log.warning(
        "%s: %d of %d run(s) left out for lacking what it reads: %s%s", analysis, len(lacking), selected, named, more
    )


# runs named one by one in a left-out message; the rest are counted
MOST_NAMED = 4


def warn_damaged(damaged: list[str], analysis: str, store: Path) -> None:
    """Warn (:class:`DamagedRunWarning`) that the runs of ``damaged`` (``"<run_id>: <problem>"``)
    were left out of ``analysis`` because a checkpoint failed its sha256 check as it was loaded."""
    warnings.warn(
        f"{len(damaged)} damaged run(s) of {store} left out of {analysis} ({'; '.join(damaged)}); "
        f"`robustkit verify {store} --repair` moves them aside",
        DamagedRunWarning,
        stacklevel=3,
    )
