"""`robustkit claims --scale S` with no recipe named judges the recipes that have runs at S
(the cpu scale's six), as `reproduce --all --scale S` trains them; a recipe without the scale is
left out instead of stopping the command."""

from __future__ import annotations

from robustkit.verdicts.recipes import list_recipes, load_recipe, recipe_names
from robustkit.verdicts.reproduce import claims


def test_claims_at_a_scale_judge_the_recipes_that_have_it(tmp_path):
    with_cpu = [name for name in list_recipes() if "cpu" in load_recipe(name).scales]
    assert 0 < len(with_cpu) < len(list_recipes())  # the case: some recipes have no cpu scale
    table = claims(tmp_path, scale="cpu")  # an empty store: every claim inconclusive, none skipped
    assert sorted(table["recipe"].unique()) == sorted(with_cpu) == recipe_names(None, scale="cpu")
    assert table["verdict"].eq("inconclusive").all()


def test_the_claims_verb_at_a_scale(tmp_path, capsys):
    from robustkit.cli import main

    assert main(["claims", "--scale", "cpu", "--store", str(tmp_path), "--no-settle", "--format", "csv"]) == 0
    printed = capsys.readouterr().out
    assert "houlsby2019/fig6-ablation" in printed and "beyond/connectivity" not in printed


def test_a_claim_not_judged_at_a_scale_says_what_its_stored_runs_show(tmp_path, monkeypatch):
    """Issue #55: a claim the recipe does not judge at cpu scale whose cpu runs exist read
    "n = 0 vs 0; untestable". With runs stored it is *not sized for this scale*, with the effect
    and runs observed and no p-value; without them it stays untestable."""
    import dataclasses

    import numpy as np

    from robustkit.verdicts import tally
    from robustkit.verdicts.rules import NOT_SIZED, UNTESTABLE
    from tests.observation_frames import runs_frame

    recipe = load_recipe("houlsby2019/fig3-4")
    claim = next(c for c in recipe.claims if c.id == "layernorm-only-poor")
    assert not claim.judged_at("cpu")
    recipe = dataclasses.replace(recipe, claims=[claim])

    def found(claim, figure, figure_params, store, run_ids, frames=None, device=None):
        return runs_frame({"layernorm": np.arange(6.0), "full": np.arange(6.0) + 10.0}, task="rte", lr=1e-4)

    monkeypatch.setattr(tally, "observations", found)
    empty = tally.verdicts(tmp_path, [recipe], scale="cpu")
    empty = empty[empty["claim"] == claim.id].iloc[-1]
    assert empty["reason_class"] == UNTESTABLE and empty["n_a"] == 0  # no run stored: nothing observed

    run_id = recipe.specs("cpu")[0].run_id
    (tmp_path / run_id).mkdir()
    (tmp_path / run_id / "manifest.json").write_text("{}")
    stored = tally.verdicts(tmp_path, [recipe], scale="cpu")
    row = stored[stored["claim"] == claim.id].iloc[-1]
    assert row["verdict"] == "inconclusive" and row["reason_class"] == NOT_SIZED
    assert (row["n_a"], row["n_b"]) == (6, 6) and np.isfinite(row["effect"]) and np.isnan(row["p_value"])
    assert "judges it at paper scale" in row["reason"] and "observed" in row["reason"]
    assert "untestable" not in tally.summary_line(stored[stored["claim"] == claim.id])
