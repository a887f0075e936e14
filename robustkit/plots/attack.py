"""Han et al. 2021 figure 5: PWWS attack success rate vs task-specific pretraining steps."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from robustkit.plots import style
from robustkit.plots.style import method_color, method_label, new_figure


def attack_vs_tsp(summary: pd.DataFrame, convention: str = "openattack") -> Figure:
    """Success rate (%) against TSP steps, one line per method: mean over seeds, ±1 std band.

    Parameters
    ----------
    summary : DataFrame
        :func:`robustkit.analysis.attack.summarize` output (columns ``method, tsp_step,
        convention, success_rate``; one row per run and convention).
    convention : str
        ``openattack`` (prediction flips, misclassified inputs included) or ``gold``.
    """
    data = summary[summary["convention"] == convention]
    if data.empty:
        raise ValueError(f"no rows with convention {convention!r}")
    fig, ax = new_figure()
    for method, group in data.groupby("method", sort=True):
        stats = group.groupby("tsp_step")["success_rate"].agg(["mean", "std", "count"]).sort_index()
        x, mean, std = stats.index.to_numpy(), 100 * stats["mean"], 100 * stats["std"].fillna(0)
        color = method_color(method)
        low, high = int(stats["count"].min()), int(stats["count"].max())
        ax.plot(x, mean, marker="o", color=color, label=f"{method_label(method)} (n={low if low == high else f'{low}-{high}'} runs per point)")
        ax.fill_between(x, mean - std, mean + std, color=color, alpha=0.2, linewidth=0)
    examples = int(data["attacked"].max())
    ax.set_xlabel("task-specific pretraining steps")
    ax.set_ylabel("attack success rate (%)")
    ax.set_title(f"PWWS attack success ({convention} convention, up to {examples} examples/run)", fontsize=9)
    ax.grid(alpha=0.3)
    style.set_title(fig, style.paper_title("Han et al. 2021, figure 5", data))
    handles, _ = ax.get_legend_handles_labels()
    style.legend_below(fig, ax, handles, ncols=1)
    style.add_note(fig, "Lines: mean over the runs (seeds) at each TSP step; bands: ±1 std over them (ddof 1).")
    return fig
