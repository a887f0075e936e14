"""The mean test (robustkit.measures.welch): the bootstrap-t of Welch's statistic, each one-sided
p doubled, deciding from 8 runs per group. Issue #55: claims about means were tested as
P(a > b), which at equal means with skew agrees falsely more often the more runs there are
(0.087 at 5 vs 5, 0.28 at 18 vs 18)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from robustkit.measures import brunner_munzel, welch
from robustkit.verdicts import simulation


def _skewed(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    """The simulation's run shape (a long tail of weak seeds), mean 0, SD ``scale``."""
    return -(rng.gamma(2.0, 1 / math.sqrt(2), n) - math.sqrt(2)) * scale


def _worst_rates(test, n: int, draws: int, seed: int) -> float:
    """The worst one-sided false rejection at alpha = 0.05 of ``test(a, b) -> (greater, less)``
    at equal means, a tight and b 10 times as wide and skewed, and the reverse."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    for scale_a, scale_b in ((0.3, 3.0), (3.0, 0.3)):
        hits = np.zeros(2)
        for _ in range(draws):
            hits += np.array(test(_skewed(rng, n, scale_a), _skewed(rng, n, scale_b))) < 0.05
        worst = max(worst, *(hits / draws))
    return worst


@pytest.mark.parametrize("n", [8, 12, 22])
def test_the_mean_test_holds_alpha_at_equal_means_under_skew(n):
    draws = 600
    rate = _worst_rates(welch.tails, n, draws, seed=n)
    print(f"{n} vs {n}: worst false rejection {rate:.3f} ({draws} draws per side)")
    assert rate <= simulation.bound(0.05, draws), rate


def test_welch_t_and_the_location_test_err_there():
    """Why neither Welch's t nor Brunner-Munzel decides a claim about means: at equal means,
    18 vs 18, Welch's t errs on the skewed side and Brunner-Munzel (whose null is P(a > b) = 1/2,
    not equal means) errs far more."""
    draws = 600

    def welch_t(a, b):
        return tuple(stats.ttest_ind(a, b, equal_var=False, alternative=side).pvalue for side in ("greater", "less"))

    assert _worst_rates(welch_t, 18, draws, seed=1) > simulation.bound(0.05, draws)
    assert _worst_rates(brunner_munzel.tails, 18, 200, seed=2) > 0.1


def test_below_its_runs_it_does_not_decide_and_its_interval_inverts_it():
    rng = np.random.default_rng(0)
    assert welch.tails(rng.normal(1, 0.1, 7), rng.normal(0, 0.1, 7)) == (1.0, 1.0)
    assert welch.smallest_p(7, 8) == 1.0 and welch.smallest_p(8, 8) < 0.001
    a, b = rng.normal(0.3, 1, 12), rng.normal(0, 1, 12)
    estimate, low, high = welch.difference_interval(a, b, 0.05)
    assert estimate == pytest.approx(a.mean() - b.mean()) and low < estimate < high
    # each end the one-sided bound at 0.05: a shift just inside is not rejected, just outside is
    assert welch.tails(a, b, shift=low + 0.02)[0] >= 0.05 > welch.tails(a, b, shift=low - 0.05)[0]
    assert welch.tails(a, b, shift=high - 0.02)[1] >= 0.05 > welch.tails(a, b, shift=high + 0.05)[1]
    far = welch.tails(rng.normal(1, 0.1, 8), rng.normal(0, 0.1, 8))
    assert far[0] < 0.01 and far[1] == 1.0
