"""Intruder dimensions (Shuttleworth et al. 2024): the count against the threshold epsilon, one
line per run, and each top singular vector's largest |cosine| with the start's by its rank."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.figure import Figure

from robustkit import figures
from robustkit.analysis.declare import INTRUDER_EPSILON, MATRICES
from robustkit.figures.method_style import method_color, method_label

# The figure, as robustkit.figures reads it from this source (its analysis declares its data and view).
DECLARED = figures.register_figure(
    figures.Figure(
        "intruders",
        "Shuttleworth et al. 2024: intruder dimensions, each run's count against the threshold and each top singular "
        "vector's largest |cosine| with the start's",
        "intruders",
        ":intruders_figure",
        (MATRICES, INTRUDER_EPSILON),
        view="robustkit.analysis.intruders:intruder_view",
        order=250,
        module=__name__,
    )
)


def intruders_figure(counts: pd.DataFrame, cosines: pd.DataFrame, matrices: str, epsilon: float) -> Figure:
    """Left: each run's intruder count against epsilon; right: the largest |cosine| by rank.

    Parameters
    ----------
    counts : DataFrame
        :func:`robustkit.analysis.intruders.counts` (identity columns, ``epsilon``, ``value``).
    cosines : DataFrame
        The chosen matrices' rows of :func:`robustkit.analysis.intruders.run`.
    matrices : str
        The kinds counted (``q,v`` or ``all``), for the labels.
    epsilon : float
        The threshold the claims use, marked on both panels.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title

    if counts.empty:
        raise figures.NothingToDraw("no intruder counts to draw")
    fig, (left, right) = canvas.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    groups = _groups(counts)
    for (method, config), style_, run_ids in groups:
        for _, line in counts[counts["run_id"].isin(run_ids)].groupby("run_id"):
            line = line.sort_values("epsilon")
            left.plot(
                line["epsilon"], line["value"], color=method_color(method), linestyle=style_, linewidth=0.9, alpha=0.75
            )
    left.axvline(epsilon, color="#444444", linestyle=":", linewidth=0.9)
    left.set_xlabel(r"threshold $\epsilon$ (intruder: max |cos| < $\epsilon$)")
    left.set_ylabel(f"intruder dimensions (sum over {matrices} matrices)")
    left.set_title("Intruder count per run against the threshold", fontsize=9)
    left.grid(alpha=0.3)
    k = int(cosines["rank"].max())
    width = 0.8 / max(len(groups), 1)
    for i, ((method, config), style_, run_ids) in enumerate(groups):
        part = cosines[cosines["run_id"].isin(run_ids)]
        ranks = part["rank"].to_numpy(float) + (i - (len(groups) - 1) / 2) * width
        right.scatter(ranks, part["max_cosine"], s=6, alpha=0.35, color=method_color(method), linewidths=0)
        mean = part.groupby("rank")["max_cosine"].mean()
        right.plot(
            mean.index,
            mean.to_numpy(),
            color=method_color(method),
            linestyle=style_,
            linewidth=1.4,
            marker="o",
            markersize=3,
        )
    right.axhline(epsilon, color="#444444", linestyle=":", linewidth=0.9)
    right.set_xticks(np.arange(1, k + 1))
    right.set_ylim(-0.02, 1.04)
    right.set_xlabel("rank of the tuned singular vector (1 = largest)")
    right.set_ylabel("max |cos| with the start's singular vectors")
    right.set_title(f"Each top-{k} singular vector ({matrices} matrices; line: mean)", fontsize=9)
    right.grid(alpha=0.3)
    handles = [
        plt.Line2D(
            [],
            [],
            color=method_color(method),
            linestyle=style_,
            label=f"{method_label(method)}{f' [{config}]' if config else ''} (n={len(run_ids)} runs)",
        )
        for (method, config), style_, run_ids in groups
    ]
    style.set_title(fig, paper_title("Intruder dimensions (Shuttleworth et al. 2024)", counts))
    style.legend_below(fig, left, handles)
    checkpoint = "/".join(sorted(map(str, cosines["checkpoint"].unique()))) if "checkpoint" in cosines else ""
    style.add_note(
        fig,
        f"Per layer matrix of each run ({matrices}; low-rank updates merged into the matrix), the top-{k} "
        f"left singular vectors of the tuned matrix at '{checkpoint}' against every left singular vector of "
        "the matrix at step-0. Dotted: the threshold of the claims. Runs whose method changes no weight "
        "matrix (adapters, prefix tuning) have nothing to measure and are not drawn.",
    )
    return fig


def _groups(counts: pd.DataFrame) -> list[tuple[tuple[str, str], str, list[str]]]:
    """The runs' groups: per method, one per value of every setting that varies inside it (LoRA's
    rank...), never pooled; each as ((method, settings text), line style, run ids)."""
    from robustkit.analysis.pooling import mixed_settings
    from robustkit.figures.labels import settings_text
    from robustkit.figures.setting_groups import method_configs

    runs = counts.drop_duplicates("run_id")
    return [
        ((method, settings_text(settings)), line_style, sorted(rows["run_id"]))
        for method, settings, line_style, rows in method_configs(runs, mixed_settings(runs, ["method"]))
    ]
