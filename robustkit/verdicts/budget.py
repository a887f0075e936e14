"""What longer training would settle: the budget at which a claim's still-improving runs would
pass the convergence guard, extrapolated from their dev-loss curves.

For each still-improving run (:func:`robustkit.train.convergence_rule.improving`) its dev-loss
evaluations are fitted by a power law toward an asymptote, ``L(s) = c + a s^-b``
(``scipy.optimize.curve_fit``), and the run extended at its own evaluation interval, its
observed losses followed by the fitted ones, until the rule no longer calls it improving: that
step count over its last step is its multiple of the budget (:func:`fitted_budget`,
:func:`budget_to_converge`). A group passes the guard when none of its runs still improves,
so a claim's multiple is the largest its cells' groups need (:func:`claim_budget`). An
extrapolation of a fitted curve, not a measurement: a fit that fails or still falls past
:data:`MAX_MULTIPLE` times the budget gives no estimate, and says why. The runs per group that
would settle a claim are :mod:`robustkit.verdicts.settle`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from robustkit.analysis.convergence import TOLERANCE
from robustkit.analysis.convergence import improving as still_improving_rule
from robustkit.store import collapse
from robustkit.verdicts.cells import cell_names, groups_of
from robustkit.verdicts.rules import tested_rows
from robustkit.verdicts.selection import text as _text
from robustkit.verdicts.spec import Claim

MAX_MULTIPLE = 100.0  # the longest budget the extrapolation looks at, in multiples of the current one


def _power_law(steps: np.ndarray, a: float, b: float, c: float) -> np.ndarray:
    return c + a * np.power(steps, -b)


def fitted_budget(
    steps: Sequence[float], losses: Sequence[float], tolerance: float = TOLERANCE, max_multiple: float = MAX_MULTIPLE
) -> tuple[float | None, str]:
    """The multiple of its current steps at which one run would pass the guard's rule.

    Parameters
    ----------
    steps : sequence of float, shape (K,)
        Optimizer steps of the run's validation evaluations, increasing.
    losses : sequence of float, shape (K,)
        Its dev loss at each (nats).

    Returns
    -------
    (float or None, str)
        The multiple (1.0: the run already passes), or None and the reason: the fit failed or
        its curve still improves by the rule at ``max_multiple`` times the budget.
    """
    steps, losses = np.asarray(steps, float), np.asarray(losses, float)
    keep = np.isfinite(steps) & np.isfinite(losses) & (steps > 0)
    steps, losses = steps[keep], losses[keep]
    if not still_improving_rule(losses, tolerance):
        return 1.0, ""
    if len(steps) < 4:
        return None, "fewer than 4 evaluations to fit"
    from scipy.optimize import curve_fit

    floor = float(losses.min())
    start = (max(losses[0] - 0.5 * floor, 1e-6) * steps[0] ** 0.5, 0.5, 0.5 * floor)
    try:
        with np.errstate(all="ignore"):
            (a, b, c), _ = curve_fit(
                _power_law, steps, losses, p0=start, bounds=([0, 1e-3, 0], [np.inf, 5, floor]), maxfev=20000
            )
    except (RuntimeError, ValueError) as error:
        return None, f"the power-law fit failed ({error})"
    spacing = float(np.median(np.diff(steps))) if len(steps) > 1 else float(steps[0])
    last = float(steps[-1])
    extra = int(math.ceil((max_multiple - 1) * last / spacing))
    future = last + spacing * np.arange(1, extra + 1)
    extended = np.concatenate([losses, _power_law(future, a, b, c)])
    for more in range(1, extra + 1):  # train one evaluation longer at a time
        if not still_improving_rule(extended[: len(losses) + more], tolerance):
            return float(future[more - 1] / last), ""
    return None, (
        f"the fitted curve (floor {c:.3g}, exponent {b:.2g}) still improves by the rule at {max_multiple:g}x the budget"
    )


def budget_to_converge(
    store: str | Path | None,
    run_ids: Sequence[str],
    history: pd.DataFrame | None = None,
    tolerance: float = TOLERANCE,
    max_multiple: float = MAX_MULTIPLE,
) -> dict:
    """The training budget at which the runs ``run_ids`` would pass the convergence guard.

    Parameters
    ----------
    store : path or None
        The run store whose histories are read (:func:`robustkit.store.tables.load_history`).
    run_ids : sequence of str
        One compared group of one cell (the guard counts per group).
    history : DataFrame, optional
        The store's history, already loaded (columns ``run_id, step, epoch, split, metric,
        value``); read from ``store`` when None.

    Returns
    -------
    dict
        ``multiple`` (of the runs' current steps, at which none of them still improves by the
        rule; None with ``reason`` where too many runs have no estimate), ``runs`` (a frame:
        ``run_id, steps, epochs, improving, multiple, reason``), ``steps`` and ``epochs`` (the
        budget at the multiple, from the longest run; NaN where unknown), ``reason``.
    """
    if history is None:
        from robustkit.store.tables import load_history

        history = load_history(store)
    history = history[
        history["run_id"].isin(list(run_ids)) & (history["split"] == "validation") & (history["metric"] == "loss")
    ].sort_values("step")
    rows = []
    for run_id in run_ids:
        own = history[history["run_id"] == run_id]
        if own.empty:
            rows.append(
                {
                    "run_id": run_id,
                    "steps": np.nan,
                    "epochs": np.nan,
                    "improving": False,
                    "multiple": 1.0,
                    "reason": "no dev-loss history: the guard does not judge it",
                }
            )
            continue
        losses = own["value"].to_numpy(float)
        multiple, why = fitted_budget(own["step"].to_numpy(float), losses, tolerance, max_multiple)
        rows.append(
            {
                "run_id": run_id,
                "steps": float(own["step"].max()),
                "epochs": float(own["epoch"].max()) if "epoch" in own else np.nan,
                "improving": still_improving_rule(losses, tolerance),
                "multiple": multiple,
                "reason": why,
            }
        )
    runs = pd.DataFrame(rows, columns=["run_id", "steps", "epochs", "improving", "multiple", "reason"])
    found = {"runs": runs, "multiple": None, "steps": np.nan, "epochs": np.nan, "reason": ""}
    if runs.empty:
        return {**found, "reason": "no run"}
    # the guard passes when no run still improves (robustkit.verdicts.rules._not_converged):
    # the largest multiple
    multiple = float(runs["multiple"].astype(float).fillna(np.inf).max())
    if not np.isfinite(multiple):
        reasons = "; ".join(sorted({r for r in runs["reason"] if r}))
        return {**found, "reason": f"no budget estimate for enough runs ({reasons})"}
    return {
        **found,
        "multiple": multiple,
        "steps": float(runs["steps"].max() * multiple),
        "epochs": float(runs["epochs"].max() * multiple),
    }


def claim_budget(
    claim: Claim,
    observations: pd.DataFrame,
    improving: pd.Series,
    store: str | Path | None,
    history: pd.DataFrame | None = None,
) -> dict:
    """:func:`budget_to_converge` of every group the guard stops in the claim's cells (the
    runs each cell tests after the failure policy); the claim's multiple is the largest."""
    frame = tested_rows(claim, observations)
    if claim.failures == "exclude" and "outcome" in frame and (frame["outcome"] == collapse.OK).any():
        frame = frame[frame["outcome"] == collapse.OK]
    frame = frame[frame["value"].notna()].assign(_cell=cell_names(claim, frame), _group=groups_of(claim, frame))
    if history is None and store is not None:
        from robustkit.store.tables import load_history

        history = load_history(store)
    worst: dict = {"multiple": None, "reason": "no cell has a run of a group still improving", "group": ""}
    for (_, group), part in frame.groupby(["_cell", "_group"], sort=True):
        ids = list(dict.fromkeys(part["run_id"]))
        late = int(improving.reindex(ids).fillna(False).astype(bool).sum())
        if not late:
            continue
        found = budget_to_converge(store, ids, history)
        label = "/".join(_text(v) for v in (claim.a if group == "a" else claim.b)) or "the runs"
        found["group"], found["late"], found["n"] = label, late, len(ids)
        if found["multiple"] is None:
            return found
        if worst["multiple"] is None or found["multiple"] > worst["multiple"]:
            worst = found
    return worst


def budget_text(found: dict) -> str:
    """``"train about 2.5x longer, 7.5 epochs (4 of 5 full runs still improve; power-law fit of
    the dev loss, extrapolated)"``, or why none."""
    if found.get("multiple") is None:
        return f"no training budget found: {found['reason']}"
    epochs = f", {found['epochs']:.3g} epochs" if np.isfinite(found.get("epochs", np.nan)) else ""
    return (
        f"train about {found['multiple']:.2g}x longer{epochs} ({found['late']} of {found['n']} {found['group']} runs "
        "still improve; power-law fit of the dev loss, extrapolated)"
    )
