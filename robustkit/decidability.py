"""Can a recipe's claim be decided at its n? The plan checked before any run exists.

For every claim of a recipe at a scale: the runs per group and cell its recipe trains (from the
run specs, so no run is needed), the smallest p-value its test can give with those runs
(:func:`robustkit.measures.exact.smallest_p`) and the smallest effect it detects with 80% power
at alpha (:func:`detectable_effect`). A claim whose test can never reach alpha is an error of
the recipe (``tests/test_recipes.py`` checks every recipe at both scales); ``robustkit claims
--plan`` prints the table.

The detectable effects are computed for normal per-run values, by the exact tests' own critical
values (the rank statistics' null distributions of :mod:`robustkit.measures.exact`) and seeded
simulation of the statistic under the alternative; their units are the within-group standard
deviation (``location``, ``threshold``, ``equivalence``: a shift or margin of d SD), a ratio of
standard deviations (``spread``), or a rate of failures against none (``rate``).
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats

from robustkit.measures import exact

POWER = 0.8
SIMULATIONS = 2000
SEED = 0
PLAN_COLUMNS = ["recipe", "scale", "claim", "compare", "cell", "n_a", "n_b", "judged", "smallest_p", "decidable",
                "detectable_effect", "effect_unit"]
UNITS = {"location": "shift, SD", "threshold": "shift, SD", "equivalence": "margin, SD", "spread": "SD ratio",
         "rate": "failure rate vs 0"}


def _critical_rank_sum(m: int, n: int, alpha: float) -> int:
    """Largest u with P(U <= u) < alpha (U: pairs a_i > b_j); -1 when none."""
    return int(np.searchsorted(np.cumsum(exact.rank_sum_null(m, n)), alpha, side="left")) - 1


def _critical_signed_rank(n: int, alpha: float) -> int:
    return int(np.searchsorted(np.cumsum(exact.signed_rank_null(n)), alpha, side="left")) - 1


def power(kind: str, n_a: int, n_b: int, effect: float, alpha: float = 0.05, simulations: int = SIMULATIONS) -> float:
    """Probability that the claim's test agrees when the effect is ``effect`` (units: :data:`UNITS`).

    Parameters
    ----------
    kind : str
        The claim kind (:mod:`robustkit.claim`).
    n_a, n_b : int
        Runs per group (``n_b`` unused for ``threshold``).
    effect : float
        location / threshold: a's values shifted below b's (or below the threshold) by ``effect``
        SD; equivalence: the margin in SD with no true difference; spread: SD of a over SD of b
        (< 1); rate: a's failure rate (b's is 0).
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

        if kind == "location":
            return float(np.mean(wins(a - effect) <= critical))
        # TOST at margin m: a + m above b (U large) and a - m below b (U small), both rejected
        top = n_a * n_b
        return float(np.mean((wins(a + effect) >= top - critical) & (wins(a - effect) <= critical)))
    if kind == "threshold":
        critical = _critical_signed_rank(n_a, alpha)
        if critical < 0:
            return 0.0
        x = rng.standard_normal((simulations, n_a)) - effect
        ranks = stats.rankdata(np.abs(x), axis=1)
        positive = np.where(x > 0, ranks, 0).sum(axis=1)  # W+: small when x lies below 0
        return float(np.mean(positive <= critical))
    if kind == "spread":
        return _spread_power(n_a, n_b, effect, alpha, min(simulations, 400))
    if kind == "rate":
        return _rate_power(n_a, n_b, effect, alpha)
    raise ValueError(f"unknown claim kind {kind!r}")


def _spread_power(n_a: int, n_b: int, ratio: float, alpha: float, simulations: int) -> float:
    """Power of the Brown-Forsythe permutation test (exact over every relabelling, or 2,000 random
    ones where there are more), a's SD ``ratio`` times b's."""
    rng = np.random.default_rng(SEED)
    total = n_a + n_b
    if math.comb(total, n_a) <= 5000:
        labels = np.array([np.isin(np.arange(total), c) for c in itertools.combinations(range(total), n_a)])
    else:
        labels = np.array([np.isin(np.arange(total), rng.choice(total, n_a, replace=False)) for _ in range(2000)])
    a = rng.standard_normal((simulations, n_a)) * ratio
    b = rng.standard_normal((simulations, n_b))
    deviations = np.concatenate([np.abs(a - np.median(a, axis=1, keepdims=True)),
                                 np.abs(b - np.median(b, axis=1, keepdims=True))], axis=1)
    observed = deviations[:, :n_a].mean(axis=1) - deviations[:, n_a:].mean(axis=1)
    gaps = deviations @ labels.T / n_a - deviations @ (~labels).T / n_b  # (simulations, relabellings)
    p = (gaps <= observed[:, None] + 1e-12).mean(axis=1)
    return float(np.mean(p < alpha))


def _rate_power(n_a: int, n_b: int, rate: float, alpha: float) -> float:
    """Exact power of the one-sided Fisher test with b's rate 0 and a's ``rate``: the sum of the
    binomial probabilities of a's counts whose table rejects."""
    rejecting = [k for k in range(n_a + 1) if exact.rate_test(np.r_[np.ones(k), np.zeros(n_a - k)], np.zeros(n_b), "greater") < alpha]
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

    Returns
    -------
    list of (cell, n_a, n_b)
    """
    from dataclasses import asdict

    from robustkit.claim import _is, _text

    from robustkit.analysis.registry import statistic_of
    from robustkit.methods.registry import identity_columns

    specs = recipe.specs(scale, defaults)
    # the method options are columns too (``lora.r``): a claim may group or select on them
    specs = pd.DataFrame([{**asdict(spec), **identity_columns(spec.method, spec.resolved().method_options)} for spec in specs])
    for column, values in claim.where.items():
        if column in specs:
            specs = specs[_is(specs[column], values)]
    within = [c for c in claim.within if c in specs]
    cells = specs.groupby(within, dropna=False, sort=True) if within else [((), specs)]
    pairs = statistic_of(claim.statistic)[1].unit == "disjoint pair"
    sizes = []
    for key, cell in cells:
        key = key if isinstance(key, tuple) else (key,)
        name = ", ".join(f"{c}={_text(k)}" for c, k in zip(within, key)) or "all"
        group_a = cell[_is(cell[claim.by], claim.a)] if claim.a else cell
        group_b = cell[_is(cell[claim.by], claim.b)] if claim.b else cell.iloc[:0]
        n_a, n_b = (_disjoint_pairs(group_a), _disjoint_pairs(group_b)) if pairs else (len(group_a), len(group_b))
        sizes.append((name, n_a, n_b))
    return sizes or [("all", 0, 0)]


def _disjoint_pairs(specs: pd.DataFrame) -> int:
    """Disjoint seed pairs among run specs: half of each configuration's runs, rounded down."""
    if specs.empty:
        return 0
    settings = [c for c in specs.columns if c not in ("seed", "run_id")]
    keys = specs[settings].map(str).agg("|".join, axis=1)
    return int((keys.value_counts() // 2).sum())


def plan(recipes, scales=("demo", "paper"), defaults: dict | None = None) -> pd.DataFrame:
    """The decidability table of every claim of ``recipes`` at ``scales`` (:data:`PLAN_COLUMNS`).

    ``judged`` is False at a scale the claim leaves out (its ``scales``) and for statistics of
    run pairs (never tested); ``decidable`` is False where the test's smallest p is not below the
    claim's alpha.
    """
    from robustkit.analysis.registry import statistic_of

    rows = []
    for recipe in recipes:
        for scale in scales:
            if scale not in recipe.scales:
                continue
            for claim in recipe.claims:
                for cell, n_a, n_b in claim_sizes(recipe, claim, scale, defaults):
                    smallest = exact.smallest_p(claim.compare, n_a, n_b)
                    rows.append({"recipe": recipe.name, "scale": scale, "claim": claim.id, "compare": claim.compare,
                                 "cell": cell, "n_a": n_a, "n_b": n_b,
                                 "judged": scale in claim.scales and statistic_of(claim.statistic)[1].independent,
                                 "smallest_p": smallest,
                                 "decidable": smallest < claim.alpha,
                                 "detectable_effect": detectable_effect(claim.compare, n_a, n_b, claim.alpha),
                                 "effect_unit": UNITS[claim.compare]})
    return pd.DataFrame(rows, columns=PLAN_COLUMNS)
