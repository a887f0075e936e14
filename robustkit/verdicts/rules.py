"""How one claim is decided from its per-run observations: the verdict rules.

Pure functions of a :class:`robustkit.verdicts.spec.Claim` and a frame of observations: nothing here
reads a store or runs an analysis (:mod:`robustkit.verdicts.tally` does), it reads only the
statistic's declaration (:func:`robustkit.analysis.registry.statistic_of`: independent, better,
undefined on failed runs).

The decision framework
======================
One rule per claim kind, written here once and tested on the whole path by simulation
(:mod:`robustkit.verdicts.simulation`, ``tests/test_claim_simulation.py``): on runs that look like
real ones (scores on a grid, skew, collapsed runs at the majority score, runs still improving),
a verdict of *agrees* comes at most at rate alpha when the claim is false at its boundary, and so
does *contradicts* when it holds. alpha = 0.05, one-sided, in the claimed direction. All tests
are exact (:mod:`robustkit.measures.exact`), with ties too: their smallest p-value at the
recipe's n is known before any run exists (``robustkit claims --plan``), and a claim that cannot
reach alpha at its n is an error of the recipe (``tests/test_recipes.py``).

============  ==========================  ==============================  =======================  ============
kind          null hypothesis             test (one-sided)                effect and interval      decides at
============  ==========================  ==============================  =======================  ============
location      a and b alike               Wilcoxon-Mann-Whitney, exact    Hodges-Lehmann shift,    C(na+nb, na)
                                          (ties: exact conditional)       exact (inverted test)    > 1/alpha
spread        a and b equally spread      rank-sum of seed-pair           spread ratio, exact      C(na/2+nb/2,
              (up to a shift)             differences (Moses), exact      (inverted, log pairs)    na/2) > 1/alpha
rate          equal rates of ones         Fisher's exact                  conditional odds ratio,  as location
                                                                          exact (inverts Fisher)
equivalence   |a - b| >= value            two one-sided rank tests        Hodges-Lehmann shift,    as location
              (``value`` = the margin)    (TOST) at +-value               exact
threshold     a centred at ``value``      Wilcoxon signed-rank, exact     one-sample Hodges-       2^na > 1/alpha
                                          with ties, zeros dropped        Lehmann, exact           (na >= 5)
trend         the shift a - b at the end  the two ends' exact shift       shift at the end minus   C(na+nb, na)
              of ``along`` not below /    intervals, each at alpha / 2,   at the start (the two    > 2/alpha at
              above the one at its start  separate (Bonferroni)           intervals combined)      both ends
============  ==========================  ==============================  =======================  ============

- **Verdict of a cell**: *agrees* when the test in the claimed direction has p below the level
  the claim's quantifier gives the cell (for equivalence both one-sided tests inside the margin);
  *contradicts* when the test in the opposite direction does (equivalence: the shift outside the
  margin, Bonferroni over the two sides); else *inconclusive*. Shifts and thresholds compare on
  the data's grid (:func:`robustkit.measures.exact.on_grid`).
- **Intervals**: each end of a cell's interval is the one-sided bound at the level its side was
  judged at (the claimed side's end at the agreeing level, the other at the contradicting one),
  so it excludes the null exactly where the verdict does; "none at this n" where it cannot.
- **Sign** (``sign = "less"`` or ``"greater"``): a claim that names a direction of change
  ("vanishing" = falling) also tests group a's own values against 0 (signed-rank). The cell
  agrees only when both tests do (intersection-union, at alpha); it contradicts when either
  finds the opposite at alpha / 2 (a union held at alpha), and the reason says which part.
- **Cells and quantifiers** (``within``, ``quantifier``): a claim over cells says how its words
  aggregate them. ``each`` (the claim holds in every cell): agrees when every cell agrees at
  alpha (an intersection-union test needs no correction), contradicts when one cell contradicts
  after Holm's correction of the opposite side. ``any`` (in some cell): agrees when a cell agrees
  after Holm's correction, contradicts when every cell contradicts at alpha. ``overall``: one
  test of each run's mean over the cells. Holm runs over Tarone's family: a cell whose smallest
  p cannot pass its share of alpha leaves the family before any p is seen
  (:mod:`robustkit.measures.multiplicity`). ``exclude`` leaves out, by a rule the recipe states
  in ``exclude_why``, cells the method cannot change (the embedding output of methods that freeze
  the embeddings). A cell whose effect is below the claim's ``floor`` is undecided.
- **Each group at its best setting** (``tuned``, location and equivalence): "a's best below b's
  best" (higher values better) holds exactly when every configuration of a lies below some
  configuration of b: an intersection over a's configurations, each at alpha, of unions over
  b's, Bonferroni (:func:`_tuned_p`). Nothing is picked on the tested runs, so no winner's curse;
  with one configuration each it is the plain test. The effect shown is the best configurations'
  shift by median, without an interval.
- **Unit of replication**: the run. A statistic that gives a run several observations in a cell
  is averaged to the run's mean first; ``n_a`` and ``n_b`` of a claim's overall row count runs
  (a run in several cells once) and ``cells`` the cells. A statistic of run pairs that share
  runs is shown, never tested (*untestable*).
- **Failures** (``failures``): ``exclude`` (the default) leaves ``not-learned``, ``collapsed`` and
  ``diverged`` runs (:mod:`robustkit.train.collapse`) out of the shown test, and the verdict must hold
  with them too: ranked as the worst outcomes where the statistic has a better side
  (:attr:`robustkit.analysis.registry.Statistic.better`), else as data. Leaving failures out
  truncates the scores (a group whose weak seeds fail looks better than it is), so where the two
  disagree the verdict is *inconclusive: depends on failed runs*. Where a statistic is undefined
  on a failed run (``undefined_on_failed``: a constant classifier cannot be attacked) they are
  left out and the reason says why. ``data``: claims about failing, and every ``rate`` claim.
- **Convergence** (``final``, default: the statistic's ``ends``: it depends on how training
  ended): per cell, on the runs that cell tests after the failure policy, more than half of a
  compared group still improving at its end (:mod:`robustkit.analysis.convergence`) makes the cell
  *inconclusive: not converged*; the count names tested runs only, and the reason keeps the
  failures' disclosure beside it.
- **Reason classes** of an inconclusive verdict (column ``reason_class``): ``too few runs``,
  ``not significant``, ``not converged``, ``depends on failed runs``, ``untestable``, ``no data``.

The verdict logic is hand-written: no maintained package states paper claims as directional
hypotheses over groups of runs. The tests themselves are scipy's exact ones.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from robustkit.analysis import registry
from robustkit.analysis.pooling import check_pooling
from robustkit.measures import exact, multiplicity
from robustkit.train import collapse
from robustkit.verdicts.selection import matches as _is
from robustkit.verdicts.selection import text as _text
from robustkit.verdicts.spec import AGREES, CONTRADICTS, INCONCLUSIVE, VERDICTS, Claim, label, opposite

TOO_FEW, NOT_SIGNIFICANT, NOT_CONVERGED, UNTESTABLE, NO_DATA, DEPENDS_ON_FAILED = (
    "too few runs",
    "not significant",
    "not converged",
    "untestable",
    "no data",
    "depends on failed runs",
)
VERDICT_COLUMNS = [
    "recipe",
    "claim",
    "says",
    "statistic",
    "compare",
    "test",
    "a",
    "b",
    "direction",
    "failures",
    "cell",
    "n_a",
    "n_b",
    "cells",
    "n_failed",
    "effect",
    "effect_name",
    "ci_low",
    "ci_high",
    "p_value",
    "smallest_p",
    "verdict",
    "reason_class",
    "reason",
]


def tested_rows(claim: Claim, frame: pd.DataFrame, missing_where: str = "none") -> pd.DataFrame:
    """The rows of ``frame`` that ``claim`` reads: its ``where``, its ``exclude`` and its
    compared groups, failed runs kept (the failure policy is :func:`judge`'s). The one selection
    that :func:`judge`, :mod:`robustkit.verdicts.settle` and :mod:`robustkit.verdicts.evidence` share.

    Parameters
    ----------
    frame : DataFrame
        One row per observation (``run_id``, ``claim.by``, ``value``, ...) or per run (its
        settings).
    missing_where : {"none", "ignore"}
        A ``where`` column the frame lacks: ``"none"`` selects no row (observations: the
        statistic gives no such column); ``"ignore"`` skips that condition (run settings, which
        lack a statistic's own columns such as ``layer``).

    Returns
    -------
    DataFrame
        The selected rows, index kept.
    """
    for column, values in claim.where.items():
        if column not in frame:
            if missing_where == "none":
                return frame.iloc[:0]
            continue
        frame = frame[_is(frame[column], values)]
    for column, values in claim.exclude.items():
        if column in frame:
            frame = frame[~_is(frame[column], values)]
    if claim.by in frame and (claim.compare != "threshold" or claim.a):
        frame = frame[_is(frame[claim.by], claim.a + claim.b)]
    return frame


def judge(
    claim: Claim, observations: pd.DataFrame, include_failed: bool = False, improving: pd.Series | None = None
) -> pd.DataFrame:
    """The verdict of ``claim`` on per-run observations, per cell and overall.

    Parameters
    ----------
    observations : DataFrame
        One row per observation: ``run_id``, ``claim.by``, ``value``, the ``within`` columns,
        run settings (``seed`` orders the runs of a spread claim into pairs) and ``outcome``
        (e.g. :func:`robustkit.analysis.registry.per_run` output).
    include_failed : bool
        Keep failed runs as data whatever the claim's policy.
    improving : Series, optional
        run_id -> whether the run was still improving at its end
        (:func:`robustkit.analysis.convergence.still_improving`); the convergence guard of a
        claim on a statistic that depends on how training ended (``final``), per cell, on the
        runs each cell tests.

    Returns
    -------
    DataFrame
        :data:`VERDICT_COLUMNS` without ``recipe``: one row per cell (``cell`` names it, e.g.
        ``tsp_step=200``) and, with several cells, a last row ``cell == "all"``: the claim's
        verdict by its quantifier. ``n_a`` and ``n_b`` count runs (a run in several cells
        once), ``cells`` the cells.
    """
    missing = [c for c in [claim.by, *claim.within, "value"] if c not in observations]
    if missing:
        return rows(
            claim, [result_row(reason=f"the statistic gives no column {', '.join(missing)}", reason_class=NO_DATA)]
        )
    for column in claim.where:
        if column not in observations:
            return rows(
                claim,
                [
                    result_row(
                        reason=f"cannot select where {column}: the statistic gives no such column", reason_class=NO_DATA
                    )
                ],
            )
    notes = [
        f"{column}={label(values)} left out ({claim.exclude_why})"
        for column, values in claim.exclude.items()
        if column in observations and _is(observations[column], values).any()
    ]
    observations = tested_rows(claim, observations)  # only the compared groups must be alike
    statistic = registry.statistic_of(claim.statistic)[1]
    if "run_id_b" in observations or not statistic.independent:
        return rows(
            claim,
            [
                result_row(
                    n_a=int(_is(observations[claim.by], claim.a).sum()),
                    reason_class=UNTESTABLE,
                    reason="observations are pairs of runs that share runs (not independent): shown, not tested",
                )
            ],
        )
    tuned = (claim.tuned,) if claim.tuned else ()  # split inside each group, by the claim's rule
    check_pooling(observations, [claim.by, *claim.within], (*claim.pooled, *tuned), f"test claim {claim.id!r}")
    guard = improving if claim.final else None
    failed = (
        (observations["outcome"] != collapse.OK)
        if "outcome" in observations
        else pd.Series(False, index=observations.index)
    )
    n_failed = int(observations.loc[failed, "run_id"].nunique()) if "run_id" in observations else int(failed.sum())
    if include_failed or claim.failures == "data" or not failed.any():
        results = _judge_cells(claim, observations, failed, guard)
        undefined = (
            observations.loc[observations["value"].isna(), "run_id"].nunique() if "run_id" in observations else 0
        )
        if statistic.undefined_on_failed and undefined:
            notes.append(
                f"{undefined} run{'' if undefined == 1 else 's'} without a value left out: "
                f"{statistic.undefined_on_failed}"
            )
    else:
        results = _judge_cells(claim, observations[~failed], failed, guard)
        if statistic.undefined_on_failed:
            notes.append(f"{runs(n_failed, 'failed')} left out: {statistic.undefined_on_failed}")
        else:
            # the headline must hold with the failed runs too: leaving them out truncates the
            # scores (a group whose low runs fail looks better than it is)
            worst = bool(statistic.better) and claim.compare != "spread"
            kept = _ranked_worst(observations, failed, statistic.better, claim.value) if worst else observations
            other = _judge_cells(claim, kept, failed, guard)[-1]
            how = "ranked worst" if worst else "as data"
            head = results[-1]
            if other["verdict"] != head["verdict"]:
                notes.append(
                    f"with the {runs(n_failed, 'failed')} left out: {head['verdict']}; with them {how}: "
                    f"{other['verdict']} ({_p_text(other)})"
                )
                if head["verdict"] != INCONCLUSIVE or other["verdict"] != INCONCLUSIVE:
                    head.update(verdict=INCONCLUSIVE, reason_class=DEPENDS_ON_FAILED)
            else:
                notes.append(f"with the {runs(n_failed, 'failed')} {how} too ({_p_text(other)})")
    if notes:
        results[-1]["reason"] += "; " + "; ".join(notes)
    # failed runs per cell, counted on every observation (the policy may have left them out)
    per_cell = failed.groupby(_cells(observations, claim.within)).sum() if claim.quantifier != "overall" else {}
    for result in results:
        result["n_failed"] = int(per_cell.get(result["cell"], 0)) if result["cell"] in per_cell else n_failed
    return rows(claim, results)


def runs(n: int, what: str) -> str:
    return f"{n} {what} run" + ("" if n == 1 else "s")


def _p_text(result: dict) -> str:
    return (
        f"p = {result['p_value']:.3g}"
        if np.isfinite(result["p_value"])
        else result["reason_class"] or result["verdict"]
    )


def _ranked_worst(observations: pd.DataFrame, failed: pd.Series, better: str, value: float | None) -> pd.DataFrame:
    """``observations`` with each failed run's value replaced by one worse than every other value
    (and than a threshold ``value``): a failure ranks as the worst outcome, failures tie."""
    values = observations["value"].to_numpy(float)
    known = np.r_[values[np.isfinite(values)], [] if value is None else [value]]
    low, high = (known.min(), known.max()) if len(known) else (0.0, 0.0)
    span = high - low + 1.0
    worst = low - span if better == "higher" else high + span
    return observations.assign(value=np.where(failed.reindex(observations.index, fill_value=False), worst, values))


def _judge_cells(
    claim: Claim, observations: pd.DataFrame, failed: pd.Series, improving: pd.Series | None
) -> list[dict]:
    """Each cell's test and verdict, and with several cells the claim's by its quantifier (last)."""
    groups = _groups(claim, observations, failed)
    if not groups:
        return [result_row(reason="no run left to test (every run failed or none was selected)", reason_class=NO_DATA)]
    smallest = [_smallest_p(claim, g) for g in groups]
    # the cells whose Holm-corrected side can reach alpha at all (Tarone's rule: from the group
    # sizes alone, before any p-value is looked at)
    family = multiplicity.tarone_family(smallest, claim.alpha)

    def test_of(group: dict) -> dict:
        if claim.compare == "trend":
            return _trend(claim, group)
        return _tuned(claim, group) if _tuned_in(claim, group) else _cell(claim, group["a"], group["b"])

    tests = [test_of(g) if s < claim.alpha else None for g, s in zip(groups, smallest)]
    several = len(groups) > 1
    union_side = "p_claimed" if claim.quantifier == "any" else "p_opposite"  # the side Holm corrects
    holm = (
        _holm({i: t[union_side] for i, t in enumerate(tests) if t and smallest[i] < claim.alpha / family}, claim.alpha)
        if several
        else {}
    )
    results = []
    for i, (group, test) in enumerate(zip(groups, tests)):
        base = {
            "n_a": len(group["a"]) + len(group.get("a_end", ())),
            "n_b": len(group["b"]) + len(group.get("b_end", ())),
            "cells": 1,
            "smallest_p": smallest[i],
            "n_failed": group["n_failed"],
        }
        if test is None:
            results.append(
                {
                    **result_row(group["name"], **base),
                    "reason_class": TOO_FEW,
                    "reason": _too_few(claim, group, smallest[i]),
                }
            )
            continue
        corrected = (
            holm.get(i, (claim.alpha / family, False)) if several else (claim.alpha, test[union_side] < claim.alpha)
        )
        each_level = (claim.alpha, test["p_opposite" if union_side == "p_claimed" else "p_claimed"] < claim.alpha)
        agree_level, agrees = corrected if union_side == "p_claimed" else each_level
        against_level, against = each_level if union_side == "p_claimed" else corrected
        result = {**result_row(group["name"], **base), **_interval(claim, group, agree_level, against_level)}
        late = _not_converged(claim, group, improving)
        rule = (
            ""
            if not several
            else f"; Holm over {len(holm)} of {len(groups)} cells"
            if union_side == "p_claimed"
            else f"; each cell at {claim.alpha:g}, opposite side Holm over {len(holm)} of {len(groups)} cells"
        )
        if several and i not in holm:
            rule += (
                f"; over {len(groups)} cells a cell needs p < {claim.alpha / family:.3g} (Tarone's family of "
                f"{family}), "
                "which this one cannot reach at its n"
            )
        if late:
            result.update(
                p_value=test["p_claimed"],
                verdict=INCONCLUSIVE,
                reason_class=NOT_CONVERGED,
                reason=f"{test['shown']}; not converged: {late}",
            )
        elif test["magnitude"] < claim.floor:
            result.update(
                p_value=test["p_claimed"],
                verdict=INCONCLUSIVE,
                reason_class=NOT_SIGNIFICANT,
                reason=f"{test['shown']}; effect below the claim's floor {claim.floor:g}",
            )
        elif agrees:
            result.update(
                p_value=test["p_claimed"],
                verdict=AGREES,
                reason=f"{test['shown']}; one-sided p = {test['p_claimed']:.3g} < "
                f"{agree_level:.3g}{test['claimed_part']}{rule}",
            )
        elif against:
            result.update(
                p_value=test["p_opposite"],
                verdict=CONTRADICTS,
                reason=f"{test['shown']}; {test['against_part']} < {against_level:.3g}{rule}",
            )
        else:
            need = TOO_FEW if smallest[i] >= agree_level else NOT_SIGNIFICANT
            result.update(
                p_value=test["p_claimed"],
                verdict=INCONCLUSIVE,
                reason_class=need,
                reason=f"{test['shown']}; one-sided p = {test['p_claimed']:.3g} >= "
                f"{agree_level:.3g}{test['claimed_part']}{rule}",
            )
        results.append(result)
    if several:
        results.append(_overall(claim, results, groups))
    if any(g["averaged"] for g in groups):
        results[-1]["reason"] += "; several observations of a run averaged to one (the run is the unit)"
    return results


def _groups(claim: Claim, observations: pd.DataFrame, failed: pd.Series) -> list[dict]:
    """The cells' groups a and b: per-run values (the run is the unit), runs in seed order."""
    frame = observations.assign(
        _failed=failed.reindex(observations.index, fill_value=False),
        _in_a=_is(observations[claim.by], claim.a) if claim.a else True,
        _in_b=_is(observations[claim.by], claim.b) if claim.b else False,
    )
    if claim.quantifier == "overall" and claim.within and "run_id" in frame:
        cells = frame.groupby(list(claim.within), dropna=False).ngroups
        frame = frame.assign(
            **{c: f"mean over {cells} cells" for c in claim.within if frame[c].nunique(dropna=False) > 1}
        )
    order = [c for c in ("seed", "run_id") if c in frame]
    if claim.compare == "trend":
        return _trend_groups(claim, frame, order)
    cells = frame.groupby(list(claim.within), dropna=False, sort=True) if claim.within else [((), frame)]
    ids = lambda part: list(part["run_id"]) if "run_id" in part else []
    groups = []
    for key, cell in cells:
        key = key if isinstance(key, tuple) else (key,)
        name = ", ".join(f"{c}={_text(k)}" for c, k in zip(claim.within, key)) or "all"
        averaged = "run_id" in cell and bool(cell["run_id"].duplicated().any())
        if averaged:  # the run is the unit of replication
            cell = cell.groupby("run_id", as_index=False, sort=False).agg(
                {
                    "value": "mean",
                    "_failed": "max",
                    "_in_a": "first",
                    "_in_b": "first",
                    **{c: "first" for c in order if c != "run_id"},
                    **({claim.tuned: "first"} if claim.tuned else {}),
                }
            )
        cell = cell.sort_values(order, kind="stable") if order else cell
        known = cell["value"].notna()
        a, b = cell[cell["_in_a"] & known], cell[cell["_in_b"] & known]
        groups.append(
            {
                "name": name,
                "a": a["value"].to_numpy(float),
                "b": b["value"].to_numpy(float),
                "ids_a": ids(a),
                "ids_b": ids(b),
                "n_failed": int(cell.loc[cell["_in_a"] | cell["_in_b"], "_failed"].sum()),
                "averaged": averaged,
                **(_configurations(claim.tuned, a, b) if claim.tuned else {}),
            }
        )
    return groups


def _configurations(column: str, a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """A tuned claim's groups split by the ``column`` they are tuned over: per group the values
    of each configuration (a value of ``column`` with runs left to test), in value order."""
    found = {}
    for side, part in (("a", a), ("b", b)):
        # a run without a value (the setting left at its default) is a configuration of its own
        configs = list(part.groupby(part[column].map(_text), sort=True, dropna=False)["value"])
        found[f"configs_{side}"] = [values.to_numpy(float) for _, values in configs]
        found[f"config_names_{side}"] = [name for name, _ in configs]
    return found


def _trend_groups(claim: Claim, frame: pd.DataFrame, order: list[str]) -> list[dict]:
    """A trend's cells (the ``within`` columns but ``along``), each with groups a and b at the
    smallest (``a``, ``b``) and the largest (``a_end``, ``b_end``) value of ``along``."""
    rest = [c for c in claim.within if c != claim.along]
    cells = frame.groupby(rest, dropna=False, sort=True) if rest else [((), frame)]
    groups = []
    for key, cell in cells:
        key = key if isinstance(key, tuple) else (key,)
        steps = sorted(pd.to_numeric(cell[claim.along]).dropna().unique())
        if len(steps) < 2:
            continue
        ends = []
        for step in (steps[0], steps[-1]):
            part = cell[pd.to_numeric(cell[claim.along]) == step]
            if "run_id" in part:
                part = part.groupby("run_id", as_index=False, sort=False).agg(
                    {
                        claim.by: "first",
                        "value": "mean",
                        "_failed": "max",
                        **{c: "first" for c in order if c != "run_id"},
                    }
                )
            ends.append(part)
        pick = lambda part, values: part[_is(part[claim.by], values) & part["value"].notna()]
        first, last = ends
        name = ", ".join(
            [f"{c}={_text(k)}" for c, k in zip(rest, key)] + [f"{claim.along}={_text(steps[0])} vs {_text(steps[-1])}"]
        )
        ids = lambda part: list(part["run_id"]) if "run_id" in part else []
        groups.append(
            {
                "name": name,
                "a": pick(first, claim.a)["value"].to_numpy(float),
                "b": pick(first, claim.b)["value"].to_numpy(float),
                "a_end": pick(last, claim.a)["value"].to_numpy(float),
                "b_end": pick(last, claim.b)["value"].to_numpy(float),
                "ids_a": ids(pick(first, claim.a)) + ids(pick(last, claim.a)),
                "ids_b": ids(pick(first, claim.b)) + ids(pick(last, claim.b)),
                "n_failed": int(first["_failed"].sum() + last["_failed"].sum()),
                "averaged": False,
            }
        )
    return groups


def _smallest_p(claim: Claim, group: dict) -> float:
    """The smallest p the cell's test can give at its sizes (a trend: twice the larger of its
    two ends', the two intervals each at alpha / 2)."""
    if claim.compare == "trend":
        return min(
            1.0,
            2
            * max(
                exact.smallest_p("location", len(group["a"]), len(group["b"])),
                exact.smallest_p("location", len(group["a_end"]), len(group["b_end"])),
            ),
        )
    if _tuned_in(claim, group):
        return _tuned_p(claim, group, lambda a, b, shift, side: exact.smallest_p("location", len(a), len(b)))[0]
    return exact.smallest_p(claim.compare, len(group["a"]), len(group["b"]))


def _too_few(claim: Claim, group: dict, smallest: float) -> str:
    n_a, n_b = len(group["a"]), len(group["b"])
    sizes = f"{n_a}" + (f" vs {n_b}" if claim.groups == 2 else "")
    if claim.compare == "trend":
        sizes += f" at the start and {len(group['a_end'])} vs {len(group['b_end'])} at the end"
    need = (
        "2^n_a > 20"
        if claim.compare == "threshold"
        else "C(n_a + n_b, n_a) > 40 at both ends: two intervals at alpha / 2"
        if claim.compare == "trend"
        else "C(n_a // 2 + n_b // 2, n_a // 2) > 20: the test ranks seed pairs"
        if claim.compare == "spread"
        else f"C(n_a + n_b, n_a) > 20 times the configurations of one group, per pair of {claim.tuned} values"
        if claim.tuned
        else "C(n_a + n_b, n_a) > 20"
    )
    return f"too few runs to test: {sizes} can give p >= {smallest:.3g} at best (needs {need})"


def _not_converged(claim: Claim, group: dict, improving: pd.Series | None) -> str:
    """Which of the cell's tested groups has more than half of its runs still improving ("" when none)."""
    if improving is None:
        return ""
    texts = []
    for values, ids in ((claim.a, group["ids_a"]), (claim.b, group["ids_b"])):
        late = int(improving.reindex(ids).fillna(False).astype(bool).sum())
        if ids and late > len(ids) / 2:
            texts.append(f"{label(values) or 'the runs'}: {late} of {len(ids)} tested runs still improving at the end")
    return "; ".join(texts)


def _cell(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    """The tests of one cell: p in the claimed and the opposite direction, the effect and ``shown``.

    With ``sign``, the cell's claimed p is the larger of the comparison's and the sign test's
    (both must agree: an intersection-union test at alpha) and its opposite p twice the smaller
    of theirs (either may contradict: Bonferroni over the two, so the union stays at alpha).
    """
    result = {
        "spread": _spread,
        "location": _location,
        "rate": _rate,
        "equivalence": _equivalence,
        "threshold": _threshold,
    }[claim.compare](claim, a, b)
    result.update(claimed_part="", against_part=f"opposite direction, one-sided p = {result['p_opposite']:.3g}")
    if claim.sign:
        s, t = exact.signed_rank(a, claim.sign), exact.signed_rank(a, opposite(claim.sign))
        p, q = result["p_claimed"], result["p_opposite"]
        way = "falls" if claim.sign == "less" else "rises"
        other = "rises" if claim.sign == "less" else "falls"
        side = f"{label(claim.a)} itself"
        result["shown"] += f"; {side} {way}: one-sided p = {s:.3g}"
        result.update(
            p_claimed=max(p, s),
            p_opposite=min(1.0, 2 * min(q, t)),
            claimed_part=f" (both parts must agree: the comparison p = {p:.3g}, {side} {way} p = {s:.3g}"
            + (
                f"; {side} {other} p = {t:.3g}, x 2 for either part = {min(1.0, 2 * t):.3g}"
                if t < q and t < 0.5
                else ""
            )
            + ")",
        )
        result["against_part"] = (
            f"{side} {other}, against the claimed direction of change: one-sided p = {t:.3g}, x 2 for "
            f"either part = {min(1.0, 2 * t):.3g}"
            + (f" (the comparison itself goes the claimed way, p = {p:.3g})" if p < claim.alpha else "")
            if t <= q
            else f"opposite direction, one-sided p = {q:.3g}, x 2 for either part = {min(1.0, 2 * q):.3g}"
        )
    return result


def _interval(claim: Claim, group: dict, agree_level: float, against_level: float) -> dict:
    """The cell's effect and interval, each end the one-sided bound at the level its side was
    judged at: the end that decides *agrees* at the agreeing side's level, the other at the
    contradicting side's (equivalence: both at the agreeing level, the two one-sided tests)."""
    a, b = group["a"], group["b"]
    if _tuned_in(claim, group):  # the best configurations' shift: a description, the test is over all pairs
        best_a, best_b = _best_configuration(claim, group, "a"), _best_configuration(claim, group, "b")
        effect = exact.shift_interval(group["configs_a"][best_a], group["configs_b"][best_b], 0.5)[0]
        return {"effect": effect, "effect_name": f"shift a - b, each at its best {claim.tuned} (descriptive)"}
    if claim.compare == "trend":
        return {
            "effect": _trend_shift(group, agree_level, against_level, claim.direction)[0],
            "effect_name": EFFECT_NAMES["trend"],
            **dict(zip(("ci_low", "ci_high"), _trend_shift(group, agree_level, against_level, claim.direction)[1:])),
        }
    estimate = {
        "spread": lambda level: exact.spread_interval(a, b, level),
        "location": lambda level: exact.shift_interval(a, b, level),
        "equivalence": lambda level: exact.shift_interval(a, b, level),
        "rate": lambda level: exact.rate_interval(a, b, level),
        "threshold": lambda level: exact.centre_interval(a, level),
    }[claim.compare]
    effect, low, high = estimate(agree_level)
    if claim.compare != "equivalence" and against_level != agree_level:
        _, other_low, other_high = estimate(against_level)
        low, high = (low, other_high) if claim.direction == "greater" else (other_low, high)
    return {"effect": effect, "effect_name": EFFECT_NAMES[claim.compare], "ci_low": low, "ci_high": high}


EFFECT_NAMES = {
    "spread": "spread ratio a/b (seed pairs)",
    "location": "shift a - b (Hodges-Lehmann)",
    "equivalence": "shift a - b (Hodges-Lehmann)",
    "rate": "odds ratio a/b (conditional)",
    "threshold": "centre (Hodges-Lehmann)",
    "trend": "shift at the end minus at the start",
}


def _spread(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    against = opposite(claim.direction)
    sd_a, sd_b = np.std(a, ddof=1), np.std(b, ddof=1)
    ratio = exact.spread_interval(a, b, 0.5)[0]
    dropped = " (an odd last run left out of the pairs)" if len(a) % 2 or len(b) % 2 else ""
    return {
        "p_claimed": exact.spread_pairs(a, b, claim.direction),
        "p_opposite": exact.spread_pairs(a, b, against),
        "magnitude": abs(math.log(ratio)) if np.isfinite(ratio) and ratio > 0 else np.inf,
        "shown": f"std {sd_a:.3g} vs {sd_b:.3g}, {len(a) // 2} vs {len(b) // 2} seed pairs{dropped}",
    }


def _location(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    against = opposite(claim.direction)
    return {
        "p_claimed": exact.rank_sum(a, b, claim.direction),
        "p_opposite": exact.rank_sum(a, b, against),
        "magnitude": abs(exact.shift_interval(a, b, 0.5)[0]),
        "shown": f"medians {np.median(a):.3g} vs {np.median(b):.3g}",
    }


def _rate(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    against = opposite(claim.direction)
    return {
        "p_claimed": exact.rate_test(a, b, claim.direction),
        "p_opposite": exact.rate_test(a, b, against),
        "magnitude": abs(a.mean() - b.mean()),
        "shown": f"rates {a.mean():.2f} vs {b.mean():.2f}",
    }


def _equivalence(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    margin = claim.value
    inside = max(exact.rank_sum(a + margin, b, "greater"), exact.rank_sum(a - margin, b, "less"))
    outside = min(1.0, 2 * min(exact.rank_sum(a + margin, b, "less"), exact.rank_sum(a - margin, b, "greater")))
    return {
        "p_claimed": inside,
        "p_opposite": outside,
        "magnitude": np.inf,
        "shown": f"margin +-{margin:g}, medians {np.median(a):.3g} vs {np.median(b):.3g}",
    }


def _threshold(claim: Claim, a: np.ndarray, b: np.ndarray) -> dict:
    against = opposite(claim.direction)
    zeros = int(np.sum(exact.on_grid(a - claim.value) == 0))
    dropped = f" ({zeros} at the threshold dropped, Wilcoxon's rule)" if zeros else ""
    return {
        "p_claimed": exact.signed_rank(a, claim.direction, claim.value),
        "p_opposite": exact.signed_rank(a, against, claim.value),
        "magnitude": abs(exact.centre_interval(a, 0.5)[0] - claim.value),
        "shown": f"median {np.median(a):.3g} vs {claim.value:g}{dropped}",
    }


def _tuned_p(claim: Claim, group: dict, p) -> tuple[float, float]:
    """The claimed and opposite p of a ``tuned`` claim from ``p(a, b, shift, side)``, the p of one
    configuration pair (a + shift against b, one-sided ``side``).

    Each group at its best configuration: with higher values better, "a's best below b's best"
    holds exactly when every configuration of a lies below some configuration of b. So the
    claim is an intersection over one group's configurations (each at alpha, no correction) of
    unions over the other's (Bonferroni: the smallest p times their number). Under its null some
    configuration of a is at least every one of b, and its union errs at most at alpha; no
    configuration is picked on the runs it is tested on, so there is no winner's curse.
    Equivalence within the margin d is "a's best above b's best - d" and "below b's best + d"
    (both must hold); its opposite either of the two ways out, Bonferroni over them. With lower
    values better the values are negated. Hand-written: no library tests a maximum over
    configurations exactly.
    """
    flip = claim.lower_is_better
    configs_a = [-c if flip else c for c in group["configs_a"] if len(c)]
    configs_b = [-c if flip else c for c in group["configs_b"] if len(c)]
    if not configs_a or not configs_b:
        return 1.0, 1.0

    def every_a(shift: float, side: str) -> float:  # every a configuration vs some b one
        return max(min(1.0, len(configs_b) * min(p(a, b, shift, side) for b in configs_b)) for a in configs_a)

    def every_b(shift: float, side: str) -> float:  # every b configuration vs some a one
        return max(min(1.0, len(configs_a) * min(p(a, b, shift, side) for a in configs_a)) for b in configs_b)

    if claim.compare == "equivalence":
        d = claim.value
        inside = max(every_b(d, "greater"), every_a(-d, "less"))
        outside = min(1.0, 2 * min(every_a(d, "less"), every_b(-d, "greater")))
        return inside, outside
    below, above = every_a(0.0, "less"), every_b(0.0, "greater")
    return (below, above) if claim.best_direction == "less" else (above, below)


def _tuned_in(claim: Claim, group: dict) -> bool:
    """Whether a cell has configurations to tune over (with one value each, a tuned claim is
    the plain test: the rule reduces to it)."""
    return bool(claim.tuned) and max(len(group["configs_a"]), len(group["configs_b"])) > 1


def _best_configuration(claim: Claim, group: dict, side: str) -> int:
    """The index of a group's best configuration by its median (for the description only)."""
    medians = [np.median(c) if len(c) else np.nan for c in group[f"configs_{side}"]]
    if not np.isfinite(medians).any():
        return 0
    return int(np.nanargmin(medians) if claim.lower_is_better else np.nanargmax(medians))


def _tuned(claim: Claim, group: dict) -> dict:
    """The tests of one cell of a ``tuned`` claim (:func:`_tuned_p`), in :func:`_cell`'s form."""
    p_claimed, p_opposite = _tuned_p(claim, group, lambda a, b, shift, side: exact.rank_sum(a + shift, b, side))
    best_a, best_b = _best_configuration(claim, group, "a"), _best_configuration(claim, group, "b")
    a, b = group["configs_a"][best_a], group["configs_b"][best_b]
    configs = f"{len(group['configs_a'])} x {len(group['configs_b'])} configurations"
    margin = f"margin +-{claim.value:g}, " if claim.compare == "equivalence" else ""
    return {
        "p_claimed": p_claimed,
        "p_opposite": p_opposite,
        "magnitude": np.inf if claim.compare == "equivalence" else abs(exact.shift_interval(a, b, 0.5)[0]),
        "shown": f"{margin}each at its best {claim.tuned}: {label(claim.a)} {claim.tuned}="
        f"{group['config_names_a'][best_a]} (median {np.median(a):.3g}) vs {label(claim.b)} {claim.tuned}="
        f"{group['config_names_b'][best_b]} (median {np.median(b):.3g}); every configuration of one group "
        f"against some of the other ({configs})",
        "claimed_part": "",
        "against_part": f"opposite direction, one-sided p = {p_opposite:.3g}",
    }


def _trend(claim: Claim, group: dict) -> dict:
    """The tests of a trend cell: does the shift a - b at the end of ``along`` lie below
    (``less``) / above the shift at its start?

    The two ends hold independent runs; each shift has its exact interval (inverted rank-sum
    tests). The trend is decided when the intervals, each at level gamma, separate: under the
    null (the end's shift not below the start's) that needs one interval to miss its shift, so
    its probability is at most 2 gamma (Bonferroni). The p-value is twice the smallest gamma at
    which they separate: ``2 min_t max(p_start(shift > t), p_end(shift < t))`` over the
    thresholds t between the pairwise differences. Written here: no library tests a difference of two
    Hodges-Lehmann shifts exactly.
    """

    def p(direction: str) -> float:
        start, end = opposite(direction), direction
        points = np.unique(
            np.concatenate(
                [
                    (group["a"][:, None] - group["b"][None, :]).ravel(),
                    (group["a_end"][:, None] - group["b_end"][None, :]).ravel(),
                ]
            )
        )
        # between the differences (at them both tests would see ties): every distinct p-value pair
        candidates = np.r_[points[0] - 1, (points[1:] + points[:-1]) / 2, points[-1] + 1]
        best = min(
            max(
                exact.rank_sum(group["a"] - t, group["b"], start),
                exact.rank_sum(group["a_end"] - t, group["b_end"], end),
            )
            for t in candidates
        )
        return min(1.0, 2 * best)

    against = opposite(claim.direction)
    first = exact.shift_interval(group["a"], group["b"], 0.5)[0]
    last = exact.shift_interval(group["a_end"], group["b_end"], 0.5)[0]
    return {
        "p_claimed": p(claim.direction),
        "p_opposite": p(against),
        "magnitude": abs(last - first),
        "claimed_part": "",
        "against_part": f"opposite direction, one-sided p = {p(against):.3g}",
        "shown": f"shift a - b {first:.3g} at the start, {last:.3g} at the end",
    }


def _trend_shift(group: dict, agree_level: float, against_level: float, direction: str) -> tuple[float, float, float]:
    """The end's shift minus the start's and its interval, each end from the two shifts'
    intervals at half its side's level (Bonferroni, as the test)."""

    def ends(level: float) -> tuple[float, float, float, float]:
        _, start_low, start_high = exact.shift_interval(group["a"], group["b"], level / 2)
        _, end_low, end_high = exact.shift_interval(group["a_end"], group["b_end"], level / 2)
        return end_low - start_high, end_high - start_low, start_low, end_low

    effect = (
        exact.shift_interval(group["a_end"], group["b_end"], 0.5)[0]
        - exact.shift_interval(group["a"], group["b"], 0.5)[0]
    )
    low_agree, high_agree, _, _ = ends(agree_level)
    low_against, high_against, _, _ = ends(against_level)
    return (effect, low_against, high_agree) if direction == "less" else (effect, low_agree, high_against)


def _holm(p_values: dict[int, float], alpha: float) -> dict[int, tuple[float, bool]]:
    """Holm's step-down test over the cells ``p_values`` (cell -> p): cell -> (the level it was
    judged at, rejected). The j-th smallest p is judged at alpha / (K - j) while every smaller one
    was rejected; after the first acceptance every later cell keeps that step's level (it cannot
    be rejected, and an interval at that level does not exclude the null either)."""
    order = sorted(p_values, key=p_values.get)
    judged, stopped = {}, None
    for rank, cell in enumerate(order):
        level = alpha / (len(order) - rank) if stopped is None else stopped
        rejected = stopped is None and p_values[cell] < level
        if not rejected and stopped is None:
            stopped = level
        judged[cell] = (level, rejected)
    return judged


def _overall(claim: Claim, results: list[dict], groups: list[dict]) -> dict:
    """The claim over its cells, by its quantifier: ``each`` agrees when every cell agrees and
    contradicts when any cell contradicts (the opposite side Holm-corrected); ``any`` agrees when
    any cell agrees (Holm-corrected) and contradicts when every cell contradicts."""
    verdicts = [r["verdict"] for r in results]
    counts = {v: verdicts.count(v) for v in VERDICTS if verdicts.count(v)}
    text = ", ".join(f"{n} {v}" for v, n in counts.items())
    agree, against = counts.get(AGREES, 0), counts.get(CONTRADICTS, 0)
    if claim.quantifier == "any":
        verdict = AGREES if agree else CONTRADICTS if against == len(results) else INCONCLUSIVE
        rule = (
            f"the claim holds in some cell: any of {len(results)} cells agreeing (Holm) agrees, all contradicting "
            "contradicts"
        )
    else:
        verdict = CONTRADICTS if against else AGREES if agree == len(results) else INCONCLUSIVE
        rule = f"the claim holds in each cell: all {len(results)} must agree, one contradicting (Holm) contradicts"
    classes = [r["reason_class"] for r in results if r["verdict"] == INCONCLUSIVE]
    reason_class = ""
    if verdict == INCONCLUSIVE:
        reason_class = next(
            (c for c in (NOT_CONVERGED, TOO_FEW, NOT_SIGNIFICANT) if c in classes),
            classes[0] if classes else NOT_SIGNIFICANT,
        )
    runs = lambda key: (
        len({i for g in groups for i in g[key]})
        if any(g[key] for g in groups)
        else max(len(g[key[-1]]) for g in groups)
    )
    smallest = [r["smallest_p"] for r in results]
    return result_row(
        "all",
        n_a=runs("ids_a"),
        n_b=runs("ids_b"),
        cells=len(results),
        n_failed=sum(r["n_failed"] for r in results),
        smallest_p=min(smallest) if claim.quantifier == "any" else max(smallest),
        verdict=verdict,
        reason_class=reason_class,
        reason=f"{rule}: {text}",
    )


def result_row(
    cell: str = "all",
    n_a: int = 0,
    n_b: int = 0,
    cells: int = 1,
    n_failed: int = 0,
    effect: float = np.nan,
    effect_name: str = "",
    ci_low: float = np.nan,
    ci_high: float = np.nan,
    p_value: float = np.nan,
    smallest_p: float = np.nan,
    verdict: str = INCONCLUSIVE,
    reason_class: str = "",
    reason: str = "",
) -> dict:
    return {
        "cell": cell,
        "n_a": n_a,
        "n_b": n_b,
        "cells": cells,
        "n_failed": n_failed,
        "effect": float(effect),
        "effect_name": effect_name,
        "ci_low": float(ci_low),
        "ci_high": float(ci_high),
        "p_value": float(p_value),
        "smallest_p": float(smallest_p),
        "verdict": verdict,
        "reason_class": reason_class,
        "reason": reason,
    }


def rows(claim: Claim, results: list[dict]) -> pd.DataFrame:
    fixed = {
        "claim": claim.id,
        "says": claim.says,
        "statistic": claim.statistic,
        "compare": claim.compare,
        "test": claim.test,
        "a": label(claim.a),
        "b": label(claim.b),
        "direction": claim.direction or "both",
        "failures": claim.failures,
    }
    return pd.DataFrame([{**fixed, **r} for r in results], columns=VERDICT_COLUMNS[1:])


def _cells(frame: pd.DataFrame, within: Sequence[str]) -> pd.Series:
    if not within:
        return pd.Series("all", index=frame.index)
    return frame[list(within)].apply(lambda row: ", ".join(f"{c}={_text(v)}" for c, v in row.items()), axis=1)
