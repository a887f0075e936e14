"""Stability box plots: the spread of final scores over runs, each run drawn as a dot.

- :func:`box_seeds`: Han et al. 2021 figure 2, dev/test score over random seeds per method,
  one panel per task.
- :func:`box_tsp`: Han et al. 2021 figure 4, over task-specific pretraining (TSP) steps: a box
  per TSP step and method (over seeds), or one box per method pooling the TSP steps as in the
  paper (``pooled=True``).
- :func:`box_tsp_epochs`: Han et al. 2021 figures 9 and 10, score at each fine-tuning epoch
  end, one box per TSP step, one panel per method; or (``pool_epochs=True``, the paper's) one
  box per TSP step and method over every epoch end of every run.
- :func:`box_lr`: He et al. 2021 figure 4, over seeds at each learning rate.
- :func:`train_size`: He et al. 2021 figure 3, score against the number of training examples
  (boxes, or mean +- std).

Every figure shows the number of runs behind each box (``n=``), collapsed and diverged runs
(:mod:`robustkit.train.collapse`) as grey crosses left out of the boxes, means and tests (unless
``include_failed``) with ``collapsed k/n`` over their box, the majority-class baseline (dashed)
and, under the figure, the caption of :func:`robustkit.analysis.stability.caption` (Levene /
Brown-Forsythe for the spread, Mann-Whitney U for the location). Runs that differ in any run
setting besides the seed and the plotted axes are never pooled into one box: they get a panel
each.

These functions only draw. Their statistics (the summary per box, the panels, the caption with
its tests) come from the view of the same name in :mod:`robustkit.analysis.boxes`, whose dict
is their keyword arguments::

    from robustkit.analysis import boxes
    fig = box_seeds(**boxes.box_seeds(frame))
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import MatplotlibDeprecationWarning
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import blended_transform_factory

from robustkit import figures
from robustkit.figures import canvas, style
from robustkit.figures.style import (
    PERCENT,
    SCALED,
    is_missing,
    method_color,
    method_label,
    plt,
    rows_matching,
    setting_combos,
    setting_label,
    sort_key,
)
from robustkit.params import Param
from robustkit.train import collapse

# The figures of this module, as robustkit.figures reads them from this source (their analyses
# declare their data).
DECLARED = (
    figures.Figure(
        "box-seeds",
        "Han et al. 2021 figure 2: box plot of each method's score over random seeds, one panel per task",
        "scores",
        ":box_seeds",
        (figures.ASO,),
        view="robustkit.analysis.boxes:box_seeds",
        score_axis=True,
        order=110,
        module=__name__,
    ),
    figures.Figure(
        "box-tsp",
        "Han et al. 2021 figure 4: box plots of the score per TSP step and method (pooled: one box per method over "
        "TSP steps)",
        "scores",
        ":box_tsp",
        (
            Param(
                "pooled",
                False,
                "one box per method over all TSP steps (each run differs by its TSP step, as in the paper) instead of "
                "a box per TSP step",
            ),
            figures.ASO,
        ),
        view="robustkit.analysis.boxes:box_tsp",
        score_axis=True,
        order=120,
        module=__name__,
    ),
    figures.Figure(
        "box-tsp-epochs",
        "Han et al. 2021 figures 9-10: box plots of the dev score at each fine-tuning epoch end, per TSP step, one "
        "panel per method (pool_epochs: one box per TSP step and method over every epoch end, the paper's)",
        "epoch-scores",
        ":box_tsp_epochs",
        (
            Param(
                "pool_epochs",
                False,
                "one box per TSP step and method over every fine-tuning epoch end of every run (Han et al. 2021 "
                "figures 9-10: 'development scores from 100 runs ... epochs ranging from 1 to 100') instead of a box "
                "per epoch",
            ),
        ),
        view="robustkit.analysis.boxes:box_tsp_epochs",
        score_axis=True,
        order=130,
        module=__name__,
    ),
    figures.Figure(
        "box-lr",
        "He et al. 2021 figure 4: box plots of the score over seeds per learning rate and method",
        "scores",
        ":box_lr",
        (figures.ASO,),
        view="robustkit.analysis.boxes:box_lr",
        score_axis=True,
        order=140,
        module=__name__,
    ),
    figures.Figure(
        "train-size",
        "He et al. 2021 figure 3: score vs number of training examples, per method (boxes or mean +- std)",
        "scores",
        ":train_size",
        (
            Param(
                "kind",
                "box",
                "box: boxes over seeds; mean: mean +- std (ddof 1) as in the paper",
                choices=("box", "mean"),
            ),
            figures.ASO,
        ),
        view="robustkit.analysis.boxes:train_size",
        score_axis=True,
        order=150,
        module=__name__,
    ),
)


__all__ = [
    "PERCENT",
    "SCALED",
    "box_lr",
    "box_seeds",
    "box_tsp",
    "box_tsp_epochs",
    "method_boxes",
    "train_size",
    "value_label",
]

BOX_WIDTH = 0.8  # seaborn's default: dodged boxes share it equally
BOX_NOTE = "Boxes: quartiles and median of the runs kept; whiskers: 1.5 x IQR; dots: runs."


def box_seeds(
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    panels: Sequence[str] = (),
    caption_text: str = "",
    include_failed: bool = False,
) -> Figure:
    """Han et al. 2021 figure 2: one box per method over its runs (seeds); a panel per task.

    The arguments but ``include_failed`` are :func:`robustkit.analysis.boxes.box_seeds`'s.

    Parameters
    ----------
    frame : DataFrame
        The view's ``frame``: :func:`robustkit.analysis.scores.outcomes` output (``task, method,
        value, baseline, split, metric, outcome``); every run of a method in a task and setting
        goes in one box.
    summary : DataFrame
        The view's ``summary`` (one row per box: ``n_runs``, ``n_collapsed``, ``n_diverged``,
        ``n_failed``).
    panels : sequence of str
        The view's ``panels``: columns that give a panel each besides the task.
    caption_text : str
        Text under the figure (the view's: the tests of method vs method within each panel).
    include_failed : bool
        The boxes hold collapsed / diverged runs too (they are still marked); as the view's.
    """
    return _box_figure(
        frame,
        summary,
        panels,
        caption_text,
        x="method",
        hue="method",
        xlabel="tuning method",
        figure="Han et al. 2021, figure 2",
        include_failed=include_failed,
    )


def box_tsp(
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    panels: Sequence[str] = (),
    caption_text: str = "",
    pooled: bool = False,
    include_failed: bool = False,
) -> Figure:
    """Han et al. 2021 figure 4: scores over task-specific pretraining steps.

    The arguments but ``pooled`` and ``include_failed`` are :func:`robustkit.analysis.boxes.box_tsp`'s.

    Parameters
    ----------
    frame : DataFrame
        The view's ``frame``: :func:`robustkit.analysis.scores.outcomes` output with several
        ``tsp_step`` values, with ``outcome``.
    summary : DataFrame
        The view's ``summary`` (one row per box: ``n_runs``, ``n_collapsed``, ``n_diverged``,
        ``n_failed``).
    panels : sequence of str
        The view's ``panels``: columns that give a panel each besides the task.
    caption_text : str
        Text under the figure (the view's: the tests of method vs method within each panel, and
        TSP step unless pooled).
    pooled : bool
        False: x = TSP steps, one box per method over the seeds at that step. True: one box per
        method over every TSP step (the paper's figure 4: each run differs by its TSP step); as
        the view's.
    include_failed : bool
        The boxes hold collapsed / diverged runs too; as the view's.
    """
    figure = "Han et al. 2021, figure 4"
    if pooled:
        steps = ", ".join(map(str, sorted(frame["tsp_step"].unique())))
        return _box_figure(
            frame,
            summary,
            panels,
            caption_text,
            x="method",
            hue="method",
            figure=figure,
            xlabel=f"tuning method (pooled over TSP steps {steps})",
            include_failed=include_failed,
        )
    return _box_figure(
        frame,
        summary,
        panels,
        caption_text,
        x="tsp_step",
        hue="method",
        figure=figure,
        xlabel="task-specific pretraining steps (masked-LM updates)",
        include_failed=include_failed,
    )


def box_tsp_epochs(
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    panels: Sequence[str] = (),
    caption_text: str = "",
    pool_epochs: bool = False,
    include_failed: bool = False,
) -> Figure:
    """Han et al. 2021 figures 9 and 10: the dev score at fine-tuning epoch ends per TSP step.

    The arguments but ``pool_epochs`` and ``include_failed`` are
    :func:`robustkit.analysis.boxes.box_tsp_epochs`'s.

    Parameters
    ----------
    frame : DataFrame
        The view's ``frame``: :func:`robustkit.analysis.scores.epoch_outcomes` output
        (``epoch`` column; one row per run x epoch end), with ``outcome``.
    summary : DataFrame
        The view's ``summary`` (one row per box: ``n_runs``, ``n_collapsed``, ``n_diverged``,
        ``n_failed``).
    panels : sequence of str
        The view's ``panels``: columns that give a panel each besides the task.
    caption_text : str
        Text under the figure (the view's: the tests of method vs method within each cell).
    pool_epochs : bool
        False: x = epoch, hue = TSP step, a panel per method (a box per epoch over the seeds).
        True, the paper's ("distributions of the development scores from 100 runs ...
        fine-tuning epochs ranging from 1 to 100"): x = TSP step, hue = method, one box per
        (TSP step, method) over every epoch end of every run. As the view's.
    include_failed : bool
        The boxes hold collapsed / diverged evaluations too; as the view's.
    """
    figure = "Han et al. 2021, figures 9-10"
    if pool_epochs:
        epochs = sorted(frame["epoch"].unique())
        span = f"{epochs[0]}-{epochs[-1]}" if len(epochs) > 1 else f"{epochs[0]}"
        return _box_figure(
            frame,
            summary,
            panels,
            caption_text,
            x="tsp_step",
            hue="method",
            figure=figure,
            xlabel=f"task-specific pretraining steps (each box: fine-tuning epoch ends {span} of every run)",
            include_failed=include_failed,
            unit="evaluations",
        )
    return _box_figure(
        frame,
        summary,
        panels,
        caption_text,
        x="epoch",
        hue="tsp_step",
        xlabel="fine-tuning epochs",
        figure=figure,
        include_failed=include_failed,
    )


def box_lr(
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    panels: Sequence[str] = (),
    caption_text: str = "",
    include_failed: bool = False,
) -> Figure:
    """He et al. 2021 figure 4: one box per learning rate and method, over the seeds.

    Runs that differ in another setting (He's 1k and 5k training examples) get a panel each.
    The arguments but ``include_failed`` are :func:`robustkit.analysis.boxes.box_lr`'s.

    Parameters
    ----------
    frame : DataFrame
        The view's ``frame``: :func:`robustkit.analysis.scores.outcomes` output with several
        ``lr`` values, with ``outcome``.
    summary : DataFrame
        The view's ``summary`` (one row per box: ``n_runs``, ``n_collapsed``, ``n_diverged``,
        ``n_failed``).
    panels : sequence of str
        The view's ``panels``: columns that give a panel each besides the task.
    caption_text : str
        Text under the figure (the view's: the tests of method vs method within each panel x learning rate).
    include_failed : bool
        The boxes hold collapsed / diverged runs too; as the view's.
    """
    return _box_figure(
        frame,
        summary,
        panels,
        caption_text,
        x="lr",
        hue="method",
        xlabel="learning rate (AdamW peak)",
        figure="He et al. 2021, figure 4",
        include_failed=include_failed,
    )


def train_size(
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    panels: Sequence[str] = (),
    caption_text: str = "",
    kind: str = "box",
    include_failed: bool = False,
) -> Figure:
    """He et al. 2021 figure 3: score against the number of training examples, per method.

    The arguments but ``kind`` and ``include_failed`` are :func:`robustkit.analysis.boxes.train_size`'s.

    Parameters
    ----------
    frame : DataFrame
        The view's ``frame``: :func:`robustkit.analysis.scores.outcomes` output with several
        ``train_size`` values (missing = the whole training set, shown as ``all``), with
        ``outcome``.
    summary : DataFrame
        The view's ``summary`` (one row per box: ``n_runs``, ``n_collapsed``, ``n_diverged``,
        ``n_failed``; ``mean`` and ``std`` (ddof 1) for ``kind="mean"``).
    panels : sequence of str
        The view's ``panels``: columns that give a panel each besides the task.
    caption_text : str
        Text under the figure (the view's: the tests of method vs method within each panel x training size).
    kind : {"box", "mean"}
        Boxes over seeds, or the paper's mean with a +-1 std error bar (ddof 1, the summary's).
    include_failed : bool
        The boxes and means hold collapsed / diverged runs too; as the view's.
    """
    if kind not in ("box", "mean"):
        raise ValueError(f"kind must be 'box' or 'mean', got {kind!r}")
    return _box_figure(
        frame,
        summary,
        panels,
        caption_text,
        x="train_size",
        hue="method",
        mean_std=kind == "mean",
        xlabel="training examples",
        figure="He et al. 2021, figure 3",
        include_failed=include_failed,
    )


# ---------------------------------------------------------------------------------------------
# outcomes and facets


def method_boxes(
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    figure: str,
    panels: Sequence[str] = (),
    caption_text: str = "",
    include_failed: bool = False,
) -> Figure:
    """One box per method over its runs, a panel per task, titled ``figure``: any per-run score
    (``value``, ``metric``, ``split``, ``outcome``); ``summary``, ``panels`` and ``caption_text``
    (the tests between methods) from :func:`robustkit.analysis.boxes.method_boxes`."""
    return _box_figure(
        frame,
        summary,
        panels,
        caption_text,
        x="method",
        hue="method",
        xlabel="tuning method",
        figure=figure,
        include_failed=include_failed,
    )


# ---------------------------------------------------------------------------------------------
# the shared figure


def _box_figure(
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    panels: Sequence[str],
    caption_text: str,
    x: str,
    hue: str,
    xlabel: str,
    figure: str,
    mean_std: bool = False,
    include_failed: bool = False,
    unit: str = "runs",
) -> Figure:
    """Rows = tasks, columns = values of the ``panels`` columns; boxes at x, by hue."""
    if frame.empty:
        raise figures.NothingToDraw("nothing to plot: the frame is empty")
    if "outcome" not in frame or not {x, hue} <= set(summary.columns):
        raise ValueError(
            f"the frame needs an outcome column and the summary one row per {x} x {hue}: "
            "pass the view's dict (robustkit.analysis.boxes)"
        )
    data = _prepared(frame, x)
    panel_keys = list(panels)
    tasks = sorted(data["task"].unique())
    combos = setting_combos(data, panel_keys)
    hues = sorted(data[hue].unique(), key=sort_key)
    palette = _palette(hue, hues)
    width = min(7.5, max(4.6, 0.9 * data["_x"].nunique() * (len(hues) if hue != x else 1) + 2.2))
    # one metric: every panel on one y scale, so boxes compare by eye across the whole figure
    share = True if data["metric"].nunique() == 1 else "row"
    fig, axes = canvas.subplots(
        len(tasks),
        len(combos),
        squeeze=False,
        constrained_layout=True,
        sharey=share,
        figsize=(width * len(combos), 3.6 * len(tasks)),
    )
    # runs per box, from the summary (its statistics' groups are the boxes)
    counts = summary.assign(_x=summary[x].map(_x_label), n_ok=summary["n_runs"] - summary["n_failed"])
    for row, task in zip(axes, tasks):
        for ax, combo in zip(row, combos):
            panel = data[(data["task"] == task) & rows_matching(data, panel_keys, combo)]
            if panel.empty:
                ax.set_visible(False)
                continue
            _panel(
                ax,
                panel,
                x,
                hue,
                [h for h in hues if h in set(panel[hue])],
                palette,
                mean_std,
                include_failed,
                _panel_rows(summary, task, panel_keys, combo) if mean_std else None,
            )
            _annotate(
                ax,
                panel,
                hue,
                [h for h in hues if h in set(panel[hue])],
                x != hue,
                _panel_rows(counts, task, panel_keys, combo),
                include_failed,
            )
            ax.set_xlabel(xlabel)
            ax.set_title(_panel_title(task, panel_keys, combo), fontsize=9)
        row[0].set_ylabel(value_label(data[data["task"] == task]))
    _fit_limits(axes, data)
    style.set_title(fig, style.paper_title(figure, data))
    style.legend_below(fig, axes[0][0], _legend_handles(data, hue, hues, palette, mean_std), ncols=None)
    style.add_note(fig, caption_text)
    style.add_note(fig, _method_note(data, mean_std, include_failed, unit))
    return fig


def _prepared(frame: pd.DataFrame, x: str) -> pd.DataFrame:
    """``frame`` + ``_x`` (x as ordered text) + ``shown`` / ``shown_baseline`` (plotted units)."""
    values = sorted(frame[x].unique(), key=sort_key)
    labels = {v: _x_label(v) for v in values}
    factor = frame["metric"].map(style.scale)
    baseline = frame["baseline"] if "baseline" in frame else pd.Series(np.nan, index=frame.index)
    return frame.assign(
        _x=pd.Categorical(frame[x].map(labels), categories=list(dict.fromkeys(labels.values()))),
        shown=frame["value"] * factor,
        shown_baseline=baseline * factor,
    )


def _panel(
    ax,
    panel: pd.DataFrame,
    x: str,
    hue: str,
    levels: list,
    palette: dict,
    mean_std: bool,
    include_failed: bool,
    summary: pd.DataFrame | None,
) -> None:
    order = [c for c in panel["_x"].cat.categories if c in set(panel["_x"])]
    dodge = hue != x  # x = hue = method: one centred box per method
    kept = collapse.kept(panel, include_failed)
    ok = kept[kept["outcome"] == collapse.OK] if "outcome" in kept else kept
    common = {
        "x": "_x",
        "y": "shown",
        "hue": hue,
        "order": order,
        "hue_order": levels,
        "palette": palette,
        "ax": ax,
        "legend": False,
    }
    if mean_std:
        _mean_std(ax, summary, x, order, hue, levels, palette, dodge, style.scale(str(panel["metric"].iloc[0])))
    elif not kept.empty:
        with warnings.catch_warnings():  # seaborn 0.13 passes matplotlib 3.11's deprecated vert=
            warnings.simplefilter("ignore", MatplotlibDeprecationWarning)
            sns.boxplot(data=kept, **common, dodge=dodge, width=BOX_WIDTH, showfliers=False, boxprops={"alpha": 0.45})
    if not ok.empty:
        style.strip_points(data=ok, **common, dodge=dodge, jitter=0.12, size=3.5, linewidth=0.5, edgecolor="black")
    _failed_markers(ax, panel, order, hue, levels, dodge)
    _baseline(ax, panel, order, dodge)
    ax.grid(alpha=0.3, axis="y")


def _failed_markers(ax, panel: pd.DataFrame, order: list[str], hue: str, levels: list, dodge: bool) -> None:
    """Collapsed (and plottable diverged) runs: grey crosses at their box's position."""
    failed = panel[(panel["outcome"] != collapse.OK) & np.isfinite(panel["shown"])]
    for (x, level), rows in failed.groupby(["_x", hue], observed=True):
        if x not in order or level not in levels:
            continue
        centre = _position(order.index(x), levels.index(level), len(levels), dodge)
        # spread side by side (deterministic): crosses at one value would hide each other
        offsets = np.linspace(-0.08, 0.08, len(rows)) if len(rows) > 1 else np.zeros(1)
        ax.plot(
            centre + offsets,
            rows["shown"].to_numpy(),
            **style.COLLAPSED_STYLE,
            zorder=4,
            gid="collapsed",
            label="_collapsed",
        )


def _mean_std(
    ax,
    summary: pd.DataFrame,
    x: str,
    order: list[str],
    hue: str,
    levels: list,
    palette: dict,
    dodge: bool,
    factor: float,
) -> None:
    """Mean +- std (ddof 1, the summary's: :func:`robustkit.analysis.stability.summarize`) per x
    and hue, joined per hue."""
    if summary is None or summary.empty:
        return
    for j, level in enumerate(levels):
        rows = summary[summary[hue] == level]
        stats = rows.assign(_x=rows[x].map(_x_label)).set_index("_x").reindex(order)
        positions = [_position(i, j, len(levels), dodge) for i in range(len(order))]
        ax.errorbar(
            positions,
            stats["mean"] * factor,
            yerr=stats["std"].fillna(0) * factor,
            color=palette[level],
            marker="o",
            markersize=5,
            capsize=3,
            linewidth=1.2,
            zorder=3,
        )


def _fit_limits(axes: np.ndarray, data: pd.DataFrame) -> None:
    """Y limits: every baseline in view (even far below the runs), a top margin for the n= and
    collapsed labels. Shared axes get one setting; the others one per row."""
    for row, task in zip(axes, sorted(data["task"].unique())):
        style.include_baseline(row[0], data.loc[data["task"] == task, "shown_baseline"])
    shared = data["metric"].nunique() == 1  # sharey=True: one setting for the whole figure
    for row in axes[:1] if shared else axes:
        low, high = row[0].get_ylim()
        row[0].set_ylim(low, high + 0.16 * (high - low))


def _annotate(
    ax, panel: pd.DataFrame, hue: str, levels: list, dodge: bool, counts: pd.DataFrame, include_failed: bool
) -> None:
    """``n=`` (runs in the box's statistics) and ``collapsed k/n`` over each box, in the top margin of the axes."""
    where = blended_transform_factory(ax.transData, ax.transAxes)
    order = [c for c in panel["_x"].cat.categories if c in set(panel["_x"])]
    for row in counts.to_dict("records"):
        x, level = row["_x"], row[hue]
        if x not in order or level not in levels:
            continue
        position = _position(order.index(x), levels.index(level), len(levels), dodge)
        used = row["n_runs"] if include_failed else row["n_ok"]
        ax.text(position, 0.985, f"n={used}", transform=where, ha="center", va="top", fontsize=6)
        failed = collapse.label(row["n_collapsed"], row["n_runs"], row["n_diverged"], row.get("n_not_learned", 0))
        if failed:
            ax.text(
                position,
                0.935,
                failed.replace(", ", "\n"),
                transform=where,
                ha="center",
                va="top",
                fontsize=5.5,
                color="#555555",
                gid="collapsed-label",
            )


def _baseline(ax, panel: pd.DataFrame, order: list[str], dodge: bool) -> None:
    """Dashed majority-class baseline: one line if it is the same for every x, else one per x."""
    base = panel.dropna(subset=["shown_baseline"]).groupby("_x", observed=True)["shown_baseline"].mean()
    if base.empty:
        return
    if np.allclose(base, base.iloc[0]):
        style.draw_baseline(ax, float(base.iloc[0]))
    else:
        for i, x in enumerate(order):
            if x in base.index:
                ax.hlines(base[x], i - BOX_WIDTH / 2, i + BOX_WIDTH / 2, **style.BASELINE_STYLE, zorder=1)


def _legend_handles(data: pd.DataFrame, hue: str, hues: list, palette: dict, mean_std: bool) -> list:
    handles = [Patch(facecolor=palette[h], alpha=0.7, label=_hue_label(hue, h)) for h in hues]
    if mean_std:
        handles.append(
            Line2D([], [], color="#333333", marker="o", markersize=4, label="mean ± 1 std over seeds (ddof 1)")
        )
    if data["shown_baseline"].notna().any():
        handles.append(style.baseline_handle())
    if (data["outcome"] != collapse.OK).any():
        handles.append(style.collapsed_handle())
    return handles


def _method_note(data: pd.DataFrame, mean_std: bool, include_failed: bool, unit: str) -> str:
    """What the scores and marks are (the caption counts the failed runs)."""
    parts = ["Points: mean ± 1 std (ddof 1) over seeds; dots: runs." if mean_std else BOX_NOTE]
    if "checkpoint" in data and data["checkpoint"].nunique() == 1:
        which = {"last": "the last checkpoint (end of training)", "best": "the checkpoint of the best validation score"}
        parts.insert(
            0,
            f"Scores: {value_label(data).split(' (')[0]} at "
            f"{which.get(data['checkpoint'].iloc[0], data['checkpoint'].iloc[0])}.",
        )
    if (data["outcome"] != collapse.OK).any():
        kept = "kept in" if include_failed else "left out of"
        parts.append(
            f"Grey crosses: collapsed / diverged {unit} (robustkit.train.collapse: stuck at the majority class), "
            f"{kept} the {'means' if mean_std else 'boxes'}, n= and tests."
        )
    return " ".join(parts)


# ---------------------------------------------------------------------------------------------
# helpers


def _panel_rows(table: pd.DataFrame, task: str, keys: list[str], combo: tuple) -> pd.DataFrame:
    if table is None or table.empty:
        return table
    return table[(table["task"] == task) & rows_matching(table, keys, combo)]


def _panel_title(task: str, keys: list[str], combo: tuple, most: int = 3) -> str:
    """``task: method, setting value, ...``: an import by its import_id alone (its other settings
    are unknown), unknown settings left out (a missing train_size is the whole set: "all"), at
    most ``most`` settings."""
    settings = dict(zip(keys, combo))
    parts = [task, *([method_label(settings.pop("method"))] if "method" in settings else [])]
    imported = settings.get("import_id")
    if not is_missing(imported):
        settings = {"import_id": imported}
    shown = [
        f"import {v}"
        if k == "import_id"
        else _data_label(v)
        if k == "data_fingerprint"
        else f"{setting_label(k)} {_x_label(v)}"
        for k, v in settings.items()
        if not is_missing(v) or k == "train_size"
    ]
    parts += shown[:most] + (["..."] if len(shown) > most else [])
    return ": ".join(parts[:2]) + "".join(f", {p}" for p in parts[2:])


def _data_label(fingerprint) -> str:
    """A data fingerprint as a panel title says it: its kind and 8 hex digits (``data
    user:673d5df8``), not 64 (``user:sha256:673d...``); the legacy default (None) is the task's
    own data."""
    if is_missing(fingerprint):
        return "data: the task's own"
    kind, _, digest = str(fingerprint).rpartition("sha256:")
    return f"data {kind}{digest[:8]}" if kind else f"data {fingerprint}"


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


def _x_label(value) -> str:
    if is_missing(value):
        return "all"  # train_size missing: the whole training set
    if _numeric(value):
        return f"{int(value)}" if float(value).is_integer() else f"{value:g}"
    return str(value)


def value_label(panel: pd.DataFrame) -> str:
    """Axis label of the scores: split, metric and unit (e.g. \"test accuracy (%)\")."""
    return style.score_label(panel["metric"], panel["split"] if "split" in panel else ())
