"""The Brunner-Munzel test of two groups whose spreads and shapes may differ, by permutation.

The Brunner-Munzel statistic studentizes the estimated relative effect by its own variance, so
its null is the relative effect alone, ``p = P(A > B) + P(A = B) / 2 = 1/2`` for a run A of
group a and a run B of group b, whatever their spreads (Brunner & Munzel 2000); the permutation
distribution of that statistic is exact when the groups are exchangeable and asymptotically
exact when they are not (Neubert & Brunner 2007). Shifted by ``shift``, the test is of
``p(A - shift, B) = 1/2``: inverting it gives an interval for the median difference, whose
estimate is the Hodges-Lehmann one; a verdict, its interval and a floor test are one test.

Null distribution: every relabelling up to :data:`EXACT_LIMIT` runs (8 vs 8); :data:`RESAMPLES`
seeded random relabellings up to :data:`RESAMPLED_LIMIT` runs (p = (1 + k) / (1 + R)); above,
the t approximation with Satterthwaite's degrees of freedom. Inputs are 1-D arrays of per-run
values (shape ``(n,)``, the values' units).

Why not the rank-sum test (7.8% false agreement at 8 vs 8 runs under unequal spread) and why
written by hand rather than with scipy: ``docs/verdicts.md``, "robustkit/measures/brunner_munzel.py".
"""

from __future__ import annotations

import math
from functools import lru_cache
from itertools import combinations

import numpy as np
from scipy import stats

from robustkit.measures.exact import on_grid, smallest_p

__all__ = ["difference_interval", "relative_effect", "tails", "test"]

EXACT_LIMIT = 20_000  # relabellings counted exactly (8 vs 8: 12,870)
RESAMPLES = 4_999
RESAMPLED_LIMIT = 40  # runs in both groups; above, the t approximation
SEED = 0  # the resampled relabellings are fixed: the same runs give the same p


def relative_effect(a: np.ndarray, b: np.ndarray) -> float:
    """P(A > B) + P(A = B) / 2 over the pairs of a run of ``a`` and one of ``b`` (0 to 1)."""
    a, b = on_grid(a), on_grid(b)
    if not len(a) or not len(b):
        return np.nan
    return float(((a[:, None] > b[None, :]) + 0.5 * (a[:, None] == b[None, :])).mean())


@lru_cache(maxsize=64)
def _relabellings(total: int, m: int) -> np.ndarray:
    """Group-a memberships to compare with, shape (R, total), bool: every one of the C(total, m)
    when they are at most :data:`EXACT_LIMIT`, else the observed one and :data:`RESAMPLES`
    seeded random ones."""
    if math.comb(total, m) <= EXACT_LIMIT:
        chosen = np.array(list(combinations(range(total), m)), dtype=int).reshape(-1, m)
    else:
        rng = np.random.default_rng(SEED)
        chosen = np.argsort(rng.random((RESAMPLES, total)), axis=1)[:, :m]
        chosen = np.vstack([np.arange(m)[None, :], chosen])
    member = np.zeros((len(chosen), total), bool)
    np.put_along_axis(member, chosen, True, axis=1)
    return member


def _statistics(pooled: np.ndarray, member: np.ndarray) -> np.ndarray:
    """The studentized statistic (p - 1/2) / se of each membership row (a: True).

    A zero variance (the groups separate completely, or every run ties) gives +-inf by the sign
    of p - 1/2, 0 at p = 1/2.
    """
    centred, part_a, part_b = _parts(pooled, member)
    se = np.sqrt(part_a + part_b)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, centred / np.where(se > 0, se, 1.0), np.sign(centred) * np.inf)
    return np.where((se == 0) & (np.abs(centred) < 1e-12), 0.0, t)


def _parts(pooled: np.ndarray, member: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """p - 1/2 and the two parts of p's variance, per membership row (a: True).

    Placements: a run's count of the other group's runs below it (ties a half); p is a's mean
    placement over n_b, and its variance S_a^2 / (n_a n_b^2) + S_b^2 / (n_b n_a^2) from the
    placements' sample variances (Brunner & Munzel 2000): the two terms are returned apart, for
    Satterthwaite's degrees of freedom.
    """
    # below[j, i]: run j below run i (a half for ties), built in this layout: a transposed view
    # made the products below 200 times slower (a strided operand, 11 ms vs 0.06 ms at 7 vs 7)
    below = (pooled[None, :] < pooled[:, None]).T + 0.5 * (pooled[None, :] == pooled[:, None])
    below = np.ascontiguousarray(below)
    in_a = member.astype(float)
    m = int(member[0].sum())
    n = len(pooled) - m
    among_b = (1.0 - in_a) @ below  # each run's placement among group b (used for a's runs)
    among_a = in_a @ below  # and among group a (used for b's runs)
    mean_a = (among_b * in_a).sum(axis=1) / m
    mean_b = (among_a * (1.0 - in_a)).sum(axis=1) / n
    var_a = (((among_b - mean_a[:, None]) ** 2) * in_a).sum(axis=1) / max(m - 1, 1)
    var_b = (((among_a - mean_b[:, None]) ** 2) * (1.0 - in_a)).sum(axis=1) / max(n - 1, 1)
    return mean_a / n - 0.5, var_a / (m * n * n), var_b / (n * m * m)


def test(a: np.ndarray, b: np.ndarray, alternative: str, shift: float = 0.0) -> float:
    """One-sided p that ``a - shift`` tends to be ``less`` / ``greater`` than ``b`` (the relative
    effect below / above 1/2), by the studentized permutation Brunner-Munzel test, bounded below
    by the sign test that holds where one group is a point (:func:`_point_group_bound`).

    Parameters
    ----------
    a, b : ndarray, shape (n_a,), (n_b,)
        Per-run values; NaN are not allowed (a caller leaves undefined values out or places them).
    shift : float
        Tested median difference (the values' units): 0 for "a and b alike", a margin for
        equivalence, a floor for a minimum-effect test.

    Returns
    -------
    float
        The p-value; 1.0 where a group is empty.
    """
    greater, less = tails(a, b, shift)
    return greater if alternative == "greater" else less


def tails(a: np.ndarray, b: np.ndarray, shift: float = 0.0) -> tuple[float, float]:
    """Both one-sided p-values of :func:`test` (``greater``, ``less``): each the larger of the
    studentized permutation test's and the point-group bound's (:func:`_point_group_bound`)."""
    a, b = on_grid(np.asarray(a, float) - shift), on_grid(b)
    m, n = len(a), len(b)
    if not m or not n:
        return 1.0, 1.0
    greater, less = _permutation_tails(a, b)
    return max(greater, _point_group_bound(a, b)), max(less, _point_group_bound(-a, -b))


def _point_group_bound(a: np.ndarray, b: np.ndarray) -> float:
    """The p of "a above b" were one group a point at its median: the sign test of the other
    group's runs against it, the larger of the two ways round.

    Where one group is tight and the other wide at the same median, the wide group's runs fall
    above the tight one like coin flips, and a permutation test rejects arrangements the coin
    flips make often: at 6 vs 6 with one group 10 times as wide and skewed, the studentized
    permutation test alone agreed falsely 8.0% of the time (3,000 draws). Under that null this
    bound is the exact sign test (ties with the median count against the claim); under
    exchangeable groups the permutation test is exact; taking the larger p keeps each valid where
    it is, at the price of power (the bound needs about 7 of 8 runs above the other's median).

    Measured without it (issue #56, ``bench/location_size.py --floor``; the simulation's null,
    one group 10 times as wide, skewed, 1/1000 grid; worst tail, 95% Clopper-Pearson bounds):
    5 vs 5 0.048 [0.041, 0.055] (3,000 draws), 6 vs 6 0.081 [0.073, 0.090] (3,000), 8 vs 8
    0.051 [0.045, 0.059] (3,000), 12 vs 12 0.066 [0.058, 0.074] (3,000; through
    :func:`robustkit.verdicts.rules.judge` 0.066 of 1,000), 18 vs 18 0.058 [0.050, 0.067]
    (2,000). The permutation test alone is liberal at 6 and from 12 runs, and at alpha without
    margin at 5 and 8, so the bound stays (``docs/verdicts.md``).
    """
    above = int(np.sum(a > np.median(b)))  # a's runs above a point b
    below = int(np.sum(b < np.median(a)))  # b's runs below a point a
    return float(max(stats.binom.sf(above - 1, len(a), 0.5), stats.binom.sf(below - 1, len(b), 0.5)))


def _permutation_tails(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Both one-sided p of the studentized permutation Brunner-Munzel test (its t approximation
    above :data:`RESAMPLED_LIMIT` runs)."""
    m, n = len(a), len(b)
    pooled = np.concatenate([a, b])
    if m + n > RESAMPLED_LIMIT and min(m, n) > 1:
        return _t_approximation(pooled, m, 1.0), _t_approximation(pooled, m, -1.0)
    member = _relabellings(m + n, m)
    t_all = _statistics(pooled, member)
    t_observed = t_all[0]  # row 0 is the observed labelling (the first combination, or put first)
    tolerance = 1e-9 * (max(1.0, abs(t_observed)) if np.isfinite(t_observed) else 1.0)  # float sums
    # every relabelling counted, or the observed one (row 0) and R resampled: (1 + k) / (1 + R)
    greater = int(np.sum(t_all >= t_observed - tolerance)) / len(member)
    less = int(np.sum(t_all <= t_observed + tolerance)) / len(member)
    return float(min(1.0, greater)), float(min(1.0, less))


def _t_approximation(pooled: np.ndarray, m: int, sign: float) -> float:
    """Brunner and Munzel's t approximation with Satterthwaite's degrees of freedom."""
    n = len(pooled) - m
    member = np.zeros((1, m + n), bool)
    member[0, :m] = True
    t = sign * _statistics(pooled, member)[0]
    if not np.isfinite(t):
        return 0.0 if t > 0 else 1.0
    _, (a_part,), (b_part,) = _parts(pooled, member)
    total = a_part + b_part
    df = total**2 / (a_part**2 / (m - 1) + b_part**2 / (n - 1)) if total > 0 else m + n - 2
    return float(stats.t.sf(t, max(df, 1.0)))


def difference_interval(a: np.ndarray, b: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """The median difference of a run of ``a`` and one of ``b`` (Hodges-Lehmann: the median of the
    pairwise differences) and its ``1 - 2 alpha`` interval, each end the one-sided bound at
    ``alpha`` that inverts :func:`test`: the shifts it does not reject either way.

    The bounds are searched among the pairwise differences and the midpoints between them (the
    test changes only at a difference), by bisection: the test's p is monotone in the shift but
    for the studentization's small wobbles, which move a bound by at most one step.

    Returns
    -------
    (float, float, float)
        Estimate, low, high (the values' units); low / high NaN where the test cannot decide
        at ``alpha`` at these sizes (:func:`robustkit.measures.exact.smallest_p`: at least
        ``2 ** -min(n_a, n_b)`` when spreads differ), or rejects no shift that way.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    pairwise = on_grid((a[:, None] - b[None, :]).ravel())
    if not len(pairwise):
        return np.nan, np.nan, np.nan
    estimate = float(np.median(pairwise))
    if smallest_p("location", len(a), len(b)) >= alpha:  # where the test decides (its reach)
        return estimate, np.nan, np.nan
    # the test changes only at the differences: each difference and each step between them
    differences = np.unique(pairwise)
    gap = np.diff(differences).min() if len(differences) > 1 else 1.0
    candidates = np.unique(
        on_grid(np.r_[differences, (differences[1:] + differences[:-1]) / 2, differences[[0, -1]] + [-gap, gap]])
    )

    def bound(alternative: str) -> float:
        # the first shift, from the side this alternative rejects, that it does not reject: the
        # interval holds no rejected candidate, so it excludes 0 exactly where the test does
        ordered = candidates if alternative == "greater" else candidates[::-1]
        rejects = lambda index: test(a, b, alternative, ordered[index]) < alpha  # noqa: E731
        if not rejects(0):
            return np.nan
        low, high = 0, len(ordered) - 1
        if rejects(high):
            return np.nan
        while high - low > 1:  # ordered[low] rejects, ordered[high] does not
            middle = (low + high) // 2
            low, high = (middle, high) if rejects(middle) else (low, middle)
        return float(ordered[high])

    return estimate, bound("greater"), bound("less")
