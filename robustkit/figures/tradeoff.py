"""Houlsby et al. 2019 figures 3 and 4: task metric vs number of trained parameters.

- :func:`tradeoff_figure` (figure 4): per task, adapters of several sizes, fine-tuning the top
  k layers, LayerNorm-only tuning and full fine-tuning (reference); each point the best
  learning rate of its sweep (selected on validation), mean ± 1 s.e.m. over seeds.
- :func:`tradeoff_aggregate_figure` (figure 3): each point's score minus full fine-tuning's,
  20th / 50th / 80th percentiles across tasks (line: median, band: 20th-80th).

Both only draw: the selected points and their means come from
:func:`robustkit.analysis.tradeoff.tradeoff_points` (the figure's view) and
:func:`robustkit.analysis.tradeoff.aggregate`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import matplotlib.pyplot as plt
    import pandas as pd
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

from robustkit import figures
from robustkit.figures.method_style import method_color, method_label
from robustkit.figures.units import PERCENT, SCALED, scale, score_label
from robustkit.params import Param

# The figures of this module, as robustkit.figures reads them from this source (their analyses
# declare their data).
DECLARED = (
    figures.register_figure(
        figures.Figure(
            "tradeoff",
            "Houlsby et al. 2019 figure 4 (per task; figure 3's curves): metric vs trained parameters (log) for "
            "adapter "
            "sizes, top-k fine-tuning, LayerNorm-only and full fine-tuning; each point the best learning rate of its "
            "sweep, error bars s.e.m.",
            "tradeoff",
            ":tradeoff_figure",
            (
                figures.SHOWN_SPLIT,
                Param(
                    "paper_figure",
                    "Houlsby et al. 2019, figure 4",
                    "the figure named in the title",
                    default_note="a recipe that draws figure 3's per-task view too names both (issue #55)",
                ),
            ),
            view="robustkit.analysis.tradeoff:tradeoff_points",
            score_axis=True,
            order=170,
            module=__name__,
        )
    ),
    figures.register_figure(
        figures.Figure(
            "tradeoff-aggregate",
            "Houlsby et al. 2019 figure 3: score minus full fine-tuning vs trained parameters, 20th/50th/80th "
            "percentiles "
            "across tasks, adapters vs top-k",
            "tradeoff",
            ":tradeoff_aggregate_figure",
            (figures.SHOWN_SPLIT,),
            view="robustkit.analysis.tradeoff:aggregated",
            score_axis=True,
            order=180,
            module=__name__,
        )
    ),
)


_MARKERS = {"none": "o", "layer": "s", "3-layer": "^"}


def tradeoff_figure(
    shown: pd.DataFrame,
    stats: pd.DataFrame,
    n_configs: int = 1,
    n_left_out: int = 0,
    split: str = "validation",
    include_failed: bool = False,
    select_on: str = "validation",
    paper_figure: str = "Houlsby et al. 2019, figure 4",
) -> Figure:
    """Mean metric (error bars: ±1 s.e.m. over seeds) vs trained parameters (log x), per task.

    ``shown``, ``stats``, ``n_configs`` and ``n_left_out`` are the items of
    :func:`robustkit.analysis.tradeoff.tradeoff_points` (the figure's view of
    :func:`robustkit.analysis.tradeoff.table`), made with the same ``split``,
    ``include_failed`` and ``select_on``::

        tradeoff_figure(**tradeoff_points(table(store), split="test"), split="test")

    Parameters
    ----------
    shown : DataFrame
        The selected runs' rows of ``split`` (``task, model, series, method, point,
        trainable_params, base_params, metric, value, outcome``, ...): crosses, titles, axes.
    stats : DataFrame
        One row per point (``task, series, method, adapter_sharing, point``): ``value`` (mean
        of the kept runs), ``sem``, ``n``, ``n_runs``, ``n_collapsed``, ``n_diverged``,
        ``baseline``, ``trainable_params``.
    n_configs : int
        Most configurations (learning rates, epoch budgets) compared at a point.
    n_left_out : int
        Runs left out for another adapter init std.
    split : str
        Split shown: ``validation`` (Houlsby et al.'s figure 4) or ``test``.
    include_failed : bool
        The means hold collapsed / diverged runs (they are still marked).
    select_on : str
        Split on which the best learning rate of each point was chosen (for the note).
    paper_figure : str
        The paper's figure named in the title.

    Returns
    -------
    Figure
        One panel per task (one y scale when they share a metric). Series: one per method and
        adapter sharing mode; points of adapter series are labelled with the bottleneck size
        m, top-k points with k; full fine-tuning is a star and a dashed horizontal reference
        line; the majority-class baseline is dashed grey; collapsed runs are grey crosses,
        left out of the means, with ``collapsed k/n`` at their point. The legend (under the
        figure) gives the runs (seeds) per point. When a panel holds one model, a top axis
        gives the trained parameters as % of the model's parameters without adapters. Runs
        with a non-default ``adapter_init_std`` belong to the init-std figure
        (:func:`robustkit.figures.init_std.init_std_figure`) and are left out; a note says how
        many.
    """
    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title
    from robustkit.figures.marks import include_baseline

    tasks = sorted(shown["task"].unique())
    share = shown["metric"].nunique() == 1  # panels on one metric share one y scale
    fig, axes = canvas.subplots(
        1, len(tasks), figsize=(5.6 * len(tasks), 4.4), constrained_layout=True, squeeze=False, sharey=share
    )
    handles: dict[str, object] = {}
    for ax, task in zip(axes[0], tasks):
        rows = shown[shown["task"] == task]
        handles.update(_panel(ax, stats[stats["task"] == task], rows, split))
    axes[0][0].set_ylabel(f"{score_label(shown['metric'], [split])} at the {_checkpoint(shown)} checkpoint")
    for ax in axes[0]:
        include_baseline(ax, stats.loc[stats["task"].isin(tasks), "baseline"] * _factor(shown))
    style.set_title(fig, paper_title(paper_figure, shown))
    style.legend_below(fig, axes[0][0], _legend(handles, shown, stats), ncols=min(3, len(handles) + 2))
    style.add_note(fig, _note(n_configs, shown, split, select_on, include_failed, n_left_out))
    return fig


def _factor(rows: pd.DataFrame) -> float:
    metrics = rows["metric"].dropna().unique()
    return scale(str(metrics[0])) if len(metrics) else 1.0


def _panel(ax: plt.Axes, stats: pd.DataFrame, rows: pd.DataFrame, split: str) -> dict:
    """Draw one task; return the legend handles by series."""
    import numpy as np
    from matplotlib.lines import Line2D

    from robustkit.figures.marks import COLLAPSED_STYLE, draw_baseline
    from robustkit.store import collapse

    factor = _factor(rows)
    handles = {}
    for series, points in stats.groupby("series", sort=True):
        points = points.sort_values("trainable_params")
        method = points["method"].iloc[0]
        label = _label(series, method, points)
        if method == "full":
            handles[series] = _reference(ax, points, factor, label)
        else:
            marker = _MARKERS.get(str(points["adapter_sharing"].iloc[0]), "o")
            drawn = points[points["n"] > 0]
            ax.errorbar(
                drawn["trainable_params"],
                drawn["value"] * factor,
                yerr=drawn["sem"].fillna(0) * factor,
                marker=marker,
                markersize=4,
                capsize=2,
                linewidth=1.2,
                color=method_color(method),
                linestyle="-" if len(drawn) > 1 else "none",
                label=label,
            )
            handles[series] = Line2D([], [], color=method_color(method), marker=marker, markersize=4, label=label)
            _annotate_points(ax, drawn, method, factor)
        _collapsed_labels(ax, points, factor)
    failed = rows[(rows["outcome"] != collapse.OK) & np.isfinite(rows["value"])]
    if len(failed):
        ax.plot(failed["trainable_params"], failed["value"] * factor, **COLLAPSED_STYLE, zorder=4, gid="collapsed")
    baselines = stats["baseline"].dropna().unique()
    if len(baselines):
        draw_baseline(ax, float(np.mean(baselines)) * factor)
    ax.set_xscale("log")
    ax.set_xlabel("trained parameters (count, log scale)")
    ax.set_title(f"{_one(rows, 'task')} ({_one(rows, 'model')})", fontsize=9)
    ax.grid(True, which="major", linewidth=0.3, alpha=0.6)
    _percent_axis(ax, rows)
    return handles


def _reference(ax: plt.Axes, points: pd.DataFrame, factor: float, label: str) -> Line2D:
    """Full fine-tuning: a star with its error bar and a dashed line across the panel."""
    from matplotlib.lines import Line2D

    row = points.iloc[0]
    if row["n"] > 0:
        ax.errorbar(
            [row["trainable_params"]],
            [row["value"] * factor],
            yerr=[row["sem"] * factor],
            marker="*",
            markersize=9,
            capsize=2,
            color=method_color("full"),
            linestyle="none",
            label=label,
        )
        ax.axhline(row["value"] * factor, color=method_color("full"), linestyle="-.", linewidth=0.8)
    return Line2D(
        [], [], color=method_color("full"), marker="*", markersize=8, linestyle="-.", linewidth=0.8, label=label
    )


def _label(series: str, method: str, points: pd.DataFrame) -> str:
    name = method_label(method) + series[len(method) :]
    # n counts the runs in a point's mean; collapsed or diverged ones are left out and counted apart
    low, high = int(points["n"].min()), int(points["n"].max())
    runs = f"n={low}" if low == high else f"n={low}-{high}"
    failed = int((points["n_runs"] - points["n"]).sum())
    return f"{name} ({runs} run{'s' if high != 1 else ''} per point{f'; {failed} failed, left out' if failed else ''})"


def _annotate_points(ax: plt.Axes, points: pd.DataFrame, method: str, factor: float) -> None:
    """Label each point of a multi-point series with its adapter size or k."""
    import pandas as pd

    from robustkit.analysis.tradeoff import POINT_COLUMN, POINT_SYMBOL

    column = POINT_COLUMN.get(method)
    if column is None:
        return
    for _, row in points.iterrows():
        if pd.notna(row["point"]):
            ax.annotate(
                f"{POINT_SYMBOL[column]}={row['point']:g}",
                (row["trainable_params"], row["value"] * factor),
                textcoords="offset points",
                xytext=(3, 4),
                fontsize=6,
                color=method_color(method),
            )


def _collapsed_labels(ax: plt.Axes, points: pd.DataFrame, factor: float) -> None:
    """``collapsed k/n`` under each point that has failed runs (at the baseline if none is kept)."""
    import numpy as np

    from robustkit.store import collapse

    for _, row in points.iterrows():
        text = collapse.counts_label(row)
        if not text:
            continue
        y = row["value"] if row["n"] > 0 else row["baseline"]
        if not np.isfinite(y):
            continue
        ax.annotate(
            text,
            (row["trainable_params"], y * factor),
            textcoords="offset points",
            xytext=(0, -9),
            ha="center",
            fontsize=5.5,
            color="#555555",
            gid="collapsed-label",
        )


def _legend(handles: dict, shown: pd.DataFrame, stats: pd.DataFrame) -> list:
    from robustkit.figures.marks import baseline_handle, collapsed_handle
    from robustkit.store import collapse

    out = list(handles.values())
    if stats["baseline"].notna().any():
        out.append(baseline_handle())
    if (shown["outcome"] != collapse.OK).any():
        out.append(collapsed_handle())
    return out


def _note(configs: int, shown: pd.DataFrame, split: str, select_on: str, include_failed: bool, excluded: int) -> str:
    from robustkit.store import collapse

    parts = ["Error bars: ±1 s.e.m. over seeds (as in Houlsby et al. 2019)."]
    if configs > 1:
        parts.append(
            f"Each point: the best of up to {configs} learning rates / epoch budgets by the mean {select_on} "
            f"score of its runs; shown: {split} {_one(shown, 'metric')}."
        )
    else:
        parts.append(f"One learning rate per point (no sweep to select from); shown: {split} {_one(shown, 'metric')}.")
    failed = int((shown["outcome"] != collapse.OK).sum())
    if failed:
        parts.append(
            f"Collapsed / diverged runs (grey crosses) are {'kept in' if include_failed else 'left out of'} "
            f"the means: {failed} of {len(shown)} runs."
        )
    if excluded:
        parts.append(f"{excluded} runs with another adapter init std are left out (init-std figure).")
    return " ".join(parts)


def _percent_axis(ax: plt.Axes, data: pd.DataFrame) -> None:
    """Top axis: trained parameters in % of the base model's, when the panel has one base."""
    bases = data["base_params"].dropna().unique() if "base_params" in data else []
    if len(bases) != 1 or not bases[0]:
        return
    base = float(bases[0])
    top = ax.secondary_xaxis("top", functions=(lambda x: x / base * 100.0, lambda p: p * base / 100.0))
    top.set_xlabel("trained parameters (% of the model without adapters)", fontsize=7)


def _one(data: pd.DataFrame, column: str) -> str:
    return ", ".join(sorted(map(str, data[column].dropna().unique()))) if column in data else ""


# ---------------------------------------------------------------------------------------------
# figure 3: the aggregate across tasks


def tradeoff_aggregate_figure(
    aggregate: pd.DataFrame, source: pd.DataFrame | None = None, split: str = "validation", metric: str | None = None
) -> Figure:
    """Houlsby et al. 2019 figure 3: score minus full fine-tuning vs trained parameters.

    Parameters
    ----------
    aggregate : DataFrame
        :func:`robustkit.analysis.tradeoff.aggregate` output (percentiles 20, 50 and 80).
    source : DataFrame, optional
        The table the aggregate came from: names the model and tasks in the title.
    split : str
        The split shown (for the labels).
    metric : str, optional
        The metric (labels and units); default from ``source``, else ``accuracy``.

    Returns
    -------
    Figure
        One panel: per curve (adapters, top-k) the median across tasks (line) and the 20th-80th
        percentile band; a solid line at 0 is full fine-tuning, the dashed one the
        majority-class baseline (median over tasks, normalised the same way). With one task
        the band collapses onto the line and the figure says so.
    """
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title
    from robustkit.figures.marks import BASELINE_LABEL, BASELINE_STYLE, draw_baseline, include_baseline

    if aggregate.empty:
        raise figures.NothingToDraw("nothing to plot: the aggregate is empty")
    metric = metric or (_one(source, "metric") if source is not None else "") or "accuracy"
    factor = scale(metric)
    fig, ax = canvas.subplots(figsize=(6.4, 4.4), constrained_layout=True)
    handles, empty = [], []
    for series, rows in aggregate.groupby("series", sort=True):
        method = rows["method"].iloc[0]
        if not np.isfinite(rows["value"]).any():  # every run of every point failed: nothing to draw
            empty.append(f"{method_label(method)}{series[len(method) :]}")
            continue
        wide = rows.pivot_table(index="trainable_params", columns="percentile", values="value").sort_index()
        qs = sorted(wide.columns)
        low, mid, high = wide[qs[0]], wide[qs[len(qs) // 2]], wide[qs[-1]]
        colour = method_color(method)
        marker = _MARKERS.get(str(rows["adapter_sharing"].iloc[0]), "o")
        ax.plot(wide.index, mid * factor, color=colour, marker=marker, markersize=4, linewidth=1.4)
        ax.fill_between(wide.index, low * factor, high * factor, color=colour, alpha=0.2, linewidth=0)
        _aggregate_labels(ax, rows, mid, factor, method)
        tasks = rows.groupby("point", dropna=False)["n_tasks"].first()
        n = f"{int(tasks.min())}" if tasks.min() == tasks.max() else f"{int(tasks.min())}-{int(tasks.max())}"
        handles.append(
            Line2D(
                [],
                [],
                color=colour,
                marker=marker,
                markersize=4,
                label=f"{method_label(method)}{series[len(method) :]} ({n} tasks per point)",
            )
        )
    percentiles = sorted(aggregate["percentile"].unique())
    handles.append(
        Patch(
            facecolor="#999999",
            alpha=0.3,
            label=f"band: {percentiles[0]:g}th-{percentiles[-1]:g}th percentile across tasks; line: "
            f"{percentiles[len(percentiles) // 2]:g}th",
        )
    )
    ax.axhline(0.0, color=method_color("full"), linewidth=1.0)
    handles.append(Line2D([], [], color=method_color("full"), label="full fine-tuning (0 by construction)"))
    baseline = aggregate["baseline"].dropna()
    if len(baseline):
        draw_baseline(ax, float(baseline.median()) * factor)
        handles.append(Line2D([], [], **BASELINE_STYLE, label=f"{BASELINE_LABEL} (median over tasks)"))
        include_baseline(ax, [float(baseline.median()) * factor])
    ax.set_xscale("log")
    ax.set_xlabel("trained parameters (count, log scale)")
    points = "percentage points" if metric in PERCENT else ("x 100" if metric in SCALED else metric)
    ax.set_ylabel(f"{split} {metric} − full fine-tuning ({points})")
    ax.grid(True, which="major", linewidth=0.3, alpha=0.6)
    # tasks behind the figure: those of the source table (a task whose points all failed counts)
    n_tasks = (
        int(source["task"].nunique()) if source is not None and "task" in source else int(aggregate["n_tasks"].max())
    )
    ax.set_title(f"aggregate over {n_tasks} task{'s' if n_tasks != 1 else ''}", fontsize=9)
    style.set_title(fig, paper_title("Houlsby et al. 2019, figure 3", source))
    style.legend_below(fig, ax, handles, ncols=2)
    notes = [
        f"Per task and point, the best learning rate (by mean validation score) is taken and its mean {split} "
        f"score minus full fine-tuning's on that task; then percentiles across tasks."
    ]
    if n_tasks == 1:
        notes.insert(0, "1 task: percentiles are that task's value.")
    if empty:
        notes.append(f"Not drawn, no run kept at any point: {', '.join(empty)}.")
    failed = int(
        aggregate.drop_duplicates(["series", "point"])["n_collapsed"].sum()
        + aggregate.drop_duplicates(["series", "point"])["n_diverged"].sum()
    )
    if failed:
        total = int(aggregate.drop_duplicates(["series", "point"])["n_runs"].sum())
        notes.append(
            f"Collapsed / diverged runs are left out of each task's mean: {failed} of {total} runs "
            f"(collapsed k/n at the points)."
        )
    style.add_note(fig, " ".join(notes))
    return fig


def _aggregate_labels(ax: plt.Axes, rows: pd.DataFrame, mid: pd.Series, factor: float, method: str) -> None:
    """Point names (m=, k=) and ``collapsed k/n`` (summed over tasks) at each point."""
    import numpy as np
    import pandas as pd

    from robustkit.analysis.tradeoff import POINT_COLUMN, POINT_SYMBOL
    from robustkit.store import collapse

    column = POINT_COLUMN.get(method)
    for _, row in rows.drop_duplicates("point").iterrows():
        x = row["trainable_params"]
        if x not in mid.index or not np.isfinite(mid[x]):
            continue
        if column and pd.notna(row["point"]):
            ax.annotate(
                f"{POINT_SYMBOL[column]}={row['point']:g}",
                (x, mid[x] * factor),
                textcoords="offset points",
                xytext=(3, 4),
                fontsize=6,
                color=method_color(method),
            )
        text = collapse.counts_label(row)
        if text:
            ax.annotate(
                text,
                (x, mid[x] * factor),
                textcoords="offset points",
                xytext=(0, -9),
                ha="center",
                fontsize=5.5,
                color="#555555",
                gid="collapsed-label",
            )


def _checkpoint(rows: pd.DataFrame) -> str:
    """``best`` (selected on validation) or ``last``, as the rows say."""
    return "/".join(sorted(map(str, rows["checkpoint"].dropna().unique()))) if "checkpoint" in rows else "best"
