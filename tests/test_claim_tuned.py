"""Claims on each method at its best learning rate (``tuned``, robustkit.verdicts.rules): the rule
"every configuration of one group against some of the other" decides without picking the best
rate on the runs it tests, reduces to the plain test with one rate each, keeps its size where
picking the best rate first does not, and the recipes that sweep a rate at paper scale use it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from observation_frames import runs_frame

from robustkit.analysis.pooling import PoolingError, mixed_settings
from robustkit.measures import brunner_munzel, exact
from robustkit.verdicts import decidability, rules, simulation
from robustkit.verdicts.recipes import list_recipes, load_recipe
from robustkit.verdicts.rules import judge
from robustkit.verdicts.scales import SCALES
from robustkit.verdicts.spec import AGREES, CONTRADICTS, Claim, ClaimError


def _claim(**changes) -> Claim:
    table = {
        "id": "tuned",
        "says": "LayerNorm-only performs poorly (Houlsby et al. 2019, §3.4)",
        "statistic": "scores.score",
        "compare": "location",
        "a": "layernorm",
        "b": "full",
        "direction": "less",
        "tuned": "lr",
        **changes,
    }
    return Claim.from_table({k: v for k, v in table.items() if v is not None}, "test")


def _frame(means: dict, n: int = 7, sd: float = 0.01, seed: int = 0) -> pd.DataFrame:
    """Runs of method -> {lr: mean score}, ``n`` seeds each, on a 1/1000 grid."""
    rng = np.random.default_rng(seed)
    parts = [
        runs_frame({method: np.round(mean + sd * rng.standard_normal(n), 3)}, lr=lr)
        for method, rates in means.items()
        for lr, mean in rates.items()
    ]
    return pd.concat(parts, ignore_index=True)


def test_each_method_at_its_best_rate():
    """LayerNorm-only's best rate (0.75) is below full fine-tuning's (0.85): agrees, though
    full fine-tuning's worst rate (0.5) is below every LayerNorm-only rate; the reason names
    the best rates."""
    frame = _frame({"layernorm": {1e-3: 0.70, 1e-4: 0.75, 1e-5: 0.60}, "full": {1e-3: 0.50, 1e-4: 0.85, 1e-5: 0.80}})
    row = judge(_claim(), frame).iloc[-1]
    assert row["verdict"] == AGREES
    assert "layernorm lr=0.0001" in row["reason"] and "full lr=0.0001" in row["reason"]
    # no effect shown: the best-by-median configurations are biased toward the claim (issue #45)
    assert np.isnan(row["effect"]) and np.isnan(row["ci_low"]) and row["effect_name"].startswith("none")
    # the other way round the best rates decide against the claim
    swapped = frame.assign(method=frame["method"].map({"layernorm": "full", "full": "layernorm"}))
    assert judge(_claim(), swapped).iloc[-1]["verdict"] == CONTRADICTS


def test_pooling_over_rates_would_mislead():
    """The same runs pooled over rates (the mixture, not the best): full fine-tuning's diverged
    rate drags it below LayerNorm-only; without ``tuned`` the claim refuses to pool the rates."""
    frame = _frame({"layernorm": {1e-3: 0.70, 1e-4: 0.75, 1e-5: 0.74}, "full": {1e-3: 0.30, 1e-4: 0.85, 1e-5: 0.50}})
    assert judge(_claim(), frame).iloc[-1]["verdict"] == AGREES
    assert judge(_claim(tuned=None, pooled=["lr"]), frame).iloc[-1]["verdict"] != AGREES
    with pytest.raises(PoolingError):
        judge(_claim(tuned=None), frame)


@pytest.mark.parametrize("compare", ["location", "equivalence"])
def test_one_rate_each_is_the_plain_test(compare):
    extra = {"compare": compare, "direction": None, "value": 0.02} if compare == "equivalence" else {}
    for seed in range(20):
        frame = _frame({"layernorm": {1e-4: 0.75}, "full": {1e-4: 0.76}}, n=6, sd=0.02, seed=seed)
        tuned, plain = judge(_claim(**extra), frame), judge(_claim(tuned=None, **extra), frame)
        assert tuned[["verdict", "p_value", "effect", "ci_low", "ci_high"]].equals(
            plain[["verdict", "p_value", "effect", "ci_low", "ci_high"]]
        )


def test_the_p_value_is_the_rule_by_hand():
    """less: the largest over LayerNorm-only's rates of (3 x the smallest p against full's)."""
    frame = _frame({"layernorm": {1e-3: 0.70, 1e-4: 0.75, 1e-5: 0.60}, "full": {1e-3: 0.50, 1e-4: 0.85, 1e-5: 0.80}})
    groups = {k: g["value"].to_numpy(float) for k, g in frame.groupby(["method", "lr"])}
    rates = [1e-5, 1e-4, 1e-3]
    by_hand = max(
        min(1.0, 3 * min(brunner_munzel.test(groups["layernorm", a], groups["full", b], "less") for b in rates))
        for a in rates
    )
    assert judge(_claim(), frame).iloc[-1]["p_value"] == pytest.approx(by_hand)


def test_a_tuned_claim_is_checked():
    for bad in ({"compare": "spread"}, {"sign": "less"}, {"pooled": ["lr"]}, {"statistic": "curves.overfit"}):
        with pytest.raises(ClaimError, match="tuned"):
            _claim(**bad)


def test_picking_the_best_rate_on_the_tested_runs_errs_where_the_rule_does_not():
    """At the boundary (LayerNorm-only's best rate as good as full fine-tuning's, whose three
    rates are alike), testing the best-by-mean rates' runs against each other agrees falsely
    far above alpha (the winner's curse); the rule stays within it on the same stores. The picked
    runs are tested by the rank-sum test, exact here (every configuration is drawn alike), so its
    excess is the picking alone (the verdicts' Brunner-Munzel test with its point-group bound is
    conservative enough at 7 vs 7 to hide it)."""
    claim = _claim()
    form = simulation.Shape((("all", 7, 7),), 1, (3, 3))
    rng = np.random.default_rng(3)
    picked = rule = 0
    draws = 300
    for _ in range(draws):
        frame, _ = simulation.observations(claim, form, ["boundary"], rng, error="agrees")
        frame = frame.assign(outcome="ok")
        best = frame.groupby(["method", "lr"])["value"].mean().groupby(level="method").idxmax()
        chosen = pd.concat([frame[(frame["method"] == m) & (frame["lr"] == key[1])] for m, key in best.items()])
        a, b = (chosen.loc[chosen["method"] == m, "value"].to_numpy() for m in ("layernorm", "full"))
        picked += exact.rank_sum(a, b, "less") < 0.05
        rule += judge(claim, frame).iloc[-1]["verdict"] == AGREES
    bound = simulation.bound(0.05, draws)
    assert picked / draws > bound and rule / draws <= bound, (picked / draws, rule / draws)


@pytest.mark.slow
@pytest.mark.parametrize(
    "changes, form",
    [
        # as houlsby2019/fig3-4's layernorm-only-poor: failed runs are its data. Left out instead
        # (no recipe's tuned claim does), this shape gave 0.093 false contradicts at 150 draws
        # under issue #45's nuisances: not yet understood, said in recipes/README.md
        ({"failures": "data"}, simulation.Shape((("task=a", 7, 7), ("task=b", 7, 7)), 1, (3, 3))),
        ({"direction": "greater"}, simulation.Shape((("all", 7, 7),), 1, (3, 2))),
        ({"compare": "equivalence", "direction": None, "value": 0.02}, simulation.Shape((("all", 8, 5),), 1, (3, 3))),
    ],
)
def test_the_whole_path_of_a_tuned_claim_errs_at_most_at_alpha(changes, form):
    if len(form.cells) > 1:
        changes = {**changes, "within": ["task"], "quantifier": "each"}
    # 60 draws per nuisance to find the worst, 150 fresh ones at it (simulation.rates)
    agrees, contradicts = simulation.rates(_claim(**changes), form, 150, seed=1, first=40)
    assert max(agrees, contradicts) <= simulation.bound(0.05, 150), (agrees, contradicts)


def test_the_plan_counts_runs_per_rate():
    recipe = load_recipe("houlsby2019/fig3-4")
    claim = {c.id: c for c in recipe.claims}["layernorm-only-poor"]
    assert decidability.claim_sizes(recipe, claim, "paper") == [("task=cola", 7, 7), ("task=mnli", 7, 7)]
    assert decidability.sizes_and_configurations(recipe, claim, "paper")[1] == (3, 3)
    assert claim.smallest_p(7, 7, (3, 3)) == pytest.approx(3 / 128)  # 3 x 2^-7: Brunner-Munzel's reach
    assert claim.smallest_p(5, 5, (3, 3)) >= 0.05  # 5 seeds could not decide it, nor the paper's 3


@pytest.mark.parametrize("scale", SCALES)
def test_every_claim_compares_runs_of_one_setting_or_says_what_it_pools(scale):
    """At every scale a claim's compared groups differ, inside a cell, only in settings it
    pools or tunes over: a recipe whose grid sweeps a setting the claim ignores would be
    refused when judged (houlsby2019/fig3-4's paper-scale learning-rate sweep was)."""
    for name in list_recipes():
        recipe = load_recipe(name)
        frame = decidability.spec_frame(recipe, scale) if scale in recipe.scales else pd.DataFrame()
        if frame.empty:
            continue
        for claim in recipe.claims:
            rows = rules.tested_rows(claim, frame, missing_where="ignore")
            if scale not in claim.scales or claim.by not in rows:
                continue
            within = [c for c in claim.within if c in rows]
            tuned = (claim.tuned,) if claim.tuned else ()
            assert not mixed_settings(rows, [claim.by, *within], (*claim.pooled, *tuned)), (name, claim.id)


def test_runs_without_the_setting_are_a_configuration_of_their_own():
    frame = _frame({"layernorm": {1e-3: 0.70, 1e-4: 0.72}, "full": {1e-4: 0.85}})
    frame.loc[frame["method"] == "full", "lr"] = np.nan  # full fine-tuning at its default rate
    row = judge(_claim(), frame).iloc[-1]
    assert row["verdict"] == AGREES and row["n_b"] == 7 and "2 x 1 configurations" in row["reason"]


def test_lower_is_better_flips_which_group_is_united_in_the_plan_as_in_the_rule(monkeypatch):
    """Where lower values are better, "a's best below b's best" is "some a configuration below
    every b one": the union is over a's configurations, and the plan's smallest p (3 of a's
    against 2 of b's) multiplies by a's count as judge does."""
    from dataclasses import replace

    from robustkit.analysis import registry

    real = registry.statistic_of

    def lower_better(name):
        analysis, statistic = real(name)
        return analysis, replace(statistic, better="lower")

    monkeypatch.setattr(registry, "statistic_of", lower_better)
    claim = _claim()
    assert claim.best_direction == "greater" and claim.configuration_factor(3, 2) == 3
    frame = _frame({"layernorm": {1e-3: 0.20, 1e-4: 0.50, 1e-5: 0.60}, "full": {1e-3: 0.40, 1e-4: 0.45}})
    row = judge(claim, frame).iloc[-1]
    assert row["verdict"] == AGREES and "layernorm lr=0.001" in row["reason"]
    assert row["smallest_p"] == pytest.approx(claim.smallest_p(7, 7, (3, 2)))
