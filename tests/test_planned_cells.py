"""The plan's runs per group are the runs the verdict tests: both come from ``cells.cells``.

For every claim of every recipe at each scale it judges, the run specs are turned into
observations (random values, every run learned; a statistic's own ``within`` columns, such as
``layer``, given two values) and judged; each cell's n must be the plan's. Before the plan read
its cells off ``cells.cells`` they drifted apart: the plan counted han2021/fig4's 10 runs per
method for its spread claim while the test paired runs within each TSP length (one run each) and
so tested none (``tests/test_recipes.py`` now fails on such a claim: its plan says 0 runs).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from robustkit.analysis.registry import statistic_of
from robustkit.verdicts import decidability
from robustkit.verdicts.recipes import list_recipes, load_recipe
from robustkit.verdicts.rules import judge


def _observations(recipe, claim, scale: str) -> pd.DataFrame:
    frame = decidability.spec_frame(recipe, scale).assign(run_id=[spec.run_id for spec in recipe.specs(scale)])
    for column in claim.within:  # the statistic's own cells: every run in each
        if column not in frame:
            frame = pd.concat([frame.assign(**{column: value}) for value in (1, 2)], ignore_index=True)
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2, len(frame)) if claim.compare == "rate" else rng.normal(size=len(frame))
    return frame.assign(value=values.astype(float), outcome="ok")


def _cases():
    for name in list_recipes():
        recipe = load_recipe(name)
        for claim in recipe.claims:
            unit = statistic_of(claim.statistic)[1]
            # pairs of runs are observed by their analysis; overall and tuned claims report other n
            other_n = claim.quantifier == "overall" or claim.tuned or claim.compare == "trend"
            if unit.unit != "run" or not unit.independent or other_n:
                continue
            for scale in (s for s in claim.scales if s in recipe.scales):
                yield pytest.param(name, claim.id, scale, id=f"{name}:{claim.id}:{scale}")


@pytest.mark.parametrize("name, claim_id, scale", list(_cases()))
def test_plan_counts_the_runs_the_verdict_tests(name, claim_id, scale):
    recipe = load_recipe(name)
    claim = next(c for c in recipe.claims if c.id == claim_id)
    judged = judge(claim, _observations(recipe, claim, scale), describe=False)
    cells = judged[judged["cell"] != "all"] if len(judged) > 1 else judged
    tested = {(row.n_a, row.n_b) for row in cells.itertuples()}
    planned = {(n_a, n_b) for _, n_a, n_b in decidability.claim_sizes(recipe, claim, scale)}
    assert tested == planned
