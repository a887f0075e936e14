"""Tarone's family for discrete tests over cells (robustkit.measures.multiplicity), and the
family-wise error rate of Holm over it under the null, simulated with the exact rank test."""

import numpy as np
import pytest

from robustkit.measures import exact
from robustkit.measures.multiplicity import decidable_cells, family_test, tarone_family


def test_tarone_family():
    assert tarone_family([1 / 70] * 7, 0.05) == 4 and not any(decidable_cells([1 / 70] * 7, 0.05))
    assert tarone_family([1 / 252] * 7, 0.05) == 7 and all(decidable_cells([1 / 252] * 7, 0.05))
    assert tarone_family([1 / 252] * 13, 0.05) == 13 and not any(decidable_cells([1 / 252] * 13, 0.05))
    assert decidable_cells([0.001, 0.5, 0.5], 0.05) == [True, False, False]  # the 0.5 cells never count
    assert tarone_family([], 0.05) == 1


@pytest.mark.parametrize("sizes", [[(5, 5)] * 7, [(8, 8), (8, 8), (2, 2), (4, 3)]])
def test_holm_over_the_family_keeps_the_family_wise_error_rate(sizes):
    """Under the null (every cell's groups from one distribution), the chance that Holm over
    Tarone's testable cells rejects any cell stays at most alpha."""
    alpha, draws, rng = 0.05, 2000, np.random.default_rng(1)
    keep = decidable_cells([exact.smallest_p("location", m, n) for m, n in sizes], alpha)
    tested = [size for size, k in zip(sizes, keep) if k]
    false = 0
    for _ in range(draws):
        ps = sorted(exact.rank_sum(rng.standard_normal(m), rng.standard_normal(n), "greater") for m, n in tested)
        false += bool(ps) and ps[0] * len(ps) < alpha  # Holm rejects something iff its first step does
    assert false / draws <= alpha + 3 * np.sqrt(alpha * (1 - alpha) / draws)


def test_family_test_is_benjamini_yekutieli_over_tarones_claims():
    """Benjamini-Yekutieli over the claims Tarone's rule keeps (sizes alone): a claim whose
    smallest p cannot reach alpha / K is out of m and gets no adjusted p."""
    from scipy.stats import false_discovery_control

    p = [0.001, 0.02, 0.3, 0.01, np.nan]
    smallest = [1e-4, 1e-4, 1e-4, 0.03, np.nan]  # K = 3: the 0.03 claim (and the untestable one) are out
    tested, adjusted = family_test(p, smallest, 0.05)
    assert tested.tolist() == [True, True, True, False, False]
    assert np.allclose(adjusted[:3], false_discovery_control([0.001, 0.02, 0.3], method="by"))
    assert np.isnan(adjusted[3:]).all()
    # the demo unit: 50 claims whose smallest p is 0.0119 can never pass; none is in m
    tested, adjusted = family_test([0.0119] * 50, [0.0119] * 50, 0.05)
    assert not tested.any() and np.isnan(adjusted).all()
    assert family_test([], [], 0.05)[0].shape == (0,)
    # Tarone at Benjamini-Yekutieli's level alpha / c_K: two claims at 5 runs (p >= 1/32) can both
    # pass (1/32 x 2 / 2 x 1.5 = 0.047), where Bonferroni's alpha / 2 = 0.025 would leave them out;
    # three cannot (0.05 / 1.83 = 0.027 < 1/32)
    tested, adjusted = family_test([1 / 32] * 2, [1 / 32] * 2, 0.05)
    assert tested.all() and np.allclose(adjusted, 1 / 32 * 1.5) and (adjusted <= 0.05).all()
    assert not family_test([1 / 32] * 3, [1 / 32] * 3, 0.05)[0].any()
