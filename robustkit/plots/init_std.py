"""Houlsby et al. 2019 figure 6 (right): task metric vs the standard deviation of the adapters'
weight init, one panel per task, one line per adapter size."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from robustkit.analysis.tradeoff import summarize
from robustkit.methods import HOULSBY_INIT_STD
from robustkit.plots.style import method_color

_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02")


def init_std_figure(frame: pd.DataFrame, split: str = "validation") -> Figure:
    """Mean metric (error bars: std over seeds) vs adapter init std (log x), per task.

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.tradeoff.table` output; only rows with an ``init_std``
        (``houlsby`` runs; AdapterHub's default init counts as std 1e-2) are drawn.
    split : str
        ``validation`` (Houlsby et al.) or ``test``.

    Returns
    -------
    Figure
        One panel per task, one line per adapter size m (and sharing mode, when not ``none``);
        a dotted vertical line marks the paper's default std 1e-2. Legend entries give the
        number of runs (seeds) per point.
    """
    data = frame[(frame["split"] == split) & frame["init_std"].notna()]
    if data.empty:
        raise ValueError(f"no houlsby rows for split {split!r}: the init-std figure needs adapter runs")
    tasks = sorted(data["task"].unique())
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.2 * len(tasks), 4.4), constrained_layout=True, squeeze=False)
    for ax, task in zip(axes[0], tasks):
        _panel(ax, data[data["task"] == task], split)
    return fig


def _panel(ax: plt.Axes, data: pd.DataFrame, split: str) -> None:
    summary = summarize(data, ["adapter_size", "adapter_sharing", "init_std"])
    for index, ((size, sharing), points) in enumerate(summary.groupby(["adapter_size", "adapter_sharing"], sort=True)):
        points = points.sort_values("init_std")
        low, high = int(points["n"].min()), int(points["n"].max())
        runs = f"n={low}" if low == high else f"n={low}-{high}"
        shared = "" if sharing == "none" else f", shared per {sharing}"
        ax.errorbar(points["init_std"], points["value"], yerr=points["std"], marker="o", markersize=4, capsize=2,
                    linewidth=1.2, color=_COLORS[index % len(_COLORS)],
                    label=f"adapter size m={int(size)}{shared} ({runs} runs per point)")
    ax.axvline(HOULSBY_INIT_STD, color=method_color("houlsby"), linestyle=":", linewidth=0.9,
               label="paper default (std 1e-2)")
    ax.set_xscale("log")
    ax.set_xlabel("adapter init std (truncated normal, log scale)")
    ax.set_ylabel(f"{split} {_one(data, 'metric')} at the best checkpoint")
    ax.set_title(f"{_one(data, 'task')} ({_one(data, 'model')})", fontsize=9)
    ax.grid(True, which="major", linewidth=0.3, alpha=0.6)
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncols=1, frameon=False)


def _one(data: pd.DataFrame, column: str) -> str:
    return ", ".join(sorted(map(str, data[column].dropna().unique())))
