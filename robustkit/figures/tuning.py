"""Tuning curves per method: the best score to expect from k runs, with confidence bands
(Dodge et al. 2019; Lourie et al. 2024's opda; issue #16, item 4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.figure import Figure

from robustkit import figures
from robustkit.figures.method_style import method_color, method_label
from robustkit.figures.units import scale, unit

# The figure, as robustkit.figures reads it from this source (its analysis declares its data and view).
DECLARED = figures.register_figure(
    figures.Figure(
        "tuning-curves",
        "Dodge et al. 2019 / Lourie et al. 2024: tuning curves per method, the median (with confidence band) and "
        "expected best score of a budget of k runs over seeds or learning rates",
        "tuning",
        ":tuning_curves",
        order=240,
        module=__name__,
    )
)


def tuning_curves(frame: pd.DataFrame) -> Figure:
    """One panel per task (and setting that varies): per method, the median best-of-k score
    with its simultaneous band (shaded) and the expected best-of-k (dashed).

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.tuning.run` output.
    """
    import matplotlib.pyplot as plt

    from robustkit.analysis.tuning import CURVE_COLUMNS
    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title
    from robustkit.store import collapse

    if frame.empty:
        raise figures.NothingToDraw("nothing to plot: the frame is empty")
    extra = [c for c in frame.columns if c not in (*CURVE_COLUMNS, "task", "method", "metric")]
    panels = frame[["task", *extra]].drop_duplicates().sort_values(["task", *extra]).itertuples(index=False, name=None)
    panels = list(panels)
    fig, axes = canvas.subplots(
        1, len(panels), figsize=(max(6.0, 4.8 * len(panels)), 3.8), squeeze=False, constrained_layout=True
    )
    for ax, key in zip(axes[0], panels):
        data = frame
        for column, value in zip(["task", *extra], key):
            data = data[data[column] == value]
        metric = str(data["metric"].iloc[0])
        factor = scale(metric)
        for method, curve in data.groupby("method", sort=True):
            color = method_color(method)
            failed = int(curve["n_failed"].iloc[0])
            label = (
                f"{method_label(method)} (n={int(curve['n_runs'].iloc[0])} runs"
                + (f", {failed} failed" if failed else "")
                + ")"
            )
            ax.plot(curve["k"], curve["median"] * factor, color=color, marker="o", markersize=3, label=label)
            ax.fill_between(
                curve["k"],
                curve["median_low"] * factor,
                curve["median_high"] * factor,
                color=color,
                alpha=0.15,
                linewidth=0,
                step=None,
            )
            ax.plot(curve["k"], curve["mean"] * factor, color=color, linestyle="--", linewidth=1.0)
        ax.set_xlabel("budget: number of runs k (best of k)")
        ax.set_ylabel(f"best {metric}{unit(metric)} of k runs")
        title = ", ".join(f"{c} {v}" for c, v in zip(extra, key[1:]))
        ax.set_title(f"{key[0]}{': ' + title if title else ''}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.set_xticks(sorted(data["k"].unique()))
    handles = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    handles["mean"] = plt.Line2D(
        [], [], color="#444444", linestyle="--", label="expected best of k (Dodge et al. 2019)"
    )
    style.set_title(fig, paper_title("Tuning curves, best of k runs (opda)", frame))
    style.legend_below(fig, axes[0][0], list(handles.values()))
    confidence = "/".join(f"{c:.0%}" for c in sorted(frame["confidence"].unique()))
    style.add_note(
        fig,
        f"Solid: median of the best of k runs drawn from a method's runs (over seeds, and learning rates "
        f"where a method has several); shaded: its {confidence} simultaneous confidence band (opda, "
        "ld_highest_density CDF bands; with tied scores their coverage is approximate); dashed: the "
        f"expected best of k. Failed runs ({collapse.FAILED_WORDS}) count as draws: a budget of k runs can "
        "draw them.",
    )
    return fig
