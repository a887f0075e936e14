"""Tuning curves: the best score to expect from a budget of k runs, with confidence bands
(Dodge et al. 2019, "Show your work", expected validation performance; Lourie et al. 2024,
"Show your work with confidence", through their package ``opda``; issue #16, item 4).

A method's runs (over seeds, and over learning rates where a group holds several: a random
search over lr x seed) are draws from the distribution of the score one run gets. The tuning
curve says what the best of k such runs scores:

- ``median``: the median of the best of k (opda's quantile tuning curve, q = 0.5), with
  simultaneous confidence bands from opda's ``ld_highest_density`` CDF bands (exact coverage,
  Lourie et al. 2024): the band holds the whole curve at the given confidence;
- ``mean``: the expected best of k under the empirical distribution (Dodge et al.'s expected
  validation performance, opda's average tuning curve); its band needs the metric's bounds
  (accuracy in [0, 1]) and is given where they are known.

Failed (collapsed, diverged) runs are kept by default: they are what a budget of k runs really
draws, and leaving them out would overstate every point of the curve; ``exclude_failed=True``
drops them (the curve of the runs that worked).

opda's bands assume a continuous score distribution; scores with ties (an accuracy on a finite
dev set) make their coverage approximate.

A budget larger than the runs observed is extrapolation from their empirical distribution; the
curve stops at n runs.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd

from robustkit.analysis import scores
from robustkit.analysis.declare import METRIC, Analysis, Param, checkpoint_param
from robustkit.analysis.registry import register_analysis
from robustkit.errors import RobustkitError

# Everything robustkit reads about this analysis (robustkit.analysis.declare); the functions below
# take their defaults from it.
DECLARED = register_analysis(
    Analysis(
        "tuning",
        "tuning curves: median and expected best score of k runs, with confidence bands (Dodge et al. 2019; opda)",
        "Each group's runs (over seeds, and learning rates where a group has several) as draws of a search: the "
        "median best-of-k score with opda's simultaneous band and the expected best of k (expected validation "
        "performance), k = 1..n.",
        ":run",
        (
            Param(
                "split",
                "validation",
                "split scored",
                default_note="what a search selects on",
                choices=("validation", "test"),
            ),
            checkpoint_param("checkpoint scored"),
            METRIC,
            Param(
                "by",
                ["method"],
                "comma-separated grouping columns",
                default_note="settings that vary inside a group split it too",
                kind=list,
            ),
            Param("confidence", 0.8, "level of the simultaneous bands", default_note="opda's examples"),
            Param(
                "exclude_failed",
                False,
                "leave collapsed and diverged runs out (default: they count as draws of the search, which a budget of "
                "k runs can draw)",
            ),
        ),
        output="the curves",
        order=130,
        module=__name__,
    )
)


CURVE_COLUMNS = [
    "k",
    "n_runs",
    "n_failed",
    "median",
    "median_low",
    "median_high",
    "mean",
    "mean_low",
    "mean_high",
    "confidence",
]
# The support of each metric (for the bands of the average curve); others: unbounded.
BOUNDS = {
    "accuracy": (0.0, 1.0),
    "f1": (0.0, 1.0),
    "macro_f1": (0.0, 1.0),
    "mcc": (-1.0, 1.0),
    "pearson": (-1.0, 1.0),
    "spearman": (-1.0, 1.0),
    "loss": (0.0, float("inf")),
}
MINIMIZE = {"loss"}
POOLED = ("lr",)  # what a search ranges over besides the seed
# opda's examples use 80% bands: at 10 runs 95% bands span nearly the whole range (the registry's default)
DEFAULT_CONFIDENCE = DECLARED.default("confidence")


def tuning_curve(
    values: Sequence[float], metric: str = "accuracy", confidence: float = DEFAULT_CONFIDENCE, seed: int = 0
) -> pd.DataFrame:
    """The tuning curve of one group of runs, k = 1 .. n.

    Parameters
    ----------
    values : sequence of float
        One score per run.
    metric : str
        Decides the direction (``loss`` is minimised) and the bounds (:data:`BOUNDS`).
    confidence : float
        Level of the simultaneous bands.
    seed : int
        Seed of opda's band construction (a Monte Carlo calibration).

    Returns
    -------
    DataFrame
        ``k, median, median_low, median_high, mean, mean_low, mean_high`` (NaN bands of the mean
        for a metric without known bounds).
    """
    import numpy as np
    import pandas as pd
    from opda.nonparametric import EmpiricalDistribution

    ys = np.asarray(values, float)
    ys = ys[np.isfinite(ys)]
    if len(ys) < 2:
        raise RobustkitError(f"a tuning curve needs at least 2 finite scores, got {len(ys)}")
    a, b = BOUNDS.get(metric, (-np.inf, np.inf))
    minimize = metric in MINIMIZE
    with warnings.catch_warnings():
        # ties (an accuracy on a finite dev set): opda warns that the bands' coverage is then
        # approximate, which the module docstring and the figure say once
        warnings.filterwarnings("ignore", message="Duplicates detected", category=RuntimeWarning)
        lower_cdf, point, upper_cdf = EmpiricalDistribution.confidence_bands(
            ys, confidence, a=a, b=b, generator=np.random.default_rng(seed), n_jobs=1
        )
    ks = np.arange(1, len(ys) + 1)
    # for a maximised score the upper CDF band gives the lower curve (and the other way round)
    low_band, high_band = (lower_cdf, upper_cdf) if minimize else (upper_cdf, lower_cdf)
    bounded = np.isfinite(a) and np.isfinite(b)
    return pd.DataFrame(
        {
            "k": ks,
            "median": point.quantile_tuning_curve(ks, minimize=minimize),
            "median_low": low_band.quantile_tuning_curve(ks, minimize=minimize),
            "median_high": high_band.quantile_tuning_curve(ks, minimize=minimize),
            "mean": point.average_tuning_curve(ks, minimize=minimize),
            "mean_low": low_band.average_tuning_curve(ks, minimize=minimize) if bounded else np.nan,
            "mean_high": high_band.average_tuning_curve(ks, minimize=minimize) if bounded else np.nan,
        }
    )


def curves(
    df: pd.DataFrame,
    by: Sequence[str] | str = ("method",),
    value: str = "value",
    confidence: float = DEFAULT_CONFIDENCE,
    exclude_failed: bool = False,
    pooled: Sequence[str] = POOLED,
    seed: int = 0,
) -> pd.DataFrame:
    """A tuning curve per group of runs.

    Parameters
    ----------
    df : DataFrame
        One score per run (:func:`robustkit.analysis.scores.outcomes`), with ``metric``.
    by : str or sequence of str
        Grouping columns; ``task`` and ``metric`` are added (never pooled).
    exclude_failed : bool
        Leave collapsed and diverged runs out (default: kept, they are draws of the search too).
    pooled : sequence of str
        Settings searched over inside a group (default the learning rate); any other setting
        varying inside a group raises (:func:`robustkit.analysis.pooling.check_pooling`).

    Returns
    -------
    DataFrame
        ``by`` columns + :data:`CURVE_COLUMNS` (``n_runs``: runs in the curve, ``n_failed``:
        failed ones among all runs of the group).
    """
    import pandas as pd

    from robustkit.analysis.pooling import check_pooling
    from robustkit.store import collapse

    by = [by] if isinstance(by, str) else list(by)
    by = list(dict.fromkeys([*(["task"] if "task" in df else []), *by, *(["metric"] if "metric" in df else [])]))
    check_pooling(df, by, tuple(pooled), "tuning curves")
    marked = collapse.marked(df)
    frames = []
    for key, group in marked.groupby(by, dropna=False, sort=True):
        kept = collapse.kept(group, not exclude_failed)
        metric = str(group["metric"].iloc[0]) if "metric" in group else "accuracy"
        curve = tuning_curve(kept[value].to_numpy(float), metric, confidence, seed)
        frames.append(
            curve.assign(
                **dict(zip(by, key if isinstance(key, tuple) else (key,))),
                n_runs=len(kept),
                n_failed=int((group["outcome"] != collapse.OK).sum()),
                confidence=confidence,
            )
        )
    return pd.concat(frames, ignore_index=True)[[*by, *CURVE_COLUMNS]]


def run(
    store: str | Path,
    select: dict | list[str] | None = None,
    *,
    split: str,
    checkpoint: str,
    metric: str | None,
    by: Sequence[str] | str,
    confidence: float,
    exclude_failed: bool,
    seed: int = 0,
) -> pd.DataFrame:
    """Tuning curves of the selected runs' scores (default: the validation score of ``best``,
    what a search selects on, Dodge et al.'s expected *validation* performance).

    Settings other than the seed and the learning rate that vary inside a ``by`` group become
    grouping columns of their own (runs of different settings are never pooled).
    """
    from robustkit.analysis.pooling import mixed_settings

    frame = scores.outcomes(store, select, checkpoint=checkpoint, split=split, metric=metric)
    by = [by] if isinstance(by, str) else list(by)
    varying = [c for c in mixed_settings(frame, ["task", *by], POOLED) if c not in by]
    return curves(frame, [*by, *varying], confidence=confidence, exclude_failed=exclude_failed, seed=seed)
