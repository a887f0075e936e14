"""Stability of fine-tuning: how much the final score varies across runs, and tests of the claims.

- Han et al. 2021, figure 2 (and appendix, MNLI): dev score over random seeds, with vs without
  adapters; figure 4: over task-specific pretraining (TSP) steps; figures 9 and 10: over TSP
  steps x fine-tuning epochs.
- He et al. 2021, figure 4: test score over seeds at each learning rate; figure 3: test score
  against the number of training examples.

The papers read these off box plots ("the adapter leads to a smaller variance"). Here the same
claims become tests: :func:`summarize` gives the spread of each box (std, IQR, bootstrap CI of
the mean, runs at or below the majority-class baseline) and :func:`compare` tests the difference
between methods (Levene / Brown-Forsythe for the variance, Mann-Whitney U for the location).

The scores come from :mod:`robustkit.analysis.scores` (one per run, with its outcome); this
module only computes statistics on them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from robustkit.analysis.pooling import check_pooling, require_columns, setting_columns
from robustkit.errors import RobustkitError
from robustkit.measures import multiplicity, significance
from robustkit.store import collapse

_STATS = ["n", "mean", "std", "median", "iqr", "min", "max", "ci_low", "ci_high"]
SUMMARY_STATS = [
    *_STATS[:7],
    "n_failed",
    *_STATS[7:],
    "note",
    "n_runs",
    "n_not_learned",
    "n_collapsed",
    "n_undecided",
    "n_diverged",
    "failed_rate",
]
COMPARE_COLUMNS = [
    "by",
    "group_a",
    "group_b",
    "n_a",
    "n_b",
    "test",
    "statistic",
    "p_value",
    "ci_low",
    "ci_high",
    "note",
]
# Observation columns that also define a cell (besides every run setting).
OBSERVATION_CELLS = ["epoch", "checkpoint", "split", "metric"]

N_RESAMPLES = 9999  # bootstrap resamples: CI ends stable to ~1% of their width at this B
BOOTSTRAP_METHOD = significance.BCA  # bias-corrected and accelerated; percentile where BCa is degenerate
SEED = 0


# ---------------------------------------------------------------------------------------------
# summaries and tests


def summarize(
    df: pd.DataFrame,
    by: Sequence[str] | str = ("method",),
    value: str = "value",
    confidence: float = 0.95,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
    include_failed: bool = False,
    pooled: Sequence[str] = (),
) -> pd.DataFrame:
    """Spread of ``value`` in each group: one row per box of a box plot.

    Collapsed and diverged runs (``outcome`` column, :mod:`robustkit.store.collapse`) are counted but
    left out of the statistics unless ``include_failed``.

    Parameters
    ----------
    df : DataFrame
        One row per observation (run, or run x epoch), e.g. :func:`outcomes` output.
    by : str or sequence of str
        Grouping columns (missing values form their own group).
    value : str
        Column summarised.
    confidence : float
        Level of the bootstrap confidence interval of the mean.
    n_resamples : int
        Bootstrap resamples B (``scipy.stats.bootstrap``, BCa; percentile where BCa is
        degenerate), seeded by ``seed`` so the same frame gives the same interval.
    include_failed : bool
        Compute the statistics over every run, collapsed and diverged ones included.
    pooled : sequence of str
        Run settings deliberately pooled inside a group (e.g. ``tsp_step``); any other setting
        that varies inside a group raises (:func:`robustkit.analysis.pooling.check_pooling`).

    Returns
    -------
    DataFrame
        ``by`` columns + ``n`` (observations in the statistics), ``mean``, ``std`` (ddof 1;
        NaN for n < 2), ``median``, ``iqr`` (75th - 25th percentile, linear interpolation),
        ``min``, ``max``, ``n_failed`` (runs not ok), ``ci_low``, ``ci_high``
        (bootstrap CI of the mean; NaN for n < 2; the value itself for constant groups),
        ``n_runs`` (every observation), ``n_collapsed``, ``n_undecided``, ``n_diverged``, ``failed_rate``
        (fraction). Units are those of ``value``; statistics are NaN for a group with no ok run.

    Raises
    ------
    PoolingError
        Runs of different settings (other than seed and ``pooled``) in one group.
    """
    by = _columns(df, by, value, "summarize")
    check_pooling(df, by, pooled, "summarize")
    df = collapse.marked(df)
    failures = collapse.failure_rates(df, by)
    rows = []
    for key, group in df.groupby(by, dropna=False, sort=True):
        x = collapse.kept(group, include_failed)[value].dropna().to_numpy(float)
        low, high, _ = _mean_ci(x, confidence, n_resamples, seed)
        q75, q25 = np.percentile(x, [75, 25]) if len(x) else (np.nan, np.nan)
        rows.append(
            {
                **dict(zip(by, key)),
                "n": len(x),
                "mean": x.mean() if len(x) else np.nan,
                "std": x.std(ddof=1) if len(x) > 1 else np.nan,
                "median": np.median(x) if len(x) else np.nan,
                "iqr": q75 - q25,
                "min": x.min() if len(x) else np.nan,
                "max": x.max() if len(x) else np.nan,
                "ci_low": low,
                "ci_high": high,
            }
        )
    summary = pd.DataFrame(rows, columns=[*by, *_STATS]).merge(failures, on=by, how="left")
    summary = summary.assign(n_failed=summary["n_runs"] - summary["n_ok"])  # every run that is no result
    # an interval from fewer than 3 runs is a point or two (a bootstrap of 2 values): said, not hidden
    note = summary["n"].map(lambda n: f"n = {n}: interval degenerate (fewer than 3 runs)" if 0 < n < 3 else "")
    return summary.assign(note=note)[[*by, *SUMMARY_STATS]]


def compare(
    df: pd.DataFrame,
    by: str = "method",
    value: str = "value",
    within: Sequence[str] | None = None,
    confidence: float = 0.95,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
    include_failed: bool = False,
    pooled: Sequence[str] = (),
) -> pd.DataFrame:
    """Test the difference between the groups of ``by`` (each pair), within each cell.

    The papers' stability claim ("adapters vary less") is a difference of variances: Levene's
    test (deviations from the group mean) and its Brown-Forsythe variant (from the median, robust
    to skew). Mann-Whitney U tests the location without assuming normal scores. Effect sizes:
    ratio of standard deviations and a bootstrap CI of the difference of means. Collapsed and
    diverged runs are left out (``include_failed`` keeps them): a run stuck at the majority
    class is a failure to count (:func:`summarize`), not a score.

    Parameters
    ----------
    df : DataFrame
        One row per observation, e.g. :func:`outcomes` output.
    by : str
        Column whose values are compared pairwise (``method``: houlsby vs full).
    value : str
        Column tested.
    within : sequence of str, optional
        Cells tested separately (``["task", "tsp_step"]``); default :func:`default_within`:
        every run setting that varies inside a group of ``by``, so that runs of different
        settings are never pooled. An explicit ``within`` that would pool runs of different
        settings raises :class:`robustkit.analysis.pooling.PoolingError`.
    confidence, n_resamples, seed
        Bootstrap of the difference of means, as in :func:`summarize`.
    include_failed : bool
        Test every run, collapsed and diverged ones included.
    pooled : sequence of str
        Run settings deliberately pooled inside a group (not split into cells).

    Returns
    -------
    DataFrame
        One row per cell x pair x test: ``within`` columns + ``by`` (the column name),
        ``group_a``, ``group_b`` (the values compared, a < b in sorted order), ``n_a``,
        ``n_b`` (runs tested), ``test`` (``levene``, ``brown-forsythe``, ``mann-whitney-u``
        (two-sided), ``std-ratio`` (std_a / std_b), ``mean-difference`` (mean_a - mean_b, with
        ``ci_low``, ``ci_high``)), ``statistic``, ``p_value`` (NaN for the effect sizes and
        for tests that cannot be computed), ``ci_low``, ``ci_high``, ``note`` (why a value is
        NaN, else empty).
    """
    within = default_within(df, by, pooled) if within is None else list(within)
    _columns(df, [*within, by], value, "compare")
    check_pooling(df, [*within, by], pooled, "compare")
    df = collapse.kept(collapse.marked(df), include_failed)
    rows = []
    cells = df.groupby(within, dropna=False, sort=True) if within else [((), df)]
    for key, cell in cells:
        groups = {g: part[value].dropna().to_numpy(float) for g, part in cell.groupby(by, sort=True)}
        for a, b in itertools.combinations(groups, 2):
            cell_key = dict(zip(within, key if isinstance(key, tuple) else (key,)))
            for test in _pair_tests(groups[a], groups[b], a, b, confidence, n_resamples, seed):
                rows.append(
                    {
                        **cell_key,
                        "by": by,
                        "group_a": a,
                        "group_b": b,
                        "n_a": len(groups[a]),
                        "n_b": len(groups[b]),
                        **test,
                    }
                )
    return pd.DataFrame(rows, columns=[*within, *COMPARE_COLUMNS])


def default_within(df: pd.DataFrame, by: str, pooled: Sequence[str] = ()) -> list[str]:
    """Cell columns that vary inside some group of ``by`` (``task`` always, if present).

    Candidates are every run setting (:func:`robustkit.analysis.pooling.setting_columns`) and
    the observation's ``epoch, checkpoint, split, metric``. With ``by="method"``, ``lr`` and
    ``adapter_size`` differ between methods by design (1e-4 vs 2e-5) but not inside one, so
    they do not split cells; a learning-rate sweep does.
    """
    if not df.empty:
        require_columns(df, [by], "compare groups of")
    candidates = [*setting_columns(df), *[c for c in OBSERVATION_CELLS if c in df]]
    cells = [c for c in candidates if c != by and c not in pooled]
    text = df[cells].map(str)
    varying = text.groupby(df[by].map(str)).nunique().max() if cells else pd.Series(dtype=int)
    return [c for c in cells if c == "task" or varying[c] > 1]


def caption(
    summary: pd.DataFrame,
    tests: pd.DataFrame,
    unit: str = "runs",
    group: str = "box",
    dominance: pd.DataFrame | None = None,
) -> str:
    """A short text for a figure: observations per group and the tests' p-values.

    Parameters
    ----------
    summary : DataFrame
        :func:`summarize` output (uses ``n``, ``n_runs``, ``n_collapsed``, ``n_diverged``).
    tests : DataFrame
        :func:`compare` output.
    unit : str
        What one observation is (``runs``; ``evaluations`` when each run gives one per epoch).
    group : str
        What one group is drawn as (``box`` in a box plot, ``row`` in a table).
    dominance : DataFrame, optional
        :func:`robustkit.analysis.dominance.aso_table` output: its epsilon_min values are added.

    Returns
    -------
    str
        E.g. ``"n = 10 runs per box. Descriptive tests, not the claims' (Holm-adjusted over these
        3 p-values): houlsby vs full (two-sided): Levene Holm p = 0.009, Brown-Forsythe Holm p =
        0.009, Mann-Whitney U Holm p = 0.21."``; with several cells, the number of cells with
        adjusted p < 0.05 and the smallest per test; failed runs, when any, are counted and said
        to be left out.
    """
    n = summary["n"]
    count = f"{int(n.min())}" if n.min() == n.max() else f"{int(n.min())}-{int(n.max())}"
    # "n = 1 run per box", "n = 5 runs per box"
    parts = [f"n = {count} {unit.removesuffix('s') if count == '1' else unit} per {group}."]
    if "n_runs" in summary and summary["n_failed"].fillna(0).sum():
        failed = {
            collapse.NOT_LEARNED: int(summary["n_not_learned"].sum()) if "n_not_learned" in summary else 0,
            collapse.COLLAPSED: int(summary["n_collapsed"].sum()),
            collapse.UNDECIDED: int(summary["n_undecided"].sum()) if "n_undecided" in summary else 0,
            collapse.DIVERGED: int(summary["n_diverged"].sum()),
        }
        counted = " and ".join(f"{k} {v}" for k, v in failed.items() if v)
        parts.append(
            f"Left out of the statistics and tests: {counted} of {int(summary['n_runs'].sum())} {unit}"
            f" (counted per {group} in the figure)."
        )
    names = {"levene": "Levene", "brown-forsythe": "Brown-Forsythe", "mann-whitney-u": "Mann-Whitney U"}
    # Issue #55: a caption's p-values sat beside claims' verdicts they are not. They are
    # descriptive: Holm-adjusted over every p the caption gives, and said to be so.
    shown = tests[tests["test"].isin(list(names))].reset_index(drop=True)
    adjusted = multiplicity.holm_adjusted(shown["p_value"])
    if adjusted.notna().any():
        parts.append(
            f"Descriptive tests, not the claims' (Holm-adjusted over these {int(adjusted.notna().sum())} p-values):"
        )
    for (a, b), pair in shown.groupby(["group_a", "group_b"], sort=True):
        texts = []
        for test, name in names.items():
            p = adjusted[pair.index[pair["test"] == test]].dropna()
            if len(p) == 1 and len(pair[pair["test"] == test]) == 1:
                texts.append(f"{name} Holm p = {_p(p.iloc[0])}")
            elif len(p):
                texts.append(
                    f"{name} Holm p < 0.05 in {int((p < 0.05).sum())}/{len(p)} cells (min Holm p = {_p(p.min())})"
                )
            else:  # say why: too few runs, zero variance
                notes = pair.loc[pair["test"] == test, "note"]
                texts.append(f"{name} p n/a" + (f" ({notes.iloc[0]})" if len(notes) and notes.iloc[0] else ""))
        parts.append(f"{a} vs {b} (two-sided): " + ", ".join(texts) + ".")
    if tests.empty:
        parts.append("No test: no cell holds two groups to compare.")
    if dominance is not None and not dominance.empty:
        from robustkit.analysis.dominance import aso_sentence

        parts.append(aso_sentence(dominance))
    return " ".join(p for p in parts if p)


# ---------------------------------------------------------------------------------------------
# helpers


def _columns(df: pd.DataFrame, by: Sequence[str] | str, value: str, what: str) -> list[str]:
    """Check ``df`` can be grouped by ``by`` and has ``value``; return ``by`` as a list."""
    by = [by] if isinstance(by, str) else list(by)
    if df.empty:
        raise RobustkitError(f"nothing to {what}: the selection is empty (no rows)")
    missing = [c for c in [*by, value] if c not in df.columns]
    if missing:
        raise RobustkitError(
            f"cannot {what}: no column {', '.join(map(repr, missing))}; columns are {', '.join(df.columns)}"
        )
    return by


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}" if p < 0.1 else f"{p:.2f}"


def _mean_ci(x: np.ndarray, confidence: float, n_resamples: int, seed: int) -> tuple[float, float, str]:
    """Bootstrap CI of the mean of ``x``, and a note when it is NaN or not BCa."""
    if len(x) < 2:
        return np.nan, np.nan, "fewer than 2 observations"
    if np.ptp(x) == 0:  # every resample has the same mean
        return float(x[0]), float(x[0]), "constant values"
    return _bootstrap((x,), significance.mean, confidence, n_resamples, seed)


def _bootstrap(samples: tuple, statistic, confidence: float, n_resamples: int, seed: int) -> tuple[float, float, str]:
    """:func:`robustkit.measures.significance.bootstrap_ci_bca`, with the note of its method."""
    low, high, method = significance.bootstrap_ci_bca(samples, statistic, confidence, n_resamples, seed)
    if not method:
        return np.nan, np.nan, "bootstrap interval degenerate"
    return low, high, "" if method == BOOTSTRAP_METHOD else "percentile bootstrap (BCa degenerate)"


def _pair_tests(
    a: np.ndarray, b: np.ndarray, name_a, name_b, confidence: float, n_resamples: int, seed: int
) -> list[dict]:
    """The rows of :func:`compare` for one pair of groups."""
    small = [str(n) for n, x in ((name_a, a), (name_b, b)) if len(x) < 2]
    rows = [_spread_test(a, b, center, test) for test, center in (("levene", "mean"), ("brown-forsythe", "median"))]
    rows.append(_mann_whitney(a, b, small))
    sd_a, sd_b = (np.std(x, ddof=1) if len(x) > 1 else np.nan for x in (a, b))
    ratio_note = (
        f"fewer than 2 runs in {', '.join(small)}"
        if small
        else ("zero variance in " + str(name_b) if sd_b == 0 else "")
    )
    ratio = sd_a / sd_b if not small and sd_b > 0 else np.nan
    rows.append(_row("std-ratio", ratio, np.nan, note=ratio_note))
    if small:
        rows.append(_row("mean-difference", np.nan, np.nan, note=f"fewer than 2 runs in {', '.join(small)}"))
    else:
        low, high, note = _mean_difference_ci(a, b, confidence, n_resamples, seed)
        rows.append(_row("mean-difference", a.mean() - b.mean(), np.nan, low, high, note))
    return rows


def _spread_test(a: np.ndarray, b: np.ndarray, center: str, test: str) -> dict:
    # With 2 runs both absolute deviations from the centre are equal: the test has no
    # within-group variance to compare against, so it needs 3.
    if min(len(a), len(b)) < 3:
        return _row(test, np.nan, np.nan, note="fewer than 3 runs in a group")
    statistic, p_value = significance.spread_test(a, b, center)
    if not np.isfinite(statistic):
        return _row(test, np.nan, np.nan, note="degenerate: deviations constant within each group (e.g. zero variance)")
    return _row(test, statistic, p_value)


def _mann_whitney(a: np.ndarray, b: np.ndarray, small: list[str]) -> dict:
    if small:
        return _row("mann-whitney-u", np.nan, np.nan, note=f"fewer than 2 runs in {', '.join(small)}")
    if np.ptp(np.concatenate([a, b])) == 0:
        return _row("mann-whitney-u", np.nan, np.nan, note="all values equal")
    return _row("mann-whitney-u", *significance.mann_whitney(a, b, "two-sided"))


def _mean_difference_ci(
    a: np.ndarray, b: np.ndarray, confidence: float, n_resamples: int, seed: int
) -> tuple[float, float, str]:
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return a[0] - b[0], a[0] - b[0], "constant values"
    # independent resampling of each group (scipy resamples each sample separately)
    return _bootstrap((a, b), significance.mean_difference, confidence, n_resamples, seed)


def _row(
    test: str, statistic: float, p_value: float, ci_low: float = np.nan, ci_high: float = np.nan, note: str = ""
) -> dict:
    return {
        "test": test,
        "statistic": float(statistic),
        "p_value": float(p_value),
        "ci_low": float(ci_low),
        "ci_high": float(ci_high),
        "note": note,
    }


def tables(
    df: pd.DataFrame,
    by: str = "method",
    within: Sequence[str] | None = None,
    value: str = "value",
    include_failed: bool = False,
    pooled: Sequence[str] = (),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`summarize` per cell x group and :func:`compare` of the groups within each cell.

    Parameters
    ----------
    df : DataFrame
        :func:`robustkit.analysis.scores.outcomes` or :func:`~robustkit.analysis.scores.epoch_outcomes` output.
    by, within, value, include_failed, pooled
        As in :func:`compare` (``within`` default: :func:`default_within`).

    Returns
    -------
    (DataFrame, DataFrame)
        The summary (``within`` + ``by`` columns + :data:`SUMMARY_STATS`) and the tests.
    """
    if not df.empty and within is not None:  # an empty selection is said by summarize; by: default_within
        require_columns(df, list(within), "split cells by")
    within = default_within(df, by, pooled) if within is None else list(within)
    return (
        summarize(df, [*within, by], value, include_failed=include_failed, pooled=pooled),
        compare(df, by, value, within, include_failed=include_failed, pooled=pooled),
    )
