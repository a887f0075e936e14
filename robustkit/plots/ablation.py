"""Houlsby et al. 2019 figure 6 (left/centre): relative dev performance after removing the
adapters of a span of layers, as a first-layer x last-layer heatmap."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from robustkit import tasks
from robustkit.plots.style import method_label, new_figure


def ablation_heatmap(frame: pd.DataFrame, metric: str | None = None) -> Figure:
    """Mean relative change of ``metric`` (in %) per ablated span, over the runs given.

    Rows are the first ablated layer, columns the last (0-based, as Houlsby et al.); cell
    (i, j) removes the adapters of layers i..j. The lower triangle (first > last: no span) is
    0 and greyed out; the diagonal (one layer ablated) is outlined. Each cell is annotated with
    its value when there are at most 12 layers.

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.ablation.run` output (``first, last, metric,
        relative_change`` + identity columns).
    metric : str, optional
        Default: the task's main metric (one task expected), else ``loss``.

    Returns
    -------
    Figure
    """
    metric = metric or _main_metric(frame)
    data = frame[frame["metric"] == metric]
    if data.empty:
        raise ValueError(f"no rows with metric {metric!r}; the frame has {sorted(frame['metric'].unique())}")
    grid = _grid(data)
    n_layers = grid.shape[0]
    fig, ax = new_figure(4.8 + 0.15 * n_layers, 3.8 + 0.15 * n_layers)
    masked = np.ma.masked_where(np.tril(np.ones_like(grid, dtype=bool), k=-1), grid)
    bound = max(float(np.abs(grid).max()), 1e-9)
    cmap = _cmap()
    image = ax.imshow(masked, cmap=cmap, norm=TwoSlopeNorm(0.0, -bound, bound), origin="upper")
    for k in range(n_layers):  # the diagonal: a single layer's adapters removed
        ax.add_patch(Rectangle((k - 0.5, k - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.2))
    if n_layers <= 12:
        _annotate(ax, grid)
    ax.set_xticks(range(n_layers))
    ax.set_yticks(range(n_layers))
    ax.set_xlabel("last ablated layer")
    ax.set_ylabel("first ablated layer")
    bar = fig.colorbar(image, ax=ax)
    bar.set_label(f"relative change in dev {metric} vs all adapters (%)")
    ax.set_title(_title(data, metric), fontsize=9)
    return fig


def _main_metric(frame: pd.DataFrame) -> str:
    names = frame["task"].unique() if "task" in frame else []
    if len(names) == 1:
        return tasks.get_task(str(names[0])).main_metric
    return "loss"


def _grid(data: pd.DataFrame) -> np.ndarray:
    """(L, L) mean relative change in %, 0 where first > last."""
    mean = data.groupby(["first", "last"])["relative_change"].mean() * 100.0
    n_layers = int(max(data["first"].max(), data["last"].max())) + 1
    grid = np.zeros((n_layers, n_layers))
    for (first, last), value in mean.items():
        grid[int(first), int(last)] = value
    return grid


def _cmap():
    import matplotlib

    return matplotlib.colormaps["RdBu"].with_extremes(bad="#d9d9d9")  # grey: the lower triangle, no span


def _annotate(ax, grid: np.ndarray) -> None:
    n = grid.shape[0]
    bound = max(float(np.abs(grid).max()), 1e-9)
    for i in range(n):
        for j in range(i, n):
            colour = "white" if abs(grid[i, j]) > 0.6 * bound else "black"
            ax.text(j, i, f"{grid[i, j]:.1f}", ha="center", va="center", fontsize=6, color=colour)


def _title(data: pd.DataFrame, metric: str) -> str:
    n = data["run_id"].nunique() if "run_id" in data else 1
    parts = [", ".join(sorted(map(str, data[c].unique())))
             for c in ("model", "task") if c in data]
    methods = ", ".join(method_label(m) for m in sorted(data["method"].unique())) if "method" in data else ""
    head = " / ".join(p for p in parts if p)
    return f"{head}: removing adapters of layers first..last\n{methods}, dev {metric}, mean of n={n} runs"
