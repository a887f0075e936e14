"""Box plots of per-run scores: the figure every stability box plot and the attack boxes draw.

:func:`box_figure` draws one box per x value and hue level over the runs (each run a dot), a
panel per task and combination of the ``panels`` columns, with the number of runs behind each
box (``n=``), collapsed and diverged runs (:mod:`robustkit.store.collapse`) as grey crosses
left out of the boxes unless ``include_failed``, the majority-class baseline (dashed), one
legend and the caption under the figure. The statistics it shows (the summary per box, the
panels, the caption's tests) come from a view of :mod:`robustkit.analysis.boxes`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import matplotlib.pyplot as plt
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
from robustkit.figures.box_labels import hue_label, panel_title, value_label, x_label
from robustkit.figures.labels import paper_title
from robustkit.figures.marks import (
    BASELINE_STYLE,
    COLLAPSED_STYLE,
    baseline_handle,
    collapsed_handle,
    draw_baseline,
    include_baseline,
    strip_points,
)
from robustkit.figures.method_style import method_color
from robustkit.figures.setting_groups import rows_matching, setting_combos, sort_key
from robustkit.figures.units import scale
from robustkit.store import collapse

BOX_WIDTH = 0.8  # seaborn's default: dodged boxes share it equally
MIN_BOX = 2  # a box of one run is a flat line with no quartiles: that run is drawn as its dot only
# Means on a log x axis (numeric x, e.g. training examples) sit at their x times LOG_DODGE ** k,
# k in -(levels - 1) / 2 .. (levels - 1) / 2: a multiplicative dodge, so two methods stay within
# 3.5% of their x (an additive one put He fig 3's adapters at about 420 and 1,200 of 300 and 1,000).
LOG_DODGE = 10**0.015
BOX_NOTE = "Boxes: quartiles and median of the runs kept; whiskers: 1.5 x IQR; dots: runs."


def box_figure(
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
    """Boxes of per-run scores: a row of panels per task, a column per combination of the
    ``panels`` columns; in each panel a box per ``x`` value and ``hue`` level, runs as dots.

    Parameters
    ----------
    frame : DataFrame
        A view's ``frame`` (:mod:`robustkit.analysis.boxes`): one row per run (or evaluation),
        with ``task``, ``x``, ``hue``, ``value``, ``metric``, ``outcome`` and, where known,
        ``split``, ``baseline`` and ``checkpoint``.
    summary : DataFrame
        The view's ``summary``: one row per box (``n_runs``, ``n_collapsed``, ``n_diverged``,
        ``n_failed``; ``mean`` and ``std`` for ``mean_std``).
    panels : sequence of str
        Columns that give a panel each besides the task.
    caption_text : str
        Text under the figure (the view's tests).
    x, hue : str
        The columns along the x axis and of the box colours (the same column: one centred box
        per value).
    xlabel : str
        The x axis label.
    figure : str
        The paper's figure, for the title (:func:`robustkit.figures.labels.paper_title`).
    mean_std : bool
        Mean +- 1 std (the summary's) per x and hue, joined per hue, instead of boxes.
    include_failed : bool
        Boxes, means and ``n=`` hold collapsed / diverged runs too (they are marked either way).
    unit : str
        What a dot is, for the note (``runs``, ``evaluations``).

    Raises
    ------
    NothingToDraw
        ``frame`` is empty.
    ValueError
        ``frame`` has no ``outcome`` column, or ``summary`` no ``x`` and ``hue`` columns.
    """
    if frame.empty:
        raise figures.NothingToDraw("nothing to plot: the frame is empty")
    if "outcome" not in frame or not {x, hue} <= set(summary.columns):
        raise ValueError(
            f"the frame needs an outcome column and the summary one row per {x} x {hue}: "
            "pass the view's dict (robustkit.analysis.boxes)"
        )
    data = _prepared(frame, x)
    numeric = mean_std and _positive_numbers(data[x])  # means at their x, on a log axis
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
    counts = summary.assign(_x=summary[x].map(x_label), n_ok=summary["n_runs"] - summary["n_failed"])
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
                numeric,
            )
            _annotate(
                ax,
                panel,
                hue,
                [h for h in hues if h in set(panel[hue])],
                x != hue,
                _panel_rows(counts, task, panel_keys, combo),
                include_failed,
                _places(panel, x, [h for h in hues if h in set(panel[hue])], x != hue, numeric),
                palette if numeric else None,
            )
            ax.set_xlabel(xlabel)
            ax.set_title(panel_title(task, panel_keys, combo), fontsize=9)
        row[0].set_ylabel(value_label(data[data["task"] == task]))
    _fit_limits(axes, data)
    style.set_title(fig, paper_title(figure, data))
    style.legend_below(fig, axes[0][0], _legend_handles(data, hue, hues, palette, mean_std), ncols=None)
    style.add_note(fig, caption_text)
    style.add_note(fig, _method_note(data, mean_std, include_failed, unit))
    return fig


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
    return box_figure(
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


def _prepared(frame: pd.DataFrame, x: str) -> pd.DataFrame:
    """``frame`` + ``_x`` (x as ordered text) + ``shown`` / ``shown_baseline`` (plotted units)."""
    values = sorted(frame[x].unique(), key=sort_key)
    labels = {v: x_label(v) for v in values}
    factor = frame["metric"].map(scale)
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
    numeric: bool = False,
) -> None:
    """One panel's boxes (or means +- std), dots of the runs kept, failed-run crosses and baseline.
    ``numeric``: means, dots and crosses at their x on a log axis (:func:`_log_panel`)."""
    order = [c for c in panel["_x"].cat.categories if c in set(panel["_x"])]
    dodge = hue != x  # x = hue = method: one centred box per method
    kept = collapse.kept(panel, include_failed)
    ok = kept[kept["outcome"] == collapse.OK] if "outcome" in kept else kept
    places = _places(panel, x, levels, dodge, numeric)
    if numeric:
        _log_panel(ax, panel, ok, summary, x, hue, levels, palette, places)
        _failed_markers(ax, panel, order, hue, levels, places)
        _baseline(ax, panel, order, dodge, places)
        ax.grid(alpha=0.3, axis="y")
        return
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
    boxed = kept[kept.groupby(["_x", hue], observed=True)["shown"].transform("size") >= MIN_BOX]
    if mean_std:
        _mean_std(ax, summary, x, order, hue, levels, palette, places, scale(str(panel["metric"].iloc[0])))
    elif not boxed.empty:
        with warnings.catch_warnings():  # seaborn 0.13 passes matplotlib 3.11's deprecated vert=
            warnings.simplefilter("ignore", MatplotlibDeprecationWarning)
            sns.boxplot(data=boxed, **common, dodge=dodge, width=BOX_WIDTH, showfliers=False, boxprops={"alpha": 0.45})
    if not ok.empty:
        strip_points(data=ok, **common, dodge=dodge, jitter=0.12, size=3.5, linewidth=0.5, edgecolor="black")
    _failed_markers(ax, panel, order, hue, levels, places)
    _baseline(ax, panel, order, dodge, places)
    ax.grid(alpha=0.3, axis="y")


def _positive_numbers(values: pd.Series) -> bool:
    """Whether every x is a finite positive number (a log axis can place it; ``all`` cannot)."""
    numbers = pd.to_numeric(values, errors="coerce")
    return bool(numbers.notna().all() and np.isfinite(numbers).all() and (numbers > 0).all())


def _places(panel: pd.DataFrame, x: str, levels: list, dodge: bool, numeric: bool) -> dict:
    """(x tick label, hue level) -> the x where that box, mean, cross and ``n=`` are drawn: seaborn's
    categorical slot, or on a log axis the x value itself times :data:`LOG_DODGE` per level."""
    order = [c for c in panel["_x"].cat.categories if c in set(panel["_x"])]
    if not numeric:
        return {
            (c, level): _position(i, j, len(levels), dodge)
            for i, c in enumerate(order)
            for j, level in enumerate(levels)
        }
    values = panel.groupby("_x", observed=True)[x].first().astype(float)
    middle = (len(levels) - 1) / 2
    return {(c, level): values[c] * LOG_DODGE ** (j - middle) for c in order for j, level in enumerate(levels)}


def _log_panel(
    ax, panel: pd.DataFrame, ok: pd.DataFrame, summary, x: str, hue: str, levels: list, palette: dict, places: dict
) -> None:
    """Means +- std joined per hue, and the runs' dots, at their numeric x on a log axis: ticks at
    the x values, dots jittered multiplicatively (by at most LOG_DODGE ** 0.5, seeded) around
    their mean's x."""
    order = [c for c in panel["_x"].cat.categories if c in set(panel["_x"])]
    _mean_std(ax, summary, x, order, hue, levels, palette, places, scale(str(panel["metric"].iloc[0])))
    jitter = np.random.default_rng(0)
    for (c, level), rows in ok.groupby(["_x", hue], observed=True):
        if (c, level) not in places:
            continue
        spread = LOG_DODGE ** jitter.uniform(-0.45, 0.45, len(rows))
        ax.scatter(
            places[(c, level)] * spread,
            rows["shown"],
            s=12,
            color=palette[level],
            edgecolor="black",
            linewidth=0.5,
            zorder=2,
            gid="run-dots",
        )
    ax.set_xscale("log")
    values = panel.groupby("_x", observed=True)[x].first().astype(float)
    ax.set_xticks(list(values[order]), order)
    ax.xaxis.set_minor_locator(plt.NullLocator())
    ax.set_xlim(values.min() / 1.4, values.max() * 1.4)


def _failed_markers(ax, panel: pd.DataFrame, order: list[str], hue: str, levels: list, places: dict) -> None:
    """Collapsed (and plottable diverged) runs: grey crosses at their box's position."""
    failed = panel[(panel["outcome"] != collapse.OK) & np.isfinite(panel["shown"])]
    log = ax.get_xscale() == "log"
    for (x, level), rows in failed.groupby(["_x", hue], observed=True):
        if x not in order or level not in levels:
            continue
        centre = places[(x, level)]
        # spread side by side (deterministic): crosses at one value would hide each other
        offsets = np.linspace(-0.08, 0.08, len(rows)) if len(rows) > 1 else np.zeros(1)
        ax.plot(
            centre * LOG_DODGE ** (offsets * 5) if log else centre + offsets,
            rows["shown"].to_numpy(),
            **COLLAPSED_STYLE,
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
    places: dict,
    factor: float,
) -> None:
    """Mean +- std (ddof 1, the summary's: :func:`robustkit.analysis.stability.summarize`) per x
    and hue, joined per hue, at ``places`` (:func:`_places`)."""
    if summary is None or summary.empty:
        return
    for level in levels:
        rows = summary[summary[hue] == level]
        stats = rows.assign(_x=rows[x].map(x_label)).set_index("_x").reindex(order)
        positions = [places[(c, level)] for c in order]
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
        include_baseline(row[0], data.loc[data["task"] == task, "shown_baseline"])
    shared = data["metric"].nunique() == 1  # sharey=True: one setting for the whole figure
    for row in axes[:1] if shared else axes:
        low, high = row[0].get_ylim()
        row[0].set_ylim(low, high + 0.16 * (high - low))


def _annotate(
    ax,
    panel: pd.DataFrame,
    hue: str,
    levels: list,
    dodge: bool,
    counts: pd.DataFrame,
    include_failed: bool,
    places: dict | None = None,
    colors: dict | None = None,
) -> None:
    """``n=`` (runs in the box's statistics) and ``collapsed k/n`` over each box, in the top margin
    of the axes; a slot with no run kept says so where its box would be. ``colors`` (on a log
    axis, where a hue's means sit close together): one line per hue level in its colour."""
    where = blended_transform_factory(ax.transData, ax.transAxes)
    order = [c for c in panel["_x"].cat.categories if c in set(panel["_x"])]
    places = places or _places(panel, "_x", levels, dodge, False)
    for row in counts.to_dict("records"):
        x, level = row["_x"], row[hue]
        if x not in order or level not in levels:
            continue
        position = places[(x, level)]
        used = row["n_runs"] if include_failed else row["n_ok"]
        failed = collapse.counts_label(row)
        if colors is not None:  # stacked per level, centred on the x value
            line = f"n={used}" + (f" ({failed})" if failed else "")
            centre = float(np.exp(np.mean([np.log(places[(x, h)]) for h in levels])))
            height = 0.985 - 0.045 * levels.index(level)
            ax.text(centre, height, line, transform=where, ha="center", va="top", fontsize=6, color=colors[level])
            continue
        ax.text(position, 0.985, f"n={used}", transform=where, ha="center", va="top", fontsize=6)
        if not used:  # no box here: say why rather than leave an empty slot
            ax.text(
                position,
                0.5,
                "no box:\nno run kept" if row["n_runs"] else "no run",
                transform=where,
                ha="center",
                va="center",
                fontsize=6,
                color="#555555",
                style="italic",
                gid="empty-slot",
            )
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


def _baseline(ax, panel: pd.DataFrame, order: list[str], dodge: bool, places: dict) -> None:
    """Dashed majority-class baseline: one line if it is the same for every x, else one per x."""
    base = panel.dropna(subset=["shown_baseline"]).groupby("_x", observed=True)["shown_baseline"].mean()
    if base.empty:
        return
    if np.allclose(base, base.iloc[0]):
        draw_baseline(ax, float(base.iloc[0]))
    else:
        for i, x in enumerate(order):
            if x in base.index:
                at = [v for (c, _), v in places.items() if c == x]
                low, high = (
                    (min(at) / LOG_DODGE, max(at) * LOG_DODGE)
                    if ax.get_xscale() == "log"
                    else (i - BOX_WIDTH / 2, i + BOX_WIDTH / 2)
                )
                ax.hlines(base[x], low, high, **BASELINE_STYLE, zorder=1)


def _legend_handles(data: pd.DataFrame, hue: str, hues: list, palette: dict, mean_std: bool) -> list:
    """The legend: a patch per hue level, then the mean marker, baseline and failed-run cross where drawn."""
    handles = [Patch(facecolor=palette[h], alpha=0.7, label=hue_label(hue, h)) for h in hues]
    if mean_std:
        handles.append(
            Line2D([], [], color="#333333", marker="o", markersize=4, label="mean ± 1 std over seeds (ddof 1)")
        )
    if data["shown_baseline"].notna().any():
        handles.append(baseline_handle())
    if (data["outcome"] != collapse.OK).any():
        handles.append(collapsed_handle())
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
            f"Grey crosses: failed {unit} ({collapse.FAILED_WORDS}: robustkit.store.collapse), "
            f"{kept} the {'means' if mean_std else 'boxes'}, n= and tests."
        )
    return " ".join(parts)


def _panel_rows(table: pd.DataFrame | None, task: str, keys: list[str], combo: tuple) -> pd.DataFrame | None:
    """The rows of ``table`` (a summary, or None) of one panel: ``task`` and ``keys`` = ``combo``."""
    if table is None or table.empty:
        return table
    return table[(table["task"] == task) & rows_matching(table, keys, combo)]


def _position(i: int, j: int, k: int, dodge: bool) -> float:
    """x of box j of k at category i, where seaborn draws it."""
    return i if not dodge else i - BOX_WIDTH / 2 + (j + 0.5) * BOX_WIDTH / k


def _palette(hue: str, levels: list) -> dict:
    """Colour per hue level: each method's own colour, else viridis steps."""
    if hue == "method":
        return {m: method_color(m) for m in levels}
    return dict(zip(levels, map(tuple, plt.get_cmap("viridis")(np.linspace(0, 0.9, len(levels))))))
