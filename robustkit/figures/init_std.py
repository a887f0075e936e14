"""Houlsby et al. 2019 figure 6 (right): task metric vs the standard deviation of the adapters'
weight init, one panel per task, one line per adapter size. It only draws: the points and
their means come from :func:`robustkit.analysis.tradeoff.init_std_points`, the figure's view."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import matplotlib.pyplot as plt
    import pandas as pd
    from matplotlib.figure import Figure

from robustkit import figures
from robustkit.figures.method_style import method_color
from robustkit.figures.units import scale, score_label
from robustkit.methods import HOULSBY_INIT_STD

# The figure, as robustkit.figures reads it from this source (its analysis declares its data and view).
DECLARED = figures.register_figure(
    figures.Figure(
        "init-std",
        "Houlsby et al. 2019 figure 6 right: metric vs the std of the adapters' weight init (log)",
        "tradeoff",
        ":init_std_figure",
        (figures.SHOWN_SPLIT,),
        view="robustkit.analysis.tradeoff:init_std_points",
        score_axis=True,
        order=190,
        module=__name__,
    )
)


_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02")


def init_std_figure(
    shown: pd.DataFrame,
    stats: pd.DataFrame,
    n_configs: int = 1,
    split: str = "validation",
    include_failed: bool = False,
    select_on: str = "validation",
) -> Figure:
    """Mean metric (error bars: ±1 s.e.m. over seeds) vs adapter init std (log x), per task.

    ``shown``, ``stats`` and ``n_configs`` are the items of
    :func:`robustkit.analysis.tradeoff.init_std_points` (the figure's view of
    :func:`robustkit.analysis.tradeoff.table`: ``houlsby`` runs only, AdapterHub's default
    init counted as std 1e-2), made with the same ``split``, ``include_failed`` and
    ``select_on``.

    Parameters
    ----------
    shown : DataFrame
        The selected runs' rows of ``split`` (``task, model, init_std, metric, value,
        outcome``, ...): crosses, titles, axes.
    stats : DataFrame
        One row per task x adapter size x sharing x init std: ``value`` (mean of the kept
        runs), ``sem``, ``n``, ``n_runs``, ``n_collapsed``, ``n_diverged``, ``baseline``.
    n_configs : int
        Most learning rates compared at a point.
    split : str
        ``validation`` (Houlsby et al.) or ``test``.
    include_failed : bool
        The means hold collapsed / diverged runs (they are still marked).
    select_on : str
        Split on which the best learning rate of each point was chosen (for the note).

    Returns
    -------
    Figure
        One panel per task (one y scale when they share a metric), one line per adapter size
        m (and sharing mode, when not ``none``); a dotted vertical line marks the paper's
        default std 1e-2, a dashed one the majority-class baseline; collapsed runs are grey
        crosses left out of the means. Legend entries give the runs (seeds) per point.
    """
    from matplotlib.lines import Line2D

    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title
    from robustkit.figures.marks import baseline_handle, collapsed_handle
    from robustkit.store import collapse

    tasks = sorted(shown["task"].unique())
    fig, axes = canvas.subplots(
        1,
        len(tasks),
        figsize=(5.2 * len(tasks), 4.0),
        constrained_layout=True,
        squeeze=False,
        sharey=shown["metric"].nunique() == 1,
    )
    handles = {}
    for ax, task in zip(axes[0], tasks):
        handles.update(_panel(ax, shown[shown["task"] == task], stats[stats["task"] == task]))
    axes[0][0].set_ylabel(f"{score_label(shown['metric'], [split])} at the {_checkpoint(shown)} checkpoint")
    handles["default"] = Line2D([], [], color=method_color("houlsby"), linestyle=":", label="paper default (std 1e-2)")
    if shown["baseline"].notna().any() if "baseline" in shown else False:
        handles["baseline"] = baseline_handle()
    if (shown["outcome"] != collapse.OK).any():
        handles["collapsed"] = collapsed_handle()
    style.set_title(fig, paper_title("Houlsby et al. 2019, figure 6 (right)", shown))
    style.legend_below(fig, axes[0][0], list(handles.values()), ncols=2)
    note = "Error bars: ±1 s.e.m. over seeds."
    if n_configs > 1:
        note += f" Each point: the best of up to {n_configs} learning rates by mean {select_on} score."
    failed = int((shown["outcome"] != collapse.OK).sum())
    if failed:
        note += (
            f" Collapsed / diverged runs (grey crosses) are {'kept in' if include_failed else 'left out of'} "
            f"the means: {failed} of {len(shown)} runs."
        )
    style.add_note(fig, note)
    return fig


def _panel(ax: plt.Axes, data: pd.DataFrame, summary: pd.DataFrame) -> dict:
    import numpy as np
    from matplotlib.lines import Line2D

    from robustkit.figures.marks import COLLAPSED_STYLE, draw_baseline, include_baseline
    from robustkit.store import collapse

    factor = scale(str(data["metric"].iloc[0]))
    handles = {}
    for index, ((size, sharing), points) in enumerate(summary.groupby(["adapter_size", "adapter_sharing"], sort=True)):
        points = points.sort_values("init_std")
        low, high = int(points["n_runs"].min()), int(points["n_runs"].max())
        runs = f"n={low}" if low == high else f"n={low}-{high}"
        shared = "" if sharing == "none" else f", shared per {sharing}"
        label = f"adapter size m={int(size)}{shared} ({runs} runs per point)"
        colour = _COLORS[index % len(_COLORS)]
        drawn = points[points["n"] > 0]
        ax.errorbar(
            drawn["init_std"],
            drawn["value"] * factor,
            yerr=drawn["sem"].fillna(0) * factor,
            marker="o",
            markersize=4,
            capsize=2,
            linewidth=1.2,
            color=colour,
            label=label,
        )
        handles[label] = Line2D([], [], color=colour, marker="o", markersize=4, label=label)
        for _, row in points.iterrows():
            text = collapse.counts_label(row)
            y = row["value"] if row["n"] > 0 else row["baseline"]
            if text and np.isfinite(y):
                ax.annotate(
                    text,
                    (row["init_std"], y * factor),
                    textcoords="offset points",
                    xytext=(0, -9),
                    ha="center",
                    fontsize=5.5,
                    color="#555555",
                    gid="collapsed-label",
                )
    failed = data[(data["outcome"] != collapse.OK) & np.isfinite(data["value"])]
    if len(failed):
        ax.plot(failed["init_std"], failed["value"] * factor, **COLLAPSED_STYLE, zorder=4, gid="collapsed")
    if summary["baseline"].notna().any():
        draw_baseline(ax, float(summary["baseline"].mean()) * factor)
        include_baseline(ax, [float(summary["baseline"].mean()) * factor])
    ax.axvline(HOULSBY_INIT_STD, color=method_color("houlsby"), linestyle=":", linewidth=0.9)
    ax.set_xscale("log")
    ax.set_xlabel("adapter init std (truncated normal, log scale)")
    ax.set_title(f"{_one(data, 'task')} ({_one(data, 'model')})", fontsize=9)
    ax.grid(True, which="major", linewidth=0.3, alpha=0.6)
    return handles


def _one(data: pd.DataFrame, column: str) -> str:
    return ", ".join(sorted(map(str, data[column].dropna().unique())))


def _checkpoint(rows: pd.DataFrame) -> str:
    """``best`` (selected on validation) or ``last``, as the rows say."""
    return "/".join(sorted(map(str, rows["checkpoint"].dropna().unique()))) if "checkpoint" in rows else "best"
