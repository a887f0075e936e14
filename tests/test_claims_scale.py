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
