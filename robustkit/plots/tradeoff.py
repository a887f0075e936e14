"""Houlsby et al. 2019 figures 3 and 4: task metric vs number of trained parameters, for
adapters of several sizes, fine-tuning the top k layers, LayerNorm-only tuning and full
fine-tuning (reference), one panel per task."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from robustkit.analysis.tradeoff import summarize
from robustkit.plots.style import method_color, method_label

# Series drawn as a line through their points, and the column that orders the points.
_POINT_COLUMN = {"houlsby": "adapter_size", "adapterhub-houlsby": "adapter_size", "topk": "top_k"}
_POINT_PREFIX = {"adapter_size": "m=", "top_k": "k="}
_MARKERS = {"none": "o", "layer": "s", "3-layer": "^"}


def tradeoff_figure(frame: pd.DataFrame, split: str = "validation") -> Figure:
    """Mean metric (error bars: std over seeds) vs trained parameters (log x), per task.

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.tradeoff.table` output: ``task, method, seed, adapter_size,
        top_k, adapter_sharing, adapter_init_std, trainable_params, base_params, split,
        metric, value``.
    split : str
        ``validation`` (Houlsby et al.'s figure 4) or ``test``.

    Returns
    -------
    Figure
        One panel per task. Series: one per method and adapter sharing mode; points of adapter
        series are labelled with the bottleneck size m, top-k points with k; full fine-tuning
        is a star and a dashed horizontal reference line. Legend entries (below each panel)
        give the number of runs (seeds) per point. When a panel holds one model, a top axis
        gives the trained parameters as % of the model's parameters without adapters. Runs
        with a non-default ``adapter_init_std`` belong to the init-std figure
        (:func:`robustkit.plots.init_std.init_std_figure`) and are left out; the panel title
        says how many.
    """
    data = frame[frame["split"] == split]
    if data.empty:
        raise ValueError(f"no rows for split {split!r}; the frame has {sorted(frame['split'].unique())}")
    left_out = data[data["adapter_init_std"].notna()]
    data = data[data["adapter_init_std"].isna()]
    if data.empty:
        raise ValueError("every run has a non-default adapter_init_std: plot them with the init-std figure")
    data = data.assign(series=data.apply(_series, axis=1), point=data.apply(_point, axis=1))
    tasks = sorted(data["task"].unique())
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.6 * len(tasks), 4.8), constrained_layout=True, squeeze=False)
    for ax, task in zip(axes[0], tasks):
        _panel(ax, data[data["task"] == task], split)
        excluded = left_out.loc[left_out["task"] == task, "run_id"].nunique()
        if excluded:
            ax.set_title(f"{ax.get_title()}; {excluded} runs with another init std left out", fontsize=9)
    return fig


def _series(run: pd.Series) -> str:
    """Series key of a run: its method, plus its sharing mode when not ``none``."""
    if run.get("adapter_sharing") not in (None, "none"):
        return f"{run['method']}, shared per {run['adapter_sharing']}"
    return run["method"]


def _point(run: pd.Series) -> float:
    """What orders a run within its series: adapter size or k; NaN for single-point methods."""
    column = _POINT_COLUMN.get(run["method"])
    return float(run[column]) if column and pd.notna(run.get(column)) else np.nan


def _panel(ax: plt.Axes, data: pd.DataFrame, split: str) -> None:
    summary = summarize(data, ["series", "method", "adapter_sharing", "point"])
    for series, points in summary.groupby("series", sort=True):
        points = points.sort_values("trainable_params")
        method = points["method"].iloc[0]
        if method == "full":
            _reference(ax, points)
            continue
        marker = _MARKERS.get(str(points["adapter_sharing"].iloc[0]), "o")
        ax.errorbar(points["trainable_params"], points["value"], yerr=points["std"], marker=marker,
                    markersize=4, capsize=2, linewidth=1.2, color=method_color(method),
                    linestyle="-" if len(points) > 1 else "none", label=_label(series, method, points))
        _annotate_points(ax, points, method)
    ax.set_xscale("log")
    ax.set_xlabel("trained parameters (count, log scale)")
    ax.set_ylabel(f"{split} {_one(data, 'metric')} at the best checkpoint")
    ax.set_title(f"{_one(data, 'task')} ({_one(data, 'model')})", fontsize=9)
    ax.grid(True, which="major", linewidth=0.3, alpha=0.6)
    _percent_axis(ax, data)
    # below the panel: inside it would cover points anywhere on a trade-off curve
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncols=1, frameon=False)


def _reference(ax: plt.Axes, points: pd.DataFrame) -> None:
    """Full fine-tuning: a star with its error bar and a dashed line across the panel."""
    row = points.iloc[0]
    ax.errorbar([row["trainable_params"]], [row["value"]], yerr=[row["std"]], marker="*", markersize=9,
                capsize=2, color=method_color("full"), linestyle="none", label=_label("full", "full", points))
    ax.axhline(row["value"], color=method_color("full"), linestyle="--", linewidth=0.8)


def _label(series: str, method: str, points: pd.DataFrame) -> str:
    name = method_label(method) + series[len(method):]
    low, high = int(points["n"].min()), int(points["n"].max())
    runs = f"n={low}" if low == high else f"n={low}-{high}"
    return f"{name} ({runs} runs per point)"


def _annotate_points(ax: plt.Axes, points: pd.DataFrame, method: str) -> None:
    """Label each point of a multi-point series with its adapter size or k."""
    column = _POINT_COLUMN.get(method)
    if column is None:
        return
    for _, row in points.iterrows():
        if pd.notna(row["point"]):
            ax.annotate(f"{_POINT_PREFIX[column]}{int(row['point'])}", (row["trainable_params"], row["value"]),
                        textcoords="offset points", xytext=(3, 4), fontsize=6, color=method_color(method))


def _percent_axis(ax: plt.Axes, data: pd.DataFrame) -> None:
    """Top axis: trained parameters in % of the base model's, when the panel has one base."""
    bases = data["base_params"].dropna().unique() if "base_params" in data else []
    if len(bases) != 1 or not bases[0]:
        return
    base = float(bases[0])
    top = ax.secondary_xaxis("top", functions=(lambda x: x / base * 100.0, lambda p: p * base / 100.0))
    top.set_xlabel("trained parameters (% of the model without adapters)", fontsize=7)


def _one(data: pd.DataFrame, column: str) -> str:
    return ", ".join(sorted(map(str, data[column].dropna().unique())))
