"""The plan of a claim before any run exists (robustkit.decidability): the power it prints is the
power of the test that is run."""

from __future__ import annotations

import numpy as np
import pytest

from robustkit import decidability
from robustkit.measures import exact


@pytest.mark.parametrize("n_a, n_b", [(5, 5), (10, 10)])  # every relabelling; 20,000 drawn ones
def test_spread_power_is_the_rate_at_which_the_claims_test_agrees(n_a, n_b):
    """The same draws, tested one by one by the test claims run (exact.spread_permutation, its
    relabellings), agree exactly as often as the power says."""
    simulations, ratio = 60, 0.4
    rng = np.random.default_rng(decidability.SEED)
    a = rng.standard_normal((simulations, n_a)) * ratio
    b = rng.standard_normal((simulations, n_b))
    agrees = np.mean([exact.spread_permutation(x, y, "less")[1] < 0.05 for x, y in zip(a, b)])
    assert decidability._spread_power(n_a, n_b, ratio, 0.05, simulations) == agrees
    assert 0 < agrees < 1  # a comparison that can fail either way


def test_spread_permutations_hold_bounded_memory(monkeypatch):
    """Chunked over the rows (CHUNK relabelled statistics at a time), with the same p-values."""
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((7, 6)), rng.standard_normal((7, 6))
    whole = exact.spread_permutations(a, b, "greater")
    monkeypatch.setattr(exact, "CHUNK", len(exact.relabellings(6, 6)) * 2)  # 2 rows per chunk
    assert all(np.array_equal(x, y) for x, y in zip(whole, exact.spread_permutations(a, b, "greater")))
