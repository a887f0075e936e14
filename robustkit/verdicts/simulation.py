"""The verdict path as a whole, checked by simulation: how often does a claim, as its recipe
encodes it, give a false verdict on runs that look like real ones?

For each claim of a recipe at a scale, synthetic observations are drawn with the claim's own
structure (its cells and runs per group from :func:`robustkit.verdicts.decidability.claim_sizes`, a
statistic's own cells such as layers holding the same runs) and judged by the real path,
:func:`robustkit.verdicts.rules.judge`: Tarone, Holm or the intersection-union test, the quantifier, the
sign check, the per-cell convergence guard, both failure policies and exact tests with ties.
The runs look like real ones: scores on the dev set's 1/872 grid (SST-2's), skewed (a long tail
of weak seeds), a point mass at the majority-class score for failed runs (15% of runs, outcome
``collapsed``, value 0.509), 25% of runs still improving at the end (the guard's input), and the
layers of one run correlated.

Two configurations per claim, each the least favourable for its error:

- **false agrees**: the claim is false at its boundary (no difference, equal spread, equal failure
  rates, a shift exactly at the equivalence margin, a centre exactly at the threshold) in one cell,
  and, for a claim on ``each`` cell, clearly true in every other cell (the intersection-union test
  must not let them carry it); for ``any`` every cell is at the boundary;
- **false contradicts**: the claim holds at its boundary in every cell for ``each``; for ``any``
  it is at the boundary in one cell and clearly false in the others.

A ``tuned`` claim (each group at its best learning rate) draws several configurations per group;
at the boundary the group its test takes a union over has every configuration there and the other
one there and the rest clearly worse (:func:`_draw_tuned`).

A claim with a ``sign`` gets both of its parts' boundaries (the comparison at its boundary with the
sign clearly true, and the other way round) and the larger rate is reported. Threshold claims'
values are symmetric about their centre: the signed-rank test's null is symmetry, and skew there
is an assumption of the test, not of the path.

Written by hand: the path under test is robustkit's own. The rates are Monte-Carlo estimates;
:func:`simulate` reports each with its draws so a reader can see its standard error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from robustkit.analysis import registry
from robustkit.verdicts.decidability import sizes_and_configurations, statistic_cells
from robustkit.verdicts.rules import judge
from robustkit.verdicts.selection import UNSET
from robustkit.verdicts.spec import AGREES, CONTRADICTS, Claim, opposite

GRID = 872  # SST-2's dev set: scores are k / 872
MAJORITY = 0.509  # its majority-class accuracy: where a collapsed run sits
FAILED_SHARE, IMPROVING_SHARE = 0.15, 0.25
CENTRE, SPREAD = 0.85, 0.02  # a learned run's score: CENTRE - Gamma(2, SPREAD / sqrt(2)) recentred
STRONG = 10.0  # "clearly" true or false: this many SD
CLEARLY_BELOW = 0.02
SIMULATION_COLUMNS = [
    "recipe",
    "scale",
    "claim",
    "compare",
    "quantifier",
    "cells",
    "n",
    "draws",
    "false_agrees",
    "false_contradicts",
    "bound",
    "passes",
]


@dataclass(frozen=True)
class Shape:
    """What the simulation needs of a claim at a scale: its cells and runs per group."""

    cells: tuple[tuple[str, int, int], ...]  # run-setting cell name, n_a, n_b
    per_cell: int  # the statistic's own cells (layers) of each
    # a tuned claim's configurations of group a and b (out of the repr, which keys the memo of
    # shapes simulated before tuned claims existed; a tuned claim's key adds them)
    configs: tuple[int, int] = field(default=(1, 1), repr=False)


def shape(recipe, claim: Claim, scale: str, defaults: dict | None = None) -> Shape:
    """The claim's cells and runs per group at ``scale`` (from the recipe's run specs)."""
    sizes, configs = sizes_and_configurations(recipe, claim, scale, defaults)
    return Shape(
        tuple((name, int(a), int(b)) for name, a, b in sizes), statistic_cells(recipe, claim, scale, defaults), configs
    )


def _score(rng: np.random.Generator, n: int) -> np.ndarray:
    """Skewed learned scores centred at 0 (units of SPREAD), before the grid."""
    return (rng.gamma(2.0, 1 / math.sqrt(2), n) - math.sqrt(2)) * -1.0


def _draw_cell(claim: Claim, state: str, n_a: int, n_b: int, rng: np.random.Generator, sign_state: str, end: str = ""):
    """Values (score units) and failed flags of group a and b in one cell, in ``state``:
    ``boundary``, ``true`` or ``false`` (the claim clearly true / false). ``end``: a trend's
    cell at the ``start`` or ``end`` of its ``along`` column (else in between)."""
    towards = {"boundary": 0.0, "true": 1.0, "false": -1.0}[state]
    up = 1.0 if claim.direction == "greater" else -1.0
    kind = claim.compare
    if kind == "trend":  # a shift at the start (claim true, "less") or at the end (claim false)
        lifted = (end == "start" and state == "true") or (end == "end" and state == "false")
        towards, up, kind = (1.0 if lifted else 0.0), (1.0 if claim.direction == "less" else -1.0), "location"
    if kind == "rate":  # the value is the failure indicator
        p_b = 0.3
        p_a = {"boundary": p_b, "true": 0.0 if up < 0 else 1.0, "false": 1.0 if up < 0 else 0.0}[state]
        p_b = {"boundary": p_b, "true": 1.0 if up < 0 else 0.0, "false": 0.0 if up < 0 else 1.0}[state]
        a, b = (rng.random(n_a) < p_a).astype(float), (rng.random(n_b) < p_b).astype(float)
        return a, b, a.astype(bool), b.astype(bool)
    a, b = _score(rng, n_a), _score(rng, n_b)
    if claim.sign:  # symmetric values: the sign part is a signed-rank test against 0
        a, b = rng.standard_normal(n_a), rng.standard_normal(n_b)
    if kind == "threshold":
        a = rng.standard_normal(n_a)  # symmetric: the signed-rank test's null
        a = claim.value / SPREAD + a + up * towards * STRONG
        b = np.array([])
    elif kind == "location":
        a = a + up * towards * STRONG
    elif kind == "spread":
        a = a * (10.0 if towards * up > 0 else 0.1) if towards else a
        a = a + 3.0  # equally spread at the boundary, wherever the groups are centred (failures too)
    elif kind == "equivalence":
        margin = claim.value / SPREAD
        offset = {"boundary": margin, "true": 0.0, "false": 5 * margin}[state]
        a, b = a * (0.05 if state == "true" else 1.0), b * (0.05 if state == "true" else 1.0)
        a = a + offset * (1 if rng.random() < 0.5 else -1)
    if claim.sign:  # a's own values against 0: the second part of the claim
        centre = (
            {"boundary": 0.0, "true": 1.0, "false": -1.0}[sign_state] * STRONG * (1 if claim.sign == "greater" else -1)
        )
        shift = centre - np.median(a) if len(a) else 0.0
        a, b = a + shift, b + shift
        return a * SPREAD, b * SPREAD, np.zeros(n_a, bool), np.zeros(n_b, bool)
    failed_a, failed_b = rng.random(n_a) < FAILED_SHARE, rng.random(n_b) < FAILED_SHARE
    values_a, values_b = CENTRE + a * SPREAD, CENTRE + b * SPREAD
    if kind == "threshold":
        values_a = a * SPREAD
        failed_a[:] = False
    collapsed_a = MAJORITY + (3.0 * SPREAD if kind == "spread" else 0.0)
    values_a = np.where(failed_a, collapsed_a, np.round(values_a * GRID) / GRID)
    values_b = np.where(failed_b, MAJORITY, np.round(values_b * GRID) / GRID)
    return values_a, values_b, failed_a, failed_b


def _draw_tuned(
    claim: Claim, state: str, error: str, configs: tuple[int, int], n_a: int, n_b: int, rng: np.random.Generator
) -> tuple[list, list]:
    """A ``tuned`` claim's cell: per configuration of group a and of group b, (values, failed).

    Least favourable at the boundary: the group the test takes a union over (each of the
    other's configurations needs only *some* of its own) has every configuration at the
    boundary, so each gives the union a chance; the other group has one configuration at the
    boundary and the rest clearly worse. ``error`` says which test's union: the claimed side's
    (false agrees) or the opposite's (false contradicts). Equivalence draws one of its two ways
    out of the margin (or its two boundaries) at random, as :func:`_draw_cell` does.
    """
    lower = claim.lower_is_better
    towards = {"boundary": 0.0, "true": 1.0, "false": -1.0}[state]
    best_dir = claim.best_direction
    count_a, count_b = configs
    one_and_worse = lambda count, at: [at] + [-STRONG] * (count - 1)  # noqa: E731 - a layout
    scale = 1.0
    if claim.compare == "equivalence":
        margin = claim.value / SPREAD
        side = 1 if rng.random() < 0.5 else -1
        if state == "true":
            offsets_a, offsets_b, scale = [0.0] * count_a, [0.0] * count_b, 0.05
        elif state == "false":
            offsets_a, offsets_b = [side * 5 * margin] * count_a, [0.0] * count_b
        elif (side > 0) == (error == "agrees"):  # a's best at + margin: every a vs some b
            offsets_a, offsets_b = one_and_worse(count_a, side * margin), [0.0] * count_b
        else:  # a's best at - margin: every b vs some a
            offsets_a, offsets_b = [side * margin] * count_a, one_and_worse(count_b, 0.0)
    elif state != "boundary":
        offsets_a, offsets_b = [(1 if best_dir == "greater" else -1) * towards * STRONG] * count_a, [0.0] * count_b
    else:
        tested = best_dir if error == "agrees" else opposite(best_dir)
        if tested == "less":  # every a configuration below some b one: the union is over b
            offsets_a, offsets_b = one_and_worse(count_a, 0.0), [0.0] * count_b
        else:
            offsets_a, offsets_b = [0.0] * count_a, one_and_worse(count_b, 0.0)
    drawn = []
    for offsets, n in ((offsets_a, n_a), (offsets_b, n_b)):
        group = []
        for offset in offsets:
            values = CENTRE + (_score(rng, n) * scale + offset) * SPREAD * (-1 if lower else 1)
            failed = rng.random(n) < FAILED_SHARE
            group.append((np.where(failed, MAJORITY, np.round(values * GRID) / GRID), failed))
        drawn.append(group)
    return drawn[0], drawn[1]


def observations(
    claim: Claim,
    form: Shape,
    states: list[str],
    rng: np.random.Generator,
    sign_state: str = "true",
    error: str = "agrees",
) -> tuple[pd.DataFrame, pd.Series]:
    """One synthetic store's observations of ``claim`` and its runs' still-improving flags.

    ``states``: per run-setting cell, the claim's state there (layers of a cell share it);
    ``error``: the false verdict the store is drawn for (a tuned claim's boundary depends on it).
    """
    rows = []
    ends = _trend_ends(claim, form)
    if claim.compare == "trend":  # states are per trend cell: spread them over its run-setting cells
        states = [states[ends[name][0]] for name, _, _ in form.cells]
    group_a = claim.a[0] if claim.a else "a"
    group_b = claim.b[0] if claim.b else "b"
    layered = "layer" in claim.within and form.per_cell > 1
    for (name, n_a, n_b), state in zip(form.cells, states):
        settings = dict(part.split("=", 1) for part in name.split(", ")) if "=" in name else {}
        settings = {c: settings.get(c, "x") for c in claim.within if c != "layer"}
        if claim.tuned:
            drawn = _draw_tuned(claim, state, error, form.configs, n_a, n_b, rng)
            for group, configs in ((group_a, drawn[0]), (group_b, drawn[1])):
                for k, (values, failed) in enumerate(configs):
                    rows += [
                        {
                            "run_id": f"{name}|{group}|{k}|{seed}",
                            claim.by: group,
                            claim.tuned: k,
                            "seed": seed,
                            "value": float(value),
                            "outcome": "collapsed" if fail else "ok",
                            **settings,
                        }
                        for seed, (value, fail) in enumerate(zip(values, failed))
                    ]
            continue
        layers = range(1, form.per_cell + 1) if layered else [None]
        run_effects = None
        for layer in layers:
            a, b, fa, fb = _draw_cell(claim, state, n_a, n_b, rng, sign_state, ends.get(name, (0, ""))[1])
            if run_effects is None:
                run_effects = (a, b, fa, fb)
            else:  # a run's layers are correlated: half its deviation carries over
                a, b = (a + run_effects[0]) / 2, (b + run_effects[1]) / 2
                fa, fb = run_effects[2], run_effects[3]
            for group, values, failed in ((group_a, a, fa), (group_b, b, fb)):
                for seed, (value, fail) in enumerate(zip(values, failed)):
                    row = {
                        "run_id": f"{name}|{group}|{seed}",
                        claim.by: group,
                        "seed": seed,
                        "value": float(value),
                        "outcome": "collapsed" if fail else "ok",
                        **settings,
                    }
                    if layer is not None:
                        row["layer"] = layer
                    rows.append(row)
    frame = pd.DataFrame(rows)
    for column, values in claim.where.items():  # the synthetic runs are the selected ones
        if column not in frame:
            frame[column] = values[0] if values and values[0] != UNSET else np.nan
    ids = frame["run_id"].unique()
    improving = pd.Series(rng.random(len(ids)) < IMPROVING_SHARE, index=ids)
    return frame, improving


def _trend_ends(claim: Claim, form: Shape) -> dict[str, tuple[int, str]]:
    """A trend's run-setting cells: name -> (its trend cell's index, "start" / "end" / "")."""
    if claim.compare != "trend":
        return {}
    groups: dict[str, list[tuple[float, str]]] = {}
    for name, _, _ in form.cells:
        parts = dict(part.split("=", 1) for part in name.split(", "))
        step = float(parts.pop(claim.along))
        groups.setdefault(repr(sorted(parts.items())), []).append((step, name))
    found = {}
    for index, steps in enumerate(groups.values()):
        steps.sort()
        for step, name in steps:
            found[name] = (index, "start" if step == steps[0][0] else "end" if step == steps[-1][0] else "")
    return found


def trend_cells(claim: Claim, form: Shape) -> int:
    """How many cells the claim is judged in (a trend: one per value of its other columns)."""
    return (
        len({index for index, _ in _trend_ends(claim, form).values()}) if claim.compare == "trend" else len(form.cells)
    )


def _configurations(claim: Claim, cells: int) -> dict[str, list[list[str]]]:
    """The least favourable states per cell for each error (module docstring)."""
    boundary = ["boundary"] * cells
    if cells == 1 or claim.quantifier == "overall":
        return {"agrees": [boundary], "contradicts": [boundary]}
    if claim.quantifier == "any":
        return {"agrees": [boundary], "contradicts": [["boundary"] + ["false"] * (cells - 1)]}
    return {"agrees": [["boundary"] + ["true"] * (cells - 1)], "contradicts": [boundary]}


def rates(claim: Claim, form: Shape, draws: int, seed: int = 0, first: int | None = None) -> tuple[float, float]:
    """False-agree and false-contradict rates of ``claim`` with ``form``'s runs, ``draws`` each.

    ``first``: draw this many first, and go on to ``draws`` only where a rate exceeds
    :data:`CLEARLY_BELOW` (a rate of 0.02 or less at 500 draws is below alpha by more than three
    standard errors; one near alpha needs the 2,000 that tell 0.08 from 0.05).
    """
    if first is not None and first < draws:
        agrees, contradicts = rates(claim, form, first, seed)
        if max(agrees, contradicts) <= CLEARLY_BELOW:
            return agrees, contradicts
        more = rates(claim, form, draws - first, seed + 1)
        return (
            (agrees * first + more[0] * (draws - first)) / draws,
            (contradicts * first + more[1] * (draws - first)) / draws,
        )
    rng = np.random.default_rng(seed)
    found = {}
    for error, configurations in _configurations(claim, trend_cells(claim, form)).items():
        wrong = {"agrees": AGREES, "contradicts": CONTRADICTS}[error]
        variants = []
        for states in configurations:
            if not claim.sign:
                variants.append((states, "true"))
            elif error == "agrees":  # either part at its boundary, the other clearly true
                variants += [(states, "true"), (["true" if s == "boundary" else s for s in states], "boundary")]
            else:  # the claim holds at the boundary of both parts
                variants.append((states, "boundary"))
        worst = 0.0
        for states, sign_state in variants:
            hits = 0
            for _ in range(draws):
                frame, improving = observations(claim, form, states, rng, sign_state, error)
                hits += judge(claim, frame, improving=improving).iloc[-1]["verdict"] == wrong
            worst = max(worst, hits / draws)
        found[error] = worst
    return found["agrees"], found["contradicts"]


def bound(alpha: float, draws: int) -> float:
    """alpha plus two Monte-Carlo standard errors at ``draws``."""
    return alpha + 2 * math.sqrt(alpha * (1 - alpha) / draws)


def simulate(
    recipes,
    scales=("demo", "paper"),
    draws: int = 2000,
    defaults: dict | None = None,
    first: int | None = 500,
    memo: dict | None = None,
    progress=None,
) -> pd.DataFrame:
    """The whole-path false-verdict rates of every judged, decidable claim (:data:`SIMULATION_COLUMNS`).

    Claims of the same shape (kind, quantifier, cells and runs, sign, failure policy, margin) are
    simulated once and share their rates. ``memo``: shape -> (rates, draws) already simulated
    (a caller keeps it between runs); ``progress``: called with each new shape's result.
    """
    from robustkit.verdicts.decidability import plan

    table = plan(recipes, scales, defaults)
    decidable = {
        (r, s, c)
        for r, s, c, j, d in zip(table["recipe"], table["scale"], table["claim"], table["judged"], table["decidable"])
        if j and d
    }
    memo = {} if memo is None else memo
    rows = []
    for recipe in recipes:
        for scale in scales:
            for claim in recipe.claims:
                if (recipe.name, scale, claim.id) not in decidable:
                    continue
                form = shape(recipe, claim, scale, defaults)
                statistic = registry.statistic_of(claim.statistic)[1]
                key = (
                    claim.compare,
                    claim.quantifier,
                    form,
                    claim.sign,
                    claim.failures,
                    claim.value,
                    claim.final,
                    statistic.better,
                    bool(statistic.undefined_on_failed),
                    claim.floor,
                    *([(claim.tuned, claim.direction, form.configs)] if max(form.configs) > 1 else []),
                )
                key = repr(key)
                if key not in memo:
                    found = rates(claim, form, draws, first=first)
                    used = first if first and max(found) <= CLEARLY_BELOW else draws
                    memo[key] = (*found, used)
                    if progress:
                        progress(key, memo[key])
                agrees, contradicts, used = memo[key]
                limit = bound(claim.alpha, used)
                n = ", ".join(f"{a}" + (f" vs {b}" if claim.groups == 2 else "") for _, a, b in form.cells[:3])
                rows.append(
                    {
                        "recipe": recipe.name,
                        "scale": scale,
                        "claim": claim.id,
                        "compare": claim.compare,
                        "quantifier": claim.quantifier or "one cell",
                        "cells": len(form.cells) * form.per_cell,
                        "n": n
                        + (" ..." if len(form.cells) > 3 else "")
                        + (
                            f" per {claim.tuned} ({form.configs[0]} vs {form.configs[1]} values)"
                            if max(form.configs) > 1
                            else ""
                        ),
                        "draws": used,
                        "false_agrees": agrees,
                        "false_contradicts": contradicts,
                        "bound": limit,
                        "passes": agrees <= limit and contradicts <= limit,
                    }
                )
    return pd.DataFrame(rows, columns=SIMULATION_COLUMNS)


def markdown(table: pd.DataFrame) -> str:
    """The simulation table as ``analyses/README.md`` shows it."""
    lines = [
        "| recipe | scale | claim | kind | quantifier | cells | runs per group | false agrees | false contradicts | "
        "draws |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in table.itertuples():
        lines.append(
            f"| {row.recipe} | {row.scale} | {row.claim} | {row.compare} | {row.quantifier} | {row.cells} | {row.n} | "
            f"{row.false_agrees:.3f} | {row.false_contradicts:.3f} | {row.draws} |"
        )
    return "\n".join(lines) + "\n"
