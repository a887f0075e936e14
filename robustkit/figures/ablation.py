"""Houlsby et al. 2019 figure 6 (left/centre): relative dev performance after removing the
adapters of a span of layers, as a first-layer x last-layer heatmap; one panel per task (and per
run setting that differs), one colour scale for all panels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import numpy as np

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.figure import Figure

from robustkit import figures
from robustkit.analysis.declare import METRIC_NAME
from robustkit.figures.method_style import method_label
from robustkit.params import Param

# The figure, as robustkit.figures reads it from this source (its analysis declares its data and view).
DECLARED = figures.register_figure(
    figures.Figure(
        "ablation",
        "Houlsby et al. 2019 figure 6: relative change of the dev metric when the adapters of layers i..j are removed",
        "ablation",
        ":ablation_heatmap",
        (
            Param(
                "metric",
                None,
                "metric whose relative change is shown (Houlsby et al. plot validation accuracy)",
                default_note="the task's main metric",
                check=METRIC_NAME,
            ),
            Param(
                "paper_figure",
                "Houlsby et al. 2019, figure 6",
                "the figure named in the title",
                default_note="the course report's figure 8 is the same ablation of layer-shared adapters",
            ),
        ),
        view="robustkit.analysis.ablation:ablation_heatmap",
        order=50,
        module=__name__,
    )
)


MIN_PANEL_IN = 2.3  # inches: the narrowest panel, which holds a 3-line title at 8 pt
MAX_ANNOTATED_LAYERS = 24  # beyond this a cell is too small for a number at a readable size
SHARING_TITLES = {
    "layer": "layer-shared adapters (one module per layer)",
    "3-layer": "layer-shared adapters (one module per 3 layers)",
}


def ablation_heatmap(
    frame: pd.DataFrame,
    cells: pd.DataFrame,
    metric: str,
    panels: Sequence[str] = (),
    paper_figure: str = "Houlsby et al. 2019, figure 6",
) -> Figure:
    """Mean relative change of ``metric`` (in %) per ablated span, over the runs given.

    Rows are the first ablated layer, columns the last (0-based, as Houlsby et al.); cell
    (i, j) removes the adapters of layers i..j. The lower triangle (first > last: no span) is
    greyed out; the diagonal (one layer ablated) is outlined. Each cell shows its value with one
    decimal, at a font size that fits the cell and in black or white by the cell's brightness,
    for up to :data:`MAX_ANNOTATED_LAYERS` layers.

    ``frame``, ``cells``, ``metric`` and ``panels`` are the keyword arguments
    :func:`robustkit.analysis.ablation.ablation_heatmap` returns (the figure's view).

    Parameters
    ----------
    frame : DataFrame
        The rows of ``metric`` of :func:`robustkit.analysis.ablation.run` output (``first,
        last, metric, relative_change`` + identity columns, ``adapter_sharing`` among them):
        the panels' titles and the figure's.
    cells : DataFrame
        ``panels`` columns + ``first, last, relative_change``: the mean relative change (%) of
        each span over a panel's runs.
    metric : str
        The metric shown.
    panels : sequence of str
        The columns that make a panel (``task`` and the settings that differ); empty: one panel.
    paper_figure : str
        The figure the heatmap reproduces, named in the title (the course report's figure 8
        draws the same ablation for layer-shared adapters).

    Returns
    -------
    Figure
        One panel per task and differing setting; the title names the paper's figure, the
        model and task, and says "layer-shared" for runs with shared adapters.
    """
    import numpy as np
    from matplotlib.colors import TwoSlopeNorm

    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title

    keys = list(panels)
    groups = list(frame.groupby(keys, dropna=False, sort=True)) if keys else [((), frame)]
    means = [rows for _, rows in cells.groupby(keys, dropna=False, sort=True)] if keys else [cells]
    grids = [_matrix(rows) for rows in means]
    n_layers = max(g.shape[0] for g in grids)
    bound = max(max(float(np.abs(g).max()) for g in grids), 1e-9)  # one scale: panels compare
    side = max(MIN_PANEL_IN, 1.2 + 0.36 * n_layers)  # a small model's panel still holds its title
    height = side + 0.4
    fig, axes = canvas.subplots(
        1, len(groups), figsize=(side * len(groups) + 1.2, height), squeeze=False, constrained_layout=True
    )
    norm = TwoSlopeNorm(0.0, -bound, bound)
    image = None
    for ax, (key, rows), grid in zip(axes[0], groups, grids):
        image = _panel(ax, grid, norm)
        # each title wrapped to its panel's width: side by side, long titles ran into each other
        title = "\n".join(
            line
            for part in _panel_title(rows, metric, keys, key).split("\n")
            for line in style.wrap(fig, part, 8, 0.85 * side)
        )
        ax.set_title(title, fontsize=8)
    bar = fig.colorbar(image, ax=list(axes[0]), shrink=0.9)
    label = f"relative change in dev {metric} vs all adapters (%)"
    size = bar.ax.yaxis.label.get_size()
    bar.set_label("\n".join(style.wrap(fig, label, size, 0.8 * 0.9 * height)))  # within the bar's height
    style.set_title(fig, paper_title(paper_figure, frame, extra=_sharing(frame)))
    style.add_note(
        fig,
        "Cell (i, j): adapters of layers i..j removed (nothing re-trained), mean over the runs; "
        "outlined: a single layer; grey: no span.",
    )
    return fig


def _panel(ax, grid: np.ndarray, norm):
    import numpy as np
    from matplotlib.patches import Rectangle

    n_layers = grid.shape[0]
    masked = np.ma.masked_where(np.tril(np.ones_like(grid, dtype=bool), k=-1), grid)
    cmap = _cmap()
    image = ax.imshow(masked, cmap=cmap, norm=norm, origin="upper")
    for k in range(n_layers):  # the diagonal: a single layer's adapters removed
        ax.add_patch(Rectangle((k - 0.5, k - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.0))
    if n_layers <= MAX_ANNOTATED_LAYERS:
        _annotate(ax, grid, cmap, norm)
    ax.set_xticks(range(n_layers))
    ax.set_yticks(range(n_layers))
    ax.tick_params(labelsize=7)
    ax.set_xlabel("last ablated layer")
    ax.set_ylabel("first ablated layer")
    return image


def _matrix(cells: pd.DataFrame) -> np.ndarray:
    """(L, L) array of one panel's cells (``first, last, relative_change``), 0 where first > last."""
    import numpy as np

    n_layers = int(max(cells["first"].max(), cells["last"].max())) + 1
    grid = np.zeros((n_layers, n_layers))
    for first, last, value in zip(cells["first"], cells["last"], cells["relative_change"]):
        grid[int(first), int(last)] = value
    return grid


def _cmap():
    import matplotlib

    return matplotlib.colormaps["RdBu"].with_extremes(bad="#d9d9d9")  # grey: the lower triangle, no span


def cell_font_size(n_layers: int) -> float:
    """Points for a cell's number: large for a few layers, smaller as the cells shrink."""
    import numpy as np

    return float(np.clip(10.5 - 0.3 * n_layers, 4.5, 8.5))


def _annotate(ax, grid: np.ndarray, cmap, norm) -> None:
    n = grid.shape[0]
    size = cell_font_size(n)
    for i in range(n):
        for j in range(i, n):
            red, green, blue, _ = cmap(norm(grid[i, j]))
            # white on dark cells, black on light ones (relative luminance of the cell colour)
            colour = "white" if 0.299 * red + 0.587 * green + 0.114 * blue < 0.5 else "black"
            text = f"{grid[i, j]:.1f}".replace("-0.0", "0.0")
            ax.text(j, i, text, ha="center", va="center", fontsize=size, color=colour)


def _sharing(data: pd.DataFrame) -> str:
    modes = sorted(set(data["adapter_sharing"].dropna()) - {"none"}) if "adapter_sharing" in data else []
    return "; ".join(SHARING_TITLES.get(m, f"adapters shared per {m}") for m in modes)


def _panel_title(data: pd.DataFrame, metric: str, keys: list[str], key) -> str:
    n = data["run_id"].nunique() if "run_id" in data else 1
    key = key if isinstance(key, tuple) else (key,)
    where = ", ".join([str(key[0]), *(f"{k.replace('_', ' ')} {v}" for k, v in zip(keys[1:], key[1:]))]) if keys else ""
    methods = ", ".join(method_label(m) for m in sorted(data["method"].unique())) if "method" in data else ""
    sharing = _sharing(data)
    return (
        f"{where}: {methods}{' (' + sharing.split(' (')[0] + ')' if sharing else ''}\ndev {metric}, mean of n={n} runs"
    )
