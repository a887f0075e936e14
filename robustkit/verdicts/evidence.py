"""Evidence counted once: which claims rest on which runs.

A verdict is evidence about the runs it was judged on. Claims of several recipes are often judged
on the same runs: He et al.'s figures 5-9 and table 6 and Han et al.'s figure 2 and table 1 read
the same ten runs, and every ``peft/zoo*`` claim compares its method with one group of full
fine-tuning runs. Their verdicts are not independent: one unlucky seed moves all of them. This
module says, from the recipes' run specs alone (no run needs to exist):

- :func:`claim_runs`: the runs a claim's observations can come from (the recipe's runs at the
  scale, kept by the claim's ``where`` and its groups);
- :func:`units`: per claim its **evidence unit** (claims that share at least one run, directly
  or through other claims, are one unit: the connected components of the claims' runs), the
  runs it rests on, and whether it reads the same observations as an earlier claim
  (``same_as``: the same runs, statistic, groups and cells tested again, perhaps for another
  hypothesis; a second look at one piece of evidence, not a second piece);
- :func:`unit_table` and :func:`tally_line`: the verdicts counted per unit, so that a tally
  counts units, not claims;
- :func:`n_text`: a verdict's n as runs (and cells), ``"n = 5 vs 5 runs, 7 cells"``: seven
  layers of the same five runs are not 35 observations;
- :func:`by_chance` and :func:`chance_line`: how many decisions chance alone would give across
  the claims judged, and which decisions survive Benjamini-Yekutieli within their family (a
  paper's figure, fixed before any run), a procedure valid however its claims share runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

import numpy as np
import pandas as pd

from robustkit.measures.multiplicity import family_test
from robustkit.verdicts.recipes import Recipe
from robustkit.verdicts.rules import tested_rows
from robustkit.verdicts.selection import matches as _is
from robustkit.verdicts.spec import AGREES, CONTRADICTS, INCONCLUSIVE, Claim
from robustkit.verdicts.tally import parameters

UNIT_COLUMNS = ["recipe", "claim", "unit", "runs", "unit_runs", "run_set", "same_as"]
UNIT_TABLE_COLUMNS = ["unit", "claims", "recipes", "runs", AGREES, CONTRADICTS, INCONCLUSIVE, "repeats", "evidence"]
# what a unit says as one piece of evidence (the "evidence" column of unit_table)
AGREES_ONLY, CONTRADICTS_ONLY, BOTH, NEITHER = "agrees", "contradicts", "both", "neither"


def settings(recipe: Recipe, scale: str, defaults: dict | None = None) -> pd.DataFrame:
    """The recipe's runs at ``scale``, one row per run: ``run_id`` and every setting of the
    resolved spec, the method's options as ``<method>.<option>`` columns (``lora.r``), as a
    run store's table gives them. Empty when the recipe has no such scale."""
    from robustkit.methods.registry import identity_columns

    if scale not in recipe.scales:
        return pd.DataFrame(columns=["run_id"])
    rows = []
    for spec in recipe.specs(scale, defaults):
        resolved = spec.resolved()
        values = {k: v for k, v in asdict(resolved).items() if k != "method_options"}
        rows.append({**values, **identity_columns(resolved.method, resolved.method_options), "run_id": spec.run_id})
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=["run_id"])


def claim_runs(
    recipe: Recipe, claim: Claim, scale: str, defaults: dict | None = None, runs: pd.DataFrame | None = None
) -> frozenset[str]:
    """The run ids ``claim``'s observations can come from at ``scale``.

    Parameters
    ----------
    recipe : Recipe
        The claim's recipe; its runs at ``scale`` (:meth:`Recipe.specs`) are the candidates.
    claim : Claim
        One of ``recipe.claims``.
    defaults : dict, optional
        The recipes' ``defaults.toml`` (default: the one next to the project's recipes).
    runs : DataFrame, optional
        :func:`settings` of the recipe at ``scale``, when already computed.

    Returns
    -------
    frozenset of str
        The runs kept by the claim's ``where`` (on run settings; a ``where`` on a column of the
        statistic, such as ``layer``, keeps every run) and in its groups: runs whose ``claim.by``
        value is in ``claim.a + claim.b`` (a threshold claim: group a, or every run when a is
        empty). Values compare as :func:`robustkit.verdicts.rules.judge` compares them (numbers as
        numbers, ``"unset"`` matches a run without the setting). Empty at a scale not in
        ``claim.scales``: there the claim is judged on no run.
    """
    if not claim.judged_at(scale):
        return frozenset()
    selected = _selected(claim, settings(recipe, scale, defaults) if runs is None else runs)
    return frozenset(selected["run_id"])


def _selected(claim: Claim, runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``runs`` the claim reads: its selection on run settings (a statistic's own
    ``where`` columns, such as ``layer``, are not settings and select every run)."""
    return tested_rows(claim, runs, missing_where="ignore")


def _observations(recipe: Recipe, claim: Claim, scale: str, runs: pd.DataFrame) -> tuple:
    """What makes two claims read the same observations: the same statistic read with the same
    parameters (the figure's where the statistic is the figure's analysis: one cache entry), the
    same runs in each group, the same cells (the same partition of the runs; the statistic's own
    cells, such as ``layer``, by name) and the same failure policy.

    Groups are compared as run sets, unordered: ``a = ["houlsby", "adapterhub-houlsby"]`` and
    ``a = "houlsby"`` are one group where the recipe trains no AdapterHub run, and a claim of
    b against a reads what one of a against b reads. The kind, direction and margin are left
    out: a location and an equivalence test of the same numbers are two looks at one piece of
    evidence, not two pieces.
    """
    analysis, values, own = parameters(claim, recipe.figure, recipe.figure_params(scale))
    selected = _selected(claim, runs)

    def group(chosen: tuple) -> frozenset[str]:
        if not chosen or claim.by not in selected:
            return frozenset(selected["run_id"])
        return frozenset(selected.loc[_is(selected[claim.by], chosen), "run_id"])

    groups = (
        frozenset({group(claim.a)}) if claim.compare == "threshold" else frozenset({group(claim.a), group(claim.b)})
    )
    settings_within = [c for c in claim.within if c in selected]
    if settings_within and len(selected):
        cells = frozenset(frozenset(cell["run_id"]) for _, cell in selected.groupby(settings_within, dropna=False))
    else:
        cells = frozenset({frozenset(selected["run_id"])})
    others = tuple(c for c in claim.within if c not in selected)
    where = tuple(sorted((k, repr(v)) for k, v in claim.where.items() if k not in runs))
    return (
        claim.statistic,
        analysis.name,
        repr(sorted(values.items())),
        repr(sorted(own.items())),
        claim.failures,
        claim.compare == "threshold",
        groups,
        cells,
        others,
        where,
    )


def units(recipes: Sequence[Recipe], scale: str = "demo", defaults: dict | None = None) -> pd.DataFrame:
    """Each claim's evidence unit and the runs it rests on at ``scale``.

    Parameters
    ----------
    recipes : sequence of Recipe
        The recipes judged together (e.g. every recipe of the project).
    defaults : dict, optional
        The recipes' ``defaults.toml`` (default: the one next to the project's recipes).

    Returns
    -------
    DataFrame
        :data:`UNIT_COLUMNS`, one row per recipe x claim in the recipes' order:

        - ``unit``: the claim's evidence unit, numbered from 1 in order of first appearance
          (nullable integer). Claims that share at least one run are one unit, and so are claims
          linked through others (the connected components of the claims' runs). A claim on no
          run at this scale (a scale it is not judged at) has no unit (``<NA>``).
        - ``runs``: the distinct runs the claim rests on (:func:`claim_runs`); ``unit_runs``
          the distinct runs of its unit.
        - ``run_set``: claims on the identical set of runs share it (numbered from 1; ``<NA>``
          on no run): finer than the unit, whose claims only need to share one run.
        - ``same_as``: the first earlier ``"recipe/claim"`` that reads the same observations
          (the same runs, statistic and parameters, groups and cells: :func:`_observations`),
          ``""`` when none. Such a claim tests the same evidence again, be it for another
          hypothesis (a location and an equivalence test of one table).
    """
    rows, owners, parent = [], {}, {}

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    first: dict[tuple, str] = {}
    run_sets = []
    for recipe in recipes:
        table = settings(recipe, scale, defaults)
        for claim in recipe.claims:
            index = len(rows)
            parent[index] = index
            runs = claim_runs(recipe, claim, scale, defaults, table)
            run_sets.append(runs)
            for run in runs:
                parent[root(index)] = root(owners.setdefault(run, index))
            same = ""
            if runs:
                key = (runs, _observations(recipe, claim, scale, table))
                same = first.setdefault(key, f"{recipe.name}/{claim.id}")
                same = "" if same == f"{recipe.name}/{claim.id}" else same
            rows.append({"recipe": recipe.name, "claim": claim.id, "runs": len(runs), "same_as": same})
    numbers: dict[int, int] = {}
    identical: dict[frozenset, int] = {}
    members: dict[int, set] = {}
    for index, row in enumerate(rows):
        if run_sets[index]:
            top = root(index)
            row["unit"] = numbers.setdefault(top, len(numbers) + 1)
            row["run_set"] = identical.setdefault(run_sets[index], len(identical) + 1)
            members.setdefault(top, set()).update(run_sets[index])
    for index, row in enumerate(rows):
        row["unit_runs"] = len(members[root(index)]) if run_sets[index] else 0
    frame = pd.DataFrame(rows, columns=UNIT_COLUMNS)
    frame[["unit", "run_set"]] = frame[["unit", "run_set"]].astype("Int64")
    return frame


def _overall(verdicts: pd.DataFrame) -> pd.DataFrame:
    """Each claim's overall row (its last) of a verdict frame."""
    return verdicts.groupby(["recipe", "claim"], sort=False).tail(1)


def unit_table(verdicts: pd.DataFrame, units_frame: pd.DataFrame) -> pd.DataFrame:
    """The verdicts counted per evidence unit.

    Parameters
    ----------
    verdicts : DataFrame
        :func:`robustkit.verdicts.tally.verdicts` rows (one per recipe x claim x cell, the claim's overall
        row last).
    units_frame : DataFrame
        :func:`units` of the recipes judged.

    Returns
    -------
    DataFrame
        :data:`UNIT_TABLE_COLUMNS`, one row per unit that holds a judged claim: its claims,
        recipes, distinct runs, how many of its claims agree, contradict or are inconclusive,
        how many read the same observations as another claim (``repeats``), and ``evidence``, what the unit says
        as one piece of evidence: ``agrees`` (a claim agrees, none contradicts),
        ``contradicts`` (the reverse), ``both`` or ``neither``.
    """
    merged = _overall(verdicts).merge(units_frame, on=["recipe", "claim"], how="inner")
    merged = merged[merged["unit"].notna()]
    rows = []
    for unit, group in merged.groupby("unit", sort=True):
        counts = group["verdict"].value_counts()
        agree, against = int(counts.get(AGREES, 0)), int(counts.get(CONTRADICTS, 0))
        rows.append(
            {
                "unit": int(unit),
                "claims": len(group),
                "recipes": group["recipe"].nunique(),
                "runs": int(group["unit_runs"].iloc[0]),
                AGREES: agree,
                CONTRADICTS: against,
                INCONCLUSIVE: int(counts.get(INCONCLUSIVE, 0)),
                "repeats": int((group["same_as"] != "").sum()),
                "evidence": BOTH
                if agree and against
                else AGREES_ONLY
                if agree
                else CONTRADICTS_ONLY
                if against
                else NEITHER,
            }
        )
    return pd.DataFrame(rows, columns=UNIT_TABLE_COLUMNS)


def _count(n: int, thing: str, plural: str | None = None) -> str:
    """``"1 claim"``, ``"2 claims"``."""
    return f"{n} {thing if n == 1 else plural or thing + 's'}"


def tally_line(verdicts: pd.DataFrame, units_frame: pd.DataFrame) -> str:
    """The tally of ``verdicts`` by claim and by evidence unit, in one line.

    ``"77 claims (16 agrees, 9 contradicts, 52 inconclusive) in 9 evidence units (claims that
    share a run are one unit): 3 with agreeing claims only, 1 with contradicting claims only, 2
    with both, 3 with neither; 3 claims re-test another's observations"``.

    How units are counted: a unit is one piece of evidence however many claims it holds. It
    counts as agreeing when at least one of its claims agrees and none contradicts, as
    contradicting in the reverse case, as *both* when its claims disagree and as *neither* when
    all are inconclusive (:func:`unit_table`). Claims judged on no run at the scale (their
    recipe leaves the scale out) are counted as claims and said apart; claims whose recipe is
    not in ``units_frame`` count as claims on no run too.

    Parameters
    ----------
    verdicts : DataFrame
        :func:`robustkit.verdicts.tally.verdicts` rows (:data:`robustkit.verdicts.rules.VERDICT_COLUMNS`).
    units_frame : DataFrame
        :func:`units` of the recipes judged.
    """
    overall = _overall(verdicts)
    counts = overall["verdict"].value_counts()
    parts = ", ".join(f"{int(counts.get(v, 0))} {v}" for v in (AGREES, CONTRADICTS, INCONCLUSIVE))
    table = unit_table(verdicts, units_frame)
    kinds = table["evidence"].value_counts()
    split = [
        f"{int(kinds.get(AGREES_ONLY, 0))} with agreeing claims only",
        f"{int(kinds.get(CONTRADICTS_ONLY, 0))} with contradicting claims only",
        f"{int(kinds.get(BOTH, 0))} with both",
        f"{int(kinds.get(NEITHER, 0))} with neither",
    ]
    text = (
        f"{_count(len(overall), 'claim')} ({parts}) in {_count(len(table), 'evidence unit')} "
        f"(claims that share a run are one unit)" + (f": {', '.join(split)}" if len(table) else "")
    )
    merged = overall.merge(units_frame, on=["recipe", "claim"], how="left")
    repeats = int((merged["same_as"].fillna("") != "").sum())
    text += (
        f"; {_count(repeats, 'claim')} {'re-tests' if repeats == 1 else 're-test'} another's observations (same "
        "runs, statistic and cells)"
    )
    unplaced = int(merged["unit"].isna().sum())
    if unplaced:
        text += f"; {_count(unplaced, 'claim')} {'rests' if unplaced == 1 else 'rest'} on no run at this scale"
    return text


def n_text(rows: pd.DataFrame) -> str:
    """A claim's n from its verdict rows (its cells' rows, then its overall row):
    ``"n = 5 vs 5"``, ``"n = 5 vs 5 runs, 7 cells"`` (threshold claims: one n).

    Where the rows have a ``cells`` column, the overall row's ``n_a`` / ``n_b`` are distinct
    runs and ``cells`` the cells they were tested in. Without it (verdicts written before), the
    overall row's n is summed over the cells and is said so: ``"n = 35 vs 35 summed over 7
    cells"``.
    """
    row = rows.iloc[-1]
    n = f"n = {int(row['n_a'])}" + ("" if row.get("compare") == "threshold" else f" vs {int(row['n_b'])}")
    if "cells" in rows and pd.notna(row["cells"]):
        cells = int(row["cells"])
        return n + (f" runs, {cells} cells" if cells > 1 else "")
    cells = len(rows) - 1 if len(rows) > 1 else 1
    return n + (f" summed over {cells} cells" if cells > 1 else "")


CHANCE_COLUMNS = [
    "recipe",
    "claim",
    "unit",
    "family",
    "verdict",
    "decision_p",
    "can_decide",
    "in_family",
    "family_adjusted_p",
    "survives_family",
]
# inconclusive for a reason other than its evidence: its p, if any, was not a test's decision
_WITHHELD = ("not converged", "depends on failed runs", "untestable", "no data")


def _sides(part: pd.DataFrame) -> tuple[float, float]:
    """A claim's p on each side from its verdict rows (its cells', then its overall row):
    (claimed side, opposite side).

    A verdict row carries one side's p (``p_value``): the opposite side's where it contradicts,
    the claimed side's otherwise. The side it does not carry is taken as 1, always a valid p, and
    here never a loss: a row carries the opposite side exactly where that side decided, and a
    claim that did not decide on a side at alpha has that side's p >= alpha (an agreeing location
    or rate claim: opposite p >= 1 - claimed p), which Benjamini-Yekutieli at alpha cannot reject
    whatever its value. A claim over cells combines its cells' p by its quantifier (``each``, the
    default: the claimed side needs every cell, the largest p, an intersection-union test; the
    opposite side needs one cell, the smallest times the cells, Bonferroni; ``any`` the reverse,
    read from its overall reason). A claim withheld by a guard (not converged, on failed runs,
    untestable, no data) gives 1 on both sides: it was not decided on its evidence.
    """
    overall = part.iloc[-1]
    if overall["verdict"] == INCONCLUSIVE and overall.get("reason_class", "") in _WITHHELD:
        return 1.0, 1.0
    cells = part.iloc[:-1] if len(part) > 1 else part
    p = np.nan_to_num(cells["p_value"].to_numpy(float), nan=1.0)
    against = (cells["verdict"] == CONTRADICTS).to_numpy()
    claimed, opposite = np.where(against, 1.0, p), np.where(against, p, 1.0)
    if len(cells) == 1:
        return float(claimed[0]), float(opposite[0])
    every = [float(claimed.max()), float(opposite.max())]  # a side that needs every cell
    one = [min(1.0, float(claimed.min()) * len(p)), min(1.0, float(opposite.min()) * len(p))]  # needs one
    if "holds in some cell" in str(overall.get("reason", "")):  # quantifier any (rules._overall's words)
        return one[0], every[1]
    return every[0], one[1]


def by_chance(
    verdicts: pd.DataFrame, units_frame: pd.DataFrame, alpha: float = 0.05, families: dict | None = None
) -> pd.DataFrame:
    """Per judged claim: the p of its decision, whether its test could decide at all, and whether
    a decision survives Benjamini-Yekutieli at ``alpha`` within its family.

    A family is fixed before any run: a recipe (one paper figure or table) is one family, unless
    ``families`` maps recipes to a wider one (``{"he2021/fig3": "he2021", ...}``). Its claims may
    share runs (one evidence unit, :func:`units`, which says which do); Benjamini-Yekutieli keeps
    the false-discovery rate under any such dependence
    (:func:`robustkit.measures.multiplicity.family_test`). Agreements and contradictions are two
    procedures, each over every judged claim of the family with the p of the side it tests: the
    claimed side's p of every claim for agreements, the opposite side's for contradictions
    (:func:`_sides`), so m counts the family's claims and each p is a test of the same kind. m
    leaves out, by Tarone's rule on the claims' smallest attainable p alone (group sizes, before
    any p is seen), the claims that cannot reach their share of alpha at their n.

    Returns
    -------
    DataFrame
        :data:`CHANCE_COLUMNS`, one row per judged claim: ``decision_p`` the p of the side it
        decided on (1 when inconclusive); ``can_decide`` its smallest p < alpha; ``in_family``
        Tarone's rule keeps it in its family's m; ``family_adjusted_p`` the Benjamini-Yekutieli
        adjusted p of its decision's side (NaN when inconclusive or left out); ``survives_family``
        True / False for a decided claim (adjusted p <= alpha), NA for an inconclusive one.
    """
    rows = []
    verdicts = verdicts.assign(  # frames written before these columns existed lack them
        **{c: verdicts[c] if c in verdicts else np.nan for c in ("p_value", "smallest_p")}
    )
    for (recipe, claim), part in verdicts.groupby(["recipe", "claim"], sort=False):
        overall = part.iloc[-1]
        verdict = overall["verdict"]
        claimed, opposite = _sides(part)
        smallest = float(overall["smallest_p"])
        rows.append(
            {
                "recipe": recipe,
                "claim": claim,
                "family": (families or {}).get(recipe, recipe),
                "verdict": verdict,
                "decision_p": claimed if verdict == AGREES else opposite if verdict == CONTRADICTS else 1.0,
                "can_decide": bool(np.isfinite(smallest) and smallest < alpha),
                "smallest": smallest,
                "claimed": claimed,
                "opposite": opposite,
            }
        )
    columns = ["recipe", "claim", "family", "verdict", "decision_p", "can_decide", "smallest", "claimed", "opposite"]
    frame = pd.DataFrame(rows, columns=columns)
    frame = frame.merge(units_frame[["recipe", "claim", "unit"]], on=["recipe", "claim"], how="left")
    frame["in_family"] = False
    frame["family_adjusted_p"] = np.nan
    frame["survives_family"] = pd.Series(pd.NA, index=frame.index, dtype="object")
    for _, family in frame.groupby("family", sort=False):
        for kind, side in ((AGREES, "claimed"), (CONTRADICTS, "opposite")):
            tested, adjusted = family_test(family[side], family["smallest"], alpha)
            frame.loc[family.index, "in_family"] = tested
            decided = (family["verdict"] == kind).to_numpy()
            frame.loc[family.index[decided], "family_adjusted_p"] = adjusted[decided]
    decided = frame["verdict"] != INCONCLUSIVE
    frame.loc[decided, "survives_family"] = (frame.loc[decided, "family_adjusted_p"] <= alpha).astype(object)
    return frame[CHANCE_COLUMNS]


def chance_line(
    verdicts: pd.DataFrame, units_frame: pd.DataFrame, alpha: float = 0.05, families: dict | None = None
) -> str:
    """How many decisions chance alone would give across the claims judged, and how many survive
    Benjamini-Yekutieli within their family (:func:`by_chance`), in one line:
    ``"Chance alone: of 56 claims judged, 40 could decide at their n; were every claim's null
    true, they would give at most 4.0 decisions in expectation (2 x 0.05 each: agrees or
    contradicts); 11 decided, 3 of them survive Benjamini-Yekutieli at 5% within their figure
    (...): he2021/fig3 1 of 2 (m = 3), ..."``, a figure named when one of its claims decided."""
    table = by_chance(verdicts, units_frame, alpha, families)
    if table.empty:
        return ""
    could = int(table["can_decide"].sum())
    decided = table["verdict"] != INCONCLUSIVE
    kept = int(table["survives_family"].fillna(False).astype(bool).sum())
    per = [
        f"{name} {int(part['survives_family'].fillna(False).astype(bool).sum())} of {int(part_decided.sum())} "
        f"(m = {int(part['in_family'].sum())})"
        for name, part in table.groupby("family", sort=False)
        if (part_decided := part["verdict"] != INCONCLUSIVE).any()
    ]
    return (
        f"Chance alone: of {_count(len(table), 'claim')} judged, {could} could decide at their n; were every "
        f"claim's null true they would give at most {2 * alpha * could:.1f} decisions in expectation "
        f"(2 x {alpha:g} each: agrees or contradicts); {int(decided.sum())} decided, {kept} of them survive "
        f"Benjamini-Yekutieli at {alpha:.0%} within their {'family' if families else 'figure'} (its claims one "
        "family fixed before any run, valid however they share runs; agreements and contradictions tested apart, "
        "m the claims whose smallest p can reach their share of alpha, Tarone's rule)"
        + (": " + "; ".join(per) if per else "")
    )
