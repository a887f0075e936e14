"""Exact small-sample tests and the intervals that invert them: what a verdict is decided by.

The rank tests here are exact (their null distribution counted, ties included, up to 60 runs;
above, the normal approximation with tie and continuity corrections), so their false-positive
rate is at most alpha, and every interval is the set of effects the test does not reject:

- :func:`rank_sum` / :func:`shift_interval`: one-sided Wilcoxon-Mann-Whitney test of location,
  the Hodges-Lehmann shift (verdicts use :mod:`robustkit.measures.brunner_munzel`);
- :func:`sign_test` / :func:`median_interval`: one group's median against a constant (threshold
  claims: no symmetry assumed);
- :func:`signed_rank` / :func:`centre_interval`: Wilcoxon signed-rank test against a constant
  (symmetric values only), the one-sample Hodges-Lehmann centre;
- :func:`spread_pairs` / :func:`spread_interval`: dispersion, the rank-sum test of the groups'
  seed-pair differences (Moses 1963), the spread ratio;
- :func:`rate_test` / :func:`rate_interval`: Fisher's exact test of two rates, the conditional
  odds ratio;
- :func:`smallest_p`: the smallest p-value each test can give at given group sizes.

Inputs are 1-D arrays of per-run values (shape ``(n,)``, the values' units); ``alpha`` is the
one-sided level, and intervals are two-sided at ``1 - 2 alpha`` (each tail alpha).

Why exact tests at 3-10 seeds, and what scipy provides: ``docs/verdicts.md``,
"robustkit/measures/exact.py".
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats

from robustkit.measures import welch

__all__ = [
    "centre_interval",
    "on_grid",
    "rank_sum",
    "rate_interval",
    "rate_test",
    "seed_pairs",
    "median_interval",
    "shift_interval",
    "sign_test",
    "signed_rank",
    "smallest_p",
    "spread_interval",
    "spread_pairs",
]


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
    return counts / 2.0**n


def rank_sum(a: np.ndarray, b: np.ndarray, alternative: str) -> float:
    """One-sided p of the Wilcoxon-Mann-Whitney test that ``a`` tends to be ``less`` / ``greater``
    than ``b``: exact, with ties too (the null of the observed mid-ranks, :func:`_tied_rank_sum`),
    up to :data:`TIED_EXACT_LIMIT` runs in all; above, the normal approximation."""
    a, b = on_grid(a), on_grid(b)
    pooled = np.concatenate([a, b])
    if len(pooled) > TIED_EXACT_LIMIT:  # paper-scale pooled cells (45 vs 45 ... 720 vs 72)
        return float(stats.mannwhitneyu(a, b, alternative=alternative, method="asymptotic").pvalue)
    if len(np.unique(pooled)) == len(pooled):
        return float(stats.mannwhitneyu(a, b, alternative=alternative, method="exact").pvalue)
    return _tied_rank_sum(pooled, len(a), alternative)


TIED_EXACT_LIMIT = 60  # runs in both groups together counted exactly (a few ms); above, the normal
# approximation with scipy's tie and continuity corrections, accurate at these sizes, where the
# exact count (or 20,000 relabellings) took seconds per test


def _tied_rank_sum(pooled: np.ndarray, m: int, alternative: str) -> float:
    """Exact conditional p of the rank sum of the first ``m`` of ``pooled`` (ties as mid-ranks):
    the sums of every m-subset of the observed mid-ranks, counted by dynamic programming over
    doubled ranks (integers), each subset equally likely under the null. It is what scipy's
    permutation method enumerates, without enumerating."""
    doubled = np.rint(2 * stats.rankdata(pooled)).astype(int)
    observed = int(doubled[:m].sum())
    total = int(doubled.sum())
    counts = np.zeros((m + 1, total + 1))
    counts[0, 0] = 1.0
    for rank in doubled:  # subsets of size k with each doubled sum, one item at a time
        counts[1:, rank:] = counts[1:, rank:] + counts[:-1, : total + 1 - rank]
    null = counts[m] / counts[m].sum()
    tail = null[observed:].sum() if alternative == "greater" else null[: observed + 1].sum()
    return float(min(1.0, tail))


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
    differences = np.sort(on_grid((a[:, None] - b[None, :]).ravel()))
    estimate = float(np.median(differences))
    k = int(np.searchsorted(np.cumsum(rank_sum_null(len(a), len(b))), alpha, side="left"))
    if k < 1:
        return estimate, np.nan, np.nan
    return estimate, float(differences[k - 1]), float(differences[len(differences) - k])


def signed_rank(x: np.ndarray, alternative: str, value: float = 0.0) -> float:
    """One-sided p of the Wilcoxon signed-rank test that ``x`` is centred ``less`` / ``greater``
    than ``value``: exact, with ties too (the conditional null of the observed mid-ranks).

    Differences of zero are dropped (Wilcoxon's convention; the test is then exact conditional on
    their number, and a cell's n is the non-zero differences); 1.0 when none is left. scipy's
    exact method assumes untied ranks: with ties its p-value is not the exact one (0.047 against
    0.0625 for five differences with two tied), so the null is counted here over the observed
    mid-ranks: each difference's sign a fair coin, W+ the sum of the positive ones' ranks.
    Differences are taken on the data's grid (:func:`on_grid`), so ``x = value`` compares equal.
    """
    d = on_grid(np.asarray(x, float) - value)
    d = d[d != 0]
    if not len(d):
        return 1.0
    doubled = np.rint(2 * stats.rankdata(np.abs(d))).astype(int)  # mid-ranks are multiples of 1/2
    observed = int(doubled[d > 0].sum())
    null = _signed_rank_counts(tuple(sorted(doubled)))
    tail = null[: observed + 1].sum() if alternative == "less" else null[observed:].sum()
    return float(min(1.0, tail))


@lru_cache(maxsize=4096)
def _signed_rank_counts(doubled: tuple[int, ...]) -> np.ndarray:
    """P(2 W+ = w) for w = 0 .. sum(doubled), each rank's sign a fair coin (subset sums)."""
    probabilities = np.zeros(sum(doubled) + 1)
    probabilities[0] = 1.0
    for rank in doubled:
        shifted = np.zeros_like(probabilities)
        shifted[rank:] = probabilities[: len(probabilities) - rank]
        probabilities = (probabilities + shifted) / 2
    return probabilities


def on_grid(x: np.ndarray) -> np.ndarray:
    """Values rounded to 10 decimals: the grid of the data (accuracies are k / n, n < 10^6), so
    that a shift or a threshold compares on it. In floats 0.6 + 0.02 > 0.62 (15% of a 1/1000 grid
    shifted by 0.02 compares spuriously so); rounded, equal values stay equal."""
    return np.round(np.asarray(x, float), 10)


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
    walsh = np.sort(on_grid((x[i] + x[j]) / 2))
    estimate = float(np.median(walsh))
    k = int(np.searchsorted(np.cumsum(signed_rank_null(len(x))), alpha, side="left"))
    if k < 1:
        return estimate, np.nan, np.nan
    return estimate, float(walsh[k - 1]), float(walsh[len(walsh) - k])


def sign_test(x: np.ndarray, alternative: str, value: float = 0.0) -> float:
    """One-sided p of the exact sign test that the median of ``x`` is ``less`` / ``greater`` than
    ``value``: the count of values on the claimed side of it, binomial with probability 1/2 under
    the null. Values at ``value`` (on the data's grid) count against the claim, so the test is
    exact whatever the distribution's shape and point masses: under "the median is at most t",
    P(X > t) <= 1/2 (dropping the ties, as the signed-rank test does, would make it liberal where
    values pile up at t). Unlike the signed-rank test it assumes no symmetry: with the median at
    the threshold of a skewed distribution the signed-rank test agreed falsely 7-12% of the time.
    """
    d = on_grid(np.asarray(x, float) - value)
    if not len(d):
        return 1.0
    hits = int(np.sum(d > 0)) if alternative == "greater" else int(np.sum(d < 0))
    return float(stats.binom.sf(hits - 1, len(d), 0.5))


def median_interval(x: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """The median of ``x`` and the exact ``1 - 2 alpha`` interval that inverts :func:`sign_test`:
    ``[x_(k), x_(n + 1 - k)]`` of the sorted values, ``k`` the largest with
    ``P(Binomial(n, 1/2) <= k - 1) <= alpha``.

    Returns
    -------
    (float, float, float)
        Median, low, high (the values' units); low and high NaN where the test cannot reach
        ``alpha`` at this n.
    """
    x = np.sort(on_grid(np.asarray(x, float)))
    if not len(x):
        return np.nan, np.nan, np.nan
    estimate = float(np.median(x))
    k = int(np.searchsorted(stats.binom.cdf(np.arange(len(x) + 1), len(x), 0.5), alpha, side="right"))
    if k < 1:
        return estimate, np.nan, np.nan
    return estimate, float(x[k - 1]), float(x[len(x) - k])


def seed_pairs(x: np.ndarray) -> np.ndarray:
    """Absolute differences of disjoint consecutive pairs of ``x`` (given in seed order):
    ``|x_1 - x_2|, |x_3 - x_4|, ...``; an odd last value is left out.

    Within a group the pairs are independent and identically distributed whatever the group's
    location, so two groups' pair differences are exchangeable exactly when the groups are equally
    spread (same distribution up to a shift): the basis of :func:`spread_pairs` (Moses 1963, "Rank
    tests of dispersion", with subsets of two). The pairing is fixed before the values are seen
    (by seed), so it cannot select a favourable split.

    Returns
    -------
    ndarray, shape (len(x) // 2,)
        In the values' units.
    """
    x = np.asarray(x, float)
    half = len(x) // 2
    return np.abs(x[0 : 2 * half : 2] - x[1 : 2 * half : 2])


def spread_pairs(a: np.ndarray, b: np.ndarray, alternative: str) -> float:
    """One-sided exact test that ``a`` is ``less`` / ``greater`` spread than ``b``: the
    Wilcoxon-Mann-Whitney test (:func:`rank_sum`, exact with ties) of the groups' seed-pair
    differences (:func:`seed_pairs`).

    Unlike Brown-Forsythe's deviations from each group's median, which are exchangeable only
    approximately (the median is estimated from the same values: at 4 vs 4 runs of skewed
    accuracies the permutation test of them agreed falsely 8% of the time at alpha 0.05), pair
    differences are exactly exchangeable under the null, so the p-value is exact at every n,
    ties, point masses (collapsed runs) and skew included. The price is power: ``n // 2`` pairs
    per group, so it decides from 8 runs against 8 (4 pairs each, p >= 1/70), where a rank test
    of runs decides from 4 against 4 (:func:`smallest_p`).

    Parameters
    ----------
    a, b : ndarray, shape (n_a,), (n_b,)
        Per-run values of each group in seed order.
    """
    return rank_sum(seed_pairs(a), seed_pairs(b), alternative)


def spread_interval(a: np.ndarray, b: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """The ratio of the groups' spreads and its exact ``1 - 2 alpha`` interval, inverting
    :func:`spread_pairs`: exp of the Hodges-Lehmann shift of the log pair differences and its
    interval (under the scale model, a's pair differences are b's times the ratio, a shift of
    the logs). Pair differences of 0 (two runs collapsed to one value) stay the smallest, tied:
    they are put at a thousandth of the smallest non-zero difference before the logs are taken.

    Returns
    -------
    (float, float, float)
        Ratio a/b, low, high (dimensionless); low and high NaN where the test cannot reach
        ``alpha`` at these sizes; NaN throughout where every pair difference is 0.
    """
    da, db = seed_pairs(a), seed_pairs(b)
    positive = np.concatenate([da, db])
    positive = positive[positive > 0]
    if not len(da) or not len(db) or not len(positive):
        return np.nan, np.nan, np.nan
    tiny = positive.min() / 1000
    shift, low, high = shift_interval(np.log(np.maximum(da, tiny)), np.log(np.maximum(db, tiny)), alpha)
    return float(np.exp(shift)), float(np.exp(low)), float(np.exp(high))


def rate_test(a: np.ndarray, b: np.ndarray, alternative: str) -> float:
    """One-sided p of Fisher's exact test that the rate of ones in ``a`` is ``less`` / ``greater``
    than in ``b`` (``a``, ``b``: 0/1 per run)."""
    a, b = np.asarray(a, int), np.asarray(b, int)
    table = [[int(a.sum()), len(a) - int(a.sum())], [int(b.sum()), len(b) - int(b.sum())]]
    return float(stats.fisher_exact(table, alternative=alternative).pvalue)


def rate_interval(a: np.ndarray, b: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """Odds ratio of ones in ``a`` against ``b`` (the conditional maximum-likelihood estimate) and
    its exact conditional ``1 - 2 alpha`` interval, each end the one-sided bound at ``alpha``.

    The interval inverts Fisher's exact test (:func:`rate_test`): both refer the table to the
    non-central hypergeometric distribution given its margins, so its low end is above 1 exactly
    where Fisher's test that a's rate is greater rejects at ``alpha`` (and its high end below 1
    where the test of less does). Newcombe's score interval of the rate difference, shown before,
    disagreed with Fisher's test in 26 tables at the recipes' sizes (0/8 vs 3/8: p = 0.10, yet
    an interval [-0.65, -0.04]). scipy's ``odds_ratio`` computes it.

    Returns
    -------
    (float, float, float)
        Odds ratio, low, high (dimensionless; 0 or inf where a count is 0 or full).
    """
    from scipy.stats.contingency import odds_ratio

    a, b = np.asarray(a, int), np.asarray(b, int)
    table = [[int(a.sum()), len(a) - int(a.sum())], [int(b.sum()), len(b) - int(b.sum())]]
    result = odds_ratio(table, kind="conditional")
    low = result.confidence_interval(1 - alpha, alternative="greater").low
    high = result.confidence_interval(1 - alpha, alternative="less").high
    return float(result.statistic), float(low), float(high)


def smallest_p(kind: str, n_a: int, n_b: int = 0) -> float:
    """The smallest one-sided p-value a claim kind's test can give with these group sizes.

    Parameters
    ----------
    kind : {"location", "mean", "spread", "rate", "equivalence", "threshold"}
        The claim kind (:mod:`robustkit.verdicts.rules`): two-group kinds are rank or permutation tests
        over the ``C(n_a + n_b, n_a)`` relabellings (Fisher's test too, at its most extreme
        table; ``spread`` over the groups' ``n // 2`` seed pairs); ``location`` and
        ``equivalence`` (Brunner-Munzel, valid when spreads differ) at least
        ``2 ** -min(n_a, n_b)``, the chance that a group's runs all fall on one side of a tight
        other group at the same median; ``threshold`` is the sign test, ``2 ** -n_a``.

    Returns
    -------
    float
        1.0 where a group is empty.
    """
    if n_a < 1 or (kind != "threshold" and n_b < 1):
        return 1.0
    if kind == "mean":  # the calibrated bootstrap-t of Welch's statistic
        return welch.smallest_p(n_a, n_b)
    if kind == "threshold":
        return 2.0**-n_a
    if kind == "spread":  # a rank test of the seed pairs (spread_pairs)
        n_a, n_b = n_a // 2, n_b // 2
        if n_a < 1 or n_b < 1:
            return 1.0
    if kind in ("location", "equivalence"):
        # the Brunner-Munzel permutation test (robustkit.measures.brunner_munzel), whose groups
        # may differ in spread: against a tight group, the n runs of a wide one at the same
        # median all land on one side of it 1 time in 2^n, the most extreme arrangement; a test
        # that rejects there errs at least that often, so it decides only where 2^-n < alpha.
        # Measured without the bound (issue #56, bench/location_size.py --floor): the worst tail
        # errs at 0.048 at 5 vs 5, 0.081 at 6 vs 6, 0.051 at 8 vs 8, 0.066 at 12 vs 12, 0.058 at
        # 18 vs 18 (3,000 or 2,000 draws, one group 10 times as wide and skewed): the floor stays
        return max(1 / math.comb(n_a + n_b, n_a), 2.0 ** -min(n_a, n_b))
    return 1 / math.comb(n_a + n_b, n_a)
