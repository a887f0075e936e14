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
    assert np.allclose(exact.signed_rank_null(n), counts / 2 ** n)


def test_p_values_match_scipy_and_the_smallest_p():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=4), rng.normal(size=5) + 1
    assert exact.rank_sum(a, b, "less") == pytest.approx(stats.mannwhitneyu(a, b, alternative="less", method="exact").pvalue)
    assert exact.rank_sum(np.array([0.0, 0.1, 0.2]), np.array([1.0, 1.1, 1.2]), "less") == pytest.approx(1 / 20)
    assert exact.smallest_p("location", 3, 3) == pytest.approx(1 / 20) and exact.smallest_p("location", 4, 4) == pytest.approx(1 / 70)
    assert exact.smallest_p("threshold", 4) == 1 / 16 and exact.smallest_p("threshold", 5) == 1 / 32
    assert exact.signed_rank(np.array([-1.0, -2, -3, -4, -5]), "less") == pytest.approx(1 / 32)
    # ties: the permutation of mid-ranks is exact too
    tied = exact.rank_sum(np.array([0.0, 0.0, 1.0]), np.array([1.0, 2.0, 2.0]), "less")
    assert 1 / 20 <= tied < 0.5


def _inverted(a, b, alpha):
    """The shifts the one-sided tests at alpha do not reject, found by brute force on a grid."""
    grid = np.linspace(-5, 5, 4001)
    kept = [d for d in grid if exact.rank_sum(a - d, b, "less") >= alpha and exact.rank_sum(a - d, b, "greater") >= alpha]
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


def test_spread_permutation_is_exact_and_directional():
    narrow, wide = np.array([0.01, -0.01, 0.02, -0.02]), np.array([1.0, -1.0, 2.0, -2.0])
    gap, p = exact.spread_permutation(narrow, wide, "less")
    assert gap < 0 and p == pytest.approx(1 / 70)  # the most extreme of C(8, 4) relabellings
    assert exact.spread_permutation(narrow, wide, "greater")[1] == pytest.approx(1.0)


def test_rate_interval_is_newcombes():
    """Newcombe 1998 table II, example (a): 56/70 vs 48/80, 95% interval 0.0524 to 0.3339."""
    a, b = np.r_[np.ones(56), np.zeros(14)], np.r_[np.ones(48), np.zeros(32)]
    difference, low, high = exact.rate_interval(a, b, 0.025)
    assert difference == pytest.approx(0.2) and low == pytest.approx(0.0524, abs=1e-4) and high == pytest.approx(0.3339, abs=1e-4)
