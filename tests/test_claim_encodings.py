"""The statistics of issue #37's re-encoded claims, on small synthetic frames whose values are
known: disjoint seed pairs for Chen et al. 2022's "longer training, more stable" (independent by
construction), He et al. 2021's collapse (a run that never learned is left out), the fall of the
dev metric from its best (He et al. 2021 figure 9), and the update rank over LoRA's r (Biderman
et al. 2024); and the recipes that use them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from robustkit.analysis.registry import get, load, statistic_of
from robustkit.errors import RobustkitError
from robustkit.store.tables import IDENTITY
from robustkit.verdicts import decidability
from robustkit.verdicts.recipes import list_recipes, load_recipe
from robustkit.verdicts.rules import judge
from robustkit.verdicts.spec import Claim


def _epoch_frame(scores: dict, outcomes: dict | None = None) -> pd.DataFrame:
    """``epoch-scores`` rows: method -> seed -> validation score after epochs 1, 2, ..."""
    outcomes = outcomes or {}
    rows = []
    for method, seeds in scores.items():
        for seed, values in seeds.items():
            for epoch, value in enumerate(values, start=1):
                rows.append(
                    {
                        "run_id": f"{method}-s{seed}",
                        "method": method,
                        "seed": seed,
                        "epoch": epoch,
                        "value": value,
                        "metric": "accuracy",
                        "outcome": outcomes.get((method, seed, epoch), "ok"),
                    }
                )
    frame = pd.DataFrame(rows)
    for column in IDENTITY:
        if column not in frame:
            frame[column] = {"task": "rt", "model": "minilm-l6", "tsp_step": 0}.get(column)
    frame["lr"] = frame["method"].map({"houlsby": 5e-4, "lora": 2.5e-3, "prefix": 5e-4})
    return frame


def _pair_drops(frame: pd.DataFrame) -> pd.Series:
    return get("epoch-scores").statistic("pair-gap-drop", frame).set_index("run_id")["value"]


# ---------------------------------------------------------------------------------------------
# epoch-scores.pair-gap-drop (beyond/stability-length, longer-more-stable)


def test_pair_gap_drop_in_closed_form():
    lora = {
        0: [0.50, 0.65, 0.73],
        1: [0.70, 0.71, 0.74],
        2: [0.57, 0.68, 0.72],
        3: [0.75, 0.73, 0.745],
        4: [0.60, 0.70, 0.73],
    }
    frame = _epoch_frame({"lora": lora}, {("lora", 3, 3): "collapsed"})
    table = get("epoch-scores").statistic("pair-gap-drop", frame).set_index("run_id")
    # seeds sorted and paired 0-1, 2-3; seed 4 is the odd one out
    assert list(table.index) == ["lora-s0", "lora-s2"] and list(table["seed_b"]) == [1, 3]
    np.testing.assert_allclose(
        table["value"], [abs(0.50 - 0.70) - abs(0.73 - 0.74), abs(0.57 - 0.75) - abs(0.72 - 0.745)]
    )
    assert list(table["outcome"]) == ["ok", "collapsed"]  # a pair is ok only where both runs end ok
    assert "run_id_b" not in table  # one observation per pair, under its lower seed's identity
    assert statistic_of("epoch-scores.pair-gap-drop")[1].unit == "disjoint pair"


def test_pair_gap_drop_values_are_independent_by_construction():
    rng = np.random.default_rng(0)
    scores = {"lora": {seed: list(rng.uniform(0.5, 0.8, 3)) for seed in range(10)}}
    before = _pair_drops(_epoch_frame(scores))
    assert len(before) == 5
    changed = {"lora": {**scores["lora"], 3: [0.99, 0.10, 0.55]}}  # one run's history changes
    after = _pair_drops(_epoch_frame(changed))
    differs = before.index[~np.isclose(before, after.reindex(before.index))]
    assert list(differs) == ["lora-s2"]  # only the pair of seed 3 (2-3) moves; every other value is the same
    more = {"lora": {**scores["lora"], 10: [0.6, 0.6, 0.6], 11: [0.7, 0.7, 0.7]}}  # two more runs: one more pair
    grown = _pair_drops(_epoch_frame(more))
    pd.testing.assert_series_equal(grown.drop("lora-s10"), before)


def test_pair_count_is_the_plans():
    recipe = load_recipe("beyond/stability-length")
    claim = next(c for c in recipe.claims if c.id == "longer-more-stable")
    assert claim.statistic == "epoch-scores.pair-gap-drop"
    # the demo's seeds: houlsby and lora 0-4, prefix 0-3 -> 2 + 2 + 2 pairs
    seeds = {"houlsby": range(5), "lora": range(5), "prefix": range(4)}
    frame = _epoch_frame({m: {s: [0.6, 0.7] for s in ss} for m, ss in seeds.items()})
    assert len(get("epoch-scores").statistic("pair-gap-drop", frame)) == 6
    assert decidability.claim_sizes(recipe, claim, "demo") == [("all", 6, 0)]
    assert decidability.claim_sizes(recipe, claim, "paper") == [("all", 12, 0)]  # seeds 0-7: 4 pairs per method


@pytest.mark.parametrize("late, verdict", [(0.01, "agrees"), (0.40, "contradicts")])
def test_the_claim_reads_pair_gaps(late, verdict):
    # 12 seeds per method: 6 pairs each, gap 0.2 after epoch 1 and `late` after the last
    scores = {"houlsby": {s: [0.6 + 0.2 * (s % 2), 0.7, 0.7 + late * (s % 2)] for s in range(12)}}
    claim = Claim.from_table(
        {
            "id": "longer",
            "says": "x",
            "statistic": "epoch-scores.pair-gap-drop",
            "failures": "data",
            "compare": "threshold",
            "a": "houlsby",
            "value": 0,
            "direction": "greater",
        },
        "test",
    )
    result = judge(claim, get("epoch-scores").statistic("pair-gap-drop", _epoch_frame(scores))).iloc[-1]
    assert result["n_a"] == 6 and result["verdict"] == verdict


# ---------------------------------------------------------------------------------------------
# scores.collapsed (he2021/fig4, ft-collapses)


def _score_frame(outcomes: dict) -> pd.DataFrame:
    rows = [
        {"run_id": f"{m}-{i}", "method": m, "seed": i, "value": 0.6, "outcome": o, "failed": o != "ok"}
        for m, os in outcomes.items()
        for i, o in enumerate(os)
    ]
    frame = pd.DataFrame(rows)
    for column in IDENTITY:
        if column not in frame:
            frame[column] = {"task": "rt", "model": "minilm-l6", "tsp_step": 0, "train_size": 1000}.get(column)
    return frame


def test_collapsed_counts_learned_and_fallen_runs_and_leaves_out_never_learned():
    frame = _score_frame({"full": ["ok", "collapsed", "diverged", "not-learned"]})
    table = get("scores").statistic("collapsed", frame).set_index("run_id")
    assert table["value"].tolist()[:3] == [0.0, 1.0, 1.0] and np.isnan(table.loc["full-3", "value"])
    assert table["outcome"].tolist() == ["ok", "ok", "ok", "not-learned"]
    assert statistic_of("scores.collapsed")[1].undefined_on_failed  # the reason it is left out


def test_a_rate_claim_on_collapses_does_not_count_under_trained_adapters():
    # the demo's situation: adapters at the too-small rates never learn; fine-tuning learns and falls back
    frame = _score_frame({"houlsby": ["not-learned"] * 4 + ["ok"] * 4, "full": ["collapsed"] * 3 + ["ok"] * 5})
    claim = Claim.from_table(
        {
            "id": "ft-collapses",
            "says": "x",
            "statistic": "scores.collapsed",
            "compare": "rate",
            "a": "houlsby",
            "b": "full",
            "direction": "less",
        },
        "test",
    )
    result = judge(claim, get("scores").statistic("collapsed", frame)).iloc[-1]
    assert (result["n_a"], result["n_b"]) == (4, 8) and "rates 0.00 vs 0.38" in result["reason"]
    failed = Claim.from_table(
        {
            **{"id": "f", "says": "x", "compare": "rate", "a": "houlsby", "b": "full", "direction": "less"},
            "statistic": "scores.failed",
        },
        "test",
    )
    as_failed = judge(failed, get("scores").statistic("failed", frame)).iloc[-1]
    assert (as_failed["n_a"], as_failed["n_b"]) == (8, 8) and "rates 0.50 vs 0.38" in as_failed[
        "reason"
    ]  # before issue #37


# ---------------------------------------------------------------------------------------------
# curves.metric-fall (he2021/fig5-9, ft-overfits)


def test_metric_fall_is_best_minus_last_of_the_main_dev_metric():
    curves = {"overfits": [0.50, 0.80, 0.70], "rising": [0.50, 0.60, 0.70]}
    rows = []
    for run, values in curves.items():
        for step, value in zip((100, 200, 300), values):
            rows.append(
                {
                    "run_id": run,
                    "step": step,
                    "split": "validation",
                    "metric": "accuracy",
                    "main_metric": "accuracy",
                    "value": value,
                }
            )
            rows.append(
                {
                    "run_id": run,
                    "step": step,
                    "split": "validation",
                    "metric": "loss",
                    "main_metric": "accuracy",
                    "value": 9.0 - step / 100,
                }
            )
    frame = pd.DataFrame(rows).sample(frac=1, random_state=0)  # the order of the rows does not matter: the step does
    for column in IDENTITY:
        if column not in frame:
            frame[column] = {"method": "full", "seed": 0, "task": "rt"}.get(column)
    fall = get("curves").statistic("metric-fall", frame).set_index("run_id")["value"]
    assert fall["overfits"] == pytest.approx(0.10) and fall["rising"] == pytest.approx(0.0)
    rise = get("curves").statistic("overfit", frame).set_index("run_id")["value"]
    assert (rise == 0).all()  # the dev loss falls throughout: no rise


# ---------------------------------------------------------------------------------------------
# forgetting.update-rank-ratio (beyond/forgetting, full-updates-high-rank)


def test_update_rank_ratio_is_the_rank_over_the_reference_rank():
    rows = [
        {"run_id": "full-0", "measure": "energy_rank", "kind": kind, "value": value}
        for kind, value in (("q", 60.0), ("v", 100.0), ("intermediate", 300.0))
    ]
    rows.append({"run_id": "full-0", "measure": "forgetting", "kind": None, "value": 0.4})
    frame = pd.DataFrame(rows)
    for column in IDENTITY:
        if column not in frame:
            frame[column] = {"method": "full", "seed": 0, "task": "rt"}.get(column)
    forgetting = get("forgetting")
    ratio = forgetting.statistic("update-rank-ratio", frame, rank_measure="energy_rank", matrices="q,v")["value"].item()
    assert ratio == pytest.approx(80.0 / 8)  # mean of q and v over the default r = 8
    assert forgetting.statistic("update-rank-ratio", frame, matrices="q,v", reference_rank=4)[
        "value"
    ].item() == pytest.approx(20.0)
    with pytest.raises(RobustkitError, match="reference_rank"):
        forgetting.statistic("update-rank-ratio", frame, reference_rank=0)


# ---------------------------------------------------------------------------------------------
# the recipes


def _claims(name: str) -> dict:
    return {c.id: c for c in load_recipe(name).claims}


def test_the_recipes_use_the_new_encodings():
    assert _claims("beyond/forgetting")["full-updates-high-rank"].statistic == "forgetting.update-rank-ratio"
    assert _claims("beyond/forgetting")["full-updates-high-rank"].value == 10
    assert all(c.params.get("estimator") != "trace_per_parameter" for c in _claims("beyond/flat-lora").values())
    # issue #55 (item 4): stuck runs count as failures, as He et al. count them
    assert _claims("he2021/fig4")["ft-collapses"].statistic == "scores.failed"
    assert _claims("houlsby2019/fig3-4")["layernorm-only-poor"].scales == ("paper",)
    assert _claims("houlsby2019/fig3-4")["layernorm-only-poor"].tuned == "lr"


def test_no_recipe_states_a_floor_set_after_its_runs():
    """Issue #45: the per-layer similarity claims' floors (1% of the measure's range) were set
    after one demo verdict was seen. A floor is now a minimum-effect test, stated before any run;
    none of the recipes states one, so every claim tests a difference from 0."""
    for name in list_recipes():
        for claim in load_recipe(name).claims:
            assert claim.floor == 0, (name, claim.id)
    overfit = _claims("he2021/fig5-9")
    assert (
        overfit["ft-overfits"].statistic == "curves.metric-fall"
        and overfit["ft-dev-loss-rises"].statistic == "curves.overfit"
    )


@pytest.mark.parametrize(
    "reference",
    ["epoch-scores.pair-gap-drop", "scores.collapsed", "curves.metric-fall", "forgetting.update-rank-ratio"],
)
def test_new_statistics_state_unit_sign_and_their_fields(reference):
    statistic = statistic_of(reference)[1]
    assert statistic.better in (None, "higher", "lower") and isinstance(statistic.ends, bool)
    assert any(word in statistic.help for word in ("units", "unitless", "dimensionless"))
    assert load(statistic.function).__doc__  # its documentation, in whichever module declares it
