"""Linear mode connectivity between seeds: the loss along the line between two runs, and the
barrier per method as a box over seed pairs (Frankle et al. 2020; issue #16, item 2)."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.figure import Figure

from robustkit import figures
from robustkit.figures.method_style import method_color, method_label, method_tick

# The figure, as robustkit.figures reads it from this source (its analysis declares its data and view).
DECLARED = figures.register_figure(
    figures.Figure(
        "connectivity",
        "Frankle et al. 2020: linear mode connectivity between runs that differ only in their seed; the loss along "
        "the line and the barrier per method as a box over seed pairs",
        "connectivity",
        ":connectivity_figure",
        view="robustkit.analysis.connectivity:lines_and_barriers",
        order=220,
        module=__name__,
    )
)


SPLIT_LABELS = {"train": "training", "validation": "dev", "test": "test"}


def connectivity_figure(lines: pd.DataFrame, barriers: pd.DataFrame, metric: str = "loss") -> Figure:
    """Left: the loss along (1 - alpha) theta_A + alpha theta_B, one thin line per seed pair;
    right: the barrier per method, a box over the seed pairs with a dot per pair.

    Parameters
    ----------
    lines : DataFrame
        :func:`robustkit.analysis.connectivity.run` output.
    barriers : DataFrame
        :func:`robustkit.analysis.connectivity.barriers` of ``lines``.
    metric : str
        ``loss`` (default) or the task metric (its barrier is then on the error, 1 - metric).
    """
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns
    from matplotlib import MatplotlibDeprecationWarning

    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title
    from robustkit.figures.marks import strip_points

    data = lines[lines["metric"] == metric]
    if data.empty:
        raise figures.NothingToDraw(f"no rows with metric {metric!r}; the frame has {sorted(lines['metric'].unique())}")
    table = barriers[barriers["metric"] == (metric if metric == "loss" else f"{metric} error")]
    methods = sorted(data["method"].unique())
    tasks = sorted(data["task"].unique())
    fig, axes = canvas.subplots(len(tasks), 2, figsize=(9.5, 3.6 * len(tasks)), squeeze=False, constrained_layout=True)
    shown = metric if metric == "loss" else f"{metric} error"
    for row, task in zip(axes, tasks):
        left, box = row
        for method in methods:
            part = data[(data["task"] == task) & (data["method"] == method)]
            for _, line in part.groupby(["run_id", "run_id_b"]):
                line = line.sort_values("alpha")
                y = line["value"] if metric == "loss" else 1 - line["value"]
                left.plot(line["alpha"], y, color=method_color(method), linewidth=0.9, alpha=0.7)
        left.set_xlabel(r"$\alpha$: (1 - $\alpha$) $\theta_A$ + $\alpha$ $\theta_B$ (seed A at 0, seed B at 1)")
        left.set_ylabel(
            f"{SPLIT_LABELS.get(data['split'].iloc[0], '')} {shown}" + (" (nats)" if metric == "loss" else "")
        )
        left.set_title(f"{task}: {shown} along the line between two seeds", fontsize=9)
        left.grid(alpha=0.3)
        cell = table[table["task"] == task]
        order = [m for m in methods if m in set(cell["method"])]
        palette = {m: method_color(m) for m in order}
        with warnings.catch_warnings():  # seaborn 0.13 passes matplotlib 3.11's deprecated vert=
            warnings.simplefilter("ignore", MatplotlibDeprecationWarning)
            sns.boxplot(
                data=cell,
                x="method",
                y="barrier",
                hue="method",
                order=order,
                palette=palette,
                ax=box,
                legend=False,
                showfliers=False,
                boxprops={"alpha": 0.45},
                width=0.5,
            )
        strip_points(
            data=cell,
            x="method",
            y="barrier",
            hue="method",
            order=order,
            palette=palette,
            ax=box,
            legend=False,
            size=4,
            jitter=0.1,
            edgecolor="black",
            linewidth=0.5,
        )
        for i, method in enumerate(order):
            n_pairs = int((cell["method"] == method).sum())
            seeds = len(
                set(cell.loc[cell["method"] == method, "seed"]) | set(cell.loc[cell["method"] == method, "seed_b"])
            )
            box.text(
                i,
                0.98,
                f"n={n_pairs} pairs\n({seeds} seeds)",
                transform=box.get_xaxis_transform(),
                ha="center",
                va="top",
                fontsize=6.5,
            )
        box.axhline(0, color="#444444", linewidth=0.8, linestyle=":")
        box.set_xticks(range(len(order)), [method_tick(m) for m in order], fontsize=7)
        box.set_xlabel("tuning method")
        box.set_ylabel(f"barrier: max {shown} − mean of the two ends")
        box.set_title(f"{task}: barrier per seed pair (Frankle et al. 2020)", fontsize=9)
        box.grid(alpha=0.3, axis="y")
        low, high = box.get_ylim()
        box.set_ylim(low, high + 0.2 * (high - low))
    handles = [
        plt.Line2D([], [], color=method_color(m), label=f"{method_label(m)}: a line per seed pair") for m in methods
    ]
    style.set_title(fig, paper_title("Linear mode connectivity between seeds (Frankle et al. 2020)", data))
    style.legend_below(fig, axes[0][0], handles)
    checkpoint = "/".join(sorted(data["checkpoint"].unique()))
    examples = "/".join(str(e) for e in sorted(data["examples"].unique()))
    grid = np.sort(data["alpha"].unique())
    style.add_note(
        fig,
        f"Each pair: two runs of one configuration that differ only in their seed, both at their "
        f"'{checkpoint}' checkpoint, interpolated over the tensors they train ({len(grid)} points, alpha "
        f"{grid[0]:g} to {grid[-1]:g}); adapter runs share the frozen base, full fine-tuning "
        "and adapter runs are never interpolated with each other (different parameterisations). "
        f"{shown.capitalize()} on {examples} {SPLIT_LABELS.get(data['split'].iloc[0], '')} examples. "
        "Boxes: quartiles and median over the pairs, whiskers 1.5 x IQR, dots: pairs; k seeds give "
        "k(k-1)/2 pairs that share runs, so the pairs are not independent observations.",
    )
    return fig
