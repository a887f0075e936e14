"""Learning vs forgetting (Biderman et al. 2024): each run's task score against its forgetting,
and the rank of each weight update per method."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.figure import Figure

from robustkit import figures
from robustkit.analysis.declare import MATRICES, RANK_MEASURE
from robustkit.figures.method_style import method_color, method_label, method_tick

# The figure, as robustkit.figures reads it from this source (its analysis declares its data and view).
DECLARED = figures.register_figure(
    figures.Figure(
        "forgetting",
        "Biderman et al. 2024: learning (the task score) against forgetting (masked-LM loss on held-out text), and "
        "the rank of each weight update",
        "forgetting",
        ":forgetting_figure",
        (MATRICES, RANK_MEASURE),
        view="robustkit.analysis.forgetting:forgetting_view",
        score_axis=True,
        order=260,
        module=__name__,
    )
)


RANK_LABELS = {
    "energy_rank": "rank holding 90% of the update's squared norm",
    "effective_rank": "effective rank (Roy & Vetterli 2007)",
}


def forgetting_figure(
    points: pd.DataFrame,
    ranks: pd.DataFrame,
    matrices: str,
    rank_measure: str,
    run_ranks: pd.DataFrame | None = None,
) -> Figure:
    """Left: validation score (learning) against forgetting, a dot per run; right: the update
    rank of every changed matrix (small dots), each run's mean over them (large dots) and the
    median over runs of those means (bar: the statistic the update-rank claims test), per
    method, with each LoRA run's rank r dashed.

    Parameters
    ----------
    points : DataFrame
        Per run: ``method``, ``score``, ``metric``, ``forgetting``, ``outcome``, ``head``
        (:func:`robustkit.analysis.forgetting.forgetting_view`).
    ranks : DataFrame
        Per run x matrix: ``method``, ``kind``, ``value``; ``lora.r`` where present.
    run_ranks : DataFrame, optional
        Per run: ``method``, ``value`` (its mean update rank over ``ranks``' matrices,
        :func:`robustkit.analysis.forgetting.update_ranks`); without it no bar is drawn.
    matrices, rank_measure : str
        What the right panel shows (for its labels).
    """
    import matplotlib.pyplot as plt
    import numpy as np

    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title

    if points.empty:
        raise figures.NothingToDraw("no runs to draw")
    fig, (left, right) = canvas.subplots(1, 2, figsize=(10, 3.9), constrained_layout=True)
    methods = sorted(points["method"].unique())
    for method in methods:
        part = points[points["method"] == method]
        ok = part["outcome"] == "ok"
        left.scatter(
            part.loc[ok, "score"],
            part.loc[ok, "forgetting"],
            color=method_color(method),
            s=28,
            edgecolor="black",
            linewidth=0.4,
        )
        if (~ok).any():
            left.scatter(
                part.loc[~ok, "score"], part.loc[~ok, "forgetting"], color=method_color(method), marker="x", s=30
            )
    left.axhline(0, color="#444444", linestyle=":", linewidth=0.8)
    metric = "/".join(sorted(points["metric"].unique()))
    left.set_xlabel(f"learning: validation {metric}")
    left.set_ylabel("forgetting: held-out masked-LM loss\ntuned − pre-trained encoder (nats / masked token)")
    left.set_title("Learning vs forgetting, a dot per run", fontsize=9)
    left.grid(alpha=0.3)
    shown = [m for m in methods if m in set(ranks["method"])]
    for i, method in enumerate(shown):
        values = ranks.loc[ranks["method"] == method, "value"].to_numpy(float)
        jitter = np.random.default_rng(i).uniform(-0.15, 0.15, len(values))  # placement only
        right.scatter(
            np.full(len(values), i) + jitter, values, s=6, alpha=0.35, color=method_color(method), linewidths=0
        )
        if run_ranks is None:
            continue
        # the bar is what the claims test: the median over runs of each run's mean rank (issue #55:
        # it was the median over every matrix of every run, a statistic no claim reads)
        means = run_ranks.loc[run_ranks["method"] == method, "value"].to_numpy(float)
        spread = np.random.default_rng(100 + i).uniform(-0.08, 0.08, len(means))
        right.scatter(
            np.full(len(means), i) + spread,
            means,
            s=30,
            color=method_color(method),
            edgecolor="black",
            linewidth=0.6,
            zorder=3,
            gid="run-means",
        )
        if len(means):
            right.hlines(np.median(means), i - 0.3, i + 0.3, color="black", linewidth=1.4, zorder=4, gid="median")
    if "lora.r" in ranks:
        for r in sorted(ranks["lora.r"].dropna().unique()):
            right.axhline(float(r), color=method_color("lora"), linestyle="--", linewidth=0.9)
            right.text(len(shown) - 0.5, float(r), f" LoRA r = {float(r):g}", va="bottom", ha="right", fontsize=7)
    right.set_xticks(range(len(shown)), [method_tick(m) for m in shown], fontsize=7)
    right.set_xlim(-0.6, max(len(shown) - 0.4, 0.6))
    right.set_ylabel(RANK_LABELS.get(rank_measure, rank_measure))
    right.set_title(
        f"Rank of each weight update W_tuned − W_0 ({matrices} matrices)\n"
        + (
            "small dots: matrices; large: each run's mean; bar: median of the runs' means"
            if run_ranks is not None
            else ""
        ),
        fontsize=9,
    )
    right.grid(alpha=0.3, axis="y")
    handles = [
        plt.Line2D([], [], color=method_color(m), marker="o", linestyle="none", label=method_label(m)) for m in methods
    ]
    if (points["outcome"] != "ok").any():
        handles.append(plt.Line2D([], [], color="#444444", marker="x", linestyle="none", label="failed run (not ok)"))
    style.set_title(fig, paper_title("Learning vs forgetting (Biderman et al. 2024)", points))
    style.legend_below(fig, left, handles)
    head = "/".join(sorted(points["head"].unique()))
    style.add_note(
        fig,
        "Forgetting: masked-LM cross-entropy on held-out WordNet glosses (no task's text) through the "
        f"pre-trained model's masked-LM head ({head}: 'own' = the model's, 'fitted' = robustkit's TSP head "
        "fitted on the frozen pre-trained encoder), the tuned encoder minus the pre-trained one. Right: one "
        "small dot per changed weight matrix of every run (LoRA updates merged), a large one per run (its mean "
        "over them) and the median over runs of those means; methods that change no matrix have none.",
    )
    return fig
