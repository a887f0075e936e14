"""Evidence counted once (issue #37 item 7): which claims rest on which runs, evidence units,
claims that re-test another's observations, and the tally by unit (robustkit.verdicts.evidence)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from robustkit.verdicts.evidence import claim_runs, n_text, tally_line, unit_table, units
from robustkit.verdicts.recipes import list_recipes, load_recipe


@pytest.fixture(scope="module")
def project_units() -> dict[str, pd.DataFrame]:
    recipes = [load_recipe(name) for name in list_recipes()]
    return {scale: units(recipes, scale).set_index(["recipe", "claim"]) for scale in ("demo", "paper")}


def _judged(frame: pd.DataFrame, recipes: list[str]) -> pd.DataFrame:
    """The claims of ``recipes`` that rest on runs at the frame's scale."""
    rows = frame[frame.index.get_level_values("recipe").isin(recipes)]
    return rows[rows["runs"] > 0]


def test_claims_on_shared_runs_are_one_unit(project_units):
    """The reviewer's cases land in one evidence unit each at demo scale: he2021/fig3 and table2;
    Han et al.'s figures 2-3 and table 1 with He et al.'s figures 5-9 and table 6 (the same ten
    runs); the peft/zoo* claims, which share one group of full fine-tuning runs."""
    demo = project_units["demo"]
    shared = demo.loc[[("he2021/fig3", "adapters-ahead-when-small"), ("he2021/table2", "adapters-ahead-on-average")]]
    ten = _judged(demo, ["han2021/fig2", "han2021/fig3", "han2021/table1", "he2021/fig5-9", "he2021/table6"])
    zoo = _judged(demo, ["peft/zoo", "peft/zoo-attack", "peft/zoo-landscape", "peft/zoo-rsa", "peft/zoo-tradeoff"])
    for case in (shared, ten, zoo):
        assert len(case) >= 2 and case["unit"].notna().all() and case["unit"].nunique() == 1, case
    # the two-group claims of Han et al. and He et al. read the very same ten runs (5 houlsby, 5 full)
    on_ten = ten[ten["runs"] == 10]
    assert len(on_ten) >= 4 and on_ten["run_set"].nunique() == 1
    assert on_ten.index.get_level_values("recipe").str.startswith("han2021").any()
    assert on_ten.index.get_level_values("recipe").str.startswith("he2021").any()
    # the zoo's claims of several methods: each method's runs with the one full group
    assert zoo["run_set"].nunique() > 1 and zoo["unit_runs"].iloc[0] > zoo["runs"].max()
    # a claim at a scale it is not judged at rests on no run and is in no unit
    assert demo.loc[("han2021/fig1", "tsp-spread"), "runs"] == 0 and pd.isna(
        demo.loc[("han2021/fig1", "tsp-spread"), "unit"]
    )


def test_a_claim_that_reads_another_claims_observations_is_marked(project_units):
    """he2021/table2 reads fig3's demo runs at both sizes (20 runs); fig3's trend over them, the
    same observations, is judged at paper scale only since issue #45 (its two ends each at
    alpha / 2 need 6 runs a group), and fig3's demo claim reads the 300-example cell alone: not the
    same observations. At paper scale fig3 has 60 runs, table2 150."""
    demo, paper = project_units["demo"], project_units["paper"]
    fig3, table2 = ("he2021/fig3", "ft-catches-up"), ("he2021/table2", "adapters-ahead-on-average")
    small = ("he2021/fig3", "adapters-ahead-when-small")
    assert demo.loc[table2, "same_as"] == "" and demo.loc[small, "same_as"] == ""
    assert demo.loc[table2, "runs"] == 20 and demo.loc[small, "runs"] == 10 and demo.loc[fig3, "runs"] == 0
    assert paper.loc[table2, "same_as"] == "" and paper.loc[fig3, "runs"] < paper.loc[table2, "runs"]
    # an equivalence of a and b is one of b and a: table5's two claims re-test one set of numbers
    assert paper.loc[("he2021/table5", "256-not-below-64"), "same_as"] == "he2021/table5/64-not-below-256"
    # the same runs with another statistic are not the same observations
    assert demo.loc[("he2021/table6", "smaller-best-minus-mean"), "same_as"] == ""


RECIPE = """title = "t"
figure = "box-seeds"
output = "{name}.pdf"
[[claim]]
id = "spread"
says = "adapters vary less"
statistic = "scores.score"
compare = "spread"
a = "houlsby"
b = "full"
direction = "less"
[[claim]]
id = "location"
says = "adapters score higher"
statistic = "scores.score"
compare = "location"
a = "full"
b = "houlsby"
direction = "less"
[[claim]]
id = "full-above-half"
says = "full fine-tuning learns"
statistic = "scores.score"
compare = "threshold"
a = "full"
value = 0.5
direction = "greater"
[[claim]]
id = "paper-only"
says = "only the paper's runs can tell"
statistic = "scores.score"
compare = "location"
a = "houlsby"
b = "full"
direction = "less"
scales = ["paper"]
[demo.base]
model = "bert-tiny"
task = "{task}"
[demo.grid]
method = ["houlsby", "full"]
seed = [0, 1, 2, 3, 4]
"""


@pytest.fixture
def two_recipes(tmp_path):
    (tmp_path / "toy").mkdir()
    for name, task in (("one", "rte"), ("two", "mrpc")):
        (tmp_path / "toy" / f"{name}.toml").write_text(RECIPE.format(name=name, task=task))
    (tmp_path / "toy" / "again.toml").write_text(RECIPE.format(name="again", task="rte"))
    return tmp_path


def test_disjoint_runs_are_two_units_and_a_repeat_is_marked(two_recipes):
    one, two = load_recipe("toy/one", two_recipes), load_recipe("toy/two", two_recipes)
    frame = units([one, two], "demo", {}).set_index(["recipe", "claim"])
    assert frame.loc["toy/one", "unit"].iloc[:3].eq(1).all()
    assert (
        frame.loc["toy/two", "unit"].iloc[:3].eq(2).all()
        and frame.loc[[("toy/one", "paper-only"), ("toy/two", "paper-only")], "unit"].isna().all()
    )
    assert list(frame.loc["toy/one", "runs"]) == [10, 10, 5, 0]
    assert claim_runs(one, one.claims[2], "demo", {}) == {s.run_id for s in one.specs("demo", {}) if s.method == "full"}
    # the location claim of a against b reads what the spread claim reads: a second look
    assert (
        frame.loc[("toy/one", "location"), "same_as"] == "toy/one/spread"
        and frame.loc[("toy/one", "spread"), "same_as"] == ""
    )
    # a recipe on the same runs joins the first recipe's unit, its claims re-testing the first's
    again = units([one, two, load_recipe("toy/again", two_recipes)], "demo", {}).set_index(["recipe", "claim"])
    assert again.loc[("toy/again", "spread"), "unit"] == again.loc[("toy/one", "spread"), "unit"] == 1
    assert again.loc[("toy/again", "full-above-half"), "same_as"] == "toy/one/full-above-half"
    assert again["unit"].nunique() == 2


def _verdicts(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    """Verdict rows: a cell row and the overall row per claim (the overall verdict last)."""
    frame = []
    for recipe, claim, verdict in rows:
        frame += [
            {"recipe": recipe, "claim": claim, "cell": "task=rt", "verdict": "inconclusive", "n_a": 5, "n_b": 5},
            {"recipe": recipe, "claim": claim, "cell": "all", "verdict": verdict, "n_a": 5, "n_b": 5},
        ]
    return pd.DataFrame(frame)


def test_the_tally_counts_units_and_pluralises(two_recipes):
    recipes = [load_recipe(name, two_recipes) for name in ("toy/one", "toy/two")]
    frame = units(recipes, "demo", {})
    verdicts = _verdicts(
        [
            ("toy/one", "spread", "agrees"),
            ("toy/one", "location", "contradicts"),
            ("toy/one", "full-above-half", "agrees"),
            ("toy/one", "paper-only", "inconclusive"),
            ("toy/two", "spread", "agrees"),
            ("toy/two", "location", "inconclusive"),
            ("toy/two", "full-above-half", "inconclusive"),
            ("toy/two", "paper-only", "inconclusive"),
        ]
    )
    line = tally_line(verdicts, frame)
    assert line.startswith(
        "8 claims (3 agrees, 1 contradicts, 4 inconclusive) in 2 evidence units (claims that share a run are one unit)"
    )
    assert "0 with agreeing claims only" not in line and "1 with agreeing claims only" in line and "1 with both" in line
    assert "2 claims re-test another's observations" in line and "2 claims rest on no run at this scale" in line
    table = unit_table(verdicts, frame).set_index("unit")
    assert table.loc[1, ["claims", "agrees", "contradicts", "inconclusive", "repeats", "evidence"]].tolist() == [
        3,
        2,
        1,
        0,
        1,
        "both",
    ]
    assert table.loc[2, "evidence"] == "agrees" and table.loc[2, "runs"] == 10
    one = tally_line(_verdicts([("toy/one", "spread", "inconclusive")]), frame)
    assert one.startswith("1 claim (0 agrees, 0 contradicts, 1 inconclusive) in 1 evidence unit (")
    assert "0 claims re-test" in one and "1 with neither" in one and "rest on no run" not in one
    repeat = tally_line(_verdicts([("toy/one", "spread", "agrees"), ("toy/one", "location", "agrees")]), frame)
    assert "1 claim re-tests another's observations" in repeat


def test_n_is_runs_and_cells():
    """Seven layers of five runs per group are "5 vs 5 runs, 7 cells", not 35 vs 35 (issue #37)."""
    cells = pd.DataFrame({"compare": "location", "n_a": [5] * 7 + [5], "n_b": [5] * 7 + [5], "cells": [1] * 7 + [7]})
    assert n_text(cells) == "n = 5 vs 5 runs, 7 cells"
    assert n_text(cells.iloc[:1].assign(cells=1)) == "n = 5 vs 5"
    assert n_text(pd.DataFrame({"compare": ["threshold"], "n_a": [6], "n_b": [0]})) == "n = 6"
    # verdicts written before the cells column: the overall n is a sum over cells, and says so
    summed = pd.DataFrame({"compare": "location", "n_a": [5] * 7 + [35], "n_b": [5] * 7 + [35]})
    assert n_text(summed) == "n = 35 vs 35 summed over 7 cells"


def test_chance_alone_and_benjamini_hochberg_within_a_unit():
    """Issue #45: the tally says how many decisions chance alone would give, and a decision that
    does not survive Benjamini-Hochberg over the claims of its evidence unit is marked."""
    from robustkit.verdicts.evidence import by_chance, chance_line

    def rows(recipe, claim, verdict, p, smallest=0.004):
        return {"recipe": recipe, "claim": claim, "verdict": verdict, "p_value": p, "smallest_p": smallest}

    verdicts = pd.DataFrame(
        [
            rows("r", "a", "agrees", 0.004),
            rows("r", "b", "agrees", 0.04),  # two more claims share its runs: 0.04 x 3 / 2 > 0.05
            rows("r", "c", "inconclusive", 0.6),
            rows("s", "d", "contradicts", 0.03),  # alone in its unit: survives
            rows("s", "e", "inconclusive", 0.5, smallest=0.1),  # cannot decide at its n
        ]
    )
    frame = pd.DataFrame({"recipe": ["r", "r", "r", "s", "s"], "claim": list("abcde"), "unit": [1, 1, 1, 2, np.nan]})
    table = by_chance(verdicts, frame).set_index("claim")
    assert table.loc["a", "bh_unit"] and not table.loc["b", "bh_unit"] and table.loc["d", "bh_unit"]
    assert pd.isna(table.loc["c", "bh_unit"]) and not table.loc["e", "can_decide"]
    line = chance_line(verdicts, frame)
    assert "of 5 claims judged, 4 could decide" in line and "at most 0.4 decisions" in line
    assert "3 decided, 2 of them survive Benjamini-Hochberg" in line
