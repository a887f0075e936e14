"""Issue #56: every claim says what the paper's own study could see, its runs per group
(``paper_n``) and where that number comes from (``paper_n_source``), or "not stated" and why."""

from __future__ import annotations

import re
import shutil

from robustkit.verdicts.recipes import RECIPE_DIR, Recipe, list_recipes, load_recipe
from robustkit.verdicts.spec import NOT_STATED

# How a source may write its n: the papers write both "10 random seed restarts" and "five runs".
_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 10: "ten", 20: "twenty", 100: "hundred"}


def paper_n_problems(recipes: list[Recipe]) -> list[str]:
    """What is wrong with the recipes' paper_n keys, one line per claim (empty: all is said).

    A claim must carry ``paper_n_source``; one that gives ``paper_n`` must write that number in
    its source (as a numeral or a word), so that the n is quoted from the paper, not put there.
    """
    problems = []
    for recipe in recipes:
        for claim in recipe.claims:
            where = f"{recipe.name}: {claim.id}"
            source = claim.paper_n_source
            if not source:
                problems.append(f"{where}: no paper_n_source (the paper's n and where, or 'not stated: ...')")
            elif claim.paper_n is None and not source.startswith(NOT_STATED):
                problems.append(f"{where}: no paper_n, but its source does not begin {NOT_STATED!r}")
            elif claim.paper_n is not None:
                said = re.search(rf"(?<![\d.]){claim.paper_n}(?![\d.])", source) or re.search(
                    rf"\b{_WORDS.get(claim.paper_n, '-')}\b", source, flags=re.IGNORECASE
                )
                if not said:
                    problems.append(f"{where}: paper_n = {claim.paper_n}, which its source does not write")
    return problems


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
