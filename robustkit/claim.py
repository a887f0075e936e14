"""A paper's claim as a checkable hypothesis, and its verdict from the runs behind a figure.

Each recipe (``analyses/<paper>/<figure>.toml``) states its paper's claim before any run exists::

    [[claim]]
    id = "spread"
    says = "full FT 'leads to a large standard deviation'; adapters 'a much smaller variance' (§2)"
    statistic = "scores.score"       # <analysis>.<statistic> (robustkit.analysis.registry)
    compare = "spread"               # spread | location | rate | equivalence | threshold
    a = "houlsby"
    b = "full"
    direction = "less"               # the claim: a less than b
    paper_effect_source = "not reported: figure 2 shows the scores as box plots, no numbers"

A claim is judged on the frame its figure drew: when ``statistic`` names the figure's analysis,
the analysis's parameters are the figure's (the recipe's ``params`` at the scale), so claim and
figure read one cache entry; a claim's ``params`` are then the statistic's own. A claim on
another analysis gives that analysis's parameters in ``params`` too (unknown names are errors).

The decision framework
======================
One rule per claim kind, written here once and tested by simulation
(``tests/test_claim_simulation.py``): under the null, a verdict of *agrees* comes at most at rate
alpha at every n, and so does *contradicts* when the claim holds. alpha = 0.05, one-sided, in
the claimed direction; intervals are two-sided at 1 - 2 alpha (90%), each tail alpha, so an
interval excludes the null exactly where the test rejects. All tests are exact
(:mod:`robustkit.measures.exact`): their smallest p-value at the recipe's n is known before any
run exists (``robustkit claims --plan``), and a claim that cannot reach alpha at its n is an
error of the recipe (``tests/test_recipes.py``).

============  ==========================  ==============================  =======================  ============
kind          null hypothesis             test (one-sided)                effect and interval      decides at
============  ==========================  ==============================  =======================  ============
location      a and b alike               Wilcoxon-Mann-Whitney, exact    Hodges-Lehmann shift,    C(na+nb, na)
                                                                          exact (inverted test)    > 1/alpha
spread        a and b equally spread      permutation of Brown-Forsythe   std ratio a/b; bootstrap as location
                                          deviations, exact               only with >= 10 per group
rate          equal rates of ones         Fisher's exact                  rate difference,         as location
                                                                          Newcombe score interval
equivalence   |a - b| >= value            two one-sided rank tests        Hodges-Lehmann shift,    as location
              (``value`` = the margin)    (TOST) at +-value               exact
threshold     a centred at ``value``      Wilcoxon signed-rank, exact     one-sample Hodges-       2^na > 1/alpha
                                                                          Lehmann, exact           (na >= 5)
============  ==========================  ==============================  =======================  ============

- **Verdict of a cell**: *agrees* when the test in the claimed direction has p < alpha (for
  equivalence both one-sided tests inside the margin); *contradicts* when the test in the
  opposite direction does (for equivalence: the shift lies outside the margin, either side,
  Bonferroni over the two sides); else *inconclusive*. Below the smallest n at which the test
  can reach alpha the interval says "none at this n" and the verdict is *inconclusive: too few
  runs*.
- **Sign** (``sign = "less"`` or ``"greater"``): a claim that names a direction of change
  ("vanishing" = falling) also tests group a's own values against 0 (signed-rank); the cell
  agrees only when both tests agree, and contradicts when either finds the opposite.
- **Cells** (``within``): each cell is tested; the p-values are Holm-corrected over the cells
  (each direction apart). A cell whose smallest possible p cannot pass its share of alpha is
  *too few runs* and leaves the family before any p is seen (Tarone's rule for discrete tests,
  :mod:`robustkit.measures.multiplicity`): 4 vs 4 runs at 7 layers cannot decide (1/70 x 7 =
  0.1), 5 vs 5 can. A cell whose effect is smaller than the claim's ``floor``
  (statistic units, default 0) counts as undecided. The claim agrees when at least half of the
  cells agree and none contradicts, contradicts when at least half contradict and none agrees,
  and is inconclusive otherwise.
- **Unit of replication**: one observation per run and cell. A statistic that gives a run several
  observations in a cell (its evaluations at every epoch) is averaged to the run's mean first:
  evaluations of one run are not independent samples.
- **Dependent pairs**: a statistic of run pairs (the barrier of two seeds' runs) shares runs
  between its observations; it is shown, never tested (*inconclusive: untestable*).
- **Failures** (``failures``): ``not-learned``, ``collapsed`` and ``diverged`` runs
  (:mod:`robustkit.collapse`) are left out (``"exclude"``, the default) or kept as data
  (``"data"``: claims about failing or degrading, and every ``rate`` claim). Where leaving them
  out changes the verdict, the reason says what the verdict is with them.
- **Convergence** (``final``, default: claims on the final score, ``scores.score``): when more
  than half of a compared group's runs are still improving at the end of training (the rule of
  :mod:`robustkit.analysis.convergence`), the verdict is *inconclusive: not converged*.
- **The paper's effect** (``paper_effect``, with ``paper_effect_source`` quoting the numbers and
  how they were standardised): the effect the paper reports, in the kind's unit of
  :data:`robustkit.decidability.UNITS` and in the claimed direction (a negative shift: the
  paper's numbers go the other way). ``robustkit claims --plan`` prints the test's power at it
  beside the smallest effect it detects. Only from numbers the paper prints (means and SDs over
  seeds, values in its text), never read off a plot; otherwise ``paper_effect_source`` says
  ``"not reported: ..."`` and why.
- **Reason classes** of an inconclusive verdict (column ``reason_class``): ``too few runs``,
  ``not significant``, ``not converged``, ``untestable``, ``no data``.

The verdict logic is hand-written: no maintained package states paper claims as directional
hypotheses over groups of runs. The tests themselves are scipy's exact ones.
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
from robustkit.measures import exact, multiplicity, significance
from robustkit.params import resolve

AGREES, CONTRADICTS, INCONCLUSIVE = "agrees", "contradicts", "inconclusive"
VERDICTS = (AGREES, CONTRADICTS, INCONCLUSIVE)
COMPARES = {"spread": "brown-forsythe", "location": "mann-whitney", "rate": "fisher", "equivalence": "tost-rank",
            "threshold": "signed-rank"}
TOO_FEW, NOT_SIGNIFICANT, NOT_CONVERGED, UNTESTABLE, NO_DATA = (
    "too few runs", "not significant", "not converged", "untestable", "no data")
BOOTSTRAP_MIN_N = 10  # below this many runs per group no percentile bootstrap interval is given
FAILURE_POLICIES = ("exclude", "data")
VERDICT_COLUMNS = ["recipe", "claim", "says", "statistic", "compare", "test", "a", "b", "direction", "failures", "cell",
                   "n_a", "n_b", "n_failed", "effect", "effect_name", "ci_low", "ci_high", "p_value", "smallest_p",
                   "verdict", "reason_class", "reason"]
N_RESAMPLES = 9999
SEED = 0
_KEYS = {"id", "says", "statistic", "params", "compare", "by", "a", "b", "direction", "test", "within", "pooled",
         "value", "alpha", "where", "sign", "floor", "failures", "final", "scales", "paper_effect", "paper_effect_source"}
NOT_REPORTED = "not reported"  # how a paper_effect_source without a paper_effect begins
FINAL_STATISTICS = ("scores.score",)
UNSET = "unset"  # a ``where`` value: the runs without a value in that column


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
        ``spread``, ``location``, ``rate``, ``equivalence`` or ``threshold`` (module docstring).
    by : str
        Column whose groups ``a`` and ``b`` are compared.
    a, b : tuple
        The values of ``by`` that make group a and group b (several values: one group, e.g.
        ``("houlsby", "adapterhub-houlsby")`` so that one claim serves both scales; numbers
        compare as numbers). ``b`` is empty for ``threshold``.
    direction : {"less", "greater"} or None
        The claim: a less / greater than b (threshold: than ``value``); None for equivalence.
    test : str
        The kind's test (:data:`COMPARES`; one per kind).
    within, pooled : tuple of str
        Cells judged separately; run settings pooled on purpose inside a group.
    where : dict
        Column -> accepted values: only these observations are judged (e.g. the late TSP stage).
        ``"unset"`` accepts the runs that have no value there: ``{"lora.r": [8, "unset"]}`` keeps
        rank-8 LoRA runs and the runs of methods without a rank (full fine-tuning).
    value : float or None
        Equivalence margin or threshold (statistic units, e.g. 0.02 = 2 accuracy points).
    alpha : float
        One-sided level of the tests; intervals are 1 - 2 alpha.
    sign : {"less", "greater"} or None
        The direction of change the claim names for group a's own values (against 0).
    floor : float
        Smallest effect that counts for a cell (statistic units).
    failures : {"exclude", "data"}
        Failed runs left out, or kept as data (always data for ``rate``).
    final : bool
        The claim is about final performance: runs still improving make it inconclusive.
    scales : tuple of str
        The scales whose runs can decide the claim (the recipe says why where one is left out);
        at the others it is *inconclusive: untestable at this scale*.
    paper_effect : float, tuple or dict, optional
        The effect the paper reports, in the kind's unit (:data:`robustkit.decidability.UNITS`)
        and in the claimed direction: location and threshold a standardised difference (SD),
        spread the SD ratio of the group claimed less spread to the other, rate the failure rate
        of the group claimed to fail more (the other's taken as 0), equivalence the pair
        ``(margin, difference)`` in SD. One value for every cell, or a dict cell -> value (cells
        named as :func:`robustkit.decidability.claim_sizes` names them); None: not reported.
    paper_effect_source : str or None
        Where ``paper_effect`` comes from (table, the numbers, how they were standardised), or
        ``"not reported: ..."`` and why.
    """

    id: str
    says: str
    statistic: str
    compare: str
    a: tuple
    direction: str | None = None
    b: tuple = ()
    by: str = "method"
    test: str | None = None
    params: dict = field(default_factory=dict)
    within: tuple[str, ...] = ()
    pooled: tuple[str, ...] = ()
    value: float | None = None
    alpha: float = 0.05
    where: dict = field(default_factory=dict)
    sign: str | None = None
    floor: float = 0.0
    failures: str = "exclude"
    final: bool = False
    scales: tuple[str, ...] = ("demo", "paper")
    paper_effect: float | tuple | dict | None = None
    paper_effect_source: str | None = None

    @classmethod
    def from_table(cls, raw: dict, where: str) -> "Claim":
        """Parse and check one ``[[claim]]`` table of a recipe (``where`` names it in errors)."""
        name = raw.get("id", "?")
        unknown = sorted(set(raw) - _KEYS)
        missing = sorted({"id", "says", "statistic", "compare"} - set(raw))
        if unknown or missing:
            raise ClaimError(f"{where}: claim {name!r} has unknown key(s) {unknown}, missing key(s) {missing}")
        compare = raw["compare"]
        if compare not in COMPARES:
            raise ClaimError(f"{where}: claim {name!r}: compare must be one of {', '.join(COMPARES)}, got {compare!r}")
        test = raw.get("test", COMPARES[compare])
        if test != COMPARES[compare]:
            raise ClaimError(f"{where}: claim {name!r}: {compare} is tested by {COMPARES[compare]} (one rule per kind), got {test!r}")
        direction = raw.get("direction")
        if compare == "equivalence":
            if direction is not None:
                raise ClaimError(f"{where}: claim {name!r}: equivalence has no direction (both sides of the margin)")
        elif direction not in ("less", "greater"):
            raise ClaimError(f"{where}: claim {name!r}: direction must be less or greater, got {direction!r}")
        for key, allowed in (("sign", (None, "less", "greater")), ("failures", FAILURE_POLICIES)):
            if raw.get(key, allowed[0]) not in allowed:
                raise ClaimError(f"{where}: claim {name!r}: {key} must be one of {[a for a in allowed if a]}, got {raw[key]!r}")
        try:
            registry.statistic_of(raw["statistic"])
        except RobustkitError as error:
            raise ClaimError(f"{where}: claim {name!r}: {error}") from None
        if compare in ("equivalence", "threshold") and not isinstance(raw.get("value"), (int, float)):
            raise ClaimError(f"{where}: claim {name!r}: {compare} needs a numeric value")
        if compare != "threshold" and (raw.get("a") is None or raw.get("b") is None):
            raise ClaimError(f"{where}: claim {name!r}: {compare} compares two groups: give a and b")
        final = raw.get("final", raw["statistic"] in FINAL_STATISTICS and compare != "rate")
        paper_effect = _paper_effect(raw, compare, f"{where}: claim {name!r}")
        return cls(id=raw["id"], says=raw["says"], statistic=raw["statistic"], compare=compare, a=_values(raw.get("a")),
                   b=_values(raw.get("b")), by=raw.get("by", "method"), direction=direction, test=test,
                   where={k: _values(v) for k, v in raw.get("where", {}).items()},
                   params=dict(raw.get("params", {})), within=tuple(raw.get("within", ())), pooled=tuple(raw.get("pooled", ())),
                   value=None if raw.get("value") is None else float(raw["value"]), alpha=float(raw.get("alpha", 0.05)),
                   sign=raw.get("sign"), floor=float(raw.get("floor", 0.0)),
                   failures="data" if compare == "rate" else raw.get("failures", "exclude"), final=bool(final),
                   scales=tuple(raw.get("scales", ("demo", "paper"))), paper_effect=paper_effect,
                   paper_effect_source=raw.get("paper_effect_source"))

    def paper_effect_in(self, cell: str) -> float | tuple | None:
        """The paper's effect in the cell named ``cell`` (None: the paper reports none there)."""
        if isinstance(self.paper_effect, dict):
            return self.paper_effect.get(cell)
        return self.paper_effect

    @property
    def hypothesis(self) -> str:
        """The claim in one line, e.g. ``"spread of scores.score: houlsby < full (brown-forsythe, one-sided)"``."""
        left = _label(self.a) or "all runs"
        if self.compare == "equivalence":
            return f"{self.statistic}: {left} within {self.value:g} of {_label(self.b)} ({self.test}, both sides)"
        sign = "<" if self.direction == "less" else ">"
        other = _label(self.b) if self.compare != "threshold" else f"{self.value:g}"
        text = f"{self.compare} of {self.statistic}: {left} {sign} {other} ({self.test}, one-sided)"
        return text + (f"; {left} itself {sign} 0" if self.sign else "")

    @property
    def groups(self) -> int:
        """Groups compared: 1 for a threshold, else 2."""
        return 1 if self.compare == "threshold" else 2


# ---------------------------------------------------------------------------------------------
# verdicts on observations


def judge(claim: Claim, observations: pd.DataFrame, include_failed: bool = False,
          improving: pd.Series | None = None) -> pd.DataFrame:
    """The verdict of ``claim`` on per-run observations, per cell and overall.

    Parameters
    ----------
    observations : DataFrame
        One row per observation: ``run_id``, ``claim.by``, ``value``, the ``within`` columns,
        run settings and ``outcome`` (e.g. :func:`robustkit.analysis.registry.per_run` output).
    include_failed : bool
        Keep failed runs whatever the claim's policy.
    improving : Series, optional
        run_id -> whether the run was still improving at its end
        (:func:`robustkit.analysis.convergence.still_improving`); used by ``final`` claims.

    Returns
    -------
    DataFrame
        :data:`VERDICT_COLUMNS` without ``recipe``: one row per cell (``cell`` names it, e.g.
        ``tsp_step=200``) and, with cells, a last row ``cell == "all"`` aggregating them.
    """
    missing = [c for c in [claim.by, *claim.within, "value"] if c not in observations]
    if missing:
        return _rows(claim, [_result(reason=f"the statistic gives no column {', '.join(missing)}", reason_class=NO_DATA)])
    for column, values in claim.where.items():
        if column not in observations:
            return _rows(claim, [_result(reason=f"cannot select where {column}: the statistic gives no such column",
                                         reason_class=NO_DATA)])
        observations = observations[_is(observations[column], values)]
    if claim.compare != "threshold" or claim.a:  # only the compared groups must be alike
        observations = observations[_is(observations[claim.by], claim.a + claim.b)]
    if "run_id_b" in observations or not registry.statistic_of(claim.statistic)[1].independent:
        return _rows(claim, [_result(n_a=int(_is(observations[claim.by], claim.a).sum()), reason_class=UNTESTABLE,
                                     reason="observations are pairs of runs that share runs (not independent): shown, not tested")])
    check_pooling(observations, [claim.by, *claim.within], claim.pooled, f"test claim {claim.id!r}")
    as_data = include_failed or claim.failures == "data"
    results = _judge_cells(claim, observations, as_data)
    if not as_data and "outcome" in observations and (observations["outcome"] != collapse.OK).any():
        other = _judge_cells(claim, observations, True)[-1]
        if other["verdict"] != results[-1]["verdict"]:
            results[-1]["reason"] += f"; with the failed runs as data: {other['verdict']}"
    if claim.final and improving is not None and "run_id" in observations:
        late = _not_converged(claim, observations, improving)
        if late:
            results[-1].update(verdict=INCONCLUSIVE, reason_class=NOT_CONVERGED, reason=f"not converged: {late}")
    return _rows(claim, results)


def _judge_cells(claim: Claim, observations: pd.DataFrame, as_data: bool) -> list[dict]:
    n_failed = (observations["outcome"] != collapse.OK).groupby(_cells(observations, claim.within)).sum() \
        if "outcome" in observations else None
    kept = observations if as_data else collapse.kept(observations)
    groups, averaged = [], False
    cells = kept.groupby(list(claim.within), dropna=False, sort=True) if claim.within else [((), kept)]
    for key, cell in cells:
        key = key if isinstance(key, tuple) else (key,)
        name = ", ".join(f"{c}={_text(k)}" for c, k in zip(claim.within, key)) or "all"
        if "run_id" in cell and cell["run_id"].duplicated().any():  # the run is the unit of replication
            averaged = True
            cell = cell.groupby("run_id", as_index=False).agg({claim.by: "first", "value": "mean"})
        a = cell.loc[_is(cell[claim.by], claim.a), "value"].dropna().to_numpy(float) if claim.a else cell["value"].dropna().to_numpy(float)
        b = cell.loc[_is(cell[claim.by], claim.b), "value"].dropna().to_numpy(float) if claim.b else np.array([])
        groups.append((name, a, b))
    # the cells that can reach alpha after Holm's correction over the cells (Tarone's rule: from
    # the group sizes alone, before any p-value is looked at)
    family = multiplicity.tarone_family([exact.smallest_p(claim.compare, len(a), len(b)) for _, a, b in groups], claim.alpha)
    results = []
    for name, a, b in groups:
        result = _cell(claim, a, b, family, len(groups))
        result.update(cell=name, n_failed=int(n_failed.get(name, 0)) if n_failed is not None else 0)
        results.append(result)
    if not results:
        return [_result(reason="no run left to test (every run failed or none was selected)", reason_class=NO_DATA)]
    if len(results) > 1:
        _holm(results, claim.alpha)
    for result in results:
        _decide(claim, result)
    if claim.within and len(results) > 1:
        results.append(_overall(results))
    if averaged:
        results[-1]["reason"] += "; several observations of a run averaged to one (the run is the unit)"
    return results


def _cell(claim: Claim, a: np.ndarray, b: np.ndarray, family: int = 1, cells: int = 1) -> dict:
    """The tests of one cell: p in the claimed and the opposite direction, effect and interval.

    ``family``: Tarone's family size of the claim's ``cells`` cells
    (:mod:`robustkit.measures.multiplicity`); the cell is tested only if its smallest p can pass
    ``alpha / family``.
    """
    smallest = exact.smallest_p(claim.compare, len(a), len(b))
    base = {"n_a": len(a), "n_b": len(b), "smallest_p": smallest}
    level = claim.alpha / family
    if smallest >= level:
        need = f"2^n_a > {1 / level:g}" if claim.compare == "threshold" else f"C(n_a + n_b, n_a) > {1 / level:g}"
        corrected = (f"; over {cells} cells a cell needs p < {level:.3g} (alpha over Tarone's family of {family})"
                     if cells > 1 and family > 1 else "")
        return _result(**base, reason_class=TOO_FEW, reason=f"too few runs to test: {len(a)}"
                       + (f" vs {len(b)}" if claim.groups == 2 else "") + f" can give p >= {smallest:.3g} at best{corrected}"
                       + f" (needs {need})")
    result = {"spread": _spread, "location": _location, "rate": _rate, "equivalence": _equivalence,
              "threshold": _threshold}[claim.compare](claim, a, b)
    if claim.sign:
        opposite = "greater" if claim.sign == "less" else "less"
        result["p_sign"] = exact.signed_rank(a, claim.sign)
        result["p_sign_opposite"] = exact.signed_rank(a, opposite)
        result["shown"] += f"; {_label(claim.a)} itself {'<' if claim.sign == 'less' else '>'} 0: one-sided p = {result['p_sign']:.3g}"
    return {**_result(**base), **result}


def _spread(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    sd_a, sd_b = np.std(a, ddof=1), np.std(b, ddof=1)
    ratio = sd_a / sd_b if sd_b > 0 else np.inf if sd_a > 0 else np.nan
    low = high = np.nan
    if min(len(a), len(b)) >= BOOTSTRAP_MIN_N:
        low, high = significance.bootstrap_ci((a, b), significance.std_ratio, 1 - 2 * claim.alpha, N_RESAMPLES, SEED,
                                              significance.PERCENTILE)
    opposite = "greater" if claim.direction == "less" else "less"
    _, p_claimed = exact.spread_permutation(a, b, claim.direction)
    _, p_opposite = exact.spread_permutation(a, b, opposite)
    return {"effect": ratio, "effect_name": "std ratio a/b", "ci_low": low, "ci_high": high, "p_claimed": p_claimed,
            "p_opposite": p_opposite, "magnitude": abs(math.log(ratio)) if np.isfinite(ratio) and ratio > 0 else np.inf,
            "shown": f"std {sd_a:.3g} vs {sd_b:.3g}" + ("" if np.isfinite(low) else f" (no interval below {BOOTSTRAP_MIN_N} runs per group)")}


def _location(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    shift, low, high = exact.shift_interval(a, b, claim.alpha)
    opposite = "greater" if claim.direction == "less" else "less"
    return {"effect": shift, "effect_name": "shift a - b (Hodges-Lehmann)", "ci_low": low, "ci_high": high,
            "p_claimed": exact.rank_sum(a, b, claim.direction), "p_opposite": exact.rank_sum(a, b, opposite),
            "magnitude": abs(shift), "shown": f"medians {np.median(a):.3g} vs {np.median(b):.3g}"}


def _rate(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    difference, low, high = exact.rate_interval(a, b, claim.alpha)
    opposite = "greater" if claim.direction == "less" else "less"
    return {"effect": difference, "effect_name": "rate a - rate b", "ci_low": low, "ci_high": high,
            "p_claimed": exact.rate_test(a, b, claim.direction), "p_opposite": exact.rate_test(a, b, opposite),
            "magnitude": abs(difference), "shown": f"rates {a.mean():.2f} vs {b.mean():.2f}"}


def _equivalence(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    margin = claim.value
    shift, low, high = exact.shift_interval(a, b, claim.alpha)
    inside = max(exact.rank_sum(a + margin, b, "greater"), exact.rank_sum(a - margin, b, "less"))
    outside = min(1.0, 2 * min(exact.rank_sum(a + margin, b, "less"), exact.rank_sum(a - margin, b, "greater")))
    return {"effect": shift, "effect_name": "shift a - b (Hodges-Lehmann)", "ci_low": low, "ci_high": high,
            "p_claimed": inside, "p_opposite": outside, "magnitude": np.inf,
            "shown": f"margin +-{margin:g}, medians {np.median(a):.3g} vs {np.median(b):.3g}"}


def _threshold(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    centre, low, high = exact.centre_interval(a, claim.alpha)
    opposite = "greater" if claim.direction == "less" else "less"
    return {"effect": centre, "effect_name": "centre (Hodges-Lehmann)", "ci_low": low, "ci_high": high,
            "p_claimed": exact.signed_rank(a, claim.direction, claim.value),
            "p_opposite": exact.signed_rank(a, opposite, claim.value), "magnitude": abs(centre - claim.value),
            "shown": f"median {np.median(a):.3g} vs {claim.value:g}"}


def _holm(results: list[dict], alpha: float) -> None:
    """Holm's step-down correction of each direction's p-values over the cells, in place."""
    for key in ("p_claimed", "p_opposite", "p_sign", "p_sign_opposite"):
        tested = [r for r in results if key in r]
        order = sorted(tested, key=lambda r: r[key])
        running = 0.0
        for rank, result in enumerate(order):
            running = max(running, min(1.0, (len(tested) - rank) * result[key]))
            result[key] = running
        for result in tested:
            result.setdefault("corrected", f"Holm over {len(tested)} cells")


def _decide(claim: Claim, result: dict) -> None:
    """The cell's verdict from its (corrected) p-values, in place."""
    if "p_claimed" not in result:
        return
    alpha, shown = claim.alpha, result.pop("shown")
    note = f" ({result.pop('corrected')})" if "corrected" in result else ""
    p, q = result.pop("p_claimed"), result.pop("p_opposite")
    s, t = result.pop("p_sign", 0.0), result.pop("p_sign_opposite", 1.0)
    magnitude = result.pop("magnitude")
    if magnitude < claim.floor:
        result.update(p_value=p, verdict=INCONCLUSIVE, reason_class=NOT_SIGNIFICANT,
                      reason=f"{shown}; effect below the claim's floor {claim.floor:g}")
    elif p < alpha and s < alpha:
        result.update(p_value=max(p, s), verdict=AGREES, reason=f"{shown}; one-sided p = {max(p, s):.3g}{note}")
    elif q < alpha or t < alpha:
        result.update(p_value=min(q, t), verdict=CONTRADICTS,
                      reason=f"{shown}; opposite direction, one-sided p = {min(q, t):.3g}{note}")
    else:
        result.update(p_value=max(p, s), verdict=INCONCLUSIVE, reason_class=NOT_SIGNIFICANT,
                      reason=f"{shown}; one-sided p = {max(p, s):.3g} >= {alpha:g}{note}")


def _overall(results: list[dict]) -> dict:
    """The claim over its cells: agrees when at least half of the cells agree and none
    contradicts, contradicts when at least half contradict and none agrees, else inconclusive."""
    verdicts = [r["verdict"] for r in results]
    counts = {v: verdicts.count(v) for v in VERDICTS if verdicts.count(v)}
    text = ", ".join(f"{n}/{len(verdicts)} cells {v}" for v, n in counts.items())
    half = len(verdicts) / 2
    agree, against = counts.get(AGREES, 0), counts.get(CONTRADICTS, 0)
    verdict = AGREES if agree >= half and not against else CONTRADICTS if against >= half and not agree else INCONCLUSIVE
    classes = {r["reason_class"] for r in results if r["verdict"] == INCONCLUSIVE}
    reason_class = "" if verdict != INCONCLUSIVE else ("cells disagree" if agree and against else
                                                      (classes.pop() if len(classes) == 1 else NOT_SIGNIFICANT))
    return _result("all", n_a=sum(r["n_a"] for r in results), n_b=sum(r["n_b"] for r in results),
                   n_failed=sum(r["n_failed"] for r in results), smallest_p=max(r["smallest_p"] for r in results),
                   verdict=verdict, reason_class=reason_class, reason=text)


def _not_converged(claim: Claim, observations: pd.DataFrame, improving: pd.Series) -> str:
    """Which compared group has more than half of its runs still improving ("" when none)."""
    runs = observations.drop_duplicates("run_id")
    texts = []
    for values in (claim.a, claim.b):
        if not values:
            continue
        group = runs[_is(runs[claim.by], values)]["run_id"]
        late = int(improving.reindex(group).fillna(False).astype(bool).sum())
        if len(group) and late > len(group) / 2:
            texts.append(f"{_label(values)} has {late} of {len(group)} runs still improving at the end")
    return "; ".join(texts)


def _result(cell: str = "all", n_a: int = 0, n_b: int = 0, n_failed: int = 0, effect: float = np.nan, effect_name: str = "",
            ci_low: float = np.nan, ci_high: float = np.nan, p_value: float = np.nan, smallest_p: float = np.nan,
            verdict: str = INCONCLUSIVE, reason_class: str = "", reason: str = "") -> dict:
    return {"cell": cell, "n_a": n_a, "n_b": n_b, "n_failed": n_failed, "effect": float(effect), "effect_name": effect_name,
            "ci_low": float(ci_low), "ci_high": float(ci_high), "p_value": float(p_value), "smallest_p": float(smallest_p),
            "verdict": verdict, "reason_class": reason_class, "reason": reason}


def _rows(claim: Claim, results: list[dict]) -> pd.DataFrame:
    fixed = {"claim": claim.id, "says": claim.says, "statistic": claim.statistic, "compare": claim.compare,
             "test": claim.test, "a": _label(claim.a), "b": _label(claim.b), "direction": claim.direction or "both",
             "failures": claim.failures}
    return pd.DataFrame([{**fixed, **r} for r in results], columns=VERDICT_COLUMNS[1:])


def _cells(frame: pd.DataFrame, within: Sequence[str]) -> pd.Series:
    if not within:
        return pd.Series("all", index=frame.index)
    return frame[list(within)].apply(lambda row: ", ".join(f"{c}={_text(v)}" for c, v in row.items()), axis=1)


def _is(column: pd.Series, values: tuple) -> pd.Series:
    """Rows whose value is one of ``values``: numbers compare as numbers (64 == 64.0), the rest
    as text; :data:`UNSET` matches a missing value (a run of a method without that option)."""
    numbers = pd.to_numeric(column, errors="coerce")
    wanted = {float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}
    texts = {str(v) for v in values if v != UNSET}
    unset = column.isna() if UNSET in values else pd.Series(False, index=column.index)
    return numbers.isin(wanted) | (column.notna() & column.map(str).isin(texts)) | unset


def _paper_effect(raw: dict, compare: str, where: str) -> float | tuple | dict | None:
    """A claim's ``paper_effect`` checked against its kind and cells, and its source required."""
    value, source = raw.get("paper_effect"), raw.get("paper_effect_source")
    if source is not None and (not isinstance(source, str) or not source.strip()):
        raise ClaimError(f"{where}: paper_effect_source must be a non-empty text, got {source!r}")
    if value is None:
        if source is not None and not source.startswith(NOT_REPORTED):
            raise ClaimError(f"{where}: paper_effect_source without a paper_effect must begin {NOT_REPORTED!r}")
        return None
    if source is None or source.startswith(NOT_REPORTED):
        raise ClaimError(f"{where}: paper_effect needs a paper_effect_source that quotes the paper's numbers")

    def one(effect, label: str):
        if compare == "equivalence":
            ok = isinstance(effect, list) and len(effect) == 2 and all(_number(e) for e in effect) and effect[0] > 0
            if not ok:
                raise ClaimError(f"{where}: {label} of an equivalence is [margin, difference] in SD, margin > 0; got {effect!r}")
            return float(effect[0]), float(effect[1])
        limits = {"spread": (0.0, math.inf), "rate": (0.0, 1.0)}.get(compare, (-math.inf, math.inf))
        if not _number(effect) or not limits[0] <= effect <= limits[1] or (compare == "spread" and effect == 0):
            raise ClaimError(f"{where}: {label} of a {compare} claim must be a number in its unit "
                             f"({'a positive SD ratio' if compare == 'spread' else 'a rate in [0, 1]' if compare == 'rate' else 'SD'}), got {effect!r}")
        return float(effect)

    if not isinstance(value, dict):
        return one(value, "paper_effect")
    within = list(raw.get("within", ()))
    for cell in value:
        columns = [part.split("=", 1)[0] for part in cell.split(", ")]
        if not within or columns != within:
            raise ClaimError(f"{where}: paper_effect cell {cell!r} must name the claim's cells "
                             f"({', '.join(f'{c}=...' for c in within) or 'the claim has none: give one value'})")
    return {cell: one(effect, f"paper_effect[{cell!r}]") for cell, effect in value.items()}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


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
                 frames: dict | None = None, device: str | None = None) -> pd.DataFrame:
    """The claim's per-run observations: its statistic of its analysis's frame, each run's outcome added.

    ``frames`` memoizes the analyses' frames within one call of :func:`verdicts` (keyed by
    analysis and parameters), so the claims of a figure compute its frame once. ``device`` is
    where an analysis that runs a model runs it (default: the GPU if there is one).
    """
    analysis, values, own = parameters(claim, figure, figure_params)
    key = (analysis.name, repr(sorted(values.items())), tuple(run_ids))
    frames = {} if frames is None else frames
    if key not in frames:
        options = {"device": device} if any(p.name == "device" for p in analysis.options) else {}
        frames[key] = analysis.run(store, {"run_id": run_ids}, **values, **options, progress=False)
    from robustkit.analysis.statistics import with_outcome

    name = claim.statistic.rpartition(".")[2]
    return with_outcome(analysis.statistic(name, frames[key], store, **own), store)


def verdicts(store: str | Path, recipes: Sequence, scale: str = "demo", include_failed: bool = False,
             defaults: dict | None = None, device: str | None = None) -> pd.DataFrame:
    """Every claim of ``recipes`` judged on the recipe's runs at ``scale`` in ``store``.

    Parameters
    ----------
    recipes : sequence of :class:`robustkit.recipes.Recipe`
        Recipes with their ``claims`` (e.g. ``[load_recipe("han2021/fig2")]``).
    defaults : dict, optional
        The recipes' ``defaults.toml`` (default: the one next to the project's recipes).
    device : str, optional
        Where the analyses that run a model run it (default: the GPU if there is one).

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
        improving = None
        for claim in recipe.claims:
            if scale not in claim.scales:
                frames.append(_rows(claim, [_result(reason_class=UNTESTABLE, reason=f"untestable at {scale} scale: the "
                                                    f"recipe judges it at {', '.join(claim.scales)} scale")]).assign(recipe=recipe.name))
                continue
            try:
                found = observations(claim, recipe.figure, recipe.figure_params(scale), store, run_ids, memo, device)
                if claim.final and improving is None:
                    from robustkit.analysis.convergence import still_improving

                    improving = still_improving(store, run_ids)
                frame = judge(claim, found, include_failed, improving)
            except Exception as error:  # noqa: BLE001 - one claim's failure must not cost the figure
                kind = "" if isinstance(error, RobustkitError) else f"{type(error).__name__}: "
                frame = _rows(claim, [_result(reason=f"not computable on these runs: {kind}{error}", reason_class=NO_DATA)])
            frames.append(frame.assign(recipe=recipe.name))
    if not frames:
        return pd.DataFrame(columns=VERDICT_COLUMNS)
    return pd.concat(frames, ignore_index=True)[VERDICT_COLUMNS]


def independent_sets(recipes: Sequence, scale: str = "demo", defaults: dict | None = None) -> dict[str, int]:
    """recipe name -> the index of its set of runs, recipes that share any run in one set.

    Verdicts on one set of runs are not independent evidence: seven claims judged on the same ten
    runs are one experiment. The sets are the connected components of the recipes' run ids.
    """
    owner: dict[str, str] = {}
    parent = {recipe.name: recipe.name for recipe in recipes}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for recipe in recipes:
        for spec in recipe.specs(scale, defaults):
            other = owner.setdefault(spec.run_id, recipe.name)
            parent[root(recipe.name)] = root(other)
    roots = sorted({root(name) for name in parent})
    return {name: roots.index(root(name)) for name in parent}


def tally_line(verdicts: pd.DataFrame, sets: dict[str, int]) -> str:
    """``"64 claims: 10 agree, 13 contradict, 41 inconclusive, on 9 independent sets of runs"``."""
    overall = verdicts.groupby(["recipe", "claim"], sort=False).tail(1)
    counts = overall["verdict"].value_counts()
    used = {sets[r] for r in overall["recipe"] if r in sets}
    parts = ", ".join(f"{int(counts.get(v, 0))} {v}" for v in VERDICTS)
    return (f"{len(overall)} claims ({parts}) rest on {len(used)} independent sets of runs "
            "(recipes that share a run count as one set)")


def summary_line(rows: pd.DataFrame) -> str:
    """One line per claim (its overall row): ``"spread: agrees (n = 5 vs 5; std ratio a/b 0.41,
    90% CI [0.2, 0.8]; std ... one-sided p = 0.01)"``, for under a figure or in an index."""
    lines = []
    for claim, group in rows.groupby("claim", sort=False):
        row = group.iloc[-1]
        effect = f"; {row['effect_name']} {row['effect']:.3g}" if row["effect_name"] and np.isfinite(row["effect"]) else ""
        if effect and row["cell"] == "all" or (effect and len(group) == 1):
            effect += (f", 90% CI [{row['ci_low']:.3g}, {row['ci_high']:.3g}]" if np.isfinite(row["ci_low"])
                       else ", no interval at this n")
        kept = "kept as data" if row["failures"] == "data" else "left out"
        failed = f"; {int(row['n_failed'])} failed runs {kept}" if row["n_failed"] else ""
        n = f"n = {int(row['n_a'])}" + (f" vs {int(row['n_b'])}" if row["compare"] != "threshold" else "")
        lines.append(f"{claim}: {row['verdict']} ({n}{effect}{failed}; {row['reason']})")
    return "\n".join(lines)
