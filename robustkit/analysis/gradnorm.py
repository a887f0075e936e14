"""Per-layer gradient norms logged during training (Han et al. 2021, section 2 and figure 3).

Training logs, at every optimisation step, the L2 norm of the gradient of each layer group
before clipping (:func:`robustkit.train.gradnorms.gradient_norms`): ``embeddings``, ``layer.<i>`` (encoder
layer i, its adapters included), ``pooler``, ``classifier``. Nothing is recomputed here, so no
cache is needed: the rows come from ``gradnorms.parquet`` through
:func:`robustkit.store.tables.load_gradnorms`.

A layer group appears only where something in it trains. Adapter runs freeze the pooler, so they
have no ``pooler`` rows at all (never zeros): figures must show the gap, not a flat line.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd

from robustkit.analysis.declare import Analysis, Param, Statistic
from robustkit.analysis.registry import register_analysis
from robustkit.errors import RobustkitError
from robustkit.store.identity import IDENTITY

# Everything robustkit reads about this analysis (robustkit.analysis.declare); the functions below
# take their defaults from it.
DECLARED = register_analysis(
    Analysis(
        "gradnorm",
        "per-layer L2 gradient norms logged during training (Han et al. 2021, figure 3)",
        "Every step's gradient norm per layer group (before clipping), from the runs' gradnorms.parquet; prints a "
        "per-run summary: per run and layer kind, the mean norm over the first and last tenth of the steps, their "
        "ratio and the slope of log10 norm per 1,000 steps. Runs without gradient norms (imports) are left out and "
        "named.",
        ":run",
        summary=":per_run_summary",
        statistics=(
            Statistic(
                "slope",
                ":slope",
                "slope of log10 gradient norm over training steps, per 1,000 steps (negative = vanishing)",
                (
                    Param(
                        "layer",
                        "classifier",
                        "a logged layer group (pooler, classifier, embeddings, layer.<i>) or top / bottom (mean slope "
                        "over the top / bottom third of the encoder layers)",
                    ),
                ),
                ends=False,
                schedule=True,
            ),
        ),
        output="every step's norms",
        order=40,
        views=(":summary",),
        module=__name__,
    )
)


# Kinds in the order figures show them; ``mlm_head`` only occurs in TSP runs; ``shared``: base-model
# parameters outside the embeddings and any one layer (prefix tuning's pool, DeBERTa's relative
# embeddings; robustkit.methods.model_parts.layer_groups).
LAYER_KINDS = ("embeddings", "shared", "intermediate", "top", "pooler", "classifier", "mlm_head")
COLUMNS = [*IDENTITY, "step", "layer", "layer_index", "layer_kind", "value"]
TARGET_POINTS = 200  # default smoothing of :func:`summary`: about this many points per run


def run(store: str | Path, select: dict | list[str] | None = None) -> pd.DataFrame:
    """Gradient norms of the selected runs, one row per run x step x layer group.

    Parameters
    ----------
    store : path
        Run store.
    select : dict or list of str, optional
        Run filters as :func:`robustkit.analysis.select.select_runs` takes them
        (``["task=rte", "method=houlsby,full"]``); complete fine-tuning runs only.

    Returns
    -------
    DataFrame
        Identity columns + ``step`` (1-based optimisation step), ``layer`` (as logged),
        ``layer_index`` (encoder layer i, <NA> elsewhere), ``layer_kind`` (one of
        :data:`LAYER_KINDS`; ``top`` is the run's last encoder layer, ``intermediate`` any
        other) and ``value`` (L2 norm of the gradient before clipping, >= 0, unitless).
        Selected runs without gradient norms (imports: nothing was logged here) are left out
        with a warning naming them.

    Raises
    ------
    RobustkitError
        No selected run has gradient norms (the runs are named).
    """
    from robustkit.analysis.each_run import leave_out
    from robustkit.analysis.select import select_runs
    from robustkit.store.tables import load_gradnorms

    runs = select_runs(store, select)
    norms = load_gradnorms(store)
    if not norms.empty:
        norms = norms[norms["run_id"].isin(runs["run_id"])].reset_index(drop=True)
    lacking = sorted(set(runs["run_id"]) - set(norms["run_id"] if not norms.empty else ()))
    if lacking:  # imported runs: nothing was logged here
        leave_out([(run, "gradient norms (imported runs have none)") for run in lacking], "gradnorm", len(runs))
    return with_layer_kind(norms)[COLUMNS]


def with_layer_kind(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``layer_index`` and ``layer_kind`` columns added (see :func:`run`).

    The top layer is found per run (its highest encoder layer index), so runs of models with
    different depths can share a frame.
    """
    import pandas as pd

    out = frame.copy()
    index = pd.to_numeric(out["layer"].str.extract(r"^layer\.(\d+)$")[0], errors="coerce").astype("Int64")
    top = index.groupby(out["run_id"]).transform("max")
    is_layer = index.notna()
    is_top = is_layer & (index == top).fillna(False).astype(bool)
    out["layer_index"] = index
    out["layer_kind"] = out["layer"].where(~is_layer, "intermediate").mask(is_top, "top")
    return out


def summary(frame: pd.DataFrame, every: int | None = None) -> pd.DataFrame:
    """Per run x layer group: mean gradient norm over consecutive windows of ``every`` steps.

    Raw per-step norms are noisy (one mini-batch each); window means keep the trend that
    Han et al.'s figure 3 is about and make long runs cheap to draw.

    Parameters
    ----------
    frame : DataFrame
        Output of :func:`run`.
    every : int, optional
        Window length in steps; default: about :data:`TARGET_POINTS` windows for the longest run.
        Windows are ``[1, every], [every + 1, 2 every], ...``: the same for every run, so runs
        of one configuration (different seeds) stay aligned step for step.

    Returns
    -------
    DataFrame
        The columns of :func:`run` with ``step`` the mean step of the window, ``value`` the
        mean norm over it, plus ``n_steps`` (steps in the window; the last may be short).
    """
    import pandas as pd

    if frame.empty:
        return pd.DataFrame(columns=[*COLUMNS, "n_steps"])
    if every is None:
        every = max(1, math.ceil(frame["step"].max() / TARGET_POINTS))
    if int(every) < 1:
        raise ValueError(f"every must be a positive number of steps, got {every!r}")
    window = (frame["step"] - 1) // int(every)
    means = (
        frame.assign(window=window)
        .groupby(["run_id", "layer", "window"], sort=True)
        .agg(step=("step", "mean"), value=("value", "mean"), n_steps=("step", "size"))
        .reset_index()
        .drop(columns="window")
    )
    # identity columns hold NaN (adapter_size of full runs): re-attach them, never group on them
    labels = frame.drop(columns=["step", "value"]).drop_duplicates(["run_id", "layer"])
    merged = means.merge(labels, on=["run_id", "layer"], how="left")
    return merged[[c for c in COLUMNS if c in merged] + ["n_steps"]]  # frames may carry fewer run settings


SUMMARY_COLUMNS = ["layer_kind", "layers", "steps", "start", "end", "end_over_start", "slope_per_1k"]


def per_run_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """What ``analyze gradnorm`` prints: one row per run x layer kind (Han et al. 2021 figure 3's
    question, does the gradient vanish?).

    Parameters
    ----------
    frame : DataFrame
        Output of :func:`run`.

    Returns
    -------
    DataFrame
        Identity columns + ``layer_kind`` (:data:`LAYER_KINDS` order), ``layers`` (layer groups
        of that kind, averaged step by step), ``steps`` (steps logged), ``start`` and ``end``
        (mean norm over the first and the last tenth of the steps), ``end_over_start`` and
        ``slope_per_1k`` (slope of log10 norm per 1,000 steps, as the ``gradnorm.slope``
        statistic fits it per layer; negative = vanishing).
    """
    import numpy as np
    import pandas as pd

    if frame.empty:
        return pd.DataFrame(columns=[*IDENTITY, *SUMMARY_COLUMNS])
    rows = []
    for (run_id, kind), group in frame.groupby(["run_id", "layer_kind"], sort=False):
        per_step = group.groupby("step")["value"].mean().sort_index()
        tenth = max(1, math.ceil(len(per_step) / 10))
        start, end = per_step.iloc[:tenth].mean(), per_step.iloc[-tenth:].mean()
        slope = (
            np.polyfit(per_step.index.to_numpy(float) / 1000, np.log10(per_step.clip(lower=1e-30)), 1)[0]
            if len(per_step) > 1
            else float("nan")
        )
        rows.append(
            {
                "run_id": run_id,
                "layer_kind": kind,
                "layers": group["layer"].nunique(),
                "steps": len(per_step),
                "start": start,
                "end": end,
                "end_over_start": end / start if start > 0 else float("nan"),
                "slope_per_1k": slope,
            }
        )
    table = frame.drop_duplicates("run_id")[IDENTITY].merge(pd.DataFrame(rows), on="run_id")
    order = {kind: i for i, kind in enumerate(LAYER_KINDS)}
    return table.sort_values(
        ["run_id", "layer_kind"], key=lambda c: c.map(order) if c.name == "layer_kind" else c, ignore_index=True
    )


# ---------------------------------------------------------------------------------------------
# its statistics (DECLARED.statistics)


def slope(frame: pd.DataFrame, layer: str) -> pd.DataFrame:
    """Slope of log10 gradient norm over training steps (per 1,000 steps; Han et al. 2021 fig 3).

    ``layer``: a logged layer group (``pooler``, ``classifier``, ``embeddings``, ``layer.<i>``)
    or ``top`` / ``bottom`` (mean slope over the top / bottom third of the encoder layers).
    Negative = vanishing gradients.
    """
    import numpy as np
    import pandas as pd

    from robustkit.analysis.layers import GRADIENT_NORMS, encoder_third

    if frame.empty:
        raise RobustkitError("no gradient norms were logged for these runs")
    if layer in ("top", "bottom"):
        frame = encoder_third(frame, GRADIENT_NORMS, layer)
    else:
        frame = frame[frame["layer"] == layer]
    rows = []
    for (run_id, name), group in frame.groupby(["run_id", "layer"], sort=True):
        slope = np.polyfit(group["step"].to_numpy(float) / 1000, np.log10(group["value"].clip(lower=1e-30)), 1)[0]
        rows.append({"run_id": run_id, "layer": name, "value": slope})
    slopes = pd.DataFrame(rows).groupby("run_id", as_index=False)["value"].mean()
    return frame.drop_duplicates("run_id")[IDENTITY].merge(slopes, on="run_id")
