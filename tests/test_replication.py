"""The replication reading (robustkit.verdicts.replication): its false readings, simulated at or
below alpha on normal and skewed runs; d33 as Simonsohn (2015) defines it; the reading and what
would say in every output (claims table rows)."""

import numpy as np
import pandas as pd
import pytest
from observation_frames import runs_frame
from scipy import stats

from robustkit.verdicts import replication
from robustkit.verdicts.replication import (
    CONSISTENT,
    IMPRECISE,
    OPPOSITE,
    SMALLER,
    SMALLER_D33,
    d33,
    our_effect,
    reading,
    runs_to_say,
)
from robustkit.verdicts.rules import judge
from robustkit.verdicts.spec import Claim
from robustkit.verdicts.tally import with_reading

ALPHA = 0.05
REFERENCE = 0.8  # the paper's effect in the simulations: SD (a spread's: log SD ratio)


def _claim(**changes) -> Claim:
    table = {
        "id": "c",
        "says": "adapters score higher (§2)",
        "statistic": "scores.score",
        "compare": "location",
        "a": "houlsby",
        "b": "full",
        "direction": "greater",
        **changes,
    }
    return Claim.from_table(table, "test")


def _runs(rng: np.random.Generator, shape: str, size: tuple) -> np.ndarray:
    """Per-run values of mean 0 and SD 1: normal, or skewed to the left as accuracies with some
    weak seeds (a negated lognormal, sigma 0.5: skewness -1.75)."""
    if shape == "normal":
        return rng.standard_normal(size)
    sigma = 0.5
    x = -rng.lognormal(0.0, sigma, size)
    mean, sd = -np.exp(sigma**2 / 2), np.sqrt((np.exp(sigma**2) - 1) * np.exp(sigma**2))
    return (x - mean) / sd


def rates(kind: str, shape: str, n: int, truth: float, draws: int, seed: int = 0) -> dict[str, float]:
    """The share of each reading over ``draws`` simulated n vs n cells whose true effect in the
    claimed direction is ``truth`` (SD; spread: log SD ratio), the paper's effect REFERENCE."""
    rng = np.random.default_rng(seed)
    claim = {
        "location": _claim(),
        "spread": _claim(compare="spread", direction="less"),
    }[kind]
    said = []
    for _ in range(draws):
        a, b = _runs(rng, shape, n), _runs(rng, shape, n)
        if kind == "location":
            a = a + truth
        else:  # a less spread than b by the log ratio truth
            a = a * np.exp(-truth)
        _, low, high = our_effect(claim, a, b)
        said.append(reading(low, high, REFERENCE))
    counts = pd.Series(said).value_counts() / draws
    return {r: float(counts.get(r, 0.0)) for r in (CONSISTENT, SMALLER, OPPOSITE, IMPRECISE)}


def _bound(draws: int) -> float:
    """alpha plus two Monte-Carlo standard errors at alpha."""
    return ALPHA + 2 * np.sqrt(ALPHA * (1 - ALPHA) / draws)


DRAWS = 400


@pytest.mark.parametrize("shape", ["normal", "skewed"])
def test_false_readings_at_or_below_alpha_and_some_power_at_cpu_n(shape):
    """12 vs 12 runs: 'consistent' when the true effect is 0 and 'smaller' when it is the
    paper's, each at or below alpha + 2 Monte-Carlo SE; 'smaller' when it is 0 and 'consistent'
    when it is the paper's, often (the reading can say both at a CPU scale's n)."""
    null = rates("location", shape, 12, 0.0, DRAWS)
    paper = rates("location", shape, 12, REFERENCE, DRAWS, seed=1)
    assert null[CONSISTENT] <= _bound(DRAWS) and null[OPPOSITE] <= _bound(DRAWS), null
    assert paper[SMALLER] <= _bound(DRAWS), paper
    assert null[SMALLER] > 0.4 and paper[CONSISTENT] > 0.4, (null, paper)


@pytest.mark.slow
@pytest.mark.parametrize("n", [5, 12, 18])
@pytest.mark.parametrize("shape", ["normal", "skewed"])
@pytest.mark.parametrize("kind", ["location", "spread"])
def test_false_readings_at_or_below_alpha_everywhere(kind, shape, n):
    """Every kind with a reading, 5 vs 5, 12 vs 12 and 18 vs 18 runs (thresholds have none:
    replication.WHY_NOT, measured below)."""
    null = rates(kind, shape, n, 0.0, DRAWS, seed=2)
    paper = rates(kind, shape, n, REFERENCE, DRAWS, seed=3)
    assert null[CONSISTENT] <= _bound(DRAWS) and paper[SMALLER] <= _bound(DRAWS), (null, paper)
    if n == 18:
        assert null[SMALLER] > 0.3 and paper[CONSISTENT] > 0.3, (null, paper)


def test_d33_is_simonsohns():
    """Simonsohn (2015): with n = 20 per cell, d33 = 0.49; and the two-sample t test at d33
    rejects (two-sided, 0.05) a third of the time, simulated by scipy's t test."""
    assert d33("location", 20) == pytest.approx(0.49, abs=0.01)
    rng = np.random.default_rng(0)
    n, draws = 10, 20000
    a = rng.standard_normal((draws, n)) + d33("location", n)
    p = stats.ttest_ind(a, rng.standard_normal((draws, n)), axis=1).pvalue
    assert np.mean(p < 0.05) == pytest.approx(1 / 3, abs=0.015)
    one = stats.ttest_1samp(rng.standard_normal((draws, n)) + d33("threshold", n), 0.0, axis=1).pvalue
    assert np.mean(one < 0.05) == pytest.approx(1 / 3, abs=0.015)
    assert d33("spread", 10) > 0 and np.isnan(d33("location", 1))


def test_the_runs_that_would_say_leave_little_imprecise():
    """At runs_to_say's n the interval is about as narrow as the reference: rarely 'too
    imprecise to say' when the true effect is 0 or the paper's."""
    n = runs_to_say("location", REFERENCE, ALPHA)
    assert n == int(np.ceil(2 * (2 * stats.norm.ppf(0.95) / REFERENCE) ** 2))
    for truth in (0.0, REFERENCE):
        assert rates("location", "normal", n, truth, 200)[IMPRECISE] < 0.15


def test_reading_rules():
    assert reading(-1.0, -0.1, 0.8) == OPPOSITE
    assert reading(-1.0, 0.5, 0.8) == SMALLER and reading(-1.0, 0.5, 0.8, "d33") == SMALLER_D33
    assert reading(0.1, 0.9, 0.8) == CONSISTENT and reading(0.1, np.nan, 0.8) == CONSISTENT
    assert reading(-0.1, 0.9, 0.8) == IMPRECISE and reading(np.nan, np.nan, 0.8) == IMPRECISE


def _observed(rng, within: bool = False) -> pd.DataFrame:
    groups = {"houlsby": 0.8 + 0.02 * rng.standard_normal(12), "full": 0.79 + 0.02 * rng.standard_normal(12)}
    if not within:
        return runs_frame(groups)
    return pd.concat([runs_frame(groups, task=task) for task in ("a", "b")])


def test_every_verdict_row_carries_its_reading():
    """The reference is the paper's effect, else d33 of its n, else none (said why); kinds
    without a standardised form say why; the overall row of cells counts its cells' readings;
    a reading too imprecise to say carries the runs and the hours that would say."""
    rng = np.random.default_rng(0)
    source = {"paper_effect_source": "Table 1 (test)"}
    cases = {
        "paper": _claim(paper_effect=1.0, **source),
        "d33": _claim(paper_n=5, paper_n_source="§3 (test)"),
        "none": _claim(),
        "rate": _claim(compare="rate", statistic="scores.score", paper_effect=0.3, **source),
    }
    found = {}
    for name, claim in cases.items():
        observed = _observed(rng)
        if name == "rate":
            observed = observed.assign(value=(observed["value"] > 0.8).astype(float))
        rows = with_reading(claim, judge(claim, observed), observed, hours=lambda: (2.0, None))
        assert list(rows.columns[-len(replication.REPLICATION_COLUMNS) :]) == replication.REPLICATION_COLUMNS
        found[name] = rows.iloc[-1]
    assert found["paper"]["reference_kind"] == "paper effect" and found["paper"]["paper_reference"] == 1.0
    assert 0 <= found["paper"]["paper_power"] <= 1
    assert found["paper"]["our_low_sd"] < found["paper"]["our_effect_sd"] < found["paper"]["our_high_sd"]
    assert found["d33"]["reference_kind"] == "d33" and found["d33"]["paper_reference"] == pytest.approx(
        d33("location", 5)
    )
    assert found["none"]["replication"] == "no reading: the paper states neither its effect nor its n"
    assert found["rate"]["replication"].startswith("no reading: a failure rate") and np.isfinite(
        found["rate"]["paper_power"]
    )
    # cells: each cell read; too imprecise carries the runs and hours that would say
    claim = _claim(within=["task"], quantifier="each", paper_effect=0.8, **source)
    observed = _observed(np.random.default_rng(3), within=True)
    rows = with_reading(claim, judge(claim, observed), observed, hours=lambda: (2.0, None))
    imprecise = rows[rows["replication"] == IMPRECISE]
    assert len(rows) == 3 and len(imprecise), rows["replication"].tolist()
    n = runs_to_say("location", 0.8, ALPHA)
    assert imprecise["replication_settles"].iloc[0] == (
        f"about {n} runs per group ({n - 12} more each: {2.0 * (n - 12) / 12:.3g} CPU-hours, GPU-hours not measured)"
    )
    assert rows.iloc[-1]["replication"] in (IMPRECISE,) or rows.iloc[-1]["replication"].startswith("cells: ")
    assert "runs per group" in replication.short(rows.iloc[-1])


def test_a_threshold_claim_says_why_it_has_no_reading():
    """Measured before the kind was left out (replication.WHY_NOT): on runs skewed like
    accuracies, neither the one-sample t nor the sign test's median interval over the SD held its
    level for a threshold's reading; a threshold claim says so rather than read approximately."""
    rng = np.random.default_rng(3)
    claim = _claim(compare="threshold", b=None, value=0.5, paper_n=5, paper_n_source="§3 (test)")
    observed = _observed(rng)
    observed = observed[observed["method"] == "houlsby"]
    row = with_reading(claim, judge(claim, observed), observed, hours=lambda: (1.0, None)).iloc[-1]
    assert row["replication"].startswith("no reading: a threshold claim is about a median")
