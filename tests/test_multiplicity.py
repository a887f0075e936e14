"""Tarone's family for discrete tests over cells (robustkit.measures.multiplicity), and the
family-wise error rate of Holm over it under the null, simulated with the exact rank test."""

import numpy as np
import pytest

from robustkit.measures import exact
from robustkit.measures.multiplicity import decidable_cells, tarone_family


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
