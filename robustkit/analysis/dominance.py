"""Stochastic dominance between methods (ASO) and failed-run rates with exact intervals: two
stability statistics the field reports beyond variance tests (issue #16, item 4).

- **ASO**, Almost Stochastic Order (del Barrio et al. 2018; Dror et al. 2019, "Deep dominance"),
  through ``deepsig.aso`` (Ulmer et al. 2022): epsilon_min(A, B) in [0, 1] is the share of the
  quantile functions' difference where A's scores fall below B's, made conservative by a
  bootstrap at the given confidence. 0: A's scores stochastically dominate B's; 0.5: no order;
  1: B dominates A. Dror et al. call A almost stochastically dominant when epsilon_min < 0.5
  (a stricter threshold, 0.2, is also common). Computed both ways for each pair, because the two
  are not exactly complementary. Scores are oriented so that higher is better (a loss is
  negated).
- **Failed-run rate**: collapsed or diverged runs (:mod:`robustkit.store.collapse`) over all runs of a
  group, with the exact (Clopper-Pearson) binomial interval (``scipy.stats.binomtest``), because
  "2 of 5 failed" says little without one.

Both take the per-run scores of :mod:`robustkit.analysis.scores` and the cells of
:mod:`robustkit.analysis.stability` (runs of different settings are never pooled).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from robustkit.analysis.pooling import check_pooling
from robustkit.errors import RobustkitError
from robustkit.store import collapse

ASO_COLUMNS = ["by", "group_a", "group_b", "n_a", "n_b", "eps_min", "confidence", "note"]
FAILURE_COLUMNS = ["n_runs", "n_failed", "failed_rate", "ci_low", "ci_high", "confidence"]
LOWER_IS_BETTER = {"loss"}
ASO_THRESHOLD = 0.5  # Dror et al. 2019: epsilon_min below it = almost stochastically dominant
DEFAULT_BOOTSTRAP = 1000  # deepsig's default bootstrap iterations


def aso(
    a: Sequence[float],
    b: Sequence[float],
    confidence: float = 0.95,
    seed: int = 0,
    num_bootstrap_iterations: int = DEFAULT_BOOTSTRAP,
    num_comparisons: int = 1,
) -> float:
    """epsilon_min of scores ``a`` over scores ``b`` (higher = better), via ``deepsig.aso``.

    Parameters
    ----------
    a, b : sequence of float
        One score per run (at least 2 each).
    confidence : float
        Confidence level of the bootstrap bound.
    seed : int
        Seed of deepsig's bootstrap (same scores and seed, same value).
    num_comparisons : int
        Comparisons made at once: deepsig applies a Bonferroni correction to the confidence.

    Returns
    -------
    float
        In [0, 1]; NaN with fewer than 2 scores on a side.
    """
    from deepsig import aso as deepsig_aso  # heavy (joblib, torch): only when ASO is computed

    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 2 or len(b) < 2:
        return float("nan")
    with (
        warnings.catch_warnings()
    ):  # deepsig warns of a zero violation ratio (identical samples): eps_min is then exact
        warnings.filterwarnings("ignore", message="Division by zero encountered in violation ratio")
        return float(
            deepsig_aso(
                a,
                b,
                confidence_level=confidence,
                num_comparisons=num_comparisons,
                num_bootstrap_iterations=num_bootstrap_iterations,
                seed=seed,
                show_progress=False,
            )
        )


def aso_table(
    df: pd.DataFrame,
    by: str = "method",
    value: str = "value",
    within: Sequence[str] = (),
    confidence: float = 0.95,
    seed: int = 0,
    include_failed: bool = False,
    pooled: Sequence[str] = (),
    num_bootstrap_iterations: int = DEFAULT_BOOTSTRAP,
) -> pd.DataFrame:
    """epsilon_min both ways for every pair of groups of ``by`` within each cell.

    Parameters
    ----------
    df : DataFrame
        One row per run (:func:`robustkit.analysis.scores.outcomes`), with ``metric`` if the
        scores' direction is to be read from it (``loss``: lower is better).
    by, within, include_failed, pooled
        As in :func:`robustkit.analysis.stability.compare`.
    confidence, seed, num_bootstrap_iterations
        As in :func:`aso`.

    Returns
    -------
    DataFrame
        ``within`` columns + ``by, group_a, group_b, n_a, n_b, eps_min`` (of A over B: < 0.5
        reads A almost stochastically dominant), ``confidence, note``; both orders of each pair.
    """
    within = list(within)
    missing = [c for c in [*within, by, value] if c not in df.columns]
    if missing:
        raise RobustkitError(f"cannot compute ASO: no column {', '.join(map(repr, missing))}")
    check_pooling(df, [*within, by], pooled, "aso")
    df = collapse.kept(collapse.marked(df), include_failed)
    rows = []
    cells = df.groupby(within, dropna=False, sort=True) if within else [((), df)]
    for key, cell in cells:
        sign = -1.0 if "metric" in cell and set(cell["metric"]) <= LOWER_IS_BETTER else 1.0
        groups = {g: sign * part[value].dropna().to_numpy(float) for g, part in cell.groupby(by, sort=True)}
        cell_key = dict(zip(within, key if isinstance(key, tuple) else (key,)))
        for a, b in itertools.permutations(groups, 2):
            small = [str(g) for g in (a, b) if len(groups[g]) < 2]
            eps = aso(groups[a], groups[b], confidence, seed, num_bootstrap_iterations) if not small else float("nan")
            note = (
                f"fewer than 2 runs in {', '.join(small)}"
                if small
                else ("lower is better: negated" if sign < 0 else "")
            )
            rows.append(
                {
                    **cell_key,
                    "by": by,
                    "group_a": a,
                    "group_b": b,
                    "n_a": len(groups[a]),
                    "n_b": len(groups[b]),
                    "eps_min": eps,
                    "confidence": confidence,
                    "note": note,
                }
            )
    return pd.DataFrame(rows, columns=[*within, *ASO_COLUMNS])


def failure_rates(df: pd.DataFrame, by: Sequence[str] | str = ("method",), confidence: float = 0.95) -> pd.DataFrame:
    """Failed (collapsed or diverged) runs per group, with the exact binomial interval.

    Parameters
    ----------
    df : DataFrame
        One row per run with ``outcome`` (or ``failed``), e.g. :func:`robustkit.analysis.scores.outcomes`.
    by : str or sequence of str
        Grouping columns.
    confidence : float
        Level of the Clopper-Pearson interval.

    Returns
    -------
    DataFrame
        ``by`` columns + ``n_runs, n_failed, failed_rate`` (fraction), ``ci_low, ci_high``,
        ``confidence``.
    """
    by = [by] if isinstance(by, str) else list(by)
    marked = collapse.marked(df)
    rows = []
    for key, group in marked.groupby(by, dropna=False, sort=True):
        n = len(group)
        failed = int((group["outcome"] != collapse.OK).sum())
        interval = stats.binomtest(failed, n).proportion_ci(confidence_level=confidence, method="exact")
        rows.append(
            {
                **dict(zip(by, key if isinstance(key, tuple) else (key,))),
                "n_runs": n,
                "n_failed": failed,
                "failed_rate": failed / n,
                "ci_low": float(interval.low),
                "ci_high": float(interval.high),
                "confidence": confidence,
            }
        )
    return pd.DataFrame(rows, columns=[*by, *FAILURE_COLUMNS])


def aso_sentence(table: pd.DataFrame) -> str:
    """The ASO rows as one caption sentence, e.g. ``"ASO (deepsig, 95%): epsilon_min(houlsby over
    full) = 0.12, (full over houlsby) = 0.91."``; several cells: the count where each is < 0.5."""
    if table.empty:
        return ""
    parts = []
    for (a, b), pair in table.groupby(["group_a", "group_b"], sort=True):
        values = pair["eps_min"].dropna()
        if values.empty:
            continue
        if len(pair) == 1:
            parts.append(f"ε_min({a} over {b}) = {values.iloc[0]:.2f}")
        else:
            parts.append(
                f"ε_min({a} over {b}) < {ASO_THRESHOLD} in {int((values < ASO_THRESHOLD).sum())}/{len(pair)} cells"
            )
    if not parts:
        return ""
    level = "/".join(f"{c:.0%}" for c in sorted(table["confidence"].unique()))
    return (
        f"ASO (deepsig, confidence {level}; < {ASO_THRESHOLD} = almost stochastically dominant): "
        + ", ".join(parts)
        + "."
    )
