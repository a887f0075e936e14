"""Issue #56: every claim says what the paper's own study could see, its runs per group
(``paper_n``) and where that number comes from (``paper_n_source``), or "not stated" and why."""

from __future__ import annotations

import shutil

from robustkit.checks import recipe as recipe_rules
from robustkit.verdicts.recipes import RECIPE_DIR, Recipe, list_recipes, load_recipe


def paper_n_problems(recipes: list[Recipe]) -> list[str]:
    """The rule's findings (robustkit/checks/recipe.py, rule "paper effect and n"), per recipe."""
    return [f"{recipe.name}: {problem}" for recipe in recipes for problem in recipe_rules.paper_n_problems(recipe)]


def test_every_claim_says_the_papers_n_or_that_it_is_not_stated():
    recipes = [load_recipe(name) for name in list_recipes()]
    assert paper_n_problems(recipes) == []
    claims = [claim for recipe in recipes for claim in recipe.claims]
    stated = [claim for claim in claims if claim.paper_n is not None]
    # the papers state their seeds for Han figs 2, 4, 9-10, He figs 3-4 and tables 2, 5, 7, Houlsby fig 4
    assert len(stated) >= 20, len(stated)
    assert len(claims) - len(stated) >= 20  # most figures without numbers say no seeds either


def test_a_recipe_without_the_papers_n_is_caught(tmp_path):
    """The check fails a recipe that leaves the keys out or gives an n its source does not quote."""
    (tmp_path / "han2021").mkdir()
    shutil.copy(RECIPE_DIR / "defaults.toml", tmp_path / "defaults.toml")
    text = (RECIPE_DIR / "han2021" / "fig2.toml").read_text(encoding="utf-8")
    assert "paper_n = 10\n" in text
    shipped = load_recipe("han2021/fig2", RECIPE_DIR)
    assert paper_n_problems([shipped]) == []

    left_out = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("paper_n"))
    (tmp_path / "han2021" / "fig2.toml").write_text(left_out, encoding="utf-8")
    assert any("no paper_n_source" in p for p in paper_n_problems([load_recipe("han2021/fig2", tmp_path)]))

    (tmp_path / "han2021" / "fig2.toml").write_text(text.replace("paper_n = 10", "paper_n = 12"), encoding="utf-8")
    problems = paper_n_problems([load_recipe("han2021/fig2", tmp_path)])
    assert problems and "paper_n = 12" in problems[0]
