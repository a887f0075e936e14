"""He et al. 2021 figure 6: loss along the line from the weights before to after tuning."""

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
        "landscape",
        "He et al. 2021 figure 6: loss along the line from theta_0 to theta_1",
        "landscape",
        ":landscape_curves",
        view="robustkit.analysis.landscape:landscape_lines",
        order=70,
        module=__name__,
    )
)


SPLIT_LABELS = {"validation": "dev", "train": "train", "test": "test"}


def landscape_curves(
    frame: pd.DataFrame,
    lines: pd.DataFrame,
    runs: pd.DataFrame,
    metric: str = "loss",
    split: str = "validation",
    log: bool = False,
) -> Figure:
    """f(alpha) = L(theta_0 + alpha (theta_1 - theta_0)) per task, one line per method.

    Lines are the mean over runs (seeds) with a +-1 std band; runs whose ``outcome`` is
    collapsed or diverged are left out of them and counted in the legend; dotted and dashed verticals mark
    alpha = 0 (theta_0, before tuning) and alpha = 1 (theta_1, after tuning). When runs of
    several TSP steps are given, each (method, TSP step) gets its own line style.

    ``frame``, ``lines``, ``runs``, ``metric`` and ``split`` are the keyword arguments
    :func:`robustkit.analysis.landscape.landscape_lines` returns (the figure's view).

    Parameters
    ----------
    frame : DataFrame
        The rows of ``metric`` and ``split`` of :func:`robustkit.analysis.landscape.run`
        output (identity columns + ``checkpoint, alpha, split, metric, value, outcome``).
    lines : DataFrame
        ``task, method, tsp_step, alpha, mean, std``: each line's points (units of ``value``).
    runs : DataFrame
        Per ``task, method, tsp_step``: ``n_ok`` (runs averaged), ``n_collapsed``, ``n_diverged``.
    metric : str
        ``loss`` (default) or a task metric.
    split : str
        ``validation`` (the dev set, default), ``train`` or ``test``.
    log : bool
        Log-scale y axis (losses far from theta_1 can be orders of magnitude larger).
    """
    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title
    from robustkit.figures.setting_groups import LINE_STYLES
    from robustkit.store import collapse

    tasks = sorted(frame["task"].unique())
    fig, axes = canvas.subplots(
        1,
        len(tasks),
        figsize=(5 * len(tasks), 3.8),
        squeeze=False,
        constrained_layout=True,
        sharey=metric != "loss" or len({_y_label(t, metric, split) for t in tasks}) == 1,
    )
    # several TSP steps: one line style per step (their order), the colour stays the method's
    styles = {t: LINE_STYLES[i % len(LINE_STYLES)] for i, t in enumerate(sorted(frame["tsp_step"].unique()))}
    several_tsp = len(styles) > 1
    for ax, task in zip(axes[0], tasks):
        for method, tsp in (
            frame.loc[frame["task"] == task, ["method", "tsp_step"]]
            .drop_duplicates()
            .sort_values(["method", "tsp_step"])
            .itertuples(index=False, name=None)
        ):
            key = (lines["task"] == task) & (lines["method"] == method) & (lines["tsp_step"] == tsp)
            count = runs[(runs["task"] == task) & (runs["method"] == method) & (runs["tsp_step"] == tsp)].iloc[0]
            _line(ax, lines[key], count, metric, method, tsp, styles[tsp], several_tsp)
        ax.axvline(
            0, color="black", linestyle=":", linewidth=1, label=r"$\alpha=0$: $\theta_0$, before tuning (step-0)"
        )
        checkpoint = ", ".join(sorted(frame["checkpoint"].unique())) if "checkpoint" in frame else "tuned"
        ax.axvline(
            1, color="grey", linestyle="--", linewidth=1, label=rf"$\alpha=1$: $\theta_1$, after tuning ({checkpoint})"
        )
        ax.set_xlabel(r"interpolation coefficient $\alpha$ (unitless)")
        ax.set_ylabel(_y_label(task, metric, split))
        ax.set_title(f"{task}: {SPLIT_LABELS.get(split, split)} {metric} along the tuning direction", fontsize=9)
        if log:
            ax.set_yscale("log")
        ax.grid(alpha=0.3)
    handles = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    style.set_title(fig, paper_title("He et al. 2021, figure 6", frame))
    style.legend_below(fig, axes[0][0], list(handles.values()), ncols=2)
    failed = (
        f" Failed runs ({collapse.FAILED_WORDS}) are left out of the lines (counted in the legend)."
        if "outcome" in frame and (frame["outcome"] != "ok").any()
        else ""
    )
    style.add_note(
        fig, f"Lines: mean over the runs (seeds) of a configuration; bands: ±1 std over them (ddof 1).{failed}"
    )
    return fig


def _line(
    ax, stats: pd.DataFrame, count: pd.Series, metric: str, method: str, tsp: int, linestyle: str, several_tsp: bool
) -> None:
    factor = scale(metric)
    alpha, mean, std = stats["alpha"], stats["mean"] * factor, stats["std"] * factor
    n = int(count["n_ok"])
    left_out = ", ".join(
        f"{int(count[f'n_{key}'])} {text} left out"
        for key, text in (("not_learned", "not-learned"), ("collapsed", "collapsed"), ("diverged", "diverged"))
        if count.get(f"n_{key}", 0)
    )
    label = (
        f"{method_label(method)}{f', TSP {tsp} steps' if several_tsp else ''} (n={n} run{'s' if n != 1 else ''}"
        f"{f'; {left_out}' if left_out else ''})"
    )
    color = method_color(method)
    ax.plot(alpha, mean, marker="o", markersize=3, color=color, linestyle=linestyle, label=label)
    if n > 1:
        std = std.fillna(0)
        ax.fill_between(alpha, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)


def _y_label(task: str, metric: str, split: str) -> str:
    where = SPLIT_LABELS.get(split, split)
    if metric != "loss":
        return f"{where} {metric}{unit(metric)}"
    return f"{where} loss ({'mean squared error' if task == 'stsb' else 'mean cross-entropy, nats'})"
