"""A scale sized from a pilot (robustkit.verdicts.sizing, issue #47 item 2): new seeds trained to
a fixed budget with its full schedule (issue #55 item 5), the runs per group each claim needs, and
a CPU budget the claims are fitted into by dropping the one needing the most seeds."""

import dataclasses
import math

import pandas as pd
import pytest

from robustkit.verdicts import sizing
from robustkit.verdicts.recipes import RECIPE_DIR, load_recipe, recipe_names
from robustkit.verdicts.spec import Claim


def _sizes(rows):
    base = {"compare": "location", "pilot_n": 5, "n": 10, "basis": "pilot", "side": "agrees", "multiple": 1.0}
    return pd.DataFrame([{**base, "reason": "", **row} for row in rows]).reindex(
        columns=[c for c in sizing.SIZE_COLUMNS if c != "fits"]
    )


def test_sized_runs_are_new_seeds_trained_to_a_fixed_budget():
    """Each sized run is its demo cell's run at a new seed, trained to the demo's epochs times the
    multiple, rounded up, with no stopping rule: every method gets its demo schedule's full decay."""
    recipe = load_recipe("han2021/fig2")
    demo = {spec.run_id for spec in recipe.specs("demo")}
    specs = sizing.sized_specs(recipe, 7, 1.0)
    assert len(specs) == 14 and not {spec.run_id for spec in specs} & demo
    assert {spec.seed for spec in specs} == set(range(sizing.FIRST_SEED, sizing.FIRST_SEED + 7))
    assert all(not spec.until_converged and spec.epochs == 3 for spec in specs)
    assert {spec.method for spec in specs} == {"houlsby", "full"}
    # the demo run with the seed changed: only the seed separates their settings
    first = next(spec for spec in recipe.specs("demo") if spec.method == "full" and spec.seed == 0)
    same = next(spec for spec in specs if spec.method == "full" and spec.seed == sizing.FIRST_SEED)
    assert dataclasses.replace(same, seed=0).run_id == first.run_id
    longer = sizing.sized_specs(recipe, 1, 1.3174603174603174)  # Houlsby figs 3-4's multiple
    assert all(spec.epochs == 4 and not spec.until_converged for spec in longer)
    capped = sizing.sized_specs(recipe, 1, 100.0)
    assert all(spec.epochs == sizing.MAX_EPOCHS for spec in capped)


def test_a_cell_with_its_own_epochs_keeps_its_multiple():
    """He fig 3's 300-example cell trains 10 demo epochs (the steps of 3 at 1000): sized, 10 times
    the multiple, never the base's epochs."""
    recipe = load_recipe("he2021/fig3")
    epochs = {spec.train_size: spec.epochs for spec in sizing.sized_specs(recipe, 1, 1.0)}
    assert epochs == {1000: 3, 300: 10}
    epochs = {spec.train_size: spec.epochs for spec in sizing.sized_specs(recipe, 1, 1.5)}
    assert epochs == {1000: 5, 300: 15}


def test_the_cost_is_each_run_to_its_budget():
    """fit's hours price every run at its whole budget: twice the multiple, about twice the hours."""
    recipes = [load_recipe("he2021/fig6")]
    sizes = _sizes([{"recipe": "he2021/fig6", "claim": "f", "seeds": 5}])
    _, once = sizing.fit(sizes, recipes, cpu_hours=100)
    _, twice = sizing.fit(sizes.assign(multiple=2.0), recipes, cpu_hours=100)
    assert once.iloc[0]["epochs"] == 1.0 and twice.iloc[0]["epochs"] == 2.0
    assert twice.iloc[-1]["cpu_hours"] == pytest.approx(2 * once.iloc[-1]["cpu_hours"], rel=0.1)


def test_runs_two_recipes_share_are_counted_once():
    recipes = [load_recipe("han2021/fig2"), load_recipe("he2021/fig6")]
    sizes = _sizes(
        [
            {"recipe": "han2021/fig2", "claim": "spread", "seeds": 10},
            {"recipe": "he2021/fig6", "claim": "f", "seeds": 6},
        ]
    )
    fitted, per_recipe = sizing.fit(sizes, recipes, cpu_hours=100)
    assert fitted["fits"].all()
    total = per_recipe.iloc[-1]
    assert total["runs"] == 20  # he2021/fig6's 6 seeds are among han2021/fig2's 10: the same runs
    assert math.isclose(total["cpu_hours"], per_recipe.iloc[0]["cpu_hours"])


def test_the_claim_needing_most_seeds_is_dropped_until_the_rest_fits():
    recipes = [load_recipe("han2021/fig2"), load_recipe("he2021/fig6")]
    sizes = _sizes(
        [
            {"recipe": "han2021/fig2", "claim": "spread", "seeds": 40},
            {"recipe": "he2021/fig6", "claim": "f", "seeds": 6},
            {"recipe": "he2021/fig6", "claim": "g", "n": math.nan, "seeds": math.nan, "reason": "no n"},
        ]
    )
    _, everything = sizing.fit(sizes, recipes, cpu_hours=1000)
    small = everything.iloc[-1]["cpu_hours"] * 6 / 40 * 1.01  # room for six seeds, not forty
    fitted, per_recipe = sizing.fit(sizes, recipes, cpu_hours=small)
    fits = fitted.set_index("claim")
    assert (
        not fits.loc["spread", "fits"] and "does not fit: 10 runs per group (40 seeds)" in fits.loc["spread", "reason"]
    )
    assert fits.loc["f", "fits"] and fits.loc["g", "reason"] == "does not fit: no n"
    assert per_recipe.iloc[-1]["runs"] == 12 and per_recipe.iloc[-1]["cpu_hours"] <= small
    # a fit's own table read back (tools/size_cpu_scale.py --sizes) says each reason once
    again = sizing.fit(fitted.drop(columns="fits"), recipes, cpu_hours=small)[0].set_index("claim")
    assert again.loc["g", "reason"] == "does not fit: no n"


def test_the_papers_effect_sizes_a_claim_the_pilot_cannot():
    claim = Claim.from_table(
        {
            "id": "c",
            "says": "test",
            "statistic": "scores.score",
            "compare": "location",
            "a": "houlsby",
            "b": "full",
            "direction": "greater",
            "paper_effect": 1.5,
            "paper_effect_source": "test",
        },
        "test",
    )
    from robustkit.verdicts.decidability import power

    n = sizing.paper_n(claim, 5)
    assert n is not None and power("location", n, n, 1.5) >= 0.8 > power("location", n - 1, n - 1, 1.5)
    assert sizing.paper_n(claim, 5, max_runs=6) is None


def test_a_pilot_gives_each_claim_its_seeds_and_budget(monkeypatch):
    """He fig 4 pools four rates: 5 runs per group in the pilot are 2 seeds of 4 runs (its demo
    grid), so 17 runs per group take ceil(17 / 2.5) = 7 seeds; a claim the pilot cannot size and
    the paper gives no single effect for does not fit."""
    import robustkit.analysis.convergence
    import robustkit.store.tables

    recipe = load_recipe("he2021/fig4")
    monkeypatch.setattr(sizing.tally, "observations", lambda *args, **kwargs: pd.DataFrame())
    monkeypatch.setattr(robustkit.analysis.convergence, "still_improving", lambda store, ids: pd.Series(False))
    monkeypatch.setattr(robustkit.store.tables, "load_history", lambda store: pd.DataFrame())
    monkeypatch.setattr(sizing.budget, "claim_budget", lambda *args: {"multiple": 2.5, "reason": ""})
    answers = {
        "stable-across-lrs": {"n": 17, "observed_n": 5, "side": "agrees", "reason": ""},
        "ft-collapses": {"n": None, "observed_n": 5, "side": None, "reason": "the observed effect is 0"},
    }
    monkeypatch.setattr(sizing.settle, "runs_to_decide", lambda claim, *args, **kwargs: answers[claim.id])
    sizes = sizing.pilot_sizes([recipe], "pilot").set_index("claim")
    assert sizes.loc["stable-across-lrs", "seeds"] == 7 and sizes.loc["stable-across-lrs", "basis"] == "pilot"
    assert math.isnan(sizes.loc["ft-collapses", "seeds"]) and sizes.loc["ft-collapses", "reason"].startswith("the obs")
    final = {claim.id: claim.final for claim in recipe.claims}
    assert (sizes["multiple"] == [2.5 if final[c] else 1.0 for c in sizes.index]).all()


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        ({"multiple": None, "reason": "any wording", "group": ""}, 1.0),  # no cell stopped: the demo budget
        ({"multiple": None, "reason": "the fit failed", "group": "full", "late": 3, "n": 5}, math.nan),
        ({"multiple": 1.6, "reason": "", "group": "houlsby", "late": 2, "n": 5}, 1.6),
    ],
)
def test_a_claims_multiple_is_its_guards_budget(monkeypatch, found, expected):
    """A final claim's budget multiple: 1 where claim_budget stops no group (read from its answer,
    not its wording), its extrapolation where one is stopped, none where that fails."""
    import robustkit.analysis.convergence
    import robustkit.store.tables

    recipe = load_recipe("he2021/fig6")
    monkeypatch.setattr(sizing.tally, "observations", lambda *args, **kwargs: pd.DataFrame())
    monkeypatch.setattr(robustkit.analysis.convergence, "still_improving", lambda store, ids: pd.Series(False))
    monkeypatch.setattr(robustkit.store.tables, "load_history", lambda store: pd.DataFrame())
    monkeypatch.setattr(sizing.budget, "claim_budget", lambda *args: found)
    answer = {"n": 5, "observed_n": 5, "side": "agrees", "reason": ""}
    monkeypatch.setattr(sizing.settle, "runs_to_decide", lambda claim, *args, **kwargs: answer)
    sizes = sizing.pilot_sizes([recipe], "pilot")
    final = [claim.final for claim in recipe.claims]
    assert any(final)
    got = sizes.loc[final, "multiple"].to_numpy(float)
    assert (math.isnan(expected) and all(math.isnan(g) for g in got)) or (got == expected).all()


def test_the_recipes_cpu_sections_are_the_sizing_tables():
    """Each headline recipe's [cpu] runs are the ones the committed sizing table
    (recipes/cpu-sizing.csv, tools/size_cpu_scale.py) gives, and its claims are judged at cpu
    scale exactly where the table says they fit."""
    table = pd.read_csv(RECIPE_DIR / "cpu-sizing.csv")
    # reproduce --all --scale cpu: the recipes with runs at it, those with a fitting claim
    assert recipe_names(None, RECIPE_DIR, "cpu") == sorted(set(table.loc[table["fits"], "recipe"]))
    for name, rows in table.groupby("recipe"):
        recipe = load_recipe(name)
        fitting = rows[rows["fits"]]
        if fitting.empty:
            assert "cpu" not in recipe.scales, name
            continue
        multiple = fitting["multiple"].max() if fitting["multiple"].notna().any() else 1.0
        planned = sizing.sized_specs(recipe, int(fitting["seeds"].max()), multiple)
        assert {spec.run_id for spec in recipe.specs("cpu")} == {spec.run_id for spec in planned}, name
        assert not any(spec.until_converged for spec in recipe.specs("cpu")), name  # the fixed budget
        fits = dict(zip(rows["claim"], rows["fits"]))
        for claim in recipe.claims:
            judged = "cpu" in claim.scales
            if (name, claim.id) in LEFT_OUT_AT_CPU:
                assert not judged, (name, claim.id)
            elif claim.id in fits:
                assert judged == fits[claim.id], (name, claim.id)


# Claims the table sizes (the pilot reads every claim) that the recipe does not judge at cpu
# scale, for a reason the recipe states beside the claim.
LEFT_OUT_AT_CPU = {
    ("houlsby2019/fig3-4", "layernorm-only-poor"),  # LayerNorm's rate is the demo's, not tuned for it
}
