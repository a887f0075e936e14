"""He et al. 2021 figures 2 and 7: similarity of each layer's representations to the base model,
after adapter tuning and after full fine-tuning."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.figure import Figure

from robustkit import figures
from robustkit.figures.method_style import method_color, method_label
from robustkit.params import Param

# The figure, as robustkit.figures reads it from this source (its analysis declares its data and view).
DECLARED = figures.register_figure(
    figures.Figure(
        "rsa",
        "He et al. 2021 figure 2: similarity of each layer's representations to the base model's",
        "rsa",
        ":rsa_by_layer",
        (
            Param(
                "measure",
                "rsa",
                "rsa (He et al. 2021) or linear CKA (Kornblith et al. 2019)",
                choices=("rsa", "cka"),
            ),
            Param(
                "paper_figure",
                "He et al. 2021, figures 2 and 7",
                "the figure named in the title",
                default_note="the he2021 recipes name figure 2 or 7, the one each draws (issue #55)",
            ),
        ),
        order=10,
        module=__name__,
    )
)


MEASURE_LABELS = {"rsa": "RSA", "cka": "linear CKA"}
# Besides every run setting that varies within a method (robustkit.analysis.pooling), what
# splits a method's line in two.
_CONFIG = ["checkpoint"]


def rsa_by_layer(
    frame: pd.DataFrame, measure: str = "rsa", paper_figure: str = "He et al. 2021, figures 2 and 7"
) -> Figure:
    """Similarity to the base model against layer, one line per method, one panel per task.

    Each point is the mean over the runs (seeds) of a configuration, with ±1 standard deviation
    as error bars; the legend (under the figure) gives the number of runs. Runs whose
    ``outcome`` is collapsed or diverged are left out of the lines (their representations
    are no result) and counted in the legend. Panels share one y scale.

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.similarity.run` output: columns ``task, method, layer,
        measure, value``, and optionally ``tokens``, ``outcome`` and the identity columns.
    measure : str
        ``rsa`` or ``cka``.
    paper_figure : str
        The paper's figure named in the title.

    Raises
    ------
    ValueError
        No rows for ``measure``.
    """
    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title
    from robustkit.store import collapse

    data = frame[frame["measure"] == measure]
    if data.empty:
        have = ", ".join(map(str, frame["measure"].unique()))
        raise figures.NothingToDraw(f"no rows with measure {measure!r} (have: {have})")
    tasks = sorted(data["task"].unique())
    # one measure on every panel: one y scale, so tasks compare by eye
    fig, axes = canvas.subplots(
        1, len(tasks), figsize=(5.0 * len(tasks), 3.6), constrained_layout=True, squeeze=False, sharey=True
    )
    for ax, task in zip(axes[0], tasks):
        _panel(ax, data[data["task"] == task], task, measure)
    axes[0][0].set_ylabel(f"{MEASURE_LABELS.get(measure, measure)} with the base model")
    handles = {}
    for ax in axes[0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    style.set_title(fig, paper_title(paper_figure, data))
    style.legend_below(fig, axes[0][0], list(handles.values()), ncols=2)
    failed = (
        f"Failed runs ({collapse.FAILED_WORDS}) are left out of the lines (counted in the legend). "
        if "outcome" in data and (data["outcome"] != collapse.OK).any()
        else ""
    )
    style.add_note(
        fig,
        "Points: mean over the runs (seeds) of a configuration; error bars: ±1 std over them (ddof 1). "
        f"{failed}Dotted line: the base model itself (similarity 1).",
    )
    return fig


def _panel(ax, data: pd.DataFrame, task: str, measure: str) -> None:
    from robustkit.analysis.pooling import mixed_settings
    from robustkit.figures.setting_groups import method_configs

    split_by = [
        *mixed_settings(data, ["method"]),
        *(c for c in _CONFIG if c in data.columns and data.groupby("method")[c].nunique(dropna=False).max() > 1),
    ]
    for method, config, line_style, group in method_configs(data, split_by):
        _line(ax, group, method, config, line_style)
    layers = sorted(data["layer"].unique())
    ax.axhline(1.0, color="#999999", linewidth=0.8, linestyle=":")  # the base model itself
    ax.set_xticks(layers)
    ax.set_xticklabels(["emb" if layer == 0 else str(layer) for layer in layers])
    ax.set_xlabel("layer (emb = embedding output)")
    ax.set_title(_title(data, task, measure), fontsize=9)
    ax.ticklabel_format(axis="y", useOffset=False)  # values near 1: show them, not 1 + offset
    ax.grid(alpha=0.3)


def _line(ax, group: pd.DataFrame, method: str, config: dict, linestyle: str) -> None:
    from robustkit.figures.labels import settings_text
    from robustkit.figures.marks import without_failed

    group, left_out = without_failed(group)
    stats = group.groupby("layer")["value"].agg(["mean", "std", "count"]).sort_index()
    runs = group["run_id"].nunique() if "run_id" in group.columns else int(stats["count"].max() if len(stats) else 0)
    extra = settings_text(config)
    label = (
        f"{method_label(method)}{f' [{extra}]' if extra else ''} (n={runs} run{'s' if runs != 1 else ''}"
        f"{f'; {left_out}' if left_out else ''})"
    )
    if stats.empty:  # every run failed: in the legend only
        ax.plot([], [], color=method_color(method), linestyle=linestyle, marker="o", markersize=3, label=label)
        return
    ax.errorbar(
        stats.index,
        stats["mean"],
        yerr=stats["std"].fillna(0.0),
        color=method_color(method),
        linestyle=linestyle,
        marker="o",
        markersize=3,
        capsize=3,
        linewidth=1.2,
        label=label,
    )


def _title(data: pd.DataFrame, task: str, measure: str) -> str:
    title = f"{task}: {MEASURE_LABELS.get(measure, measure)} of tuned vs base representations"
    details = []
    if "model" in data.columns:
        details.append("/".join(sorted(map(str, data["model"].unique()))))
    if "tokens" in data.columns:
        details.append(f"{'/'.join(str(int(t)) for t in sorted(data['tokens'].unique()))} dev tokens")
    return f"{title}\n({', '.join(details)})" if details else title
