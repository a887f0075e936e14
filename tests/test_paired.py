"""Paired location claims (issue #56 item 3): the sign test of within-seed differences, through
the verdict path (robustkit.verdicts.rules.judge) and robustkit.measures.paired."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from robustkit.measures import brunner_munzel, paired
from robustkit.verdicts import simulation
from robustkit.verdicts.rules import judge
from robustkit.verdicts.spec import AGREES, INCONCLUSIVE, Claim, ClaimError


def _claim(**changes) -> Claim:
    table = {
        "id": "paired",
        "says": "adapters above full fine-tuning, seed by seed",
        "statistic": "scores.score",
        "compare": "location",
        "a": "houlsby",
        "b": "full",
        "direction": "greater",
        "paired": True,
        **changes,
    }
    return Claim.from_table(table, "test")


def _frame(a, b, outcome_a=None, task=None) -> pd.DataFrame:
    rows = []
    for method, values in (("houlsby", a), ("full", b)):
        for seed, value in enumerate(values):
            rows.append(
                {
                    "run_id": f"{method}|{task[seed] if task else ''}|{seed}",
                    "method": method,
                    "seed": seed,
                    "task": task[seed] if task else "rt",
                    "value": value,
                    "outcome": outcome_a[seed] if method == "houlsby" and outcome_a else "ok",
                }
            )
    return pd.DataFrame(rows)


def test_pair_up_matches_keys_and_leaves_out_unpaired_and_repeated():
    a, b = paired.pair_up([1.0, 2.0, 3.0, 4.0], [10.0, 30.0, 40.0], [0, 1, 2, 2], [0, 1, 3])
    assert list(a) == [1.0, 2.0] and list(b) == [10.0, 30.0]  # key 2 twice in a, key 3 only in b


def test_paired_decides_a_small_consistent_shift_that_the_unpaired_test_cannot():
    # seeds differ a lot, the method adds 0.005 on every seed: paired, 6 of 6 above (p = 1/64)
    rng = np.random.default_rng(3)
    base = 0.80 + rng.normal(0, 0.03, 6)
    a, b = np.round(base + 0.005, 3), np.round(base, 3)
    verdict = judge(_claim(), _frame(a, b)).iloc[-1]
    assert verdict["verdict"] == AGREES and verdict["p_value"] == pytest.approx(1 / 64)
    assert verdict["effect"] == pytest.approx(0.005) and "sign-test" in verdict["effect_name"]
    assert verdict["ci_low"] > 0
    unpaired = judge(_claim(paired=False), _frame(a, b)).iloc[-1]
    assert unpaired["verdict"] == INCONCLUSIVE


def test_a_failed_run_breaks_its_pair_and_is_placed_at_either_extreme():
    base = np.linspace(0.80, 0.86, 6)
    a, b = base + 0.005, base
    outcomes = ["ok"] * 5 + ["collapsed"]
    verdict = judge(_claim(), _frame(a, b, outcomes)).iloc[-1]
    # 5 pairs left (p = 1/32 < 0.05); ranked worst, the broken pair goes against the claim (p = 7/64)
    assert verdict["verdict"] == INCONCLUSIVE and verdict["reason_class"] == "depends on failed runs"
    assert "5 seed pairs of 5 vs 6 runs" in verdict["reason"] and "ranked worst" in verdict["reason"]


def test_pairs_join_runs_of_the_same_pooled_setting_only():
    tasks = ["rte", "rte", "rte", "mrpc", "mrpc", "mrpc"]
    a = np.array([0.6, 0.62, 0.64, 0.9, 0.92, 0.94]) + 0.01
    b = np.array([0.6, 0.62, 0.64, 0.9, 0.92, 0.94])
    frame = _frame(a, b, task=tasks)
    verdict = judge(_claim(pooled=["task"]), frame).iloc[-1]
    assert verdict["verdict"] == AGREES and "6 seed pairs" in verdict["reason"]


def test_too_few_pairs_says_so():
    verdict = judge(_claim(), _frame([0.9, 0.91, 0.92, 0.93], [0.8, 0.81, 0.82, 0.83])).iloc[-1]
    assert verdict["reason_class"] == "too few runs" and "4 seed pairs" in verdict["reason"]


def test_paired_needs_a_plain_location_claim_and_seeds():
    with pytest.raises(ClaimError, match="paired"):
        _claim(compare="mean")
    frame = _frame([0.9] * 6, [0.8] * 6).drop(columns="seed")
    assert "seed" in judge(_claim(), frame).iloc[-1]["reason"]


@pytest.mark.parametrize("nuisance", simulation.NUISANCES[1:3], ids=lambda n: n.name)
def test_the_paired_test_holds_alpha_where_one_group_is_ten_times_as_wide_and_skewed(nuisance):
    # the simulation's draws of a paired claim at its null (correlated seeds, the median
    # within-seed difference 0), the sign test itself: cheap, 2,000 draws at 8 pairs
    claim, rng = _claim(), np.random.default_rng(5)
    hits = np.zeros(2)
    for _ in range(2000):
        a, b, _, _ = simulation._draw_cell(claim, "boundary", 8, 8, rng, "true", "", nuisance)
        hits += np.array(paired.tails(a, b)) < 0.05
    assert max(hits / 2000) <= simulation.bound(0.05, 2000), hits


def test_a_true_shift_is_found_more_often_paired_when_seeds_are_correlated():
    # 1 SD at 5 pairs, correlation 0.5: the sign test's power is about 0.4, the unpaired test's 0.25
    claim, rng = _claim(), np.random.default_rng(6)
    hits = np.zeros(2)
    for _ in range(300):
        a, b, _, _ = simulation._draw_cell(claim, "boundary", 5, 5, rng, "true", "", simulation.NUISANCES[0], 1.0)
        hits += [paired.tails(a, b)[0] < 0.05, brunner_munzel.tails(a, b)[0] < 0.05]
    assert hits[0] > hits[1] + 20, hits


@pytest.mark.slow
def test_the_paired_path_errs_at_most_at_alpha_under_the_hardest_nulls():
    # the whole path (failures placed, still-improving runs, ties), each nuisance 60 times, the
    # worst by the sequential check (simulation.SEQUENTIAL)
    claim, form = _claim(statistic="rsa.similarity"), simulation.Shape((("all", 8, 8),), 1)
    agrees, contradicts, _, _, used = simulation.rates(claim, form, 150, seed=2, first=60, detail=True, sequential=True)
    assert agrees <= simulation.bound(0.05, used) and contradicts <= simulation.bound(0.05, used)
