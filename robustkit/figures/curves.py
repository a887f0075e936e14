"""Learning curves and overfitting.

- :func:`dev_curves`: He et al. 2021 figures 5 and 9, dev loss and dev metric against training
  steps, one line per method.
- :func:`curves_by_tsp`: Han et al. 2021 figures 1 and 13, dev metric against fine-tuning steps,
  one line per number of task-specific pretraining steps, one panel per method.
- :func:`mean_best_table`: He et al. 2021 table 6 as a table: mean and best dev result over
  the evaluation steps, mean ± std over seeds.

Lines are means over the runs of one configuration with a ±1 std band, computed by the figures'
views (:func:`robustkit.analysis.curves.dev_curves`, :func:`~robustkit.analysis.curves.curves_by_tsp`);
runs that ended collapsed or diverged (``outcome``, :func:`robustkit.analysis.curves.with_outcomes`)
are drawn as thin grey lines and left out of the means unless ``include_failed``. Metric axes are in %
(accuracy, F1) with the majority-class baseline dashed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.figure import Figure
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import numpy as np

from robustkit import figures
from robustkit.figures.method_style import method_color, method_label
from robustkit.figures.units import scale, unit

# The figures of this module, as robustkit.figures reads them from this source (their analyses
# declare their data).
DECLARED = (
    figures.register_figure(
        figures.Figure(
            "curves",
            "He et al. 2021 figures 5 and 9: dev loss and metric vs step",
            "curves",
            ":dev_curves",
            view="robustkit.analysis.curves:dev_curves",
            score_axis=True,
            order=80,
            module=__name__,
        )
    ),
    figures.register_figure(
        figures.Figure(
            "curves-by-tsp",
            "Han et al. 2021 figures 1 and 13: dev metric vs step, one line per TSP step",
            "curves",
            ":curves_by_tsp",
            view="robustkit.analysis.curves:curves_by_tsp",
            score_axis=True,
            order=90,
            module=__name__,
        )
    ),
    figures.register_figure(
        figures.Figure(
            "mean-best",
            "He et al. 2021 table 6: mean and best dev metric over all evaluation steps, as a table",
            "curves",
            ":mean_best_table",
            view="robustkit.analysis.curves:mean_best",
            score_axis=True,
            order=100,
            module=__name__,
        )
    ),
)


STEP_LABEL = "training step (optimiser updates)"
BAND_NOTE = "Lines: mean over the runs (seeds) of a configuration; bands: ±1 std over them (ddof 1)."


def dev_curves(frame: pd.DataFrame, lines: pd.DataFrame, tsp_step: int = 0, include_failed: bool = False) -> Figure:
    """Dev loss (left) and dev main metric (right) against step; a row per task and setting.

    Each line is one method: the mean over its runs (seeds) at each evaluation step, with a
    ±1 std band; a line going up on the left while the right one falls is overfitting.
    ``frame``, ``lines``, ``tsp_step`` and ``include_failed`` are the keyword arguments
    :func:`robustkit.analysis.curves.dev_curves` returns (the figure's view).

    Parameters
    ----------
    frame : DataFrame
        The validation rows of one TSP step of :func:`robustkit.analysis.curves.run` output
        (``main_metric, step, split, metric, value``) with ``outcome`` and ``baseline``: runs
        that ended collapsed or diverged are drawn as thin grey lines.
    lines : DataFrame
        :func:`robustkit.analysis.curves.mean_curves` per task, differing setting, method and
        metric (``step, mean, std, n``; units of ``value``).
    tsp_step : int
        The runs' TSP steps, named in the title unless 0.
    include_failed : bool
        Whether the means kept collapsed / diverged runs (the note says).
    """
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    from robustkit.analysis.pooling import mixed_settings
    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title
    from robustkit.figures.setting_groups import rows_matching, setting_combos

    data = _prepared(frame)
    facets = list(mixed_settings(data, ["task", "method"]))
    rows_keys = setting_combos(data, ["task", *facets])
    line_keys = ["task", *facets, "metric", "method"]
    fig, axes = canvas.subplots(
        len(rows_keys), 2, figsize=(9, 3.2 * len(rows_keys)), squeeze=False, constrained_layout=True
    )
    for row, key in zip(axes, rows_keys):
        rows = data[rows_matching(data, ["task", *facets], key)]
        for ax, metric in zip(row, ["loss", _main_metric(rows)]):
            shown = rows[rows["metric"] == metric]
            for method, group in shown.groupby("method", sort=True):
                _mean_line(
                    ax, group, lines[rows_matching(lines, line_keys, (*key, metric, method))], method_color(method)
                )
            if metric != "loss":
                _baseline(ax, shown)
            ax.set_xlabel(STEP_LABEL)
            ax.set_ylabel(_metric_label(metric))
            ax.set_title(_title(key, facets, f"dev {metric}"), fontsize=9)
            ax.grid(alpha=0.3)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    _share_columns(axes, data)
    title = paper_title("He et al. 2021, figures 5 and 9", data)
    style.set_title(fig, title + (f" (TSP {tsp_step} steps)" if tsp_step else ""))
    methods = sorted(data["method"].unique())
    handles = [
        Line2D([], [], color=method_color(m), label=_runs_label(method_label(m), data[data["method"] == m]))
        for m in methods
    ]
    style.legend_below(fig, axes[0][0], handles + _extra_handles(data), ncols=2)
    style.add_note(fig, _note(data, include_failed))
    return fig


def curves_by_tsp(
    frame: pd.DataFrame, lines: pd.DataFrame, metric: str | None = None, include_failed: bool = False
) -> Figure:
    """Dev metric against fine-tuning step, one line per TSP step; a panel per task x method.

    ``frame``, ``lines``, ``metric`` and ``include_failed`` are the keyword arguments
    :func:`robustkit.analysis.curves.curves_by_tsp` returns (the figure's view).

    Parameters
    ----------
    frame : DataFrame
        The validation rows of :func:`robustkit.analysis.curves.run` output, with ``outcome``
        and ``baseline``.
    lines : DataFrame
        :func:`robustkit.analysis.curves.mean_curves` per task, differing setting, method, TSP
        step and metric.
    metric : str, optional
        Metric to show; default each task's main metric.
    include_failed : bool
        Whether the means kept collapsed / diverged runs (the note says).
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    from robustkit.analysis.pooling import mixed_settings
    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title
    from robustkit.figures.marks import include_baseline
    from robustkit.figures.setting_groups import rows_matching, setting_combos

    data = _prepared(frame)
    facets = list(mixed_settings(data, ["task", "method", "tsp_step"]))
    rows_keys = setting_combos(data, ["task", *facets])
    line_keys = ["task", *facets, "method", "metric", "tsp_step"]
    methods = sorted(data["method"].unique())
    steps = sorted(data["tsp_step"].unique())
    colours = dict(zip(steps, plt.get_cmap("viridis")(np.linspace(0, 0.9, len(steps)))))
    shown_metrics = {metric or _main_metric(data[data["task"] == t]) for t in data["task"].unique()}
    fig, axes = canvas.subplots(
        len(rows_keys),
        len(methods),
        figsize=(4.6 * len(methods), 3.2 * len(rows_keys)),
        squeeze=False,
        constrained_layout=True,
        sharey=True if len(shown_metrics) == 1 else "row",
    )
    for row, key in zip(axes, rows_keys):
        rows = data[rows_matching(data, ["task", *facets], key)]
        shown_metric = metric or _main_metric(rows)
        for ax, method in zip(row, methods):
            shown = rows[(rows["method"] == method) & (rows["metric"] == shown_metric)]
            for tsp, group in shown.groupby("tsp_step", sort=True):
                _mean_line(
                    ax, group, lines[rows_matching(lines, line_keys, (*key, method, shown_metric, tsp))], colours[tsp]
                )
            _baseline(ax, shown)
            ax.set_xlabel("fine-tuning " + STEP_LABEL)
            ax.set_title(_title(key, facets, method_label(method)), fontsize=9)
            ax.grid(alpha=0.3)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        row[0].set_ylabel(_metric_label(shown_metric))
    for ax in axes.flat:
        include_baseline(ax, data.loc[data["metric"].isin(shown_metrics), "shown_baseline"])
    style.set_title(fig, paper_title("Han et al. 2021, figures 1 and 13", data))
    handles = [
        Line2D([], [], color=colours[t], label=_runs_label(f"TSP {t} steps", data[data["tsp_step"] == t], "method"))
        for t in steps
    ]
    style.legend_below(fig, axes[0][0], handles + _extra_handles(data), title="task-specific pretraining", ncols=3)
    style.add_note(fig, _note(data, include_failed))
    return fig


def mean_best_table(summary: pd.DataFrame) -> Figure:
    """He et al. 2021 table 6 as a table: per task (and setting) and method, the mean and the
    best dev result over evaluation steps, each as mean ± std over the runs (seeds).

    Parameters
    ----------
    summary : DataFrame
        :func:`robustkit.analysis.curves.mean_best` output (``task, method, metric,
        statistic, value, std``, ``n`` / ``n_runs`` / ``n_collapsed`` / ``n_diverged`` /
        ``baseline`` where present, and the other configuration columns).

    Returns
    -------
    Figure
        A table: one row per task x setting x method; columns mean over steps, best over
        steps, n (runs kept), collapsed k/n, majority baseline (x 100 for fractions).
    """
    import pandas as pd

    from robustkit.figures.labels import cell_text, paper_title, setting_label
    from robustkit.figures.tables import render_table
    from robustkit.store import collapse

    if summary.empty:
        raise figures.NothingToDraw("nothing to tabulate: the mean/best summary is empty")
    keys = _group_keys(summary)
    metric = "/".join(sorted(summary["metric"].unique()))
    factor = scale(str(summary["metric"].iloc[0])) if summary["metric"].nunique() == 1 else 100.0
    shown_unit = unit(str(summary["metric"].iloc[0])) if summary["metric"].nunique() == 1 else ""
    header = [
        *(setting_label(k) for k in keys),
        "method",
        f"mean over eval steps{shown_unit}",
        f"best over eval steps{shown_unit}",
        "n",
        "collapsed",
    ]
    has_baseline = "baseline" in summary and summary["baseline"].notna().any()
    header += ["majority baseline"] if has_baseline else []
    rows = []
    for key, group in summary.groupby([*keys, "method"], dropna=False, sort=True):
        stats = group.set_index("statistic")
        first = stats.iloc[0]
        n = int(first.get("n", first.get("n_runs", 0)))
        n_runs = int(first.get("n_runs", n))
        cells = [cell_text(v, k) for k, v in zip(keys, key[:-1])] + [method_label(key[-1])]
        cells += [_mean_std(stats.loc[s], factor) if s in stats.index else "n/a" for s in ("mean", "best")]
        cells += [
            str(n),
            collapse.counts_label(first, n_runs) or f"0/{n_runs}",
        ]
        if has_baseline:
            cells.append(f"{factor * first['baseline']:.1f}" if pd.notna(first["baseline"]) else "n/a")
        rows.append(cells)
    notes = [
        f"Dev {metric}{shown_unit}: per run, the mean and the maximum over all its evaluation steps; then "
        f"mean ± std (ddof 1) over the runs (seeds). n: runs kept; collapsed runs (robustkit.store.collapse, "
        f"judged at the end of training) are left out and counted."
    ]
    title = paper_title("He et al. 2021, table 6", summary)
    return render_table(header, rows, title, notes, numeric_from=len(keys) + 1)


# ---------------------------------------------------------------------------------------------
# helpers


def _prepared(data: pd.DataFrame) -> pd.DataFrame:
    """``data`` + ``shown`` / ``shown_baseline`` (plotted units: % for accuracy and F1, x 100
    for correlations, losses as they are)."""
    factor = data["metric"].map(scale)
    # the baseline is the main metric's: it applies to the rows of that metric only
    main = data["metric"] == data["main_metric"] if "main_metric" in data else data["metric"] != "loss"
    return data.assign(shown=data["value"] * factor, shown_baseline=(data["baseline"] * factor).where(main))


def _main_metric(rows: pd.DataFrame) -> str:
    if "main_metric" in rows and rows["main_metric"].notna().any():
        return str(rows["main_metric"].dropna().iloc[0])
    return min(set(rows["metric"]) - {"loss"})


def _metric_label(metric: str) -> str:
    if metric == "loss":
        return "dev loss (mean cross-entropy, nats)"
    return f"dev {metric}{unit(metric)}"


def _mean_line(ax, group: pd.DataFrame, stats: pd.DataFrame, colour) -> None:
    """The line's mean per step (``stats``, in the units of ``value``) with a ±1 std band where
    it averages several runs; the failed runs of ``group`` as thin grey lines."""
    from robustkit.figures.marks import COLLAPSED_STYLE
    from robustkit.store import collapse

    if len(stats):
        factor = scale(str(group["metric"].iloc[0]))
        mean = stats["mean"] * factor
        ax.plot(stats["step"], mean, marker="o", markersize=2.5, linewidth=1.2, color=colour)
        if stats["n"].max() > 1:
            std = stats["std"].fillna(0) * factor
            ax.fill_between(stats["step"], mean - std, mean + std, color=colour, alpha=0.2, linewidth=0)
    for _, run in group[group["outcome"] != collapse.OK].groupby("run_id"):
        run = run.sort_values("step")
        ax.plot(
            run["step"],
            run["shown"],
            color=COLLAPSED_STYLE["color"],
            linewidth=0.8,
            linestyle=":",
            marker="x",
            markersize=3,
            gid="collapsed",
        )


def _baseline(ax, rows: pd.DataFrame) -> None:
    import numpy as np

    from robustkit.figures.marks import draw_baseline

    values = rows["shown_baseline"].dropna().unique()
    if len(values):
        draw_baseline(ax, float(np.mean(values)))


def _share_columns(axes: np.ndarray, data: pd.DataFrame) -> None:
    """One y scale per column (loss; the metric when every row shows the same one), with every
    baseline in view."""
    from robustkit.figures.marks import include_baseline

    for column in range(axes.shape[1]):
        ylabels = {ax.get_ylabel() for ax in axes[:, column]}
        if len(ylabels) == 1 and axes.shape[0] > 1:
            for ax in axes[1:, column]:
                ax.sharey(axes[0, column])
        for ax in axes[:, column]:
            if column == 1:
                include_baseline(ax, data["shown_baseline"])


def _extra_handles(data: pd.DataFrame) -> list:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from robustkit.figures.marks import COLLAPSED_STYLE, baseline_handle
    from robustkit.store import collapse

    handles = [Patch(facecolor="#999999", alpha=0.3, label="band: ±1 std over runs")]
    if data["shown_baseline"].notna().any():
        handles.append(baseline_handle())
    if (data["outcome"] != collapse.OK).any():
        handles.append(
            Line2D(
                [],
                [],
                color=COLLAPSED_STYLE["color"],
                linestyle=":",
                marker="x",
                markersize=3,
                label=f"failed run ({collapse.FAILED_WORDS})",
            )
        )
    return handles


def _runs_label(name: str, rows: pd.DataFrame, per: str | None = None) -> str:
    """``name (n=3 runs)``, or per line when the lines of ``per`` (e.g. each method's panel)
    share the label; failed runs counted."""
    import pandas as pd

    from robustkit.store import collapse

    runs = rows.drop_duplicates("run_id")
    counts = runs.groupby(per).size() if per else pd.Series([len(runs)])
    n = f"{counts.min()}" if counts.min() == counts.max() else f"{counts.min()}-{counts.max()}"
    failed = collapse.outcomes_label(runs["outcome"])
    return f"{name} (n={n} runs{' per line' if per else ''}{'; ' + failed if failed else ''})"


def _note(data: pd.DataFrame, include_failed: bool) -> str:
    from robustkit.store import collapse

    note = BAND_NOTE
    if (data["outcome"] != collapse.OK).any():
        note += (
            " Runs that ended collapsed / diverged on the dev set (grey, dotted) are "
            f"{'kept in' if include_failed else 'left out of'} the means."
        )
    return note


def _title(key: tuple, facets: list[str], what: str) -> str:
    from robustkit.figures.labels import cell_text, setting_label

    task, *settings = key
    extra = "".join(f", {setting_label(f)} {cell_text(v, f)}" for f, v in zip(facets, settings))
    return f"{task}{extra}: {what}"


def _group_keys(summary: pd.DataFrame) -> list[str]:
    """Task, then every other run setting that varies within a method (never averaged over)."""
    from robustkit.analysis.pooling import mixed_settings

    return ["task", *[c for c in mixed_settings(summary, ["method"]) if c != "task"]]


def _mean_std(row: pd.Series, factor: float) -> str:
    import pandas as pd

    if pd.isna(row["value"]):
        return "n/a (no run kept)"
    std = row.get("std")
    return (
        f"{factor * row['value']:.1f} ± {factor * std:.1f}" if pd.notna(std) else f"{factor * row['value']:.1f} (1 run)"
    )
