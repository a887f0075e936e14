"""Stability box plots: the spread of final scores over runs, each run drawn as a dot.

- :func:`box_seeds`: Han et al. 2021 figure 2, dev/test score over random seeds per method,
  one panel per task.
- :func:`box_tsp`: Han et al. 2021 figure 4, over task-specific pretraining (TSP) steps: a box
  per TSP step and method (over seeds), or one box per method pooling the TSP steps as in the
  paper (``pooled=True``).
- :func:`box_tsp_epochs`: Han et al. 2021 figures 9 and 10, score at each fine-tuning epoch
  end, one box per TSP step, one panel per method.
- :func:`box_lr`: He et al. 2021 figure 4, over seeds at each learning rate.
- :func:`train_size`: He et al. 2021 figure 3, score against the number of training examples
  (boxes, or mean +- std).

Every figure shows the number of runs behind each box (``n=``), the majority-class baseline
(dashed: a run on or below it has failed) and, under the axes, the tests of
:func:`robustkit.analysis.stability.caption` (Levene / Brown-Forsythe for the spread,
Mann-Whitney U for the location).
"""

from __future__ import annotations

import textwrap
import warnings

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import MatplotlibDeprecationWarning
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

from robustkit.analysis import stability
from robustkit.plots.style import method_color, method_label, plt

# Scores shown x 100 (as in the papers' tables); the rest (loss) as they are.
PERCENT = {"accuracy", "f1"}
SCALED = {"mcc", "pearson", "spearman"}
BOX_WIDTH = 0.8  # seaborn's default: dodged boxes share it equally


def box_seeds(frame: pd.DataFrame, caption_text: str | None = None) -> Figure:
    """Han et al. 2021 figure 2: one box per method over its runs (seeds); a panel per task.

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.stability.outcomes` output (``task, method, value,
        baseline, split, metric``); every run of a method in a task goes in one box.
    caption_text : str, optional
        Text under the axes; default the tests of method vs method within each task.
    """
    return _box_figure(frame, x="method", hue="method", within=["task"], xlabel="tuning method",
                       title="Score over random seeds (Han et al. 2021, figure 2)", caption_text=caption_text)


def box_tsp(frame: pd.DataFrame, pooled: bool = False, caption_text: str | None = None) -> Figure:
    """Han et al. 2021 figure 4: scores over task-specific pretraining steps.

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.stability.outcomes` output with several ``tsp_step`` values.
    pooled : bool
        False: x = TSP steps, one box per method over the seeds at that step. True: one box per
        method over every TSP step (the paper's figure 4: each run differs by its TSP step).
    caption_text : str, optional
        Default: tests of method vs method within each task (and TSP step unless pooled).
    """
    title = "Score over task-specific pretraining steps (Han et al. 2021, figure 4)"
    if pooled:
        steps = sorted(frame["tsp_step"].unique())
        return _box_figure(frame, x="method", hue="method", within=["task"], title=title, caption_text=caption_text,
                           xlabel=f"tuning method (runs from TSP steps {', '.join(map(str, steps))})")
    return _box_figure(frame, x="tsp_step", hue="method", within=["task", "tsp_step"], title=title,
                       xlabel="task-specific pretraining steps (masked-LM updates)", caption_text=caption_text)


def box_tsp_epochs(frame: pd.DataFrame, caption_text: str | None = None) -> Figure:
    """Han et al. 2021 figures 9 and 10: score at each fine-tuning epoch end, hue = TSP step.

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.stability.epoch_outcomes` output (``epoch`` column).
    caption_text : str, optional
        Default: tests of method vs method within each task x TSP step x epoch.
    """
    return _box_figure(frame, x="epoch", hue="tsp_step", within=["task", "tsp_step", "epoch"], columns="method",
                       xlabel="fine-tuning epochs", caption_text=caption_text,
                       title="Score over TSP steps x fine-tuning epochs (Han et al. 2021, figures 9-10)")


def box_lr(frame: pd.DataFrame, caption_text: str | None = None) -> Figure:
    """He et al. 2021 figure 4: one box per learning rate and method, over the seeds.

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.stability.outcomes` output with several ``lr`` values.
    caption_text : str, optional
        Default: tests of method vs method within each task x learning rate.
    """
    return _box_figure(frame, x="lr", hue="method", within=["task", "lr"], xlabel="learning rate (AdamW peak)",
                       title="Score over random seeds per learning rate (He et al. 2021, figure 4)", caption_text=caption_text)


def train_size(frame: pd.DataFrame, kind: str = "box", caption_text: str | None = None) -> Figure:
    """He et al. 2021 figure 3: score against the number of training examples, per method.

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.stability.outcomes` output with several ``train_size``
        values (missing = the whole training set, shown as ``all``).
    kind : {"box", "mean"}
        Boxes over seeds, or the paper's mean with a +-1 std error bar (ddof 1).
    caption_text : str, optional
        Default: tests of method vs method within each task x training size.
    """
    if kind not in ("box", "mean"):
        raise ValueError(f"kind must be 'box' or 'mean', got {kind!r}")
    return _box_figure(frame, x="train_size", hue="method", within=["task", "train_size"], mean_std=kind == "mean",
                       xlabel="training examples", caption_text=caption_text,
                       title="Score vs training set size (He et al. 2021, figure 3)")


# ---------------------------------------------------------------------------------------------
# the shared figure


def _box_figure(
    frame: pd.DataFrame, x: str, hue: str, within: list[str], xlabel: str, title: str,
    caption_text: str | None, columns: str | None = None, mean_std: bool = False,
) -> Figure:
    """Rows = tasks, columns = values of ``columns`` (or one); boxes at x, coloured by hue."""
    if frame.empty:
        raise ValueError("nothing to plot: the frame is empty")
    data = _prepared(frame, x)
    tasks = sorted(data["task"].unique())
    cols = sorted(data[columns].unique()) if columns else [None]
    width = min(7.5, max(4.6, 0.9 * data["_x"].nunique() * data[hue].nunique() + 2.2))
    # one y scale per row: methods side by side are compared by eye
    fig, axes = plt.subplots(len(tasks), len(cols), squeeze=False, constrained_layout=True, sharey="row",
                             figsize=(width * len(cols), 3.6 * len(tasks)))
    hues = sorted(data[hue].unique())
    palette = _palette(hue, hues)
    for row, task in zip(axes, tasks):
        for ax, col in zip(row, cols):
            panel = data[(data["task"] == task) & ((data[columns] == col) if columns else True)]
            _panel(ax, panel, x, hue, hues, palette, mean_std)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(value_label(panel))
            ax.set_title(task + (f": {method_label(col)}" if columns == "method" else ""), fontsize=9)
        _fit_limits(row[0], data.loc[data["task"] == task, "shown_baseline"])
    fig.suptitle(title, fontsize=10)
    if caption_text is None:
        caption_text = stability.caption(stability.summarize(frame, [*within, "method"]), stability.compare(frame, "method", within=within))
    _add_caption(fig, caption_text)
    return fig


def _prepared(frame: pd.DataFrame, x: str) -> pd.DataFrame:
    """``frame`` + ``_x`` (x as ordered text) + ``shown`` / ``shown_baseline`` (plotted units)."""
    values = sorted(frame[x].unique(), key=_sort_key)
    labels = {v: _x_label(v) for v in values}
    scale = frame["metric"].map(lambda m: 100.0 if m in PERCENT | SCALED else 1.0)
    return frame.assign(
        _x=pd.Categorical(frame[x].map(labels), categories=list(dict.fromkeys(labels.values()))),
        shown=frame["value"] * scale, shown_baseline=frame["baseline"] * scale,
    )


def _panel(ax, panel: pd.DataFrame, x: str, hue: str, hues: list, palette: dict, mean_std: bool) -> None:
    order = [c for c in panel["_x"].cat.categories if c in set(panel["_x"])]
    dodge = hue != x  # x = hue = method: one centred box per method
    levels = [h for h in hues if h in set(panel[hue])]
    common = {"data": panel, "x": "_x", "y": "shown", "hue": hue, "order": order, "hue_order": levels,
              "palette": palette, "ax": ax, "legend": False}
    if mean_std:
        _mean_std(ax, panel, order, hue, levels, palette)
    else:
        with warnings.catch_warnings():  # seaborn 0.13 passes matplotlib 3.11's deprecated vert=
            warnings.simplefilter("ignore", MatplotlibDeprecationWarning)
            sns.boxplot(**common, dodge=dodge, width=BOX_WIDTH, showfliers=False, boxprops={"alpha": 0.45})
    sns.stripplot(**common, dodge=dodge, jitter=0.12, size=3.5, linewidth=0.5, edgecolor="black")
    _annotate_n(ax, panel, order, hue, levels, dodge)
    handles = [Patch(facecolor=palette[h], alpha=0.7, label=_hue_label(hue, h)) for h in levels]
    handles += _baseline(ax, panel, order)
    ax.legend(handles=handles, fontsize=7, loc="best", title="mean +- std" if mean_std else None, title_fontsize=7)
    ax.grid(alpha=0.3, axis="y")


def _mean_std(ax, panel: pd.DataFrame, order: list[str], hue: str, levels: list, palette: dict) -> None:
    """Mean +- std (ddof 1) per x and hue, at the dodged box positions, joined per hue."""
    for j, level in enumerate(levels):
        rows = panel[panel[hue] == level]
        stats = rows.groupby("_x", observed=True)["shown"].agg(["mean", "std"]).reindex(order)
        positions = [_position(i, j, len(levels), True) for i in range(len(order))]
        ax.errorbar(positions, stats["mean"], yerr=stats["std"].fillna(0), color=palette[level], marker="o",
                    markersize=5, capsize=3, linewidth=1.2, zorder=3)


def _fit_limits(ax, baselines: pd.Series) -> None:
    """Y limits of a row: the baseline in view (even far below the runs), a top margin for n=."""
    low, high = ax.get_ylim()
    if baselines.notna().any():
        span = max(high, baselines.max()) - min(low, baselines.min())
        low, high = min(low, baselines.min() - 0.04 * span), max(high, baselines.max() + 0.04 * span)
    ax.set_ylim(low, high + 0.12 * (high - low))


def _annotate_n(ax, panel: pd.DataFrame, order: list[str], hue: str, levels: list, dodge: bool) -> None:
    """``n=`` over each box, in the top margin of the axes (kept free by :func:`_fit_limits`)."""
    where = blended_transform_factory(ax.transData, ax.transAxes)
    counts = panel.groupby(["_x", hue], observed=True).size()
    for i, x in enumerate(order):
        for j, level in enumerate(levels):
            if (x, level) in counts.index:
                ax.text(_position(i, j, len(levels), dodge), 0.985, f"n={counts[(x, level)]}", transform=where,
                        ha="center", va="top", fontsize=6)


def _baseline(ax, panel: pd.DataFrame, order: list[str]) -> list[Line2D]:
    """Dashed majority-class baseline: one line if it is the same for every x, else one per x."""
    base = panel.dropna(subset=["shown_baseline"]).groupby("_x", observed=True)["shown_baseline"].mean()
    if base.empty:
        return []
    style = {"color": "#444444", "linestyle": "--", "linewidth": 1.0, "zorder": 1}
    if np.allclose(base, base.iloc[0]):
        ax.axhline(base.iloc[0], **style)
    else:
        for i, x in enumerate(order):
            if x in base.index:
                ax.hlines(base[x], i - BOX_WIDTH / 2, i + BOX_WIDTH / 2, **style)
    return [Line2D([], [], **style, label="majority-class baseline")]


def _add_caption(fig: Figure, text: str) -> None:
    """``text`` wrapped under the axes; the layout keeps the room it needs."""
    lines = textwrap.wrap(text, width=int(fig.get_figwidth() * 17))
    height = (len(lines) * 7 * 1.35 / 72 + 0.08) / fig.get_figheight()  # 7 pt text, 1.35 line spacing
    fig.get_layout_engine().set(rect=(0, height, 1, 1 - height))
    fig.text(0.01, 0.01, "\n".join(lines), fontsize=7, ha="left", va="bottom")


# ---------------------------------------------------------------------------------------------
# helpers


def _position(i: int, j: int, k: int, dodge: bool) -> float:
    """x of box j of k at category i, where seaborn draws it."""
    return i if not dodge else i - BOX_WIDTH / 2 + (j + 0.5) * BOX_WIDTH / k


def _palette(hue: str, levels: list) -> dict:
    if hue == "method":
        return {m: method_color(m) for m in levels}
    return dict(zip(levels, map(tuple, plt.get_cmap("viridis")(np.linspace(0, 0.9, len(levels))))))


def _hue_label(hue: str, level) -> str:
    if hue == "method":
        return method_label(level)
    return f"TSP {level} steps" if hue == "tsp_step" else f"{hue} {level}"


def _numeric(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def _missing(value) -> bool:
    return value is None or (_numeric(value) and np.isnan(value))


def _sort_key(value) -> tuple:
    """Numbers by value, then text, then missing (train_size: the whole set, last)."""
    if _missing(value):
        return (2, 0.0, "")
    return (0, float(value), "") if _numeric(value) else (1, 0.0, str(value))


def _x_label(value) -> str:
    if _missing(value):
        return "all"  # train_size missing: the whole training set
    if _numeric(value):
        return f"{int(value)}" if float(value).is_integer() else f"{value:g}"
    return str(value)


def value_label(panel: pd.DataFrame) -> str:
    """Axis label of the scores: split, metric and unit (e.g. \"test accuracy (%)\")."""
    metric, split = "/".join(sorted(panel["metric"].unique())), "/".join(sorted(panel["split"].unique()))
    if set(panel["metric"]) <= PERCENT:
        return f"{split} {metric} (%)"
    return f"{split} {metric} (x 100)" if set(panel["metric"]) <= SCALED else f"{split} {metric}"
