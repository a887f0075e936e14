"""Han et al. 2021 figure 5: PWWS attack success rate vs task-specific pretraining steps."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from robustkit import collapse
from robustkit.plots import style
from robustkit.plots.style import method_color, method_label, new_figure


def attack_vs_tsp(summary: pd.DataFrame, convention: str = "openattack", include_failed: bool = False) -> Figure:
    """Success rate (%) against TSP steps, one line per method: mean over seeds, ±1 std band.

    Parameters
    ----------
    summary : DataFrame
        :func:`robustkit.analysis.attack.summarize` output (columns ``method, tsp_step,
        convention, success_rate``; one row per run and convention), with ``outcome``
        (:func:`robustkit.analysis.attack.with_outcomes`): collapsed victims are drawn as grey
        crosses and left out of the lines and bands unless ``include_failed``.
    convention : str
        ``openattack`` (prediction flips, misclassified inputs included) or ``gold``.
    """
    data = summary[summary["convention"] == convention]
    if data.empty:
        raise ValueError(f"no rows with convention {convention!r}")
    if "outcome" not in data:
        data = data.assign(outcome=collapse.OK)
    shown = collapse.kept(data, include_failed)
    failed = data[data["outcome"] != collapse.OK]
    fig, ax = new_figure()
    for method, group in shown.groupby("method", sort=True):
        stats = group.groupby("tsp_step")["success_rate"].agg(["mean", "std", "count"]).sort_index()
        x, mean, std = stats.index.to_numpy(), 100 * stats["mean"], 100 * stats["std"].fillna(0)
        color = method_color(method)
        low, high = int(stats["count"].min()), int(stats["count"].max())
        ax.plot(x, mean, marker="o", color=color, label=f"{method_label(method)} (n={low if low == high else f'{low}-{high}'} runs per point)")
        ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)
    handles, _ = ax.get_legend_handles_labels()
    if len(failed) and not include_failed:
        ax.plot(failed["tsp_step"], 100 * failed["success_rate"], **style.COLLAPSED_STYLE)
        handles.append(style.collapsed_handle())
    examples = int(data["attacked"].max())
    ax.set_xlabel("task-specific pretraining steps")
    ax.set_ylabel("attack success rate (%)")
    ax.set_title(f"PWWS attack success ({convention} convention, up to {examples} examples/run)", fontsize=9)
    ax.grid(alpha=0.3)
    style.set_title(fig, style.paper_title("Han et al. 2021, figure 5", data))
    style.legend_below(fig, ax, handles, ncols=1)
    counts = collapse.failure_rates(data, ["method"])
    left_out = "; ".join(f"{method_label(r.method)}: {collapse.label(r.n_collapsed, r.n_runs, r.n_diverged)}"
                         for r in counts.itertuples() if r.n_collapsed or r.n_diverged)
    note = "Lines: mean over the runs (seeds) at each TSP step; bands: ±1 std over them (ddof 1)."
    if left_out and not include_failed:
        note += f" Victims stuck at the majority class cannot be flipped: left out of lines and bands ({left_out})."
    style.add_note(fig, note)
    return fig
