"""The exact tests and intervals verdicts are decided by (robustkit.measures.exact), against
closed forms, scipy and brute-force inversion."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from robustkit.measures import exact


@pytest.mark.parametrize("m, n", [(1, 1), (2, 3), (3, 3), (4, 6), (5, 5)])
def test_rank_sum_null_is_the_count_of_arrangements(m, n):
    """P(U = u) by enumerating every split of ranks 1..m+n."""
    counts = np.zeros(m * n + 1)
    for a in itertools.combinations(range(m + n), m):
        u = sum(r for r in a) - m * (m - 1) / 2  # rank sum minus its minimum: pairs a wins
        counts[int(u)] += 1
    assert np.allclose(exact.rank_sum_null(m, n), counts / math.comb(m + n, m))


@pytest.mark.parametrize("n", [1, 3, 5, 8])
def test_signed_rank_null_is_the_count_of_sign_patterns(n):
    counts = np.zeros(n * (n + 1) // 2 + 1)
    for signs in itertools.product([0, 1], repeat=n):
        counts[sum(r + 1 for r, s in enumerate(signs) if s)] += 1
    assert np.allclose(exact.signed_rank_null(n), counts / 2**n)


def test_p_values_match_scipy_and_the_smallest_p():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=4), rng.normal(size=5) + 1
    assert exact.rank_sum(a, b, "less") == pytest.approx(
        stats.mannwhitneyu(a, b, alternative="less", method="exact").pvalue
    )
    assert exact.rank_sum(np.array([0.0, 0.1, 0.2]), np.array([1.0, 1.1, 1.2]), "less") == pytest.approx(1 / 20)
    # Brunner-Munzel: also at least 2^-min(n_a, n_b), a wide group all on one side of a tight one
    assert exact.smallest_p("location", 3, 3) == pytest.approx(1 / 8)
    assert exact.smallest_p("location", 4, 4) == pytest.approx(1 / 16)
    assert exact.smallest_p("location", 8, 8) == pytest.approx(1 / 256)
    assert exact.smallest_p("location", 1, 3) == pytest.approx(1 / 2)
    assert exact.smallest_p("threshold", 4) == 1 / 16 and exact.smallest_p("threshold", 5) == 1 / 32
    assert exact.signed_rank(np.array([-1.0, -2, -3, -4, -5]), "less") == pytest.approx(1 / 32)
    # ties: the permutation of mid-ranks is exact too
    tied = exact.rank_sum(np.array([0.0, 0.0, 1.0]), np.array([1.0, 2.0, 2.0]), "less")
    assert 1 / 20 <= tied < 0.5


def _inverted(a, b, alpha):
    """The shifts the one-sided tests at alpha do not reject, found by brute force on a grid."""
    grid = np.linspace(-5, 5, 4001)
    kept = [
        d for d in grid if exact.rank_sum(a - d, b, "less") >= alpha and exact.rank_sum(a - d, b, "greater") >= alpha
    ]
    return min(kept), max(kept)


def test_hodges_lehmann_interval_inverts_the_rank_sum_test():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=5), rng.normal(size=6) + 0.5
    estimate, low, high = exact.shift_interval(a, b, 0.05)
    assert estimate == pytest.approx(np.median((a[:, None] - b[None, :]).ravel()))
    brute_low, brute_high = _inverted(a, b, 0.05)
    assert low == pytest.approx(brute_low, abs=3e-3) and high == pytest.approx(brute_high, abs=3e-3)
    # where the test cannot reach alpha there is no interval
    assert np.isnan(exact.shift_interval(a[:3], b[:3], 0.05)[1])


def test_one_sample_interval_inverts_the_signed_rank_test():
    rng = np.random.default_rng(4)
    x = rng.normal(size=7) + 1
    estimate, low, high = exact.centre_interval(x, 0.05)
    grid = np.linspace(-3, 5, 4001)
    kept = [v for v in grid if exact.signed_rank(x, "less", v) >= 0.05 and exact.signed_rank(x, "greater", v) >= 0.05]
    assert low == pytest.approx(min(kept), abs=3e-3) and high == pytest.approx(max(kept), abs=3e-3)
    assert np.isnan(exact.centre_interval(x[:4], 0.05)[1])


def test_spread_pairs_are_exact_and_directional():
    """Seed pairs (x1, x2), (x3, x4), ...: 8 runs are 4 pairs, ranked by their differences."""
    narrow = np.array([0.01, -0.01, 0.02, -0.02, 0.0, 0.03, 0.1, 0.09])
    wide = np.array([1.0, -1.0, 2.0, -2.0, 0.0, 3.0, 5.0, -4.0])
    assert np.allclose(exact.seed_pairs(narrow[:5]), [0.02, 0.04])  # the odd last run is left out
    assert exact.spread_pairs(narrow, wide, "less") == pytest.approx(1 / 70)  # the most extreme of C(8, 4)
    assert exact.spread_pairs(narrow, wide, "greater") == pytest.approx(1.0)
    # location does not matter: a shifted group has the same pair differences
    assert exact.spread_pairs(narrow + 100, wide, "less") == pytest.approx(1 / 70)
    ratio, low, high = exact.spread_interval(narrow, wide, 0.05)
    assert low <= ratio <= high < 1


def test_spread_pairs_hold_their_size_on_skewed_tied_data():
    """The reviewer's case: skewed accuracies on a 1/1066 grid with a point mass at the majority
    score (collapsed runs kept as data), 4 vs 4 pairs: false agrees at most alpha (exact)."""
    rng = np.random.default_rng(7)
    draws, hits = 2000, 0
    for _ in range(draws):
        runs = np.round(np.where(rng.random(16) < 0.3, 0.574, 0.80 - rng.gamma(1.5, 0.03, 16)) * 1066) / 1066
        hits += exact.spread_pairs(runs[:8], runs[8:], "less") < 0.05
    assert hits / draws <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / draws)


def test_signed_rank_is_exact_with_ties():
    """scipy's exact method assumes untied ranks; the null here is counted over the mid-ranks."""
    import itertools

    x = np.array([-1.0, -2.0, -2.0, -3.0, 1.0, -4.0])
    ranks = np.array([1.5, 3.5, 3.5, 5, 1.5, 6])  # mid-ranks of |x|
    observed = 1.5  # the positive difference's rank
    sums = [sum(r for r, s in zip(ranks, signs) if s) for signs in itertools.product([0, 1], repeat=6)]
    assert exact.signed_rank(x, "less") == pytest.approx(np.mean(np.array(sums) <= observed + 1e-9))
    # zeros are dropped (Wilcoxon's rule): [0, -1, -2, -3, -4, -5] is the 5 non-zero ones
    assert exact.signed_rank(np.array([0.0, -1, -2, -3, -4, -5]), "less") == pytest.approx(1 / 32)


def test_rate_interval_inverts_fishers_test():
    """The conditional odds ratio's exact interval excludes 1 exactly where Fisher's one-sided
    test rejects, at every table of the recipes' sizes (Newcombe's disagreed in 26)."""
    for n_a, n_b in ((8, 8), (5, 7)):
        for k_a in range(n_a + 1):
            for k_b in range(n_b + 1):
                a, b = np.r_[np.ones(k_a), np.zeros(n_a - k_a)], np.r_[np.ones(k_b), np.zeros(n_b - k_b)]
                _, low, high = exact.rate_interval(a, b, 0.05)
                assert (low > 1) == (exact.rate_test(a, b, "greater") < 0.05)
                assert (high < 1) == (exact.rate_test(a, b, "less") < 0.05)
