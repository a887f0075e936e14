"""Learning curves and overfitting.

- :func:`dev_curves`: He et al. 2021 figures 5 and 9, dev loss and dev metric against training
  steps, one line per method.
- :func:`curves_by_tsp`: Han et al. 2021 figures 1 and 13, dev metric against fine-tuning steps,
  one line per number of task-specific pretraining steps, one panel per method.
- :func:`mean_best_table`: He et al. 2021 table 6 as bars, mean and best dev result over the
  evaluation steps, mean over seeds with +-1 std error bars.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from robustkit.plots.style import method_color, method_label, plt

STEP_LABEL = "training step (optimiser updates)"


def dev_curves(frame: pd.DataFrame, tsp_step: int | None = None) -> Figure:
    """Dev loss (left) and dev main metric (right) against step; a row per task.

    Each line is one method: the mean over its runs (seeds) at each evaluation step, with a
    +-1 std band; a line going up on the left while the right one falls is overfitting.

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.curves.run` output (``main_metric, step, split, metric, value``).
    tsp_step : int, optional
        Which runs to show by their TSP steps; default the smallest in the frame (0 = no TSP,
        as in He et al.), so runs from different starting points are never averaged together.
    """
    data = _validation(frame)
    tsp_step = int(data["tsp_step"].min()) if tsp_step is None else tsp_step
    data = data[data["tsp_step"] == tsp_step]
    if data.empty:
        raise ValueError(f"no runs with tsp_step {tsp_step}")
    tasks = sorted(data["task"].unique())
    fig, axes = plt.subplots(len(tasks), 2, figsize=(9, 3.4 * len(tasks)), squeeze=False, constrained_layout=True)
    for row, task in zip(axes, tasks):
        rows = data[data["task"] == task]
        for ax, metric in zip(row, ["loss", _main_metric(rows)]):
            for method, group in rows[rows["metric"] == metric].groupby("method", sort=True):
                _mean_line(ax, group, method_color(method), f"{method_label(method)} (n={group['run_id'].nunique()} runs)")
            ax.set_xlabel(STEP_LABEL)
            ax.set_ylabel(_metric_label(metric))
            ax.set_title(f"{task}: dev {metric}" + (f" (TSP {tsp_step} steps)" if tsp_step else ""), fontsize=9)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, loc="best")
    return fig


def curves_by_tsp(frame: pd.DataFrame, metric: str | None = None) -> Figure:
    """Dev metric against fine-tuning step, one line per TSP step; a panel per task x method.

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.curves.run` output.
    metric : str, optional
        Metric to show; default each task's main metric.
    """
    data = _validation(frame)
    tasks, methods = sorted(data["task"].unique()), sorted(data["method"].unique())
    steps = sorted(data["tsp_step"].unique())
    colours = dict(zip(steps, plt.get_cmap("viridis")(np.linspace(0, 0.9, len(steps)))))
    fig, axes = plt.subplots(
        len(tasks), len(methods), figsize=(4.6 * len(methods), 3.4 * len(tasks)), squeeze=False, constrained_layout=True
    )
    for row, task in zip(axes, tasks):
        for ax, method in zip(row, methods):
            rows = data[(data["task"] == task) & (data["method"] == method)]
            shown = metric or _main_metric(data[data["task"] == task])
            for tsp, group in rows[rows["metric"] == shown].groupby("tsp_step", sort=True):
                _mean_line(ax, group, colours[tsp], f"TSP {tsp} steps (n={group['run_id'].nunique()} runs)")
            ax.set_xlabel("fine-tuning " + STEP_LABEL)
            ax.set_ylabel(_metric_label(shown))
            ax.set_title(f"{task}: {method_label(method)}", fontsize=9)
            ax.grid(alpha=0.3)
            if ax.lines:
                ax.legend(fontsize=7, loc="best", title="task-specific pretraining", title_fontsize=7)
    return fig


def mean_best_table(summary: pd.DataFrame) -> Figure:
    """He et al. 2021 table 6 as grouped bars: per task, each method's mean (solid) and best
    (hatched) dev result over evaluation steps, x 100; mean over seeds, error bar +-1 std.

    Parameters
    ----------
    summary : DataFrame
        :func:`robustkit.analysis.curves.mean_best` output (``task, method, metric,
        statistic, value, std, n_runs`` and the other configuration columns).
    """
    if summary.empty:
        raise ValueError("nothing to plot: the mean/best summary is empty")
    keys = _group_keys(summary)
    # one x position per configuration group, numbered in sorted key order
    summary = summary.assign(position=summary.groupby(keys, dropna=False, sort=True).ngroup())
    firsts = summary.drop_duplicates("position").sort_values("position")
    methods = sorted(summary["method"].unique())
    bars = [(m, s) for m in methods for s in ("mean", "best")]
    width = 0.8 / len(bars)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * len(firsts) * len(methods)) + 4.5, 3.8), constrained_layout=True)
    for i, (method, statistic) in enumerate(bars):
        rows = summary[(summary["method"] == method) & (summary["statistic"] == statistic)]
        rows = rows.set_index("position").reindex(firsts["position"])
        x = firsts["position"].to_numpy() + (i - (len(bars) - 1) / 2) * width
        _bars(ax, x, rows, width, method, statistic)
    ax.set_xticks(firsts["position"].to_numpy(), [_group_label(row, keys) for _, row in firsts.iterrows()], fontsize=8)
    ax.set_ylabel("dev main metric x 100 (mean over runs, +-1 std)")
    ax.set_xlabel("task (main metric)")
    ax.set_title("Mean and best dev result over all evaluation steps (He et al. 2021, table 6)", fontsize=9)
    fig.legend(handles=_legend(summary, methods), fontsize=7, loc="outside right upper")
    ax.grid(alpha=0.3, axis="y")
    return fig


# ---------------------------------------------------------------------------------------------
# helpers


def _validation(frame: pd.DataFrame) -> pd.DataFrame:
    data = frame[frame["split"] == "validation"]
    if data.empty:
        raise ValueError("no validation rows to plot")
    return data


def _main_metric(rows: pd.DataFrame) -> str:
    if "main_metric" in rows and rows["main_metric"].notna().any():
        return str(rows["main_metric"].dropna().iloc[0])
    return min(set(rows["metric"]) - {"loss"})


def _metric_label(metric: str) -> str:
    if metric == "loss":
        return "dev loss (mean cross-entropy, nats)"
    return f"dev {metric} (fraction)" if metric in ("accuracy", "f1") else f"dev {metric}"


def _mean_line(ax, group: pd.DataFrame, colour, label: str) -> None:
    """Mean over runs per step with a +-1 std band (runs of one configuration share steps)."""
    stats = group.groupby("step")["value"].agg(["mean", "std"]).sort_index()
    ax.plot(stats.index, stats["mean"], marker="o", markersize=2.5, linewidth=1.2, color=colour, label=label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if group["run_id"].nunique() > 1:
        std = stats["std"].fillna(0)
        ax.fill_between(stats.index, stats["mean"] - std, stats["mean"] + std, color=colour, alpha=0.2, linewidth=0)


def _group_keys(summary: pd.DataFrame) -> list[str]:
    """Task, then every other configuration column that varies (never averaged over)."""
    others = ["tsp_step", "model", "lr", "train_size", "adapter_size"]
    # lr and adapter_size differ between methods by design; they split groups only within one
    varying = [c for c in others if c in summary and summary.groupby("method")[c].nunique(dropna=False).max() > 1]
    return ["task", *varying]


def _group_label(row: pd.Series, keys: list[str]) -> str:
    extra = [f"{k.replace('_', ' ')} {row[k]}" for k in keys if k != "task"]
    return "\n".join([f"{row['task']} ({row['metric']})", *extra])


def _bars(ax, x: np.ndarray, rows: pd.DataFrame, width: float, method: str, statistic: str) -> None:
    values, errors = 100 * rows["value"].to_numpy(float), 100 * rows["std"].fillna(0).to_numpy(float)
    colour = method_color(method)
    style = {"alpha": 0.9} if statistic == "mean" else {"alpha": 0.45, "hatch": "///"}
    ax.bar(x, values, width, yerr=errors, color=colour, edgecolor=colour, capsize=2, error_kw={"linewidth": 0.8}, **style)
    for xi, value in zip(x, values):
        if np.isfinite(value):  # inside the bar, at its foot: clear of the error bar
            ax.annotate(f"{value:.1f}", (xi, 0), xytext=(0, 3), textcoords="offset points", ha="center", va="bottom", fontsize=6, rotation=90)


def _legend(summary: pd.DataFrame, methods: list[str]) -> list[Patch]:
    handles = []
    for method in methods:
        n = summary.loc[summary["method"] == method, "n_runs"]
        runs = f"{int(n.min())}" if n.min() == n.max() else f"{int(n.min())}-{int(n.max())}"
        colour = method_color(method)
        handles.append(Patch(facecolor=colour, alpha=0.9, label=f"{method_label(method)}: mean over eval steps (n={runs} runs)"))
        handles.append(Patch(facecolor=colour, alpha=0.45, hatch="///", label=f"{method_label(method)}: best over eval steps (n={runs} runs)"))
    return handles
