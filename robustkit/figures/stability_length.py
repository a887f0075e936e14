"""Seed stability against training length (Chen et al. 2022): the standard deviation over seeds
per method at each fine-tuning epoch end, and each run's distance from the median of its method's
other seeds."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.figure import Figure

from robustkit import figures
from robustkit.figures.method_style import method_color, method_label

# The figure, as robustkit.figures reads it from this source (its analysis declares its data and view).
DECLARED = figures.register_figure(
    figures.Figure(
        "stability-length",
        "Chen et al. 2022: standard deviation of the dev score over seeds per method at each fine-tuning epoch end, "
        "and each run's distance from the median of its method's other seeds",
        "epoch-scores",
        ":stability_length_figure",
        view="robustkit.analysis.stability_length:seed_spread_by_epoch",
        order=290,
        module=__name__,
    )
)


def stability_length_figure(spread: pd.DataFrame, deviations: pd.DataFrame) -> Figure:
    """Left: std over seeds vs epoch end, a line per method; right: each run's |score - median of
    the other seeds| vs epoch end (thin lines), failed evaluations marked.

    Parameters
    ----------
    spread : DataFrame
        ``method, epoch, std, runs, failed`` (:func:`robustkit.analysis.stability_length.seed_spread_by_epoch`).
    deviations : DataFrame
        Per run x epoch: ``method, run_id, epoch, deviation, outcome, metric``.
    """
    import matplotlib.pyplot as plt

    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title

    if spread.empty:
        raise figures.NothingToDraw("no epoch evaluations to draw")
    fig, (left, right) = canvas.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    methods = sorted(spread["method"].unique())
    for method in methods:
        line = spread[spread["method"] == method].sort_values("epoch")
        left.plot(line["epoch"], line["std"], color=method_color(method), marker="o", markersize=4)
        runs = sorted(line["runs"].unique())
        left.annotate(
            f"n={'/'.join(str(r) for r in runs)}",
            (line["epoch"].iloc[-1], line["std"].iloc[-1]),
            fontsize=6.5,
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
        )
    metric = "/".join(sorted(deviations["metric"].unique()))
    left.set_xlabel("fine-tuning epoch end")
    left.set_ylabel(f"std of validation {metric} over seeds")
    left.set_title("Seed spread per method after each epoch", fontsize=9)
    left.set_xticks(sorted(spread["epoch"].unique()))
    left.grid(alpha=0.3)
    for (method, _), run in deviations.groupby(["method", "run_id"]):
        run = run.sort_values("epoch")
        right.plot(run["epoch"], run["deviation"], color=method_color(method), linewidth=0.8, alpha=0.7)
        failed = run[run["outcome"] != "ok"]
        right.scatter(failed["epoch"], failed["deviation"], color=method_color(method), marker="x", s=18)
    right.set_xlabel("fine-tuning epoch end")
    right.set_ylabel(f"|{metric} − median of the other seeds|")
    right.set_title("Each run's distance from its method's other seeds", fontsize=9)
    right.set_xticks(sorted(spread["epoch"].unique()))
    right.grid(alpha=0.3)
    handles = [plt.Line2D([], [], color=method_color(m), marker="o", label=method_label(m)) for m in methods]
    handles.append(
        plt.Line2D([], [], color="#444444", marker="x", linestyle="none", label="evaluation not ok (counted)")
    )
    style.set_title(fig, paper_title("Seed stability vs training length (Chen et al. 2022)", deviations))
    style.legend_below(fig, left, handles)
    style.add_note(
        fig,
        "Validation score at each fine-tuning epoch end of each run: every evaluation counts, one at the "
        "majority class too (a seed that has not learned is the instability). An epoch end is a point of "
        "one run under its whole run's learning-rate schedule, not a run trained for that many epochs.",
    )
    return fig
