"""The claims of recipes on a store: their observations, their verdicts and the verdict table.

A claim's observations are its statistic of its analysis's frame, computed from the store by the
analysis registry (:func:`observations`); :func:`verdicts` judges every claim of the recipes by
:func:`robustkit.verdicts.rules.judge` into one table (:data:`robustkit.verdicts.rules.VERDICT_COLUMNS`)
and :func:`summary_line` says each claim's verdict in one line.

A claim is judged on the frame its figure drew: when ``statistic`` names the figure's analysis,
the analysis's parameters are the figure's (the recipe's ``params`` at the scale), so claim and
figure read one cache entry; a claim's ``params`` are then the statistic's own. A claim on
another analysis gives that analysis's parameters in ``params`` too (unknown names are errors).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from robustkit.analysis import registry
from robustkit.errors import RobustkitError
from robustkit.params import resolve
from robustkit.verdicts.replication import REPLICATION_COLUMNS, blank, cells_of, claim_hours, replicate
from robustkit.verdicts.rules import NO_DATA, NOT_SIZED, TOO_FEW, UNTESTABLE, judge, runs
from robustkit.verdicts.spec import INCONCLUSIVE, Claim, ClaimError
from robustkit.verdicts.verdict import VERDICT_COLUMNS, Verdict, as_frame

TABLE_COLUMNS = VERDICT_COLUMNS + REPLICATION_COLUMNS  # claims.csv: the verdict, then its replication reading


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
                raise ClaimError(
                    f"claim {claim.id!r} sets {clash}, parameters of its figure's analysis {analysis.name!r}: "
                    "set them once in the recipe's params, so the claim is judged on the frame the figure draws"
                )
            values = drawn.analysis_values(drawn.resolve(**figure_params))
        else:
            values = analysis.resolve(**{k: v for k, v in claim.params.items() if k in shared})
        own = {k: v for k, v in claim.params.items() if k not in shared}
        resolve(statistic.params, own, f"statistic {claim.statistic}", ClaimError)
    except RobustkitError as error:
        raise ClaimError(f"claim {claim.id!r}: {error}") from None
    return analysis, values, own


def observations(
    claim: Claim,
    figure: str,
    figure_params: dict,
    store: str | Path,
    run_ids: list[str],
    frames: dict | None = None,
    device: str | None = None,
) -> pd.DataFrame:
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
    from robustkit.analysis.scores import with_outcome

    name = claim.statistic.rpartition(".")[2]
    return with_outcome(analysis.statistic(name, frames[key], store, **own), store)


def verdicts(
    store: str | Path,
    recipes: Sequence,
    scale: str = "demo",
    include_failed: bool = False,
    defaults: dict | None = None,
    device: str | None = None,
) -> pd.DataFrame:
    """Every claim of ``recipes`` judged on the recipe's runs at ``scale`` in ``store``.

    Parameters
    ----------
    recipes : sequence of :class:`robustkit.verdicts.recipes.Recipe`
        Recipes with their ``claims`` (e.g. ``[load_recipe("han2021/fig2")]``).
    defaults : dict, optional
        The recipes' ``defaults.toml`` (default: the one next to the project's recipes).
    device : str, optional
        Where the analyses that run a model run it (default: the GPU if there is one).

    Returns
    -------
    DataFrame
        :data:`TABLE_COLUMNS`: :data:`VERDICT_COLUMNS`, one row per recipe x claim x cell (plus
        an ``all`` row per claim with cells), then each row's replication reading
        (:data:`robustkit.verdicts.replication.REPLICATION_COLUMNS`, :func:`with_reading`). A
        claim whose statistic cannot be computed on the runs present
        (missing runs, an analysis error) is ``inconclusive`` with the reason. A claim the recipe
        does not judge at ``scale`` is *inconclusive: not sized for this scale* with its observed
        effect where the store holds its runs there, *untestable* only where it holds none.
    """
    frames = []
    for recipe in recipes:
        specs = recipe.specs(scale, defaults)
        run_ids = [spec.run_id for spec in specs]
        memo: dict = {}
        improving = None
        for claim in recipe.claims:
            if not claim.judged_at(scale):
                observed = _observed_not_judged(claim, recipe, scale, store, run_ids, memo, device, defaults)
                if observed is None:
                    observed = as_frame(claim, [_not_judged_at(recipe, claim, scale, defaults)])
                frames.append(observed.assign(recipe=recipe.name))
                continue
            stopped = _stopped_early(claim, specs)
            if stopped:
                frames.append(as_frame(claim, [stopped]).assign(recipe=recipe.name))
                continue
            try:
                found = observations(claim, recipe.figure, recipe.figure_params(scale), store, run_ids, memo, device)
                if claim.final and improving is None:
                    from robustkit.analysis.convergence import still_improving

                    improving = still_improving(store, run_ids)
                frame = judge(claim, found, include_failed, improving)
                frame = with_reading(
                    claim, frame, found, include_failed, lambda c=claim, r=recipe: claim_hours(r, c, scale, defaults)
                )
            except Exception as error:  # noqa: BLE001 - one claim's failure must not cost the figure
                frame = _not_computable(claim, error)
            frames.append(frame.assign(recipe=recipe.name))
    if not frames:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    frames = [f if "replication" in f else pd.concat([f, blank(f, "no runs judged")], axis=1) for f in frames]
    return pd.concat(frames, ignore_index=True)[TABLE_COLUMNS]


def with_reading(
    claim: Claim, frame: pd.DataFrame, observations: pd.DataFrame, include_failed: bool = False, hours=None
) -> pd.DataFrame:
    """A claim's verdict rows with their replication reading
    (:func:`robustkit.verdicts.replication.replicate` on the cells the verdict tested); rows
    without runs read say why there is none. ``hours``: () -> (CPU-hours, GPU-hours) of the
    claim's runs, for what would settle a reading too imprecise to say."""
    head = frame.iloc[-1]
    if not (head["n_a"] or head["n_b"]) or head["reason_class"] in (UNTESTABLE, NO_DATA):
        return pd.concat([frame, blank(frame, head["reason_class"] or "no runs judged")], axis=1)
    try:
        reading = replicate(claim, frame, cells_of(claim, observations, include_failed), hours)
    except Exception as error:  # noqa: BLE001 - the verdict stands without its reading
        reading = blank(frame, f"not computable: {type(error).__name__}: {error}")
    return pd.concat([frame, reading], axis=1)


def _stopped_early(claim: Claim, specs: Sequence) -> Verdict | None:
    """The row of a claim whose statistic reads the whole training schedule
    (:attr:`robustkit.analysis.declare.Statistic.schedule`) on runs trained ``until_converged``,
    which stop once they have converged: *untestable*. None where the claim can be judged."""
    statistic = registry.statistic_of(claim.statistic)[1]
    stopped = sum(spec.until_converged for spec in specs)
    if not statistic.schedule or not stopped:
        return None
    return Verdict(
        reason_class=UNTESTABLE,
        reason=f"untestable on runs trained until converged: {claim.statistic} reads the whole training schedule, "
        f"and {stopped} of the {len(specs)} runs stop once they converge (train them to a fixed budget)",
    )


def _not_computable(claim: Claim, error: Exception) -> pd.DataFrame:
    """The row of a claim whose statistic or reading raised on the runs present: *no data*, with
    the error in the reason (its type named where it is not robustkit's own)."""
    kind = "" if isinstance(error, RobustkitError) else f"{type(error).__name__}: "
    return as_frame(claim, [Verdict(reason=f"not computable on these runs: {kind}{error}", reason_class=NO_DATA)])


def _observed_not_judged(
    claim: Claim,
    recipe,
    scale: str,
    store: str | Path,
    run_ids: list[str],
    memo: dict,
    device: str | None,
    defaults: dict | None = None,
) -> pd.DataFrame | None:
    """The rows of a claim its recipe does not judge at ``scale`` whose runs the store holds at
    that scale (the figure draws them): *inconclusive: not sized for this scale*, with the effect,
    interval and runs observed, never a p-value (the test was not sized for these runs, so its p
    is not this verdict's); *no data* where the statistic cannot be computed on them. None where
    no run is stored, the claim is an ``artefact`` at ``scale``, or the claim reads none of the
    observations: :func:`_not_judged_at` says why."""
    from robustkit.store.folders import MANIFEST

    if scale in claim.artefact_scales or not any((Path(store) / r / MANIFEST).is_file() for r in run_ids):
        return None
    try:
        found = observations(claim, recipe.figure, recipe.figure_params(scale), store, run_ids, memo, device)
        judged = judge(claim, found, describe=True)
        judged = with_reading(claim, judged, found, hours=lambda: claim_hours(recipe, claim, scale, defaults))
    except Exception as error:  # noqa: BLE001 - as verdicts() says of a judged claim
        return _not_computable(claim, error)
    last = judged.iloc[-1]
    if not (last["n_a"] or last["n_b"]):
        return None
    where = f"the recipe judges it at {', '.join(claim.scales)} scale"
    reasons = []
    for _, row in judged.iterrows():
        effect = (
            f"observed {row['effect_name']} {row['effect']:.3g}"
            + (f", 90% CI [{row['ci_low']:.3g}, {row['ci_high']:.3g}]" if np.isfinite(row["ci_low"]) else "")
            if row["effect_name"] and np.isfinite(row["effect"])
            else "no effect at this n"
        )
        n = f"{int(row['n_a'])}" + (f" vs {int(row['n_b'])}" if claim.compare != "threshold" else "")
        reasons.append(f"not sized for {scale} scale: {effect} on {n} runs; {where}")
    return judged.assign(verdict=INCONCLUSIVE, reason_class=NOT_SIZED, p_value=np.nan, reason=reasons)


def _not_judged_at(recipe, claim: Claim, scale: str, defaults: dict | None) -> Verdict:
    """The row of a claim its recipe does not judge at ``scale`` and whose runs the store lacks:
    *untestable on this model* where its ``artefact`` holds, *too few runs* where no cell's test
    can reach alpha with the scale's runs, else *untestable at this scale* (with runs stored:
    :func:`_observed_not_judged`)."""
    from robustkit.verdicts.decidability import sizes_and_configurations

    if scale in claim.artefact_scales:
        return Verdict(reason_class=UNTESTABLE, reason=f"untestable on this model at {scale} scale: {claim.artefact}")

    sizes, configs = sizes_and_configurations(recipe, claim, scale, defaults)
    smallest = [claim.smallest_p(n_a, n_b, configs) for _, n_a, n_b in sizes]
    where = f"the recipe judges it at {', '.join(claim.scales)} scale"
    if sizes and min(smallest) >= claim.alpha and registry.statistic_of(claim.statistic)[1].independent:
        n_a, n_b = sizes[0][1], sizes[0][2]
        return Verdict(
            n_a=n_a,
            n_b=n_b,
            smallest_p=min(smallest),
            reason_class=TOO_FEW,
            reason=f"too few runs at {scale} scale: {n_a}"
            + (f" vs {n_b}" if claim.groups == 2 else "")
            + f" can give p >= {min(smallest):.3g} at best; {where}",
        )
    return Verdict(reason_class=UNTESTABLE, reason=f"untestable at {scale} scale: {where}")


def summary_line(rows: pd.DataFrame) -> str:
    """One line per claim (its overall row): ``"spread: agrees (n = 5 vs 5; std ratio a/b 0.41,
    90% CI [0.2, 0.8]; std ... one-sided p = 0.01)"``, for under a figure or in an index."""
    lines = []
    for claim, group in rows.groupby("claim", sort=False):
        row = group.iloc[-1]
        effect = (
            f"; {row['effect_name']} {row['effect']:.3g}" if row["effect_name"] and np.isfinite(row["effect"]) else ""
        )
        if effect and row["cell"] == "all" or (effect and len(group) == 1):
            effect += (
                f", 90% CI [{row['ci_low']:.3g}, {row['ci_high']:.3g}]"
                if np.isfinite(row["ci_low"])
                else ", no interval at this n"
            )
        kept = "kept as data" if row["failures"] == "data" else "left out"
        failed = f"; {runs(int(row['n_failed']), 'failed')} {kept}" if row["n_failed"] else ""
        n = f"n = {int(row['n_a'])}" + (f" vs {int(row['n_b'])}" if row["compare"] != "threshold" else "")
        cells = int(row["cells"]) if "cells" in row and pd.notna(row["cells"]) else 1
        n += f" runs, {cells} cells" if cells > 1 else ""
        lines.append(f"{claim}: {row['verdict']} ({n}{effect}{failed}; {row['reason']})")
    return "\n".join(lines)
