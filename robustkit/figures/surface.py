"""2-D loss surfaces around checkpoints (Li et al. 2018's contour plots; issue #16, item 2)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.figure import Figure

from robustkit import figures
from robustkit.figures.method_style import method_label
from robustkit.params import Param

# The figure, as robustkit.figures reads it from this source (its analysis declares its data and view).
DECLARED = figures.register_figure(
    figures.Figure(
        "surface",
        "Li et al. 2018: 2-D loss surface around each run's checkpoint along two filter-normalised random directions "
        "(contours; only the trained tensors move)",
        "surface",
        ":surface_contours",
        (Param("max_seeds", 3, "runs drawn per method (the lowest seeds)"),),
        order=210,
        module=__name__,
    )
)


SPLIT_LABELS = {"train": "training", "validation": "dev", "test": "test"}


def surface_contours(frame: pd.DataFrame, metric: str = "loss", max_seeds: int = 3) -> Figure:
    """One contour panel per run: rows = methods, columns = seeds (at most ``max_seeds``).

    Every panel shares one set of contour levels (from the lowest value of any panel up to the
    95th percentile of all values), so their widths compare; the star is the checkpoint itself
    (a = b = 0).

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.surface.run` output.
    metric : str
        ``loss`` (default) or a task metric.
    max_seeds : int
        Runs drawn per method (the lowest seeds).
    """
    import numpy as np

    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title

    data = frame[frame["metric"] == metric]
    if data.empty:
        raise figures.NothingToDraw(f"no rows with metric {metric!r}; the frame has {sorted(frame['metric'].unique())}")
    methods = sorted(data["method"].unique())
    runs = {m: data[data["method"] == m].drop_duplicates("run_id").sort_values("seed").head(max_seeds) for m in methods}
    columns = max(len(r) for r in runs.values())
    fig, axes = canvas.subplots(
        len(methods),
        columns,
        figsize=(3.1 * columns + 0.8, 2.9 * len(methods)),
        squeeze=False,
        constrained_layout=True,
        sharex=True,
        sharey=True,
    )
    values = data["value"].to_numpy(float)
    finite = values[np.isfinite(values)]
    levels = np.linspace(finite.min(), np.quantile(finite, 0.95), 15)
    mappable = None
    for row, method in zip(axes, methods):
        for ax, (_, run) in zip(row, runs[method].iterrows()):
            grid = data[data["run_id"] == run["run_id"]].pivot_table(index="b", columns="a", values="value")
            a, b = np.meshgrid(grid.columns.to_numpy(float), grid.index.to_numpy(float))
            mappable = ax.contourf(
                a, b, np.clip(grid.to_numpy(float), None, levels[-1]), levels=levels, cmap="viridis", extend="max"
            )
            lines = ax.contour(a, b, grid.to_numpy(float), levels=levels[::3], colors="white", linewidths=0.5)
            ax.clabel(lines, fontsize=5, fmt="%.2f")
            ax.plot(0, 0, marker="*", color="red", markersize=8)
            ax.set_title(f"{method_label(method)}\nseed {run['seed']}", fontsize=8)
            ax.set_aspect("equal")
        for ax in row[len(runs[method]) :]:
            ax.set_visible(False)
        row[0].set_ylabel("b (direction 2)")
    for ax in axes[-1]:
        ax.set_xlabel("a (direction 1)")
    unit = "mean cross-entropy, nats" if metric == "loss" else metric
    fig.colorbar(
        mappable,
        ax=axes,
        shrink=0.8,
        label=f"{SPLIT_LABELS.get(data['split'].iloc[0], data['split'].iloc[0])} {metric} ({unit})",
    )
    style.set_title(fig, paper_title("2-D loss surface around each checkpoint (Li et al. 2018)", data))
    counts = ", ".join(
        f"{method_label(m)}: {len(runs[m])} of {data[data['method'] == m]['run_id'].nunique()} runs" for m in methods
    )
    checkpoint = "/".join(sorted(data["checkpoint"].unique()))
    examples = "/".join(str(e) for e in sorted(data["examples"].unique()))
    style.add_note(
        fig,
        f"Loss at theta* + a d1 + b d2, theta* the '{checkpoint}' checkpoint (red star), d1 and d2 seeded "
        "Gaussian directions filter-normalised as Li et al. 2018 define it (each row of a weight matrix "
        "rescaled to that row's norm; biases and LayerNorms do not move), over the tensors each run trains "
        f"(adapter runs: adapters, LayerNorms and head; the frozen base stays put). {examples} "
        f"{SPLIT_LABELS.get(data['split'].iloc[0], '')} examples, the same for every run. Panels shown: {counts}. "
        "One colour scale for all panels, capped at the 95th percentile of all values.",
    )
    return fig
