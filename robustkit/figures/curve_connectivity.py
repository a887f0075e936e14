"""Curved mode connectivity (Garipov et al. 2018): the loss along the trained Bezier curve and
along the line between two seeds, and both barriers per disjoint seed pair."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.figure import Figure

from robustkit import figures
from robustkit.figures.method_style import method_color, method_label, method_tick

# The figure, as robustkit.figures reads it from this source (its analysis declares its data and view).
DECLARED = figures.register_figure(
    figures.Figure(
        "curve-connectivity",
        "Garipov et al. 2018: the loss along a trained quadratic Bezier curve and along the line between two seeds, "
        "and both barriers per seed pair",
        "curve-connectivity",
        ":curve_figure",
        view="robustkit.analysis.curve_connectivity:paths_and_barriers",
        order=280,
        module=__name__,
    )
)


PATH_STYLES = {"line": {"linestyle": "--", "alpha": 0.8}, "curve": {"linestyle": "-", "alpha": 1.0}}
SPLIT_LABELS = {"train": "training", "validation": "dev", "test": "test"}


def curve_figure(paths: pd.DataFrame, barriers: pd.DataFrame, metric: str = "loss") -> Figure:
    """Left: the loss (or error) along the line (dashed) and the curve (solid), per pair;
    right: each pair's barrier on the line and on the curve, joined.

    Parameters
    ----------
    paths : DataFrame
        :func:`robustkit.analysis.curve_connectivity.run` output.
    barriers : DataFrame
        :func:`robustkit.analysis.curve_connectivity.barriers` of it.
    metric : str
        ``loss`` or the task metric (its error 1 - metric is drawn).
    """
    import matplotlib.pyplot as plt

    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title

    data = paths[paths["metric"] == metric]
    if data.empty:
        raise figures.NothingToDraw(f"no rows with metric {metric!r}; the frame has {sorted(paths['metric'].unique())}")
    shown = metric if metric == "loss" else f"{metric} error"
    table = barriers[barriers["metric"] == shown]
    methods = sorted(data["method"].unique())
    fig, (left, right) = canvas.subplots(1, 2, figsize=(10, 3.9), constrained_layout=True)
    for (method, _, _), pair in data.groupby(["method", "run_id", "run_id_b"]):
        for path, points in pair.groupby("path"):
            points = points.sort_values("t")
            y = points["value"] if metric == "loss" else 1 - points["value"]
            left.plot(points["t"], y, color=method_color(method), linewidth=1.0, **PATH_STYLES[path])
    left.set_xlabel("t: seed A at 0, seed B at 1")
    left.set_ylabel(f"{SPLIT_LABELS.get(data['split'].iloc[0], '')} {shown}" + (" (nats)" if metric == "loss" else ""))
    left.set_title(f"{shown} along the line (dashed) and the trained curve (solid)", fontsize=9)
    left.grid(alpha=0.3)
    order = [m for m in methods if m in set(table["method"])]
    for i, method in enumerate(order):
        cell = table[table["method"] == method]
        for _, pair in cell.groupby(["run_id", "run_id_b"]):
            pair = pair.set_index("path").reindex(["line", "curve"])
            right.plot(
                [i - 0.15, i + 0.15],
                pair["barrier"],
                color=method_color(method),
                marker="o",
                markersize=4,
                linewidth=0.9,
            )
    right.axhline(0, color="#444444", linestyle=":", linewidth=0.8)
    right.set_xticks(range(len(order)), [method_tick(m) + "\n(line → curve)" for m in order], fontsize=7)
    right.set_xlim(-0.6, len(order) - 0.4)
    right.set_ylabel(f"barrier: max {shown} − mean of the two ends")
    right.set_title("Barrier per seed pair: line (left dot) and curve (right dot)", fontsize=9)
    right.grid(alpha=0.3, axis="y")
    handles = [plt.Line2D([], [], color=method_color(m), label=method_label(m)) for m in methods]
    handles += [plt.Line2D([], [], color="#444444", label=f"{p}", **PATH_STYLES[p]) for p in ("line", "curve")]
    style.set_title(fig, paper_title("Curved mode connectivity between seeds (Garipov et al. 2018)", data))
    style.legend_below(fig, left, handles)
    steps = "/".join(str(s) for s in sorted(data["steps"].unique()))
    examples = "/".join(str(e) for e in sorted(data["examples"].unique()))
    checkpoint = "/".join(sorted(data["checkpoint"].unique()))
    style.add_note(
        fig,
        f"Disjoint pairs of runs that differ only in their seed (each run in one pair), both at '{checkpoint}'. "
        "Curve: (1-t)^2 A + 2t(1-t) C + t^2 B over the tensors the runs train, the control point C trained for "
        f"{steps} steps on the training loss (t uniform per step, the runs' batches, rate and schedule); "
        f"line: C at the midpoint. {shown.capitalize()} on {examples} examples.",
    )
    return fig
