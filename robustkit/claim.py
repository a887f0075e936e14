"""A paper's claim as a checkable hypothesis, and its verdict from the runs behind a figure.

Each recipe (``analyses/<paper>/<figure>.toml``) states its paper's claim before any run exists::

    [[claim]]
    id = "spread"
    says = "full FT 'leads to a large standard deviation'; adapters 'a much smaller variance' (§2)"
    statistic = "scores.score"                 # <analysis>.<statistic> (robustkit.analysis.registry)
    compare = "spread"                         # spread | location | rate | margin | threshold
    a = "houlsby"
    b = "full"
    direction = "less"                         # the claim: a less than b
    test = "levene"

A claim is judged on the frame its figure drew: when ``statistic`` names the figure's analysis,
the analysis's parameters are the figure's (the recipe's ``params`` at the scale), so claim and
figure read one cache entry; a claim's ``params`` are then the statistic's own. A claim on
another analysis gives that analysis's parameters in ``params`` too (unknown names are errors).

The verdict is one of ``agrees``, ``contradicts`` or ``inconclusive``:

- **spread** (std of a vs b; ``levene`` or ``brown-forsythe``): the two-sided p of the test is
  halved in the direction the sample shows (one-sided). agrees: p < alpha and the sample std
  ratio a/b on the claimed side of 1; contradicts: p < alpha on the other side; else
  inconclusive. Effect: std ratio a/b with a (1 - 2 alpha) percentile bootstrap CI. Needs 3
  runs per group.
- **location** (a vs b; ``mann-whitney`` one-sided both ways, or ``bootstrap-mean``): agrees when
  the one-sided test in the claimed direction has p < alpha (bootstrap: the (1 - 2 alpha) CI of
  mean(a) - mean(b) lies on the claimed side of 0), contradicts when the opposite one does.
  Effect: mean(a) - mean(b) and its bootstrap CI. Needs 2 runs per group.
- **rate** (share of runs with value 1, e.g. collapsed runs; Fisher's exact test one-sided both
  ways): as location, effect rate(a) - rate(b). Failed runs count here, as they are the data.
- **margin** (a within ``value`` of b): agrees when the (1 - 2 alpha) bootstrap CI of
  mean(a) - mean(b) lies above -value, contradicts when it lies below -value.
- **threshold** (group a, or every run, against a constant ``value``): agrees when the
  (1 - 2 alpha) bootstrap CI of the mean lies on the claimed side of ``value``, contradicts when
  it lies on the other side. Needs 2 runs.

Collapsed and diverged runs (:mod:`robustkit.collapse`) are left out except for ``rate``. With
``within`` cells (e.g. per TSP step or per layer) each cell gets a verdict; the claim agrees when
every cell agrees, contradicts when any cell contradicts, and is inconclusive otherwise. Too few
runs, or a statistic the runs cannot give, is ``inconclusive`` with the reason.

The verdict logic here is hand-written: no maintained package states paper claims as
directional hypotheses over groups of runs (deepsig tests score distributions, which is what
``location`` does with Mann-Whitney). The tests and intervals themselves are those of the
figures' captions, in :mod:`robustkit.measures.significance` (scipy).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from robustkit import collapse
from robustkit.analysis import registry
from robustkit.analysis.pooling import check_pooling
from robustkit.errors import RobustkitError
from robustkit.measures import significance
from robustkit.params import resolve

AGREES, CONTRADICTS, INCONCLUSIVE = "agrees", "contradicts", "inconclusive"
VERDICTS = (AGREES, CONTRADICTS, INCONCLUSIVE)
COMPARES = {"spread": ("levene", "brown-forsythe"), "location": ("mann-whitney", "bootstrap-mean"),
            "rate": ("fisher",), "margin": ("bootstrap-mean",), "threshold": ("bootstrap-mean",)}
MIN_RUNS = {"spread": 3, "location": 2, "rate": 2, "margin": 2, "threshold": 2}
VERDICT_COLUMNS = ["recipe", "claim", "says", "statistic", "compare", "test", "a", "b", "direction", "cell",
                   "n_a", "n_b", "n_failed", "effect", "effect_name", "ci_low", "ci_high", "p_value", "verdict", "reason"]
N_RESAMPLES = 9999
SEED = 0
_KEYS = {"id", "says", "statistic", "params", "compare", "by", "a", "b", "direction", "test", "within", "pooled",
         "value", "alpha", "where"}


class ClaimError(RobustkitError):
    """A claim table that does not parse (the message names the recipe and the key)."""


@dataclass(frozen=True)
class Claim:
    """One paper claim as a directional hypothesis about a per-run statistic.

    Attributes
    ----------
    id, says : str
        Short name; the paper's words with the section.
    statistic : str
        ``<analysis>.<statistic>`` of :mod:`robustkit.analysis.registry`; ``params`` the
        statistic's parameters (and, for an analysis other than the figure's, the analysis's).
    compare : str
        ``spread``, ``location``, ``rate``, ``margin`` or ``threshold`` (module docstring).
    by : str
        Column whose groups ``a`` and ``b`` are compared.
    a, b : tuple
        The values of ``by`` that make group a and group b (several values: one group, e.g.
        ``("houlsby", "adapterhub-houlsby")`` so that one claim serves both scales; numbers
        compare as numbers). ``b`` is empty for ``threshold``.
    direction : {"less", "greater"}
        The claim: a less / greater than b (threshold: than ``value``).
    test : str
        The test (:data:`COMPARES` lists those of each compare).
    within, pooled : tuple of str
        Cells judged separately; run settings pooled on purpose inside a group.
    where : dict
        Column -> accepted values: only these observations are judged (e.g. the late TSP stage).
    value : float or None
        Margin or threshold (statistic units, e.g. 0.02 = 2 accuracy points).
    alpha : float
        Level of the tests and of the (1 - 2 alpha) intervals.
    """

    id: str
    says: str
    statistic: str
    compare: str
    a: tuple
    direction: str
    b: tuple = ()
    by: str = "method"
    test: str | None = None
    params: dict = field(default_factory=dict)
    within: tuple[str, ...] = ()
    pooled: tuple[str, ...] = ()
    value: float | None = None
    alpha: float = 0.05
    where: dict = field(default_factory=dict)

    @classmethod
    def from_table(cls, raw: dict, where: str) -> "Claim":
        """Parse and check one ``[[claim]]`` table of a recipe (``where`` names it in errors)."""
        unknown = sorted(set(raw) - _KEYS)
        missing = sorted({"id", "says", "statistic", "compare", "direction"} - set(raw))
        if unknown or missing:
            raise ClaimError(f"{where}: claim {raw.get('id', '?')!r} has unknown key(s) {unknown}, missing key(s) {missing}")
        compare = raw["compare"]
        if compare not in COMPARES:
            raise ClaimError(f"{where}: claim {raw['id']!r}: compare must be one of {', '.join(COMPARES)}, got {compare!r}")
        test = raw.get("test", COMPARES[compare][0])
        if test not in COMPARES[compare]:
            raise ClaimError(f"{where}: claim {raw['id']!r}: {compare} takes test {' or '.join(COMPARES[compare])}, got {test!r}")
        if raw["direction"] not in ("less", "greater"):
            raise ClaimError(f"{where}: claim {raw['id']!r}: direction must be less or greater, got {raw['direction']!r}")
        try:
            registry.statistic_of(raw["statistic"])
        except RobustkitError as error:
            raise ClaimError(f"{where}: claim {raw['id']!r}: {error}") from None
        if compare in ("margin", "threshold") and not isinstance(raw.get("value"), (int, float)):
            raise ClaimError(f"{where}: claim {raw['id']!r}: {compare} needs a numeric value")
        if compare != "threshold" and (raw.get("a") is None or raw.get("b") is None):
            raise ClaimError(f"{where}: claim {raw['id']!r}: {compare} compares two groups: give a and b")
        return cls(id=raw["id"], says=raw["says"], statistic=raw["statistic"], compare=compare, a=_values(raw.get("a")),
                   b=_values(raw.get("b")), by=raw.get("by", "method"), direction=raw["direction"], test=test,
                   where={k: _values(v) for k, v in raw.get("where", {}).items()},
                   params=dict(raw.get("params", {})), within=tuple(raw.get("within", ())), pooled=tuple(raw.get("pooled", ())),
                   value=None if raw.get("value") is None else float(raw["value"]), alpha=float(raw.get("alpha", 0.05)))

    @property
    def hypothesis(self) -> str:
        """The claim in one line, e.g. ``"spread of score: houlsby < full (levene, one-sided)"``."""
        sign = "<" if self.direction == "less" else ">"
        other = _label(self.b) if self.compare != "threshold" else f"{self.value:g}"
        left = _label(self.a) or "all runs"
        if self.compare == "margin":
            return f"{self.statistic}: {left} within {self.value:g} of {other} (bootstrap CI)"
        return f"{self.compare} of {self.statistic}: {left} {sign} {other} ({self.test}, one-sided)"


# ---------------------------------------------------------------------------------------------
# verdicts on observations


def judge(claim: Claim, observations: pd.DataFrame, include_failed: bool = False) -> pd.DataFrame:
    """The verdict of ``claim`` on per-run observations, per cell and overall.

    Parameters
    ----------
    observations : DataFrame
        One row per observation: ``claim.by``, ``value``, the ``within`` columns, run settings
        and ``outcome`` (e.g. :func:`robustkit.analysis.registry.per_run` output).
    include_failed : bool
        Keep collapsed and diverged runs (always kept for ``rate``).

    Returns
    -------
    DataFrame
        :data:`VERDICT_COLUMNS` without ``recipe``: one row per cell (``cell`` names it, e.g.
        ``tsp_step=200``) and, with cells, a last row ``cell == "all"`` aggregating them.
    """
    missing = [c for c in [claim.by, *claim.within, "value"] if c not in observations]
    if missing:
        return _rows(claim, [_result("all", reason=f"the statistic gives no column {', '.join(missing)}")])
    for column, values in claim.where.items():
        if column not in observations:
            return _rows(claim, [_result("all", reason=f"cannot select where {column}: the statistic gives no such column")])
        observations = observations[_is(observations[column], values)]
    if claim.compare != "threshold" or claim.a:  # only the compared groups must be alike
        observations = observations[_is(observations[claim.by], claim.a + claim.b)]
    check_pooling(observations, [claim.by, *claim.within], claim.pooled, f"test claim {claim.id!r}")
    n_failed = (observations["outcome"] != collapse.OK).groupby(_cells(observations, claim.within)).sum() \
        if "outcome" in observations else None
    kept = observations if include_failed or claim.compare == "rate" else collapse.kept(observations)
    results = []
    cells = kept.groupby(list(claim.within), dropna=False, sort=True) if claim.within else [((), kept)]
    for key, cell in cells:
        key = key if isinstance(key, tuple) else (key,)
        name = ", ".join(f"{c}={_text(k)}" for c, k in zip(claim.within, key)) or "all"
        a = cell.loc[_is(cell[claim.by], claim.a), "value"].dropna().to_numpy(float) if claim.a else cell["value"].dropna().to_numpy(float)
        b = cell.loc[_is(cell[claim.by], claim.b), "value"].dropna().to_numpy(float) if claim.b else np.array([])
        result = _verdict(claim, a, b)
        result.update(cell=name, n_failed=int(n_failed.get(name, 0)) if n_failed is not None else 0)
        results.append(result)
    if not results:
        results.append(_result("all", reason="no run left to test (every run failed or none was selected)"))
    if claim.within and len(results) > 1:
        results.append(_overall(results))
    return _rows(claim, results)


def _verdict(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    need = MIN_RUNS[claim.compare]
    groups = [(_label(claim.a) or "all runs", a)] + ([(_label(claim.b), b)] if claim.compare != "threshold" else [])
    small = [f"{name} has {len(x)}" for name, x in groups if len(x) < need]
    if small:
        return _result(n_a=len(a), n_b=len(b), reason=f"too few runs to test: {', '.join(small)} (needs {need} per group)")
    return {"spread": _spread, "location": _location, "rate": _rate, "margin": _margin, "threshold": _threshold}[claim.compare](claim, a, b)


def _spread(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    sd_a, sd_b = np.std(a, ddof=1), np.std(b, ddof=1)
    ratio = sd_a / sd_b if sd_b > 0 else np.inf if sd_a > 0 else np.nan
    low, high = _bootstrap_ci((a, b), significance.std_ratio, claim.alpha)
    _, p_value = significance.spread_test(a, b, center="mean" if claim.test == "levene" else "median")
    base = {"n_a": len(a), "n_b": len(b), "effect": ratio, "effect_name": "std ratio a/b", "ci_low": low, "ci_high": high}
    if not np.isfinite(p_value):
        return _result(**base, reason="test degenerate (no spread within the groups)")
    shows_less = sd_a < sd_b
    p_claimed = p_value / 2 if shows_less == (claim.direction == "less") else 1 - p_value / 2
    p_opposite = 1 - p_claimed
    return _decide(claim, base, p_claimed, p_opposite, f"std {sd_a:.3g} vs {sd_b:.3g}")


def _location(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    low, high = _bootstrap_ci((a, b), significance.mean_difference, claim.alpha)
    base = {"n_a": len(a), "n_b": len(b), "effect": a.mean() - b.mean(), "effect_name": "mean a - mean b",
            "ci_low": low, "ci_high": high}
    if claim.test == "bootstrap-mean":
        return _by_interval(claim, base, 0.0)
    if np.ptp(np.concatenate([a, b])) == 0:
        return _result(**base, reason="all values equal")
    opposite = "greater" if claim.direction == "less" else "less"
    _, p_claimed = significance.mann_whitney(a, b, claim.direction)
    _, p_opposite = significance.mann_whitney(a, b, opposite)
    shown = f"means {a.mean():.3g} vs {b.mean():.3g}"
    # the exact one-sided test cannot go below 1 / C(n_a + n_b, n_a): with 3 runs per group 0.05
    smallest = 1 / math.comb(len(a) + len(b), len(a))
    if smallest >= claim.alpha:
        shown += f"; with {len(a)} vs {len(b)} runs the smallest possible p is {smallest:.3g}: cannot reach {claim.alpha:g}"
    return _decide(claim, base, p_claimed, p_opposite, shown)


def _rate(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    base = {"n_a": len(a), "n_b": len(b), "effect": a.mean() - b.mean(), "effect_name": "rate a - rate b",
            "ci_low": np.nan, "ci_high": np.nan}
    opposite = "greater" if claim.direction == "less" else "less"
    _, p_claimed = significance.fisher_exact(a, b, claim.direction)
    _, p_opposite = significance.fisher_exact(a, b, opposite)
    return _decide(claim, base, p_claimed, p_opposite, f"rates {a.mean():.2f} vs {b.mean():.2f}")


def _margin(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    low, high = _bootstrap_ci((a, b), significance.mean_difference, claim.alpha)
    base = {"n_a": len(a), "n_b": len(b), "effect": a.mean() - b.mean(), "effect_name": "mean a - mean b",
            "ci_low": low, "ci_high": high}
    # the claim "a within value of b" is a one-sided equivalence: mean(a) - mean(b) > -value
    return _by_interval(claim, {**base}, -claim.value, direction="greater")


def _threshold(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    low, high = _bootstrap_ci((a,), significance.mean, claim.alpha)
    base = {"n_a": len(a), "n_b": 0, "effect": a.mean(), "effect_name": "mean", "ci_low": low, "ci_high": high}
    return _by_interval(claim, base, claim.value)


def _by_interval(claim: Claim, base: dict, bound: float, direction: str | None = None) -> dict:
    """Verdict from where the (1 - 2 alpha) CI lies relative to ``bound``."""
    direction = direction or claim.direction
    low, high = base["ci_low"], base["ci_high"]
    interval = f"{100 * (1 - 2 * claim.alpha):.0f}% CI [{low:.3g}, {high:.3g}] vs {bound:.3g}"
    if not (np.isfinite(low) and np.isfinite(high)):
        return _result(**base, reason="bootstrap interval degenerate")
    above, below = low > bound, high < bound
    if (above and direction == "greater") or (below and direction == "less"):
        return _result(**base, verdict=AGREES, reason=interval)
    if above or below:
        return _result(**base, verdict=CONTRADICTS, reason=interval)
    return _result(**base, reason=f"{interval}: the interval holds the bound")


def _decide(claim: Claim, base: dict, p_claimed: float, p_opposite: float, shown: str) -> dict:
    if p_claimed < claim.alpha:
        return _result(**base, p_value=p_claimed, verdict=AGREES, reason=f"{shown}; one-sided p = {p_claimed:.3g}")
    if p_opposite < claim.alpha:
        return _result(**base, p_value=p_opposite, verdict=CONTRADICTS,
                       reason=f"{shown}; opposite direction, one-sided p = {p_opposite:.3g}")
    return _result(**base, p_value=p_claimed, reason=f"{shown}; one-sided p = {p_claimed:.3g} >= {claim.alpha:g}")


def _overall(results: list[dict]) -> dict:
    verdicts = [r["verdict"] for r in results]
    counts = {v: verdicts.count(v) for v in VERDICTS if verdicts.count(v)}
    text = ", ".join(f"{n}/{len(verdicts)} cells {v}" for v, n in counts.items())
    verdict = AGREES if counts.get(AGREES) == len(verdicts) else CONTRADICTS if counts.get(CONTRADICTS) else INCONCLUSIVE
    return _result("all", n_a=sum(r["n_a"] for r in results), n_b=sum(r["n_b"] for r in results),
                   n_failed=sum(r["n_failed"] for r in results), verdict=verdict, reason=text)


def _bootstrap_ci(samples: tuple, statistic, alpha: float) -> tuple[float, float]:
    """(1 - 2 alpha) percentile bootstrap interval, each sample resampled on its own
    (:func:`robustkit.measures.significance.bootstrap_ci`)."""
    if any(len(x) < 2 for x in samples):
        return np.nan, np.nan
    return significance.bootstrap_ci(samples, statistic, 1 - 2 * alpha, N_RESAMPLES, SEED, significance.PERCENTILE)


def _result(cell: str = "all", n_a: int = 0, n_b: int = 0, n_failed: int = 0, effect: float = np.nan, effect_name: str = "",
            ci_low: float = np.nan, ci_high: float = np.nan, p_value: float = np.nan, verdict: str = INCONCLUSIVE,
            reason: str = "") -> dict:
    return {"cell": cell, "n_a": n_a, "n_b": n_b, "n_failed": n_failed, "effect": float(effect), "effect_name": effect_name,
            "ci_low": float(ci_low), "ci_high": float(ci_high), "p_value": float(p_value), "verdict": verdict, "reason": reason}


def _rows(claim: Claim, results: list[dict]) -> pd.DataFrame:
    fixed = {"claim": claim.id, "says": claim.says, "statistic": claim.statistic, "compare": claim.compare,
             "test": claim.test, "a": _label(claim.a), "b": _label(claim.b), "direction": claim.direction}
    return pd.DataFrame([{**fixed, **r} for r in results], columns=VERDICT_COLUMNS[1:])


def _cells(frame: pd.DataFrame, within: Sequence[str]) -> pd.Series:
    if not within:
        return pd.Series("all", index=frame.index)
    return frame[list(within)].apply(lambda row: ", ".join(f"{c}={_text(v)}" for c, v in row.items()), axis=1)


def _is(column: pd.Series, values: tuple) -> pd.Series:
    """Rows whose value is one of ``values``: numbers compare as numbers (64 == 64.0), the rest
    as text."""
    numbers = pd.to_numeric(column, errors="coerce")
    wanted = {float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}
    texts = {str(v) for v in values}
    return numbers.isin(wanted) | column.map(str).isin(texts)


def _values(value) -> tuple:
    """A claim's group or filter value(s) as a tuple (``None``: empty)."""
    if value is None:
        return ()
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def _label(values: tuple) -> str:
    return "/".join(_text(v) for v in values)


def _text(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "all" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{value:g}" if isinstance(value, float) else str(value)


# ---------------------------------------------------------------------------------------------
# claims of recipes, on a store


def parameters(claim: Claim, figure: str, figure_params: dict) -> tuple[registry.Analysis, dict, dict]:
    """The analysis a claim reads, the analysis's parameters and the statistic's own.

    Parameters
    ----------
    figure : str
        The recipe's registered figure (:mod:`robustkit.figures`).
    figure_params : dict
        The recipe's figure parameters at the scale judged.

    Returns
    -------
    tuple
        The analysis, its parameter values (the figure's when it is the figure's analysis: one
        cache entry for both), the statistic's parameter values.

    Raises
    ------
    ClaimError
        A claim that sets its figure's analysis parameters (they would judge another frame than
        the one drawn), or an unknown parameter.
    """
    from robustkit import figures

    analysis, statistic = registry.statistic_of(claim.statistic)
    shared = {p.name for p in analysis.params}
    drawn = figures.get(figure)
    try:
        if drawn.analysis == analysis.name:
            clash = sorted(shared.intersection(claim.params))
            if clash:
                raise ClaimError(f"claim {claim.id!r} sets {clash}, parameters of its figure's analysis {analysis.name!r}: "
                                 "set them once in the recipe's params, so the claim is judged on the frame the figure draws")
            values = drawn.analysis_values(drawn.resolve(**figure_params))
        else:
            values = analysis.resolve(**{k: v for k, v in claim.params.items() if k in shared})
        own = {k: v for k, v in claim.params.items() if k not in shared}
        resolve(statistic.params, own, f"statistic {claim.statistic}", ClaimError)
    except RobustkitError as error:
        raise ClaimError(f"claim {claim.id!r}: {error}") from None
    return analysis, values, own


def observations(claim: Claim, figure: str, figure_params: dict, store: str | Path, run_ids: list[str],
                 frames: dict | None = None) -> pd.DataFrame:
    """The claim's per-run observations: its statistic of its analysis's frame, each run's outcome added.

    ``frames`` memoizes the analyses' frames within one call of :func:`verdicts` (keyed by
    analysis and parameters), so the claims of a figure compute its frame once.
    """
    analysis, values, own = parameters(claim, figure, figure_params)
    key = (analysis.name, repr(sorted(values.items())), tuple(run_ids))
    frames = {} if frames is None else frames
    if key not in frames:
        frames[key] = analysis.run(store, {"run_id": run_ids}, **values, progress=False)
    from robustkit.analysis.statistics import with_outcome

    name = claim.statistic.rpartition(".")[2]
    return with_outcome(analysis.statistic(name, frames[key], store, **own), store)


def verdicts(store: str | Path, recipes: Sequence, scale: str = "demo", include_failed: bool = False,
             defaults: dict | None = None) -> pd.DataFrame:
    """Every claim of ``recipes`` judged on the recipe's runs at ``scale`` in ``store``.

    Parameters
    ----------
    recipes : sequence of :class:`robustkit.recipes.Recipe`
        Recipes with their ``claims`` (e.g. ``[load_recipe("han2021/fig2")]``).
    defaults : dict, optional
        The recipes' ``defaults.toml`` (default: the one next to the project's recipes).

    Returns
    -------
    DataFrame
        :data:`VERDICT_COLUMNS`, one row per recipe x claim x cell (plus an ``all`` row per
        claim with cells). A claim whose statistic cannot be computed on the runs present
        (missing runs, an analysis error) is ``inconclusive`` with the reason.
    """
    frames = []
    for recipe in recipes:
        run_ids = [spec.run_id for spec in recipe.specs(scale, defaults)]
        memo: dict = {}
        for claim in recipe.claims:
            try:
                found = observations(claim, recipe.figure, recipe.figure_params(scale), store, run_ids, memo)
                frame = judge(claim, found, include_failed)
            except Exception as error:  # noqa: BLE001 - one claim's failure must not cost the figure
                kind = "" if isinstance(error, RobustkitError) else f"{type(error).__name__}: "
                frame = _rows(claim, [_result(reason=f"not computable on these runs: {kind}{error}")])
            frames.append(frame.assign(recipe=recipe.name))
    if not frames:
        return pd.DataFrame(columns=VERDICT_COLUMNS)
    return pd.concat(frames, ignore_index=True)[VERDICT_COLUMNS]


def summary_line(rows: pd.DataFrame) -> str:
    """One line per claim (its overall row): ``"spread: agrees (n = 5 vs 5; std ratio a/b 0.41,
    90% CI [0.2, 0.8]; std ... one-sided p = 0.01)"``, for under a figure or in an index."""
    lines = []
    for claim, group in rows.groupby("claim", sort=False):
        row = group.iloc[-1]
        effect = f"; {row['effect_name']} {row['effect']:.3g}" if row["effect_name"] and np.isfinite(row["effect"]) else ""
        failed = f"; {int(row['n_failed'])} collapsed or diverged left out" if row["n_failed"] and row["compare"] != "rate" else ""
        n = f"n = {int(row['n_a'])}" + (f" vs {int(row['n_b'])}" if row["compare"] != "threshold" else "")
        lines.append(f"{claim}: {row['verdict']} ({n}{effect}{failed}; {row['reason']})")
    return "\n".join(lines)
