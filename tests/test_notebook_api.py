"""The notebook API gives each keyword one meaning (issue #28 item 1): ``recipes`` is always a list
of recipe names and ``recipe_dir`` always the folder they are read from; a string where a list is
expected is refused in one line, never iterated character by character."""

from __future__ import annotations

import pytest

import robustkit
from robustkit.verdicts.recipes import RECIPE_DIR, RecipeError, recipe_names


def test_recipes_are_names_and_recipe_dir_is_a_folder(tmp_path):
    # a folder given as `recipes` is refused, naming the keyword that takes it
    with pytest.raises(RecipeError, match="recipe_dir="):
        robustkit.claims(tmp_path / "runs", recipes=str(RECIPE_DIR))
    # one name as a string: refused, with the list it should have been
    with pytest.raises(RecipeError, match=r"\['han2021/fig2'\]"):
        robustkit.claims(tmp_path / "runs", recipes="han2021/fig2")
    with pytest.raises(RecipeError, match="recipe names"):
        recipe_names([RECIPE_DIR])
    # the folder keyword: read from there (an empty folder has no recipes, so no verdicts)
    (tmp_path / "empty").mkdir()
    assert recipe_names(None, tmp_path / "empty") == []
    with pytest.raises(RecipeError, match="unknown recipe 'han2021/fig2'"):
        robustkit.claims(tmp_path / "runs", recipes=["han2021/fig2"], recipe_dir=tmp_path / "empty")
    # names as a list are judged (no runs: inconclusive, nothing trained); a missing store is an error
    from robustkit.errors import StoreError

    with pytest.raises(StoreError, match="does not exist"):
        robustkit.claims(tmp_path / "runs", recipes=["han2021/fig2"])
    (tmp_path / "runs").mkdir()
    table = robustkit.claims(tmp_path / "runs", recipes=["han2021/fig2"])
    assert set(table["recipe"]) == {"han2021/fig2"} and (table["verdict"] == "inconclusive").all()


def test_draw_takes_one_name_and_the_folder_keyword(tmp_path):
    with pytest.raises(RecipeError, match="one recipe name"):
        robustkit.draw_recipe(["han2021/fig2"], tmp_path / "runs")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RecipeError, match="unknown recipe"):
        robustkit.draw_recipe("han2021/fig2", tmp_path / "runs", recipe_dir=tmp_path / "empty")
