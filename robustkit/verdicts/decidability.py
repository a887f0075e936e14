"""Can a recipe's claim be decided at its n? The plan checked before any run exists.

For every claim of a recipe at a scale: the runs per group and cell its recipe trains (from the
run specs, so no run is needed), the smallest p-value its test can give with those runs
(:func:`robustkit.measures.exact.smallest_p`) and the smallest effect it detects with 80% power
at alpha (:func:`detectable_effect`), and the power at the effect the paper reports
(:func:`power` at the claim's ``paper_effect``, where the paper prints the numbers). A claim whose
test can never reach alpha is an error of the recipe (``tests/test_recipes.py`` checks every
recipe at both scales); ``robustkit claims --plan`` prints the table, and ``--markdown`` the
summary of it that ``recipes/README.md`` shows (:func:`markdown`; a test keeps the two equal).

The detectable effects are computed for normal per-run values, by the exact tests' own critical
values (the rank statistics' null distributions of :mod:`robustkit.measures.exact`; a location
claim's Brunner-Munzel test as the rank-sum test's critical value, whose power the permutation
test matches on equally spread normal runs (0.81 vs 0.80 at 5 vs 5 and 1.8 SD, 600 draws), and its
point-group bound, both rejecting; threshold claims' sign test exactly, by the binomial) and
seeded simulation of the statistic under the alternative (the spread test ranks seed pairs,
:func:`robustkit.measures.exact.spread_pairs`); their units are the within-group standard
deviation (``location``, ``threshold``, ``equivalence``: a shift or margin of d SD), a ratio of
standard deviations (``spread``), or a rate of failures against none (``rate``).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats

from robustkit.measures import exact, multiplicity, welch
from robustkit.verdicts.cells import Cell
from robustkit.verdicts.cells import cells as build_cells
from robustkit.verdicts.scales import SCALES

POWER = 0.8
SIMULATIONS = 2000
SEED = 0
SPREAD_SIMULATIONS = SIMULATIONS
PLAN_COLUMNS = [
    "recipe",
    "scale",
    "claim",
    "compare",
    "cell",
    "n_a",
    "n_b",
    "judged",
    "smallest_p",
    "cells",
    "level",
    "decidable",
    "detectable_effect",
    "effect_unit",
    "paper_effect",
    "paper_difference",
    "paper_power",
]
UNITS = {
    "location": "shift, SD",
    "mean": "mean shift, SD",
    "threshold": "shift, SD",
    "equivalence": "margin, SD",
    "spread": "SD ratio",
    "rate": "failure rate vs 0",
    "trend": "shift difference, SD",
}


def _critical_rank_sum(m: int, n: int, alpha: float) -> int:
    """Largest u with P(U <= u) < alpha (U: pairs a_i > b_j); -1 when none."""
    return int(np.searchsorted(np.cumsum(exact.rank_sum_null(m, n)), alpha, side="left")) - 1


def _above(x: np.ndarray, b: np.ndarray, alpha: float) -> np.ndarray:
    """Per simulation (rows of ``x``, ``b``): whether the point-group bound of "x above b"
    (:func:`robustkit.measures.brunner_munzel.tails`) rejects at alpha, both ways round."""
    high = (x > np.median(b, axis=1)[:, None]).sum(axis=1)
    low = (b < np.median(x, axis=1)[:, None]).sum(axis=1)
    return (stats.binom.sf(high - 1, x.shape[1], 0.5) < alpha) & (stats.binom.sf(low - 1, b.shape[1], 0.5) < alpha)


def _sign_test_power(n: int, effect: float, alpha: float) -> float:
    """Exact power of the one-sided sign test (:func:`robustkit.measures.exact.sign_test`) of n
    normal values shifted ``effect`` SD to the claimed side: P(Binomial(n, Phi(effect)) >= c),
    c the smallest count whose null tail is below alpha."""
    counts = np.arange(n + 1)
    rejecting = counts[stats.binom.sf(counts - 1, n, 0.5) < alpha]
    if not len(rejecting):
        return 0.0
    return float(stats.binom.sf(rejecting[0] - 1, n, stats.norm.cdf(effect)))


def power(
    kind: str,
    n_a: int,
    n_b: int,
    effect: float,
    alpha: float = 0.05,
    simulations: int = SIMULATIONS,
    difference: float = 0.0,
) -> float:
    """Probability that the claim's test agrees when the effect is ``effect`` (units: :data:`UNITS`).

    Parameters
    ----------
    kind : str
        The claim kind (:mod:`robustkit.verdicts.rules`).
    n_a, n_b : int
        Runs per group (``n_b`` unused for ``threshold``).
    effect : float
        location / threshold: a's values shifted below b's (or below the threshold) by ``effect``
        SD; equivalence: the margin in SD; spread: SD of a over SD of b (< 1); rate: a's failure
        rate (b's is 0).
    difference : float
        equivalence only: the true difference of a from b, in SD (0: none).
    """
    rng = np.random.default_rng(SEED)
    if kind in ("location", "equivalence"):
        critical = _critical_rank_sum(n_a, n_b, alpha)
        if critical < 0:
            return 0.0
        a = rng.standard_normal((simulations, n_a))
        b = rng.standard_normal((simulations, n_b))

        def wins(x):  # U: pairs with a_i > b_j, per simulation
            return (x[:, :, None] > b[:, None, :]).sum(axis=(1, 2))

        def below(x):  # the point-group bound of "x below b" rejects too (both ways round)
            return _above(-x, -b, alpha)

        def above(x):
            return _above(x, b, alpha)

        if kind == "location":
            return float(np.mean((wins(a - effect) <= critical) & below(a - effect)))
        # TOST at margin m: a + m above b (U large) and a - m below b (U small), both rejected
        top, a = n_a * n_b, a + difference
        return float(
            np.mean(
                (wins(a + effect) >= top - critical)
                & above(a + effect)
                & (wins(a - effect) <= critical)
                & below(a - effect)
            )
        )
    if kind == "mean":
        return _mean_power(n_a, n_b, effect, alpha)
    if kind == "threshold":
        return _sign_test_power(n_a, effect, alpha)
    if kind == "spread":
        return _spread_power(n_a, n_b, effect, alpha, min(simulations, SPREAD_SIMULATIONS))
    if kind == "trend":
        return _trend_power(n_a, n_b, effect, alpha, simulations)
    if kind == "rate":
        return _rate_power(n_a, n_b, effect, alpha)
    raise ValueError(f"unknown claim kind {kind!r}")


def _mean_power(n_a: int, n_b: int, effect: float, alpha: float) -> float:
    """Power of the mean test (:mod:`robustkit.measures.welch`: the bootstrap-t at alpha / 2) on
    normal runs shifted ``effect`` SD, by Welch's t at that level (the bootstrap-t's limit on
    normal runs; the noncentral t with ``n_a + n_b - 2`` degrees of freedom); 0 below its
    :data:`robustkit.measures.welch.MIN_RUNS`."""
    if min(n_a, n_b) < welch.MIN_RUNS:
        return 0.0
    df = n_a + n_b - 2
    critical = stats.t.ppf(1 - alpha / welch.CALIBRATION, df)
    return float(stats.nct.sf(critical, df, effect / math.sqrt(1 / n_a + 1 / n_b)))


def _spread_power(n_a: int, n_b: int, ratio: float, alpha: float, simulations: int) -> float:
    """Power of the spread test claims run (:func:`robustkit.measures.exact.spread_pairs`: the
    rank-sum test of the groups' seed-pair differences, by its exact critical value), a's SD
    ``ratio`` times b's."""
    pairs_a, pairs_b = n_a // 2, n_b // 2
    critical = _critical_rank_sum(pairs_a, pairs_b, alpha) if pairs_a and pairs_b else -1
    if critical < 0:
        return 0.0
    rng = np.random.default_rng(SEED)
    a = np.abs(rng.standard_normal((simulations, pairs_a)) - rng.standard_normal((simulations, pairs_a))) * ratio
    b = np.abs(rng.standard_normal((simulations, pairs_b)) - rng.standard_normal((simulations, pairs_b)))
    wins = (a[:, :, None] > b[:, None, :]).sum(axis=(1, 2))  # U: pairs of a wider than pairs of b
    return float(np.mean(wins <= critical))


def _trend_power(n_a: int, n_b: int, effect: float, alpha: float, simulations: int) -> float:
    """Power of the trend test (:func:`robustkit.verdicts.rules._trend`): ``n_a`` vs ``n_b`` runs at each
    end, the shift at the start ``effect`` SD above the shift at the end; decided when the two
    exact shift intervals, each at alpha / 2, separate."""
    k = int(np.searchsorted(np.cumsum(exact.rank_sum_null(n_a, n_b)), alpha / 2, side="left"))
    if k < 1:
        return 0.0
    rng = np.random.default_rng(SEED)

    def differences(shift: float) -> np.ndarray:
        a, b = rng.standard_normal((simulations, n_a)) + shift, rng.standard_normal((simulations, n_b))
        return np.sort((a[:, :, None] - b[:, None, :]).reshape(simulations, -1), axis=1)

    start, end = differences(effect), differences(0.0)
    return float(np.mean(start[:, k - 1] > end[:, -k]))


def _rate_power(n_a: int, n_b: int, rate: float, alpha: float) -> float:
    """Exact power of the one-sided Fisher test with b's rate 0 and a's ``rate``: the sum of the
    binomial probabilities of a's counts whose table rejects."""
    rejecting = [
        k
        for k in range(n_a + 1)
        if exact.rate_test(np.r_[np.ones(k), np.zeros(n_a - k)], np.zeros(n_b), "greater") < alpha
    ]
    return float(sum(stats.binom.pmf(k, n_a, rate) for k in rejecting))


@lru_cache(maxsize=None)
def detectable_effect(kind: str, n_a: int, n_b: int, alpha: float = 0.05, target: float = POWER) -> float:
    """The smallest effect the claim's test detects with ``target`` power (NaN: never).

    Units: :data:`UNITS` (spread: the largest SD ratio below 1 that it detects).
    """
    if exact.smallest_p(kind, n_a, n_b) >= alpha:
        return np.nan
    # bisection between an effect the test detects and one it does not (spread: a small SD ratio
    # is the strong effect, 1 none; otherwise 20 SD or a failure rate of 1 against 0)
    strong, weak = (0.01, 1.0) if kind == "spread" else (1.0 if kind == "rate" else 20.0, 0.0)
    if power(kind, n_a, n_b, strong, alpha) < target:
        return np.nan
    for _ in range(14):
        middle = (strong + weak) / 2
        strong, weak = (middle, weak) if power(kind, n_a, n_b, middle, alpha) >= target else (strong, middle)
    return round(strong, 3)


def claim_sizes(recipe, claim, scale: str, defaults: dict | None = None) -> list[tuple[str, int, int]]:
    """Runs per group in each cell of ``claim`` that ``recipe`` trains at ``scale``.

    Cells are the claim's ``within`` columns that are run settings (a statistic's own cells,
    such as ``layer``, hold the same runs each); ``where`` filters apply where they name a run
    setting.

    A ``tuned`` claim tests configuration against configuration: its n_a and n_b are the runs
    of one configuration (the smallest of its group; :func:`sizes_and_configurations` also
    counts the configurations).

    Returns
    -------
    list of (cell, n_a, n_b)
    """
    return sizes_and_configurations(recipe, claim, scale, defaults)[0]


def sizes_and_configurations(
    recipe, claim, scale: str, defaults: dict | None = None
) -> tuple[list[tuple[str, int, int]], tuple[int, int]]:
    """:func:`claim_sizes`, and the configurations of group a and b (values of a ``tuned``
    claim's column) that ``recipe`` trains at ``scale``, the most of any cell; (1, 1) for a
    claim not tuned. Read off :func:`planned_cells`."""
    sizes, configs = [], (1, 1)
    for cell in planned_cells(recipe, claim, scale, defaults):
        if cell.configs_a or cell.configs_b:  # tuned: configuration against configuration
            smallest = lambda configs: min((len(values) for values in configs), default=0)
            sizes.append((cell.name, smallest(cell.configs_a), smallest(cell.configs_b)))
            configs = (max(configs[0], len(cell.configs_a)), max(configs[1], len(cell.configs_b)))
        else:
            sizes.append((cell.name, len(cell.a), len(cell.b)))
    return sizes or [("all", 0, 0)], configs


def planned_cells(recipe, claim, scale: str, defaults: dict | None = None) -> list[Cell]:
    """The claim's run-setting cells at ``scale`` before any run exists.

    :func:`robustkit.verdicts.cells.cells`, the function the verdicts judge with, on one planned
    observation (value 0) per run spec of the recipe at ``scale`` (per disjoint pair of runs
    for a statistic of pairs), after the claim's ``where`` filters on run settings. Cells are
    the claim's ``within`` columns that are run settings (a statistic's own cells, such as
    ``layer``, hold the same runs each: :func:`statistic_cells`). A trend's cells here are per
    value of ``along`` too, and a claim ``overall`` is not pooled: the plan and the simulation
    build those from the run-setting cells.
    """
    from dataclasses import replace

    from robustkit.analysis.registry import statistic_of
    from robustkit.verdicts.selection import matches as _is

    specs = spec_frame(recipe, scale, defaults)
    for column, values in claim.where.items():
        if column in specs:
            specs = specs[_is(specs[column], values)]
    if statistic_of(claim.statistic)[1].unit == "disjoint pair":
        specs = _disjoint_pairs(specs)
    settings = replace(
        claim,
        within=tuple(c for c in claim.within if c in specs),
        compare="location" if claim.compare == "trend" else claim.compare,
        quantifier=None if claim.quantifier == "overall" else claim.quantifier,
    )
    if specs.empty or claim.by not in specs:
        return []
    planned = specs.assign(value=0.0)
    return build_cells(settings, planned, pd.Series(False, index=planned.index))


def spec_frame(recipe, scale: str, defaults: dict | None = None) -> pd.DataFrame:
    """The recipe's run specs at ``scale`` as a frame, one row per run in grid order: each spec
    field a column, and each method option (``lora.r``), since a claim may group or select on
    them."""
    from dataclasses import asdict

    from robustkit.methods.registry import identity_columns

    return pd.DataFrame(
        [
            {**asdict(spec), **identity_columns(spec.method, spec.resolved().method_options)}
            for spec in recipe.specs(scale, defaults)
        ]
    )


def _disjoint_pairs(specs: pd.DataFrame) -> pd.DataFrame:
    """One row per disjoint seed pair of run specs: the first run of each pair, half of each
    configuration's runs (rounded down), as a statistic of pairs observes them."""
    if specs.empty:
        return specs
    settings = [c for c in specs.columns if c not in ("seed", "run_id")]
    keys = specs[settings].map(str).agg("|".join, axis=1)
    ordered = specs.assign(_key=keys).sort_values(["_key", "seed"], kind="stable")
    position = ordered.groupby("_key", sort=False).cumcount()
    pairs = ordered[(position % 2 == 0) & (position + 1 < ordered["_key"].map(ordered["_key"].value_counts()))]
    return pairs.drop(columns="_key")


# Encoder layers of the papers' hub models (``num_hidden_layers`` of their published configs),
# so that the plan needs no download; other models are read from their config.
HUB_LAYERS = {
    "bert-base-uncased": 12,
    "bert-base-cased": 12,
    "bert-large-uncased": 24,
    "roberta-base": 12,
    "roberta-large": 24,
    "distilbert-base-uncased": 6,
}


def statistic_cells(recipe, claim, scale: str, defaults: dict | None = None) -> int:
    """Cells the claim's statistic gives each run-setting cell: with ``layer = "each"``, one per
    layer output, the embedding output included (layers + 1 of the scale's model) unless the
    claim's ``exclude`` leaves it out; else 1."""
    if "layer" not in claim.within or claim.params.get("layer", "each") != "each":
        return 1
    models = {spec.model for spec in recipe.specs(scale, defaults)}
    if not models:
        return 1
    outputs = range(max(_layers(model) for model in models) + 1)
    left_out = {float(v) for v in claim.exclude.get("layer", ())}
    return sum(1 for layer in outputs if float(layer) not in left_out)


@lru_cache(maxsize=None)
def _layers(model: str) -> int:
    if model in HUB_LAYERS:
        return HUB_LAYERS[model]
    from robustkit.models.pretrained import load_config

    return int(load_config(model).num_hidden_layers)


def agreeing_level(quantifier: str | None, smallest: list[float], alpha: float) -> float:
    """The level a cell's p must pass for the claim to agree: alpha for a claim on ``each`` cell
    (an intersection-union test: every cell at alpha) or on one cell; alpha / K after Holm's
    correction over the cells for a claim on ``any`` cell (K: Tarone's family size,
    :func:`robustkit.measures.multiplicity.cell_level`)."""
    return multiplicity.cell_level(smallest, alpha) if quantifier == "any" and len(smallest) > 1 else alpha


def cells_detectable_effect(
    kind: str, sizes: list[tuple[int, int]], alpha: float = 0.05, quantifier: str | None = "any"
) -> float:
    """The largest over a claim's cells of the effect each detects with 80% power at the level
    a cell must pass for the claim to agree (:func:`agreeing_level`), in :data:`UNITS`; NaN where
    no cell's test can pass it.

    Parameters
    ----------
    sizes : list of (n_a, n_b)
        Runs per group of each cell the claim was judged in.
    """
    smallest = [exact.smallest_p(kind, n_a, n_b) for n_a, n_b in sizes]
    level = agreeing_level(quantifier, smallest, alpha)
    effects = [detectable_effect(kind, n_a, n_b, level) for (n_a, n_b), p in zip(sizes, smallest) if p < level]
    finite = [e for e in effects if np.isfinite(e)]
    return max(finite) if finite else np.nan


def plan(recipes, scales=SCALES, defaults: dict | None = None) -> pd.DataFrame:
    """The decidability table of every claim of ``recipes`` at ``scales`` (:data:`PLAN_COLUMNS`).

    ``judged`` is False at a scale the claim leaves out (its ``scales``) and for statistics of
    run pairs (never tested). ``cells`` counts the cells the claim is tested in (run-setting
    cells times the statistic's own, :func:`statistic_cells`; one for a claim ``overall``), and
    ``level`` is the level a cell's p must pass for the claim to agree (:func:`agreeing_level`:
    alpha for ``each``, alpha / K after Holm for ``any``); ``decidable`` is False where the
    test's smallest p is not below it. ``detectable_effect`` and ``paper_power`` are at that level (Holm's first
    step: a lower bound of the power). ``paper_effect`` is the claim's ``paper_effect`` in the
    cell (equivalence: the margin, and ``paper_difference`` the difference, both in SD; NaN where
    the paper reports none) and ``paper_power`` the test's power at it with the cell's runs (0
    where the test can never reach the level).
    """
    from robustkit.analysis.registry import statistic_of

    rows = []
    for recipe in recipes:
        for scale in scales:
            if scale not in recipe.scales:
                continue
            for claim in recipe.claims:
                sizes, configs = sizes_and_configurations(recipe, claim, scale, defaults)
                factor = claim.configuration_factor(*configs)  # a tuned claim's pair level: level / factor
                per_cell = statistic_cells(recipe, claim, scale, defaults)
                if claim.compare == "trend":  # one test per cell of the other columns: its two ends
                    sizes = _trend_sizes(sizes, claim.along)
                if claim.quantifier == "overall":  # one test of each run's mean over the cells
                    sizes = [
                        ("all (runs pooled over the cells)", sum(a for _, a, _ in sizes), sum(b for _, _, b in sizes))
                    ]
                    per_cell = 1
                smallest_ps = [claim.smallest_p(n_a, n_b, configs) for _, n_a, n_b in sizes]
                # every cell the claim is tested in: run-setting cells times the statistic's own
                # (e.g. layers); the level a cell must pass depends on the claim's quantifier
                cells = len(sizes) * per_cell
                level = agreeing_level(claim.quantifier, [p for p in smallest_ps for _ in range(per_cell)], claim.alpha)
                for (cell, n_a, n_b), smallest in zip(sizes, smallest_ps):
                    effect, difference = _effect_and_difference(claim.paper_effect_in(cell))
                    rows.append(
                        {
                            "recipe": recipe.name,
                            "scale": scale,
                            "claim": claim.id,
                            "compare": claim.compare,
                            "cell": (cell if per_cell == 1 else f"{cell}, layer=each ({per_cell})")
                            + (
                                f"; per {claim.tuned}, {configs[0]} vs {configs[1]} values (each at its best)"
                                if max(configs) > 1
                                else ""
                            ),
                            "n_a": n_a,
                            "n_b": n_b,
                            "judged": claim.judged_at(scale) and statistic_of(claim.statistic)[1].independent,
                            "smallest_p": smallest,
                            "cells": cells,
                            "level": level,
                            "decidable": smallest < level,
                            "detectable_effect": detectable_effect(claim.compare, n_a, n_b, level / factor),
                            "effect_unit": UNITS[claim.compare],
                            "paper_effect": effect,
                            "paper_difference": difference,
                            "paper_power": np.nan
                            if np.isnan(effect)
                            else 0.0
                            if smallest >= level
                            else _power_at(
                                claim.compare,
                                n_a,
                                n_b,
                                effect,
                                level / factor,
                                0.0 if np.isnan(difference) else difference,
                            ),
                        }
                    )
    return pd.DataFrame(rows, columns=PLAN_COLUMNS)


def _trend_sizes(sizes: list[tuple[str, int, int]], along: str) -> list[tuple[str, int, int]]:
    """A trend's cells from its run-setting cells: per value of the other columns, the smallest
    and largest ``along`` value, with the smaller group sizes of the two ends."""
    ends: dict[str, list[tuple[float, int, int]]] = {}
    for name, n_a, n_b in sizes:
        parts = dict(part.split("=", 1) for part in name.split(", ")) if "=" in name else {}
        step = float(parts.pop(along, "nan"))
        ends.setdefault(", ".join(f"{c}={v}" for c, v in parts.items()), []).append((step, n_a, n_b))
    cells = []
    for rest, steps in ends.items():
        steps = sorted(steps)
        (first, a1, b1), (last, a2, b2) = steps[0], steps[-1]
        label = f"{along}={first:g} vs {last:g}"
        cells.append((f"{rest}, {label}" if rest else label, min(a1, a2), min(b1, b2)))
    return cells


def _effect_and_difference(effect: float | tuple | None) -> tuple[float, float]:
    """A claim's paper effect in a cell as (effect or margin, equivalence difference); NaN: none."""
    if effect is None:
        return np.nan, np.nan
    return (float(effect[0]), float(effect[1])) if isinstance(effect, tuple) else (float(effect), np.nan)


@lru_cache(maxsize=None)
def _power_at(kind: str, n_a: int, n_b: int, effect: float, alpha: float, difference: float) -> float:
    return round(power(kind, n_a, n_b, effect, alpha, difference=difference), 3)


def markdown(table: pd.DataFrame, recipes) -> str:
    """The summary of a :func:`plan` table that ``recipes/README.md`` shows, one row per claim.

    Per scale: the distinct runs per group over the claim's cells, the largest detectable effect
    over them (the weakest cell) and the power at the paper's effect (its range over the cells
    where the paper reports one); then, per claim with a paper effect, where it comes from.

    Parameters
    ----------
    table : DataFrame
        :func:`plan` of ``recipes`` at both scales.
    recipes : list of Recipe
        Their claims give the effects' sources.

    Returns
    -------
    str
        Markdown: the table, a blank line and the list of sources.
    """
    header = ["recipe", "claim", "kind", "paper's effect"]
    shown = [scale for scale in SCALES if (table["scale"] == scale).any()]  # the scales some recipe has
    for scale in shown:
        header += [f"{scale}: runs per group", f"{scale}: detectable", f"{scale}: power at paper's effect"]
    claims = {(recipe.name, claim.id): claim for recipe in recipes for claim in recipe.claims}
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (recipe, name), rows in table.groupby(["recipe", "claim"], sort=False):
        kind = rows["compare"].iloc[0]
        cells = [recipe, name, kind, _effect_text(claims[recipe, name].paper_effect, kind)]
        for scale in shown:
            cells += _scale_cells(rows[rows["scale"] == scale], kind)
        lines.append("| " + " | ".join(cells) + " |")
    sources = [
        f"- `{recipe.name}` `{claim.id}`: {claim.paper_effect_source}"
        for recipe in recipes
        for claim in recipe.claims
        if claim.paper_effect is not None
    ]
    return "\n".join(lines) + "\n\n" + "\n".join(sources) + "\n"


def _effect_text(effect: float | tuple | dict | None, kind: str) -> str:
    """A claim's ``paper_effect`` in words: its value, or its range over the cells it names."""
    if effect is None:
        return "not reported"
    values = list(effect.values()) if isinstance(effect, dict) else [effect]
    many = f"; {len(values)} cells" if isinstance(effect, dict) else ""
    if kind == "equivalence":
        margins, differences = pd.Series([v[0] for v in values]), pd.Series([v[1] for v in values])
        return f"margin {_span(margins)}, difference {_span(differences)} (SD{many})"
    return f"{_span(pd.Series(values))} ({UNITS[kind]}{many})"


def _scale_cells(rows: pd.DataFrame, kind: str) -> list[str]:
    if rows.empty or not rows["judged"].any():
        return ["not judged", "", ""]
    sizes = sorted({(int(a), int(b)) for a, b in zip(rows["n_a"], rows["n_b"])})
    runs = ", ".join(str(a) if kind == "threshold" else f"{a} vs {b}" for a, b in sizes)
    tuned = {cell.split("; ", 1)[1] for cell in rows["cell"] if "; per " in cell}  # a tuned claim's configurations
    runs += "".join(f" {text}" for text in sorted(tuned))
    finite = rows["detectable_effect"].dropna()
    detectable = f"{finite.max():g} ({UNITS[kind]})" if len(finite) == len(rows) else "never"
    powers = rows["paper_power"].dropna()
    power = (
        "not reported"
        if powers.empty
        else _span(powers, "{:.2f}") + (f" ({len(powers)} cells)" if len(powers) > 1 else "")
    )
    return [runs, detectable, power]


def _span(values: pd.Series, form: str = "{:.3g}") -> str:
    """``low to high`` of ``values`` (one value where they are all equal)."""
    low, high = form.format(values.min()), form.format(values.max())
    return low if low == high else f"{low} to {high}"
