"""What the stability box plots show besides the runs: the boxes' statistics, the tests between
methods and the caption, computed before drawing (:mod:`robustkit.figures.stability` only draws).

Each function here is the *view* of one figure of :mod:`robustkit.figures`: it takes the
figure's per-run frame (:func:`robustkit.analysis.scores.outcomes` or
:func:`~robustkit.analysis.scores.epoch_outcomes` output, the analysis result that is cached)
and returns the keyword arguments of the plot function of the same name (``frame``,
``panels``, ``summary``, ``caption_text``; :func:`box_statistics` gives the tables behind the
caption too):

- :func:`box_seeds`: Han et al. 2021 figure 2 (one box per method, over seeds);
- :func:`box_tsp`: Han et al. 2021 figure 4 (per TSP step, or pooled over TSP steps);
- :func:`box_tsp_epochs`: Han et al. 2021 figures 9 and 10 (per fine-tuning epoch end);
- :func:`box_lr`: He et al. 2021 figure 4 (per learning rate);
- :func:`train_size`: He et al. 2021 figure 3 (per training size);
- :func:`method_boxes`: any per-run score, one box per method (the attack-boxes figure).

The statistics are those of :mod:`robustkit.analysis.stability` (Levene / Brown-Forsythe, Mann-
Whitney U, bootstrap CIs) and, on request, ASO (:mod:`robustkit.analysis.dominance`), always
between methods within every other shown column, in the cells the figure draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from robustkit.analysis import dominance, stability
from robustkit.analysis.pooling import mixed_settings
from robustkit.store import collapse

__all__ = [
    "box_lr",
    "box_seeds",
    "box_statistics",
    "box_tsp",
    "box_tsp_epochs",
    "method_boxes",
    "panel_columns",
    "train_size",
]


def box_seeds(frame: pd.DataFrame, include_failed: bool = False, aso: bool = False) -> dict[str, Any]:
    """Han et al. 2021 figure 2: one box per method, a panel per task (:func:`box_statistics`)."""
    return _drawn(box_statistics(frame, x="method", hue="method", include_failed=include_failed, aso=aso))


def box_tsp(
    frame: pd.DataFrame, pooled: bool = False, include_failed: bool = False, aso: bool = False
) -> dict[str, Any]:
    """Han et al. 2021 figure 4: boxes per TSP step and method, or (``pooled``) one box per
    method over every TSP step (:func:`box_statistics`)."""
    if pooled:
        return _drawn(
            box_statistics(
                frame, x="method", hue="method", pooled=("tsp_step",), include_failed=include_failed, aso=aso
            )
        )
    return _drawn(box_statistics(frame, x="tsp_step", hue="method", include_failed=include_failed, aso=aso))


def box_tsp_epochs(frame: pd.DataFrame, pool_epochs: bool = False, include_failed: bool = False) -> dict[str, Any]:
    """Han et al. 2021 figures 9 and 10: boxes per epoch and TSP step, a panel per method; or
    (``pool_epochs``) per TSP step and method over every epoch end (:func:`box_statistics`,
    whose unit is then an evaluation: run x epoch end)."""
    if pool_epochs:
        return _drawn(
            box_statistics(
                frame,
                x="tsp_step",
                hue="method",
                pooled=("epoch", "step"),
                include_failed=include_failed,
                unit="evaluations",
            )
        )
    return _drawn(box_statistics(frame, x="epoch", hue="tsp_step", columns="method", include_failed=include_failed))


def box_lr(frame: pd.DataFrame, include_failed: bool = False, aso: bool = False) -> dict[str, Any]:
    """He et al. 2021 figure 4: boxes per learning rate and method (:func:`box_statistics`)."""
    return _drawn(box_statistics(frame, x="lr", hue="method", include_failed=include_failed, aso=aso))


def train_size(frame: pd.DataFrame, include_failed: bool = False, aso: bool = False) -> dict[str, Any]:
    """He et al. 2021 figure 3: boxes (or means) per training size and method (:func:`box_statistics`)."""
    return _drawn(box_statistics(frame, x="train_size", hue="method", include_failed=include_failed, aso=aso))


def method_boxes(frame: pd.DataFrame, include_failed: bool = False) -> dict[str, Any]:
    """One box per method over its runs, a panel per task: any per-run score (:func:`box_statistics`)."""
    return _drawn(box_statistics(frame, x="method", hue="method", include_failed=include_failed))


PLOT_ARGUMENTS = ("frame", "panels", "summary", "caption_text")


def _drawn(statistics: dict[str, Any]) -> dict[str, Any]:
    """The items of :func:`box_statistics` that the box plots take (:data:`PLOT_ARGUMENTS`)."""
    return {key: statistics[key] for key in PLOT_ARGUMENTS}


def panel_columns(frame: pd.DataFrame, shown: Sequence[str], pooled: Sequence[str] = ()) -> list[str]:
    """Run settings that vary inside a group of the ``shown`` columns (panels, x, hue).

    Runs that differ in such a field would be pooled into one box (He et al. 2021 figure 4's
    1k and 5k runs): each of its values gets a panel instead
    (:func:`robustkit.analysis.pooling.mixed_settings`). ``pooled`` fields are pooled on
    purpose (the TSP steps of Han et al.'s figure 4) and never split.
    """
    return list(mixed_settings(frame, [c for c in shown if c in frame], pooled))


def box_statistics(
    frame: pd.DataFrame,
    x: str,
    hue: str,
    columns: str | None = None,
    pooled: Sequence[str] = (),
    include_failed: bool = False,
    aso: bool = False,
    unit: str = "runs",
) -> dict[str, Any]:
    """The statistics of a box figure with boxes at ``x`` by ``hue``, rows = tasks.

    Parameters
    ----------
    frame : DataFrame
        One row per observation (run, or run x epoch end): ``task, method, value, metric``,
        ``baseline`` and run settings; ``outcome`` where known (else marked by
        :func:`robustkit.store.collapse.marked`).
    x, hue : str
        Columns of the boxes' positions and colours (both ``method``: one box per method).
    columns : str, optional
        A column whose values get a panel each (besides the settings that vary).
    pooled : sequence of str
        Run settings pooled on purpose inside a box (never split into panels).
    include_failed : bool
        Keep collapsed / diverged observations in the statistics and tests.
    aso : bool
        Add ASO's epsilon_min of each method over the other to the caption, where the frame
        holds exactly two methods.
    unit : str
        What one observation is in the caption (``runs``; ``evaluations``).

    Returns
    -------
    dict
        ``frame``: ``frame`` with ``outcome`` and ``failed``; ``panels``: the columns that make
        a panel besides the task (``columns``, then :func:`panel_columns`); ``summary``:
        :func:`robustkit.analysis.stability.summarize` per task x panel x ``x`` x ``hue`` (one
        row per box: ``n``, ``mean``, ``std``, ... in the units of ``value``, and ``n_runs``,
        ``n_collapsed``, ``n_diverged``, ``n_failed``); ``tests``:
        :func:`~robustkit.analysis.stability.compare` of method vs method within every other
        shown column; ``aso``: :func:`robustkit.analysis.dominance.aso_table` or None;
        ``caption_text``: :func:`~robustkit.analysis.stability.caption` of them. The figures'
        views return the plot's items of it (:data:`PLOT_ARGUMENTS`).

    Raises
    ------
    ValueError
        An empty frame.
    robustkit.analysis.pooling.PoolingError
        Runs of different settings would share a box.
    """
    if frame.empty:
        raise ValueError("nothing to plot: the frame is empty")
    data = collapse.marked(frame)
    panels = [
        *([columns] if columns else []),
        *panel_columns(data, ["task", x, hue, *([columns] if columns else [])], pooled),
    ]
    shown = list(dict.fromkeys(["task", *panels, x, hue]))
    # the papers' question is always method vs method, within every other shown column
    within = [c for c in shown if c != "method"]
    options = {"include_failed": include_failed, "pooled": tuple(pooled)}
    summary = stability.summarize(data, shown, **options)
    tests = stability.compare(data, "method", within=within, **options)
    table = (
        dominance.aso_table(
            data, "method", within=[c for c in tests.columns if c not in stability.COMPARE_COLUMNS], **options
        )
        if aso and data["method"].nunique() == 2
        else None
    )
    return {
        "frame": data,
        "panels": panels,
        "summary": summary,
        "tests": tests,
        "aso": table,
        "caption_text": stability.caption(summary, tests, unit=unit, dominance=table),
    }
