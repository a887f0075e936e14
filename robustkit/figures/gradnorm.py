"""Han et al. 2021 figure 3: per-layer gradient norms during fine-tuning, with vs without adapters."""

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
        "gradnorm",
        "Han et al. 2021 figure 3: per-layer gradient norms during training (log scale)",
        "gradnorm",
        ":gradnorm_curves",
        view="robustkit.analysis.gradnorm:summary",
        order=60,
        module=__name__,
    )
)


PANELS = ("intermediate", "top", "pooler", "classifier")


def gradnorm_curves(frame: pd.DataFrame, intermediate: int | None = None) -> Figure:
    """Gradient norm (log scale) against training step: intermediate layer, top layer, pooler,
    classifier; one line per method, the mean over runs (seeds) with a min-max band.

    A method whose runs have no rows for a panel's layer (the pooler of adapter runs: frozen,
    so it has no gradient) gets no line there but a note in the panel, never a line at zero.

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.gradnorm.run` or :func:`~robustkit.analysis.gradnorm.summary`
        output (identity columns + ``step, layer, layer_index, layer_kind, value``; a frame without
        ``layer_kind`` gets it from :func:`robustkit.analysis.gradnorm.with_layer_kind`).
    intermediate : int, optional
        0-based index of the encoder layer of the first panel; default: the middle one,
        ``top // 2`` (layer 5 of BERT-base's 0..11).
    """
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title

    if frame.empty:
        raise figures.NothingToDraw("no gradient norms to plot")
    if "layer_kind" not in frame or "layer_index" not in frame:
        raise ValueError(
            "no layer_kind / layer_index columns: pass robustkit.analysis.gradnorm.run or summary "
            "output (or add them with robustkit.analysis.gradnorm.with_layer_kind)"
        )
    frame = frame[frame["value"] > 0]  # a log axis cannot show 0; norms are > 0 wherever logged
    methods = sorted(frame["method"].unique())
    fig, axes = canvas.subplots(1, len(PANELS), figsize=(3.2 * len(PANELS), 3.4), constrained_layout=True)
    for ax, panel in zip(axes, PANELS):
        rows, title = _panel_rows(frame, panel, intermediate)
        missing = [m for m in methods if not _draw_method(ax, rows[rows["method"] == m], m)]
        if missing:
            note = "\n".join(f"{method_label(m)}:" for m in missing) + "\nno gradient logged (layer not trained)"
            box = {"boxstyle": "round", "facecolor": "white", "edgecolor": "#bbbbbb", "alpha": 0.9}
            ax.text(
                0.5, 0.04, note, transform=ax.transAxes, ha="center", va="bottom", fontsize=7, color="#444444", bbox=box
            )
        ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("training step (optimiser updates)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("L2 gradient norm before clipping (log scale)")
    runs = frame.groupby("method")["run_id"].nunique()
    handles = [Line2D([], [], color=method_color(m), label=f"{method_label(m)} (n={runs[m]} runs)") for m in methods]
    # below the panels, never over data; the note says what the bands are
    style.legend_below(fig, None, handles, ncols=max(1, len(methods)), fontsize=8)
    style.set_title(fig, paper_title("Han et al. 2021, figure 3", frame))
    style.add_note(
        fig,
        "Lines: mean over the runs (seeds) of each method; bands: min-max over the runs. Norms of each "
        "layer group's gradient before clipping, every optimiser step.",
    )
    return fig


def _panel_rows(frame: pd.DataFrame, panel: str, intermediate: int | None) -> tuple[pd.DataFrame, str]:
    """The rows of one panel and its title."""
    if panel != "intermediate":
        rows = frame[frame["layer_kind"] == panel]
        layers = sorted(rows["layer"].unique()) if panel == "top" else []
        return rows, {"top": "top encoder layer", "pooler": "pooler", "classifier": "classifier"}[panel] + _names(
            layers
        )
    top = frame.groupby("run_id")["layer_index"].transform("max")
    wanted = top // 2 if intermediate is None else intermediate
    rows = frame[(frame["layer_index"] == wanted).fillna(False).astype(bool)]
    return rows, "intermediate encoder layer" + _names(sorted(rows["layer"].unique()))


def _names(layers: list[str]) -> str:
    return f" ({', '.join(layers)})" if layers else ""


def _draw_method(ax, rows: pd.DataFrame, method: str) -> bool:
    """Mean over runs and min-max band per step; False when the method has no rows here."""
    if rows.empty:
        return False
    stats = rows.groupby("step")["value"].agg(["mean", "min", "max"]).sort_index()
    color = method_color(method)
    ax.plot(stats.index, stats["mean"], color=color, linewidth=1)
    if rows["run_id"].nunique() > 1:
        ax.fill_between(stats.index, stats["min"], stats["max"], color=color, alpha=0.2, linewidth=0)
    return True
