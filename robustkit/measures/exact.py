"""Exact small-sample tests and the intervals that invert them: what a verdict is decided by.

A claim about runs is decided on a handful of runs per group (3-10 seeds), where large-sample
approximations and percentile bootstraps do not hold: a percentile bootstrap of 2 vs 2 runs
returns the extreme differences as its "95% interval". The rank tests here are exact (their null
distribution enumerated, or a seeded Monte-Carlo permutation where that is too large), so their
false-positive rate is at most alpha at any n, and every interval is the set of effects the
test does not reject, so it exists only where the test can decide:

- :func:`rank_sum`: one-sided Wilcoxon-Mann-Whitney test of location (two independent groups);
  :func:`shift_interval`: the Hodges-Lehmann shift and its exact interval from inverting it;
- :func:`signed_rank`: one-sided Wilcoxon signed-rank test of one group against a constant;
  :func:`centre_interval`: the one-sample Hodges-Lehmann centre and its exact interval;
- :func:`spread_permutation`: one-sided permutation test of dispersion (Brown-Forsythe's
  absolute deviations from each group's median, their mean difference). Deviations are residuals,
  exchangeable only approximately: its false-agree rate is checked by simulation instead
  (``tests/test_claim_simulation.py``; 0.057 at 4 vs 4 over 3,000 draws, 0.01-0.04 at 5-10);
  :func:`spread_permutations` runs it on many pairs of groups at once over the same
  :func:`relabellings` (the power of the test, :mod:`robustkit.decidability`);
- :func:`rate_test`: Fisher's exact test of two rates, one-sided; :func:`rate_interval`:
  Newcombe's hybrid score interval of their difference (no exact interval inverts Fisher's
  test cheaply; Newcombe's keeps its level at small n, Newcombe 1998);
- :func:`smallest_p`: the smallest p-value each test can give at given group sizes, the
  decidability of a claim before any run exists.

scipy provides the tests' p-values (``mannwhitneyu``, ``wilcoxon``, ``permutation_test``,
``fisher_exact``); the null distributions of the rank statistics, needed for the inverted
intervals and the smallest p, are counted here by the textbook recursions (scipy keeps them
private). Inputs are 1-D arrays of per-run values (shape ``(n,)``, the values' units); ``alpha``
is the one-sided level, and intervals are two-sided at ``1 - 2 alpha`` (each tail alpha).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
from scipy import stats

__all__ = ["centre_interval", "rank_sum", "rate_interval", "rate_test", "relabellings", "shift_interval", "signed_rank",
           "smallest_p", "spread_permutation", "spread_permutations"]

EXACT_LIMIT = 20_000  # relabellings enumerated in full (12 vs 8 and smaller); above, a seeded Monte-Carlo of this many
SEED = 0
CHUNK = 2 ** 22  # relabelled statistics held at once by spread_permutations (32 MiB of float64)


@lru_cache(maxsize=None)
def rank_sum_null(m: int, n: int) -> np.ndarray:
    """Null distribution of the Mann-Whitney U of a group of ``m`` against one of ``n`` (no ties).

    Returns
    -------
    ndarray, shape (m n + 1,)
        P(U = u) for u = 0 .. m n, by the recursion f(m, n, u) = f(m-1, n, u-n) + f(m, n-1, u).
    """
    counts = _rank_sum_counts(m, n)
    return np.asarray(counts, dtype=float) / math.comb(m + n, m)


@lru_cache(maxsize=None)
def _rank_sum_counts(m: int, n: int) -> tuple[int, ...]:
    """Arrangements of ``m`` a's and ``n`` b's by U: the coefficients of the Gaussian binomial
    [m + n choose m]_q = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i), in exact integers."""
    counts = [1] + [0] * (m * n)
    for i in range(1, m + 1):
        for u in range(m * n, n + i - 1, -1):  # times (1 - q^(n+i))
            counts[u] -= counts[u - n - i]
        for u in range(i, m * n + 1):  # divided by (1 - q^i)
            counts[u] += counts[u - i]
    return tuple(counts)


@lru_cache(maxsize=None)
def signed_rank_null(n: int) -> np.ndarray:
    """Null distribution of the Wilcoxon signed-rank W+ of ``n`` non-zero differences.

    Returns
    -------
    ndarray, shape (n (n + 1) / 2 + 1,)
        P(W+ = w): each rank's sign is a fair coin, counted by subset sums of 1..n.
    """
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1
    for rank in range(1, n + 1):
        counts[rank:] = counts[rank:] + counts[:-rank].copy()
    return counts / 2.0 ** n


def rank_sum(a: np.ndarray, b: np.ndarray, alternative: str) -> float:
    """One-sided p of the Wilcoxon-Mann-Whitney test that ``a`` tends to be ``less`` / ``greater``
    than ``b``: exact (scipy's ``method="exact"``) without ties, an exact (or seeded Monte-Carlo)
    permutation of the mid-ranks with ties."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    pooled = np.concatenate([a, b])
    if len(np.unique(pooled)) == len(pooled):
        return float(stats.mannwhitneyu(a, b, alternative=alternative, method="exact").pvalue)
    method = stats.PermutationMethod(n_resamples=EXACT_LIMIT, random_state=np.random.default_rng(SEED))
    return float(stats.mannwhitneyu(a, b, alternative=alternative, method=method).pvalue)


def shift_interval(a: np.ndarray, b: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """Hodges-Lehmann shift of ``a`` against ``b`` and its exact ``1 - 2 alpha`` interval.

    The estimate is the median of the ``m n`` differences ``a_i - b_j``; the interval is
    ``[D_(k), D_(mn + 1 - k)]`` of the sorted differences, ``k`` the largest count with
    ``P(U <= k - 1) <= alpha`` under the null: every shift the one-sided test at ``alpha`` does
    not reject, either way (Lehmann 1975, §2.6).

    Returns
    -------
    (float, float, float)
        Estimate, low, high (the values' units); low and high NaN where no ``k >= 1`` exists,
        i.e. where the test cannot reach ``alpha`` at these sizes ("no interval at this n").
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    differences = np.sort((a[:, None] - b[None, :]).ravel())
    estimate = float(np.median(differences))
    k = int(np.searchsorted(np.cumsum(rank_sum_null(len(a), len(b))), alpha, side="left"))
    if k < 1:
        return estimate, np.nan, np.nan
    return estimate, float(differences[k - 1]), float(differences[len(differences) - k])


def signed_rank(x: np.ndarray, alternative: str, value: float = 0.0) -> float:
    """One-sided p of the Wilcoxon signed-rank test that ``x`` is centred ``less`` / ``greater``
    than ``value`` (exact; differences of zero are dropped, Wilcoxon's convention; 1.0 when none
    is left)."""
    d = np.asarray(x, float) - value
    if not np.any(d != 0):
        return 1.0
    return float(stats.wilcoxon(d, alternative=alternative, method="exact", zero_method="wilcox").pvalue)


def centre_interval(x: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """One-sample Hodges-Lehmann centre of ``x`` (median of its Walsh averages) and the exact
    ``1 - 2 alpha`` interval that inverts :func:`signed_rank`: ``[W_(k), W_(N + 1 - k)]`` of the
    ``N = n (n + 1) / 2`` sorted Walsh averages, ``k`` the largest with ``P(W+ <= k - 1) <= alpha``.

    Returns
    -------
    (float, float, float)
        Estimate, low, high; low and high NaN where the test cannot reach ``alpha`` at this n.
    """
    x = np.asarray(x, float)
    i, j = np.triu_indices(len(x))
    walsh = np.sort((x[i] + x[j]) / 2)
    estimate = float(np.median(walsh))
    k = int(np.searchsorted(np.cumsum(signed_rank_null(len(x))), alpha, side="left"))
    if k < 1:
        return estimate, np.nan, np.nan
    return estimate, float(walsh[k - 1]), float(walsh[len(walsh) - k])


@lru_cache(maxsize=64)
def relabellings(n_a: int, n_b: int) -> np.ndarray:
    """Group-a membership of every relabelling of ``n_a + n_b`` runs (all ``C(n_a + n_b, n_a)`` up
    to :data:`EXACT_LIMIT`, else that many drawn with :data:`SEED`), the observed one first.

    The permutation tests here and their power (:func:`robustkit.decidability.power`) refer to
    these same relabellings, so the power printed is the power of the test that is run.

    Returns
    -------
    ndarray of bool, shape (relabellings, n_a + n_b)
        Read-only (cached and shared).
    """
    total = n_a + n_b
    if math.comb(total, n_a) <= EXACT_LIMIT:
        members = np.array(list(itertools.combinations(range(total), n_a)), dtype=np.intp).reshape(-1, n_a)
    else:
        rng = np.random.default_rng(SEED)
        members = np.array([np.arange(n_a)] + [rng.choice(total, n_a, replace=False) for _ in range(EXACT_LIMIT)])
    rows = np.zeros((len(members), total), dtype=bool)
    rows[np.arange(len(members))[:, None], members] = True
    rows.setflags(write=False)
    return rows


def spread_permutation(a: np.ndarray, b: np.ndarray, alternative: str) -> tuple[float, float]:
    """One-sided permutation test that ``a`` is ``less`` / ``greater`` spread than ``b``.

    Brown-Forsythe's deviations ``|x - median of its group|`` are computed once per group; the
    statistic, their mean in ``a`` minus their mean in ``b``, is referred to all relabellings of
    the pooled deviations (exact up to :data:`EXACT_LIMIT` of them; above, that many seeded random
    ones with the observed labelling among them, so p >= 1 / (B + 1)).

    Returns
    -------
    (float, float)
        The statistic (values' units) and the one-sided p; p = 1 where every deviation is 0.
    """
    gap, p = spread_permutations(np.asarray(a, float)[None, :], np.asarray(b, float)[None, :], alternative)
    return float(gap[0]), float(p[0])


def spread_permutations(a: np.ndarray, b: np.ndarray, alternative: str) -> tuple[np.ndarray, np.ndarray]:
    """:func:`spread_permutation` of many pairs of groups at once (the same relabellings for all).

    Parameters
    ----------
    a, b : ndarray, shape (samples, n_a) and (samples, n_b)
        One pair of groups per row.

    Returns
    -------
    (ndarray, ndarray), each shape (samples,)
        The statistic and the one-sided p of each row. Rows are tested in chunks, so that at most
        :data:`CHUNK` relabelled statistics are held at once, whatever the number of rows.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    da = np.abs(a - np.median(a, axis=1, keepdims=True))
    db = np.abs(b - np.median(b, axis=1, keepdims=True))
    gap = da.mean(axis=1) - db.mean(axis=1)
    pooled = np.concatenate([da, db], axis=1)
    n_a, n_b = da.shape[1], db.shape[1]
    labels = relabellings(n_a, n_b)
    inside = labels.T.astype(float)  # (runs, relabellings)
    total = pooled.sum(axis=1, keepdims=True)
    p = np.ones(len(pooled))
    step = max(1, CHUNK // len(labels))
    for start in range(0, len(pooled), step):
        rows = slice(start, start + step)
        in_a = pooled[rows] @ inside  # (rows, relabellings): the deviations a relabelled a holds
        gaps = in_a / n_a - (total[rows] - in_a) / n_b
        # equal statistics compare as equal
        slack = 1e-12 * np.maximum(1.0, np.abs(pooled[rows]).max(axis=1, initial=0.0))[:, None]
        observed = gap[rows, None]
        extreme = gaps <= observed + slack if alternative == "less" else gaps >= observed - slack
        p[rows] = extreme.mean(axis=1)
    p[~np.any(pooled > 0, axis=1)] = 1.0
    return gap, p


def rate_test(a: np.ndarray, b: np.ndarray, alternative: str) -> float:
    """One-sided p of Fisher's exact test that the rate of ones in ``a`` is ``less`` / ``greater``
    than in ``b`` (``a``, ``b``: 0/1 per run)."""
    a, b = np.asarray(a, int), np.asarray(b, int)
    table = [[int(a.sum()), len(a) - int(a.sum())], [int(b.sum()), len(b) - int(b.sum())]]
    return float(stats.fisher_exact(table, alternative=alternative).pvalue)


def rate_interval(a: np.ndarray, b: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """Rate of ones in ``a`` minus that in ``b`` and Newcombe's hybrid score ``1 - 2 alpha``
    interval (Newcombe 1998, method 10: the Wilson intervals of each rate combined).

    Returns
    -------
    (float, float, float)
        Difference, low, high (fractions).
    """
    z = stats.norm.ppf(1 - alpha)
    (pa, la, ua), (pb, lb, ub) = _wilson(a, z), _wilson(b, z)
    d = pa - pb
    return d, d - math.sqrt((pa - la) ** 2 + (ub - pb) ** 2), d + math.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)


def _wilson(x: np.ndarray, z: float) -> tuple[float, float, float]:
    n, p = len(x), float(np.mean(x))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return p, centre - half, centre + half


def smallest_p(kind: str, n_a: int, n_b: int = 0) -> float:
    """The smallest one-sided p-value a claim kind's test can give with these group sizes.

    Parameters
    ----------
    kind : {"location", "spread", "rate", "equivalence", "threshold"}
        The claim kind (:mod:`robustkit.claim`): two-group kinds are rank or permutation tests
        over the ``C(n_a + n_b, n_a)`` relabellings (Fisher's test too, at its most extreme
        table); ``threshold`` is the signed-rank test, ``2 ** -n_a``.

    Returns
    -------
    float
        1.0 where a group is empty.
    """
    if n_a < 1 or (kind != "threshold" and n_b < 1):
        return 1.0
    if kind == "threshold":
        return 2.0 ** -n_a
    return 1 / math.comb(n_a + n_b, n_a)
