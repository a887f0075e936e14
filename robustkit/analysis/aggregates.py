"""rliable's summaries over tasks x seeds: the interquartile mean (IQM) and the probability of
improvement P(A > B), each with a stratified-bootstrap interval (Agarwal et al. 2021, "Deep
reinforcement learning at the edge of the statistical precipice"), beside the exact tests of
:mod:`robustkit.analysis.stability`.

Written here on scipy rather than imported: rliable is archived, and its last release (1.2.0,
also published as ``rliable-fork``) needs ``arch``, whose releases that pip resolves against this
project's pandas fail at import (``arch.univariate.base``: ``deprecate_kwarg``). The definitions
are rliable's: the IQM is ``scipy.stats.trim_mean(x, 0.25)`` over every run of every task; P(A > B)
is, per task, Mann-Whitney's U of A over B divided by ``n_a * n_b`` (a tie counts 1/2), averaged
over the tasks; the bootstrap resamples the runs (seeds) within each task, independently per
task and per group, and the interval is the percentile interval of the resampled statistic.

IQM pools the tasks' scores as they are; rliable pools normalised scores, so tasks of one metric
(accuracy on each) are what it is meant for.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from robustkit.analysis.pooling import require_columns
from robustkit.store import collapse

N_RESAMPLES = 2000  # rliable's default number of bootstrap resamples
CONFIDENCE = 0.95
SEED = 0
IQM_COLUMNS = ["by", "group", "n_tasks", "n_runs", "iqm", "ci_low", "ci_high"]
IMPROVEMENT_COLUMNS = ["by", "group_a", "group_b", "n_tasks", "n_a", "n_b", "p_improvement", "ci_low", "ci_high"]


def iqm(scores: np.ndarray | Sequence[np.ndarray]) -> float:
    """Interquartile mean: the mean of the middle 50% of every score (rliable's ``aggregate_iqm``).

    Parameters
    ----------
    scores : ndarray, shape (n_runs, n_tasks), or sequence of ndarray, shape (n_runs_t,) each
        The runs of each task (tasks may have different numbers of runs).

    Returns
    -------
    float
        ``scipy.stats.trim_mean`` of all scores with 25% cut from each end; NaN for no score.
    """
    flat = np.concatenate([np.ravel(s) for s in scores]) if not isinstance(scores, np.ndarray) else scores.ravel()
    return float(stats.trim_mean(flat, 0.25)) if flat.size else np.nan


def probability_of_improvement(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> float:
    """P(A > B): per task, U / (n_a n_b) from Mann-Whitney's U (ties count 1/2), averaged over tasks.

    Parameters
    ----------
    a, b : sequence of ndarray, shape (n_runs_t,) each
        The runs of A and of B on each task, in the same task order.

    Returns
    -------
    float
        In [0, 1]; 0.5 where A and B are exchangeable. NaN where no task has runs of both.
    """
    per_task = [_improvement(np.asarray(x, float), np.asarray(y, float)) for x, y in zip(a, b) if len(x) and len(y)]
    return float(np.mean(per_task)) if per_task else np.nan


def iqm_interval(
    scores: Sequence[np.ndarray], confidence: float = CONFIDENCE, n_resamples: int = N_RESAMPLES, seed: int = SEED
) -> tuple[float, float, float]:
    """The IQM and its stratified-bootstrap percentile interval.

    Parameters
    ----------
    scores : sequence of ndarray, shape (n_runs_t,) each
        The runs of each task.
    confidence : float
        Level of the interval.
    n_resamples : int
        Bootstrap resamples B; the runs of each task are resampled with replacement.
    seed : int
        The same seed gives the same interval.

    Returns
    -------
    (float, float, float)
        The IQM, the interval's low and high end (NaN where there is no score).
    """
    strata = [np.asarray(s, float) for s in scores if len(s)]
    point = iqm(strata)
    if not strata:
        return point, np.nan, np.nan
    rng = np.random.default_rng(seed)
    resampled = np.concatenate([_resample(s, n_resamples, rng) for s in strata], axis=1)  # (B, n_runs)
    low, high = _percentiles(stats.trim_mean(resampled, 0.25, axis=1), confidence)
    return point, low, high


def improvement_interval(
    a: Sequence[np.ndarray],
    b: Sequence[np.ndarray],
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> tuple[float, float, float]:
    """P(A > B) and its stratified-bootstrap percentile interval.

    Parameters
    ----------
    a, b : sequence of ndarray, shape (n_runs_t,) each
        The runs of A and of B on each task, in the same task order; tasks missing either are
        left out.
    confidence, n_resamples, seed
        As in :func:`iqm_interval`; A's and B's runs are resampled independently within each task.

    Returns
    -------
    (float, float, float)
        P(A > B), the interval's low and high end (NaN where no task has runs of both).
    """
    pairs = [(np.asarray(x, float), np.asarray(y, float)) for x, y in zip(a, b) if len(x) and len(y)]
    point = probability_of_improvement([x for x, _ in pairs], [y for _, y in pairs])
    if not pairs:
        return point, np.nan, np.nan
    rng = np.random.default_rng(seed)
    per_task = [_improvement(_resample(x, n_resamples, rng), _resample(y, n_resamples, rng)) for x, y in pairs]
    low, high = _percentiles(np.mean(per_task, axis=0), confidence)
    return point, low, high


def tables(
    df: pd.DataFrame,
    by: str = "method",
    within: Sequence[str] = (),
    task: str = "task",
    value: str = "value",
    include_failed: bool = False,
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The IQM of each group and P(A > B) of each pair of groups over tasks x seeds, per cell.

    Collapsed and diverged runs are left out unless ``include_failed``, as in the exact tests.

    Parameters
    ----------
    df : DataFrame
        One row per run: :func:`robustkit.analysis.scores.outcomes` output.
    by : str
        Column whose groups are summarised and compared (``method``).
    within : sequence of str
        Cells summarised separately (e.g. ``tsp_step``); ``task`` is the stratum, never a cell.
    task : str
        The strata the bootstrap resamples within.
    value : str
        The score column.
    include_failed : bool
        Keep collapsed and diverged runs.
    confidence, n_resamples, seed
        As in :func:`iqm_interval`.

    Returns
    -------
    (DataFrame, DataFrame)
        IQM: ``within`` + :data:`IQM_COLUMNS` (``n_tasks``, ``n_runs``: tasks and runs it pools),
        one row per cell x group. Improvement: ``within`` + :data:`IMPROVEMENT_COLUMNS`, one
        row per cell x pair (``group_a`` < ``group_b`` in sorted order), ``p_improvement`` =
        P(A > B); ``n_a``, ``n_b`` count runs on the tasks both have.
    """
    within = [c for c in within if c != task]
    require_columns(df, [*within, by, task, value], "summarise over tasks x seeds by")
    df = collapse.kept(collapse.marked(df), include_failed) if not df.empty else df
    iqm_rows, pair_rows = [], []
    cells = df.groupby(within, dropna=False, sort=True) if within else [((), df)]
    for key, cell in cells:
        cell_key = dict(zip(within, key if isinstance(key, tuple) else (key,)))
        tasks = sorted(cell[task].dropna().unique(), key=str)
        runs = {
            g: [part.loc[part[task] == t, value].dropna().to_numpy(float) for t in tasks]
            for g, part in cell.groupby(by, sort=True)
        }
        for g, strata in runs.items():
            point, low, high = iqm_interval(strata, confidence, n_resamples, seed)
            iqm_rows.append(
                {
                    **cell_key,
                    "by": by,
                    "group": g,
                    "n_tasks": sum(len(s) > 0 for s in strata),
                    "n_runs": sum(len(s) for s in strata),
                    "iqm": point,
                    "ci_low": low,
                    "ci_high": high,
                }
            )
        for a, b in itertools.combinations(runs, 2):
            both = [(x, y) for x, y in zip(runs[a], runs[b]) if len(x) and len(y)]
            point, low, high = improvement_interval(
                [x for x, _ in both], [y for _, y in both], confidence, n_resamples, seed
            )
            pair_rows.append(
                {
                    **cell_key,
                    "by": by,
                    "group_a": a,
                    "group_b": b,
                    "n_tasks": len(both),
                    "n_a": sum(len(x) for x, _ in both),
                    "n_b": sum(len(y) for _, y in both),
                    "p_improvement": point,
                    "ci_low": low,
                    "ci_high": high,
                }
            )
    return (
        pd.DataFrame(iqm_rows, columns=[*within, *IQM_COLUMNS]),
        pd.DataFrame(pair_rows, columns=[*within, *IMPROVEMENT_COLUMNS]),
    )


def _improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray | float:
    """U / (n_x n_y) of ``x`` over ``y`` along the last axis: shapes (..., n_x), (..., n_y) -> (...)."""
    u = stats.mannwhitneyu(x, y, axis=-1, method="asymptotic").statistic  # U of x: pairs x > y, + 1/2 per tie
    return u / (x.shape[-1] * y.shape[-1])


def _resample(x: np.ndarray, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``n_resamples`` resamples of the runs ``x`` with replacement: shape (n_runs,) -> (B, n_runs)."""
    return x[rng.integers(0, len(x), size=(n_resamples, len(x)))]


def _percentiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)
