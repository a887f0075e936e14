"""Statistics that read a run's whole training schedule (``Statistic.schedule``: a dev-loss rise
after its minimum, epoch-end spreads, gradient-norm slopes) are never judged on runs trained
``until_converged``: those runs stop at convergence, so the schedule the statistic reads was never
trained (issue #47, item 6: why the demo keeps its fixed budget)."""

from __future__ import annotations

import copy

import pytest

from robustkit.analysis import registry
from robustkit.verdicts.recipes import list_recipes, load_defaults, load_recipe
from robustkit.verdicts.rules import UNTESTABLE
from robustkit.verdicts.tally import verdicts


def _converging(defaults: dict, scale: str) -> dict:
    changed = copy.deepcopy(defaults)
    changed[scale]["base"]["until_converged"] = True
    return changed


def test_schedule_statistics_are_the_trajectory_ones():
    declared = {f"{a.name}.{s.name}" for a in registry.ANALYSES.values() for s in a.statistics if s.schedule}
    assert {"curves.overfit", "curves.metric-fall", "epoch-scores.spread", "gradnorm.slope"} <= declared
    assert not declared & {"scores.score", "rsa.similarity", "landscape.curvature", "attack.success"}


def test_a_schedule_claim_on_converging_runs_is_untestable(tmp_path):
    """He et al. figures 5 and 9 (overfitting: the dev loss and metric after their best) on the
    demo's runs: untestable once the runs stop when they converge, judged otherwise."""
    recipe = load_recipe("he2021/fig5-9")
    defaults = load_defaults()
    store = tmp_path / "runs"
    store.mkdir()

    stopped = verdicts(store, [recipe], "demo", defaults=_converging(defaults, "demo"))
    assert len(stopped) == len(recipe.claims)
    assert (stopped["reason_class"] == UNTESTABLE).all()
    assert stopped["reason"].str.contains("reads the whole training schedule").all()
    assert stopped["verdict"].eq("inconclusive").all()

    # the same recipe to its fixed budget reaches its analysis (here: no runs in the store)
    fixed = verdicts(store, [recipe], "demo", defaults=defaults)
    assert not fixed["reason"].str.contains("until converged").any()


def test_a_final_score_claim_on_converging_runs_is_still_judged(tmp_path):
    """The check is the statistic's, not the scale's: a claim on the final score is judged on
    runs trained until converged (Han et al. figure 4 at cpu scale, its runs made to converge)."""
    recipe = load_recipe("han2021/fig4")
    table = verdicts(tmp_path, [recipe], "cpu", defaults=_converging(load_defaults(), "cpu"))
    assert not table["reason"].str.contains("until converged").any()


@pytest.mark.parametrize("name", list_recipes())
def test_no_shipped_recipe_judges_a_schedule_claim_on_converging_runs(name):
    """A scale's runs trained until converged cannot carry a claim on the schedule: the demo
    keeps its fixed budget because its runs are shared with such claims (He figs 5 and 9, Han
    fig 3, the stability-length recipe)."""
    recipe = load_recipe(name)
    for claim in recipe.claims:
        if not registry.statistic_of(claim.statistic)[1].schedule:
            continue
        for scale in set(claim.scales) & set(recipe.scales):
            converging = [spec.run_id for spec in recipe.specs(scale) if spec.until_converged]
            assert not converging, f"{name} {claim.id} at {scale}: {len(converging)} runs stop when converged"
