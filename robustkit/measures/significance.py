"""The statistical tests and bootstrap intervals, once: arrays in, statistic, p-value or interval out.

Every test robustkit reports runs here: the captions under the stability figures and the tables
(:mod:`robustkit.analysis.stability`) and the verdicts of the papers' claims
(:mod:`robustkit.verdicts.rules`) call these kernels, so that one claim read off a figure and tested in a
verdict is one computation. What to test, how many runs a test needs, how a p-value becomes a
verdict and which note explains a NaN stay with the callers; these functions only compute.

- :func:`spread_test`: Levene's test (deviations from the group means) and its Brown-Forsythe
  variant (from the medians) for a difference of variances;
- :func:`mann_whitney`: the Mann-Whitney U test of location;
- :func:`fisher_exact`: Fisher's exact test of two rates;
- :func:`bootstrap_ci` and :func:`bootstrap_ci_bca`: bootstrap confidence intervals of a
  statistic of one or several independent samples (each resampled on its own), seeded, with
  the vectorised statistics :func:`mean`, :func:`mean_difference` and :func:`std_ratio`.

All wrap :mod:`scipy.stats`; inputs are 1-D float arrays of per-run values (shape ``(n,)``, in
the units of the values: a fraction for accuracy), outputs plain floats.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
from scipy import stats

__all__ = [
    "bootstrap_ci",
    "bootstrap_ci_bca",
    "fisher_exact",
    "mann_whitney",
    "mean",
    "mean_difference",
    "spread_test",
    "std_ratio",
]

BCA = "BCa"  # bias-corrected and accelerated bootstrap (scipy's name)
PERCENTILE = "percentile"


def spread_test(a: np.ndarray, b: np.ndarray, center: str = "mean") -> tuple[float, float]:
    """Levene's test (``center="mean"``) or Brown-Forsythe's (``"median"``) of equal variances.

    Parameters
    ----------
    a, b : ndarray, shape (n_a,), (n_b,)
        Per-run values of the two groups.
    center : {"mean", "median"}
        Deviations from each group's mean (Levene) or median (Brown-Forsythe, robust to skew).

    Returns
    -------
    (float, float)
        The statistic W (dimensionless) and the two-sided p-value; both NaN when the test is
        degenerate (deviations constant within each group, e.g. zero variance).
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        result = stats.levene(a, b, center=center)
    return float(result.statistic), float(result.pvalue)


def mann_whitney(a: np.ndarray, b: np.ndarray, alternative: str = "two-sided") -> tuple[float, float]:
    """Mann-Whitney U test of location (``scipy.stats.mannwhitneyu``, its default method).

    Parameters
    ----------
    a, b : ndarray, shape (n_a,), (n_b,)
        Per-run values of the two groups.
    alternative : {"two-sided", "less", "greater"}
        ``less``: a's values tend to be smaller than b's.

    Returns
    -------
    (float, float)
        U of ``a`` (a count of pairs, ties counted half) and the p-value.
    """
    result = stats.mannwhitneyu(a, b, alternative=alternative)
    return float(result.statistic), float(result.pvalue)


def fisher_exact(a: np.ndarray, b: np.ndarray, alternative: str = "two-sided") -> tuple[float, float]:
    """Fisher's exact test that the rate of ones in ``a`` differs from that in ``b``.

    Parameters
    ----------
    a, b : ndarray, shape (n_a,), (n_b,)
        0/1 per run (e.g. 1 = collapsed).
    alternative : {"two-sided", "less", "greater"}
        ``less``: a's rate is below b's.

    Returns
    -------
    (float, float)
        The sample odds ratio of the 2 x 2 table ``[[ones a, zeros a], [ones b, zeros b]]`` and
        the p-value.
    """
    table = [[int(a.sum()), len(a) - int(a.sum())], [int(b.sum()), len(b) - int(b.sum())]]
    result = stats.fisher_exact(table, alternative=alternative)
    return float(result.statistic), float(result.pvalue)


def mean(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Mean along ``axis`` (a vectorised bootstrap statistic of one sample)."""
    return np.mean(x, axis=axis)


def mean_difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """mean(x) - mean(y) along ``axis`` (a vectorised bootstrap statistic of two samples)."""
    return np.mean(x, axis=axis) - np.mean(y, axis=axis)


def std_ratio(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """std(x) / std(y) (ddof 1) along ``axis`` (a vectorised bootstrap statistic of two samples)."""
    return np.std(x, ddof=1, axis=axis) / np.std(y, ddof=1, axis=axis)


def bootstrap_ci(
    samples: Sequence[np.ndarray],
    statistic: Callable[..., np.ndarray],
    confidence: float,
    n_resamples: int,
    seed: int,
    method: str = PERCENTILE,
) -> tuple[float, float]:
    """Bootstrap confidence interval of ``statistic(*samples)`` (``scipy.stats.bootstrap``).

    Parameters
    ----------
    samples : sequence of ndarray, each shape (n_i,)
        Independent samples, each resampled on its own (with replacement, its own size).
    statistic : callable
        Vectorised: ``statistic(*resampled, axis=-1)`` (e.g. :func:`mean_difference`).
    confidence : float
        Level in (0, 1), two-sided (e.g. 0.95; 0.9 for a (1 - 2 alpha) interval at alpha 0.05).
    n_resamples : int
        Bootstrap resamples B.
    seed : int
        Seed of ``numpy.random.default_rng``: the same samples and seed give the same interval.
    method : {"percentile", "BCa", "basic"}
        scipy's interval method.

    Returns
    -------
    (float, float)
        Low and high end, in the statistic's units; NaN where scipy finds the interval
        degenerate (its warnings are silenced: the NaN says it).
    """
    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")
        interval = stats.bootstrap(
            tuple(samples),
            statistic,
            n_resamples=n_resamples,
            confidence_level=confidence,
            method=method,
            random_state=np.random.default_rng(seed),
            vectorized=True,
        ).confidence_interval
    return float(interval.low), float(interval.high)


def bootstrap_ci_bca(
    samples: Sequence[np.ndarray], statistic: Callable[..., np.ndarray], confidence: float, n_resamples: int, seed: int
) -> tuple[float, float, str]:
    """BCa bootstrap interval, the percentile one where BCa is degenerate (:func:`bootstrap_ci`).

    Returns
    -------
    (float, float, str)
        Low and high end (the statistic's units) and the method that gave them (``"BCa"`` or
        ``"percentile"``); ``(nan, nan, "")`` when both are degenerate.
    """
    for method in (BCA, PERCENTILE):
        low, high = bootstrap_ci(samples, statistic, confidence, n_resamples, seed, method)
        if np.isfinite(low) and np.isfinite(high):
            return low, high, method
    return np.nan, np.nan, ""
