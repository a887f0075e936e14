"""The decision rules checked by simulation (issue #26): for every claim kind at the group sizes
of every recipe at both scales, synthetic runs drawn from known distributions give a false
*agrees* under the null at most at rate alpha, and a false *contradicts* when the claim holds
at most at rate alpha (each within Monte-Carlo error)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robustkit import claim as claims
from robustkit.decidability import plan
from robustkit.recipes import list_recipes, load_recipe

ALPHA = 0.05
DRAWS = 300
LARGE_DRAWS = 100  # groups of 50 runs and more (paper-scale pooled cells): slower tests, larger error


def _bound(draws: int) -> float:
    return ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / draws)  # alpha + 3 Monte-Carlo standard errors


BOUND = _bound(DRAWS)
MARGIN = 1.0  # equivalence margin, in SD


def _sizes() -> list[tuple[str, int, int]]:
    table = plan([load_recipe(name) for name in list_recipes()])
    table = table[table["judged"] & table["decidable"]]
    return sorted({(k, int(a), int(b)) for k, a, b in zip(table["compare"], table["n_a"], table["n_b"])})


SIZES = _sizes()


def _claim(kind: str) -> claims.Claim:
    table = {"id": "sim", "says": "simulated", "statistic": "scores.score", "compare": kind, "a": "a", "b": "b",
             "direction": "less"}
    if kind == "equivalence":
        table = {**table, "value": MARGIN, "direction": None}
    if kind == "threshold":
        table = {**table, "value": 0.0, "b": None}
    table = {k: v for k, v in table.items() if v is not None}
    return claims.Claim.from_table(table, "simulation")


def _draw(kind: str, n_a: int, n_b: int, rng, holds: bool) -> tuple[np.ndarray, np.ndarray]:
    """Group a and b; ``holds``: the claim is true (a below b / less spread / fewer failures /
    within the margin), else the null boundary."""
    if kind == "rate":
        return (rng.random(n_a) < (0.1 if holds else 0.4)).astype(float), (rng.random(n_b) < 0.4).astype(float)
    if kind == "spread":
        return rng.normal(size=n_a) * (0.3 if holds else 1.0), rng.normal(size=n_b)
    if kind == "equivalence":
        return rng.normal(size=n_a) + (0.0 if holds else -MARGIN), rng.normal(size=n_b)
    if kind == "threshold":
        return rng.normal(size=n_a) - (1.0 if holds else 0.0), np.array([])
    return rng.normal(size=n_a) - (1.0 if holds else 0.0), rng.normal(size=n_b)


def _verdict(claim: claims.Claim, a: np.ndarray, b: np.ndarray) -> str:
    result = claims._cell(claim, a, b)
    claims._decide(claim, result)
    return result["verdict"]


@pytest.mark.parametrize("kind, n_a, n_b", SIZES, ids=[f"{k}-{a}v{b}" for k, a, b in SIZES])
def test_false_verdicts_stay_within_alpha(kind, n_a, n_b):
    claim = _claim(kind)
    rng = np.random.default_rng(n_a * 100 + n_b)
    draws = LARGE_DRAWS if max(n_a, n_b) >= 50 else DRAWS
    null = [_verdict(claim, *_draw(kind, n_a, n_b, rng, holds=False)) for _ in range(draws)]
    holds = [_verdict(claim, *_draw(kind, n_a, n_b, rng, holds=True)) for _ in range(draws)]
    false_agrees = null.count(claims.AGREES) / draws
    false_contradicts = holds.count(claims.CONTRADICTS) / draws
    bound = _bound(draws)
    print(f"{kind} {n_a} vs {n_b}: false agrees {false_agrees:.3f}, false contradicts {false_contradicts:.3f} ({draws} draws)")
    assert false_agrees <= bound, f"{kind} {n_a} vs {n_b}: false agrees {false_agrees:.3f} > {bound:.3f}"
    assert false_contradicts <= bound, f"{kind} {n_a} vs {n_b}: false contradicts {false_contradicts:.3f}"


def test_the_simulation_can_fail():
    """A rule that ignores the test (agrees whenever the sample shows the claimed side) is caught."""
    rng = np.random.default_rng(0)
    naive = [np.median(a) < np.median(b) for a, b in (_draw("location", 5, 5, rng, holds=False) for _ in range(DRAWS))]
    assert sum(naive) / DRAWS > BOUND
    assert SIZES and {k for k, _, _ in SIZES} == {"location", "spread", "rate", "equivalence", "threshold"}
