"""A scale sized from a pilot: the runs per group and training budget each claim needs, fitted
into a CPU budget by a rule stated before any run of the sized scale exists.

The pilot is the recipes' demo runs. Per claim, :func:`pilot_sizes` takes the runs per group at
which the claim's own path decides the pilot's effect with 80% power (settle's calibrated
bootstrap, :func:`robustkit.verdicts.settle.runs_to_decide`; the paper's reported effect where
the pilot promises none, :func:`paper_n`) and the training budget its still-improving runs are
extrapolated to need. :func:`sized_specs` turns them into new seeds (from :data:`FIRST_SEED`, so
no pilot run is re-tested) trained to that fixed budget; :func:`fit` costs the distinct runs from
the measured CPU throughput and drops the claim needing the most seeds until the rest fits.

The budget is a fixed one with its full schedule, the same for every method (issue #55 item 5):
each run trains its demo cell's epochs times its recipe's multiple (1 where the pilot's groups
pass the convergence guard; :func:`robustkit.verdicts.budget.claim_budget`'s extrapolation where
they do not), rounded up, at most :data:`MAX_EPOCHS`, its linear schedule decaying to zero over
that budget (:func:`robustkit.train.optimiser.linear_lr_factor`), and no stopping rule. Each
method's rate was calibrated at the demo's budget with that full decay, so a sized run is a demo
run with a new seed and, where the pilot's runs were still improving, a longer budget. The rule
until 2026-12-07 (twice that budget, stopped by ``until_converged``) stopped runs at a median
quarter of their budget, with the rate still above 80% of its peak: full fine-tuning scored about
3 points below its demo runs (and, on three paired seeds, adapters 2; bench/README.md, "CPU
protocol").

The rule never looks at verdicts. Written by hand: it composes robustkit's settle and plan. The
rule step by step: docs/verdicts.md, "robustkit/verdicts/sizing.py".
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from robustkit.verdicts import budget, settle, tally

HEADLINE = (
    "han2021/fig2",
    "han2021/fig4",
    "han2021/fig5",
    "he2021/table2",
    "he2021/fig3",
    "he2021/fig4",
    "he2021/fig2",
    "he2021/fig6",
    "houlsby2019/fig3-4",
    "houlsby2019/fig6-ablation",
)
"""The seed papers' headline claims' recipes (issue #47): Han figs 2, 4, 5; He table 2, figs 2, 3,
4, 6; Houlsby figs 3-4 and 6."""
FIRST_SEED = 1000  # the sized runs' seeds start here: none is a pilot (demo) run
MAX_EPOCHS = 30  # the longest budget a sized run trains, in epochs
SIZE_COLUMNS = ["recipe", "claim", "compare", "pilot_n", "n", "basis", "seeds", "side", "multiple", "fits", "reason"]


def pilot_sizes(
    recipes: Sequence,
    pilot: str | Path,
    defaults: dict | None = None,
    max_runs: int = settle.MAX_RUNS,
    simulations: int = settle.SIMULATIONS,
) -> pd.DataFrame:
    """Per claim of ``recipes``, what its pilot (demo runs in ``pilot``) says it needs.

    Returns
    -------
    DataFrame
        :data:`SIZE_COLUMNS` but ``fits``: ``pilot_n`` (runs per group and cell in the pilot), ``n``
        (runs per group for 80% power, NaN where none), ``seeds`` (seeds of its recipe's grid for
        n), ``side`` (the decision the pilot's effect points to), ``multiple`` (its training
        budget over the demo's, 1 where the pilot's groups pass the guard), ``reason`` (why no n).
    """
    from robustkit.analysis.convergence import still_improving
    from robustkit.store.tables import load_history

    history = load_history(pilot)
    rows = []
    for recipe in recipes:
        specs = recipe.specs("demo", defaults)
        run_ids = [spec.run_id for spec in specs]
        demo_seeds = len({spec.seed for spec in specs})
        frames: dict = {}
        late = still_improving(pilot, run_ids)
        for claim in recipe.claims:
            row = {"recipe": recipe.name, "claim": claim.id, "compare": claim.compare, "multiple": 1.0, "reason": ""}
            try:
                found = tally.observations(claim, recipe.figure, recipe.figure_params("demo"), pilot, run_ids, frames)
            except Exception as error:  # noqa: BLE001 - one claim without pilot runs must not cost the table
                rows.append({**row, "pilot_n": 0, "n": math.nan, "seeds": math.nan, "reason": f"no pilot: {error}"})
                continue
            if claim.final:
                found_budget = budget.claim_budget(claim, found, late, pilot, history)
                # budget.claim_budget names a group ("late" runs) wherever the guard stops a cell;
                # with none, every cell passes at the demo's budget
                passes = found_budget["multiple"] is None and "late" not in found_budget
                multiple = found_budget["multiple"]
                row["multiple"] = 1.0 if passes else multiple if multiple is not None else math.nan
            sized = settle.runs_to_decide(claim, found, None, max_runs=max_runs, simulations=simulations)
            n, basis, reason = sized["n"], "pilot", sized["reason"]
            if n is None and sized["observed_n"]:
                n = paper_n(claim, sized["observed_n"], max_runs)
                basis, reason = ("paper's effect", "") if n else ("", reason)
            per_seed = sized["observed_n"] / demo_seeds if sized["observed_n"] else math.nan
            rows.append(
                {
                    **row,
                    "pilot_n": sized["observed_n"],
                    "n": n or math.nan,
                    "basis": basis,
                    "seeds": max(demo_seeds, math.ceil(n / per_seed)) if n else math.nan,
                    "side": sized["side"] or "",
                    "reason": reason,
                }
            )
    return pd.DataFrame(rows).reindex(columns=[c for c in SIZE_COLUMNS if c != "fits"])


def paper_n(claim, start: int, max_runs: int = settle.MAX_RUNS, power: float = settle.POWER) -> int | None:
    """The smallest n per group (from ``start``, doubling, then bisected) at which the plan's
    power at the paper's reported effect reaches ``power``; None where the paper reports no single
    effect or ``max_runs`` do not reach it."""
    from robustkit.verdicts.decidability import _effect_and_difference
    from robustkit.verdicts.decidability import power as power_at

    if claim.paper_effect is None or isinstance(claim.paper_effect, dict) or claim.compare in ("trend", "threshold"):
        return None
    effect, difference = _effect_and_difference(claim.paper_effect)
    reaches = lambda n: power_at(claim.compare, n, n, effect, claim.alpha, difference=difference or 0.0) >= power  # noqa: E731
    low, high = start, start
    while not reaches(high):
        if high >= max_runs:
            return None
        low, high = high, min(2 * high, max_runs)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


def sized_specs(recipe, seeds: int, multiple: float, defaults: dict | None = None) -> list:
    """The recipe's demo runs at ``seeds`` new seeds (:data:`FIRST_SEED` on), each trained to a
    fixed budget of ``multiple`` times its demo epochs (rounded up, at most :data:`MAX_EPOCHS`),
    its schedule decaying over that budget, never stopped early (module docstring)."""
    specs = recipe.specs("demo", defaults)
    first = min(spec.seed for spec in specs)
    found = {}
    for spec in specs:
        if spec.seed != first:
            continue
        for k in range(seeds):
            budget = min(MAX_EPOCHS, math.ceil(spec.epochs * multiple))
            new = dataclasses.replace(spec, seed=FIRST_SEED + k, epochs=budget, until_converged=False)
            found[new.run_id] = new
    return list(found.values())


def fit(
    sizes: pd.DataFrame,
    recipes: Sequence,
    cpu_hours: float = 8.0,
    defaults: dict | None = None,
    throughput: dict | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The claims that fit ``cpu_hours`` (module docstring, steps 2-5).

    Returns
    -------
    sizes : DataFrame
        ``sizes`` with ``fits`` (bool) and, where it does not, the reason.
    per_recipe : DataFrame
        ``recipe, seeds, epochs`` (the budget: the demo's epochs times this), ``runs`` (its
        distinct runs) and ``cpu_hours`` (its runs, each to its budget); then a ``total`` row
        over the distinct runs.
    """
    from robustkit.sweeps.plan import CPU_THROUGHPUT_TABLE, examples, read_throughput, run_hours

    rates = read_throughput(CPU_THROUGHPUT_TABLE) if throughput is None else throughput
    by_name = {recipe.name: recipe for recipe in recipes}
    # sizes read back from an earlier fit's CSV carry its reasons: each is said once
    sizes = sizes.assign(fits=sizes["seeds"].notna(), reason=sizes["reason"].str.removeprefix("does not fit: "))
    sizes.loc[~sizes["fits"] & (sizes["reason"] == ""), "reason"] = "no runs per group found"
    sizes.loc[~sizes["fits"], "reason"] = "does not fit: " + sizes.loc[~sizes["fits"], "reason"]

    def plan_of(sizes: pd.DataFrame) -> pd.DataFrame:
        rows, distinct = [], {}
        for name, recipe in by_name.items():
            mine = sizes[(sizes["recipe"] == name) & sizes["fits"]]
            if mine.empty:
                continue
            multiple = mine["multiple"].max() if mine["multiple"].notna().any() else 1.0
            specs = sized_specs(recipe, int(mine["seeds"].max()), multiple, defaults)
            own = []
            for spec in specs:
                resolved = spec.resolved()
                trained, evaluated = examples(resolved)
                row = {
                    "run_id": spec.run_id,
                    "model": resolved.model,
                    "max_length": resolved.max_length,
                    "train_examples": trained,
                    "eval_examples": evaluated,
                }
                distinct[spec.run_id] = row
                own.append(row)
            hours = run_hours(pd.DataFrame(own), rates)
            rows.append(
                {
                    "recipe": name,
                    "seeds": int(mine["seeds"].max()),
                    "epochs": multiple,
                    "runs": len(own),
                    "cpu_hours": math.nan if hours is None else hours,
                }
            )
        total = run_hours(pd.DataFrame(list(distinct.values())), rates) if distinct else 0.0
        rows.append({"recipe": "total (distinct runs)", "runs": len(distinct), "cpu_hours": total})
        return pd.DataFrame(rows, columns=["recipe", "seeds", "epochs", "runs", "cpu_hours"])

    per_recipe = plan_of(sizes)
    while per_recipe.iloc[-1]["cpu_hours"] > cpu_hours and sizes["fits"].any():
        worst = sizes[sizes["fits"]]["seeds"].idxmax()
        sizes.loc[worst, "fits"] = False
        sizes.loc[worst, "reason"] = (
            f"does not fit: {int(sizes.loc[worst, 'n'])} runs per group ({int(sizes.loc[worst, 'seeds'])} seeds) "
            f"would take the total past {cpu_hours:g} CPU-hours"
        )
        per_recipe = plan_of(sizes)
    return sizes, per_recipe
