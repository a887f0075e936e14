"""Han et al. 2021 figure 5: attack success rate vs task-specific pretraining steps, per method;
one attacker (PWWS in the paper) or several side by side."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

from robustkit import figures
from robustkit.attacks import registry as attack_registry
from robustkit.figures.method_style import method_color, method_label

# The figures of this module, as robustkit.figures reads them from this source (the attack
# analysis declares their data and views).
DECLARED = (
    figures.register_figure(
        figures.Figure(
            "attack-vs-tsp",
            "Han et al. 2021 figure 5: PWWS (or another attacker's) attack success rate vs TSP steps, with vs without "
            "adapters",
            "attack",
            ":attack_vs_tsp",
            (figures.CONVENTION,),
            view="robustkit.analysis.attack_views:success_by_tsp",
            score_axis=True,
            order=20,
            module=__name__,
        )
    ),
    figures.register_figure(
        figures.Figure(
            "attack-by-attacker",
            "Han et al. 2021 figure 5 with a second attack: PWWS and DeepWordBug success rate vs TSP steps side by "
            "side "
            "(one panel each, shared y axis), with vs without adapters",
            "attack",
            ":attack_by_attacker",
            (figures.CONVENTION,),
            view="robustkit.analysis.attack_views:success_by_tsp",
            defaults={"attackers": ["pwws", "deepwordbug"]},
            score_axis=True,
            order=30,
            module=__name__,
        )
    ),
    figures.register_figure(
        figures.Figure(
            "attack-boxes",
            "Attack success rate per method, one box over each method's victims (seeds), with the tests between "
            "methods "
            "(runs at one TSP step)",
            "attack",
            ":attack_boxes",
            (figures.CONVENTION,),
            view="robustkit.analysis.attack_views:attack_boxes",
            score_axis=True,
            order=40,
            module=__name__,
        )
    ),
)


Y_LABEL = "attack success rate"
BANDS = "Lines: mean over the runs (seeds) at each TSP step; bands: ±1 std over them (ddof 1)."


def attacker_label(attacker: str) -> str:
    """How an attacker is named in figures: its registered ``label`` (its name when it is not
    registered in this process)."""
    return attack_registry.label_of(attacker)


def y_label(attacker: str | None) -> str:
    """The y axis of ``attacker``'s success rate, with its unit (``"attack success rate (%)"``)."""
    return Y_LABEL + (" (%)" if _in_percent(attacker) else "")


def _scale(attacker: str | None) -> float:
    """Factor from the stored success rate (a fraction) to the shown one."""
    return 100.0 if _in_percent(attacker) else 1.0


def _in_percent(attacker: str | None) -> bool:
    """Whether ``attacker`` declares its success in % (the registry's default, also for data
    without an ``attacker`` column or of an attacker not registered in this process)."""
    return (
        attacker is None or attacker not in attack_registry.ATTACKS or attack_registry.get(attacker).success_unit == "%"
    )


def attack_vs_tsp(
    summary: pd.DataFrame,
    lines: pd.DataFrame,
    failures: pd.DataFrame,
    convention: str = "openattack",
    include_failed: bool = False,
) -> Figure:
    """Success rate (%) against TSP steps, one line per method: mean over seeds, ±1 std band.

    ``summary``, ``lines``, ``failures``, ``convention`` and ``include_failed`` are the keyword
    arguments :func:`robustkit.analysis.attack_views.success_lines` returns (the figure's view).

    Parameters
    ----------
    summary : DataFrame
        One attacker's rows of ``convention`` (columns ``method, tsp_step, convention,
        success_rate, attacked, outcome``, optionally ``attacker``; one row per run):
        collapsed victims are drawn as grey crosses (left out of the lines and bands unless
        ``include_failed``).
    lines : DataFrame
        ``method, tsp_step, mean, std, n``: each line's points (success rate as a fraction).
    failures : DataFrame
        Failed victims per method (``method, n_runs, n_collapsed, n_diverged``), for the note.
    convention : str
        ``openattack`` (prediction flips, misclassified inputs included) or ``gold``.

    Raises
    ------
    ValueError
        Rows of several attackers (see :func:`attack_by_attacker`).
    """
    from robustkit.figures import style
    from robustkit.figures.canvas import new_figure
    from robustkit.figures.labels import paper_title

    attackers = _attackers(summary)
    if len(attackers) > 1:
        raise ValueError(f"rows of several attackers {attackers}: draw them with attack_by_attacker")
    fig, ax = new_figure()
    attacker = attackers[0] if attackers else None
    _panel(ax, summary, lines, include_failed, _scale(attacker))
    name = attacker_label(attacker) if attacker is not None else "Attack"
    ax.set_ylabel(y_label(attacker))
    ax.set_title(
        f"{name} attack success ({convention} convention, up to {int(summary['attacked'].max())} examples/run)",
        fontsize=9,
    )
    style.set_title(fig, paper_title("Han et al. 2021, figure 5", summary))
    _legend_and_note(fig, ax, summary, lines, failures, include_failed, BANDS)
    return fig


def attack_boxes(
    frame: pd.DataFrame,
    summary: pd.DataFrame,
    panels: Sequence[str] = (),
    caption_text: str = "",
    attacker: str | None = None,
    include_failed: bool = False,
) -> Figure:
    """Attack success rate per method, one box over each method's victims (seeds): for runs that
    differ in method and seed only (one TSP step), where :func:`attack_vs_tsp` has one x.

    ``frame``, ``summary``, ``panels`` and ``caption_text`` (the tests between methods) are the
    keyword arguments :func:`robustkit.analysis.boxes.method_boxes` returns for
    :func:`robustkit.analysis.attack_views.success_scores_view` output. The title names the attackers
    of ``frame``'s ``attacker`` column (``attacker``, where given, names it instead: a frame
    without that column), each shown in its unit (its ``metric``).
    """
    from robustkit.figures.score_boxes import method_boxes

    named = [attacker] if attacker is not None else _attackers(frame)
    title = " vs ".join(attacker_label(a) for a in named) if named else "Attack"
    return method_boxes(
        frame,
        summary,
        f"{title} attack success per method",
        panels=panels,
        caption_text=caption_text,
        include_failed=include_failed,
    )


def attack_by_attacker(
    summary: pd.DataFrame,
    lines: pd.DataFrame,
    failures: pd.DataFrame,
    convention: str = "openattack",
    include_failed: bool = False,
) -> Figure:
    """Han et al. 2021 figure 5 with every attacker side by side: one panel per attacker (shared
    y axis), success rate (%) against TSP steps, one line per method, mean over seeds, ±1 std band.

    ``summary``, ``lines``, ``failures``, ``convention`` and ``include_failed`` are the keyword
    arguments :func:`robustkit.analysis.attack_views.success_lines` returns (the figure's view).

    Parameters
    ----------
    summary : DataFrame
        As for :func:`attack_vs_tsp`, with an ``attacker`` column; panels follow the attackers'
        order of appearance. Collapsed victims are crosses in every panel, left out of lines
        and bands unless ``include_failed``.
    lines : DataFrame
        ``attacker, method, tsp_step, mean, std, n``: each panel's lines.
    failures : DataFrame
        Failed victims per method, counted once (a victim's collapse is its own, whatever
        attacks it).
    convention : str
        ``openattack`` or ``gold`` (see :func:`attack_vs_tsp`).

    Raises
    ------
    ValueError
        No ``attacker`` column.
    """
    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title

    attackers = _attackers(summary)
    if not attackers:
        raise ValueError("the summary has no attacker column")
    units = {y_label(a) for a in attackers}
    fig, axes = canvas.subplots(
        1,
        len(attackers),
        figsize=(0.6 + 4.2 * len(attackers), 3.6),
        sharey=len(units) == 1,  # rates in different units on one axis would read as comparable
        squeeze=False,
        constrained_layout=True,
    )
    for ax, attacker in zip(axes[0], attackers):
        panel = summary[summary["attacker"] == attacker]
        _panel(ax, panel, lines[lines["attacker"] == attacker], include_failed, _scale(attacker))
        ax.set_title(f"{attacker_label(attacker)} (up to {int(panel['attacked'].max())} examples/run)", fontsize=9)
        if len(units) > 1 or ax is axes[0][0]:
            ax.set_ylabel(y_label(attacker))
    labels = " vs ".join(attacker_label(a) for a in attackers)
    style.set_title(fig, paper_title("Han et al. 2021, figure 5", summary, extra=f"{labels} ({convention} convention)"))
    shared = "the y axis is shared" if len(units) == 1 else "each panel's y axis is in its attacker's unit"
    note = f"{BANDS} Every attacker attacks the same examples of each run; {shared}. Han et al. 2021 report PWWS only."
    # Collapse is a property of the victim: marked once, from the first attacker's rows.
    _legend_and_note(
        fig, axes[0][0], summary[summary["attacker"] == attackers[0]], lines, failures, include_failed, note
    )
    return fig


def _attackers(data: pd.DataFrame) -> list[str]:
    import pandas as pd

    return list(pd.unique(data["attacker"])) if "attacker" in data else []


def _panel(ax: Axes, data: pd.DataFrame, lines: pd.DataFrame, include_failed: bool, scale: float = 100.0) -> None:
    """One line and ±1 std band per method, then collapsed victims as crosses (left out of both
    unless ``include_failed``); success rates (fractions) times ``scale``."""
    from robustkit.figures.marks import COLLAPSED_STYLE
    from robustkit.store import collapse

    for method, points in lines.groupby("method", sort=True):
        x, mean, std = points["tsp_step"].to_numpy(), scale * points["mean"], scale * points["std"].fillna(0)
        color = method_color(method)
        ax.plot(x, mean, marker="o", color=color, label=method_label(method))
        ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)
    failed = data[data["outcome"] != collapse.OK]
    if len(failed) and not include_failed:
        ax.plot(failed["tsp_step"], scale * failed["success_rate"], **COLLAPSED_STYLE)
    ax.set_xlabel("task-specific pretraining steps")
    ax.grid(alpha=0.3)


def _legend_and_note(
    fig: Figure,
    ax: Axes,
    data: pd.DataFrame,
    lines: pd.DataFrame,
    failures: pd.DataFrame,
    include_failed: bool,
    note: str,
) -> None:
    """One legend entry per method with its runs per point, the collapsed marker if any victim
    collapsed, and the note saying what lines and bands are and which victims were left out."""
    from matplotlib.lines import Line2D

    from robustkit.figures import style
    from robustkit.figures.marks import collapsed_handle
    from robustkit.store import collapse

    handles = [
        Line2D(
            [],
            [],
            marker="o",
            color=method_color(method),
            label=f"{method_label(method)} (n={_span(points['n'])} runs per point)",
        )
        for method, points in lines.groupby("method", sort=True)
    ]
    failed = (data["outcome"] != collapse.OK).any()
    if failed and not include_failed:
        handles.append(collapsed_handle())
    style.legend_below(fig, ax, handles, ncols=1)
    if (lines["n"].max() if len(lines) else 0) <= 1:
        note = note.replace(BANDS, "Lines: one run per TSP step (no spread to show).")
    left_out = "; ".join(
        f"{method_label(r.method)}: {collapse.counts_label(r._asdict())}"
        for r in failures.itertuples()
        if r.n_collapsed or r.n_diverged or r.n_not_learned
    )
    if left_out and not include_failed:
        note += f" Victims stuck at the majority class cannot be flipped: left out of lines and bands ({left_out})."
    style.add_note(fig, note)


def _span(values: Iterable[int]) -> str:
    low, high = int(min(values)), int(max(values))
    return str(low) if low == high else f"{low}-{high}"
