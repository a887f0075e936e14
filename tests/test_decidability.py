"""The plan of a claim before any run exists (robustkit.verdicts.decidability): the power it prints is the
power of the test that is run, and the power at the paper's effect comes from the claim's
``paper_effect`` cell by cell."""

from __future__ import annotations

import numpy as np
import pytest

from robustkit.measures import exact
from robustkit.verdicts import decidability
from robustkit.verdicts.recipes import load_recipe


@pytest.mark.parametrize("n_a, n_b", [(8, 8), (10, 11)])
def test_spread_power_is_the_rate_at_which_the_claims_test_agrees(n_a, n_b):
    """The same draws, tested one by one by the test claims run (exact.spread_pairs on the
    groups' seed pairs), agree exactly as often as the power says."""
    simulations, ratio = 200, 0.4
    rng = np.random.default_rng(decidability.SEED)
    pa, pb = n_a // 2, n_b // 2
    left, right = rng.standard_normal((simulations, pa)), rng.standard_normal((simulations, pa))
    other_left, other_right = rng.standard_normal((simulations, pb)), rng.standard_normal((simulations, pb))
    # the runs whose seed pairs are those differences: (x, y) per pair, in seed order
    a = np.stack([left * ratio, right * ratio], axis=2).reshape(simulations, -1)
    b = np.stack([other_left, other_right], axis=2).reshape(simulations, -1)
    agrees = np.mean([exact.spread_pairs(x, y, "less") < 0.05 for x, y in zip(a, b)])
    assert decidability._spread_power(n_a, n_b, ratio, 0.05, simulations) == pytest.approx(agrees)
    assert 0 < agrees < 1  # a comparison that can fail either way


def test_equivalence_power_falls_as_the_difference_nears_the_margin():
    at = [decidability.power("equivalence", 10, 10, 2.0, difference=d) for d in (0.0, 1.0, 2.0)]
    assert at[0] == decidability.power("equivalence", 10, 10, 2.0) and at[0] > at[1] > at[2]
    assert at[2] <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / decidability.SIMULATIONS)  # at the margin: the null


def test_the_plan_gives_the_power_at_the_papers_effect_per_cell():
    recipe = load_recipe("he2021/table7")
    table = decidability.plan([recipe], scales=("paper",)).set_index(["claim", "cell"])
    claim = next(c for c in recipe.claims if c.id == "no-gain-from-mixout")
    margin, difference = claim.paper_effect["task=qnli, method=full"]
    row = table.loc[("no-gain-from-mixout", "task=qnli, method=full")]
    assert (row["paper_effect"], row["paper_difference"]) == (margin, difference)
    # a claim on each of its 8 cells: every cell at alpha (an intersection-union test)
    assert row["cells"] == 8 and row["level"] == pytest.approx(0.05)
    assert row["paper_power"] == round(decidability.power("equivalence", 5, 5, margin, 0.05, difference=difference), 3)
    helps = table.loc["mixout-helps-ft-on-cola-mrpc"]
    assert helps.loc["task=cola", "paper_effect"] == 0.24 and 0 < helps.loc["task=cola", "paper_power"] < 1


def test_a_test_that_cannot_reach_alpha_has_no_power(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "f.toml").write_text(
        'title = "t"\nfigure = "box-seeds"\noutput = "o.pdf"\n'
        '[[claim]]\nid = "c"\nsays = "s"\nstatistic = "scores.score"\ncompare = "location"\na = "houlsby"\nb = "full"\n'
        'direction = "greater"\npaper_effect = 3.0\npaper_effect_source = "table 1: 3 SD"\n'
        '[demo.grid]\nmethod = ["houlsby", "full"]\nseed = [0, 1]\n'
    )
    row = decidability.plan([load_recipe("p/f", tmp_path)], scales=("demo",)).iloc[0]
    assert (row["n_a"], row["n_b"], row["decidable"], row["paper_power"]) == (2, 2, False, 0.0)
