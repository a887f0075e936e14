"""Flat-LoRA (Li et al. 2024): a LoRA run's sharpness in its LoRA parameters and in the merged
weight matrices, paired per run, and the log ratio."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.figure import Figure

from robustkit import figures
from robustkit.figures.method_style import method_color, method_label

# The figure, as robustkit.figures reads it from this source (its analysis declares its data and view).
DECLARED = figures.register_figure(
    figures.Figure(
        "lora-sharpness",
        "Li et al. 2024 (Flat-LoRA): each LoRA run's sharpness in its LoRA parameters and in the merged weight "
        "matrices, side by side",
        "lora-sharpness",
        ":lora_space_figure",
        view="robustkit.analysis.lora_space:lora_space_view",
        order=270,
        module=__name__,
    )
)


ESTIMATORS = {"top_eigenvalue": "top Hessian eigenvalue", "trace_per_parameter": "Hessian trace / parameters"}
SPACES = ("lora", "full")
SPACE_LABELS = {"lora": "LoRA factors A, B", "full": "merged matrices W"}


def lora_space_figure(values: pd.DataFrame, ratios: pd.DataFrame) -> Figure:
    """Per estimator: each run's value in both spaces joined by a line (log scale); last panel:
    log10(full / LoRA) per run and estimator.

    Parameters
    ----------
    values : DataFrame
        :func:`robustkit.analysis.lora_space.per_parameter` of the analysis's frame.
    ratios : DataFrame
        Identity columns, ``estimator``, ``value`` (log10 full / LoRA).
    """
    import matplotlib.pyplot as plt

    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title

    if values.empty:
        raise figures.NothingToDraw("no LoRA runs to draw")
    fig, axes = canvas.subplots(1, 3, figsize=(11, 3.7), constrained_layout=True)
    methods = sorted(values["method"].unique())
    for ax, estimator in zip(axes, ESTIMATORS):
        part = values[values["estimator"] == estimator]
        for (run_id, method), run in part.groupby(["run_id", "method"]):
            run = run.set_index("space").reindex(list(SPACES))
            ax.plot(
                range(len(SPACES)), run["value"], color=method_color(method), marker="o", markersize=4, linewidth=0.9
            )
        ax.set_xticks(range(len(SPACES)), [SPACE_LABELS[s] for s in SPACES], fontsize=8)
        ax.set_xlim(-0.4, len(SPACES) - 0.6)
        if (part["value"] > 0).all():
            ax.set_yscale("log")
        ax.set_ylabel(f"{ESTIMATORS[estimator]} (loss per squared unit)")
        ax.set_title(f"{ESTIMATORS[estimator]}, a line per run", fontsize=9)
        ax.grid(alpha=0.3)
    last = axes[-1]
    for i, estimator in enumerate(ESTIMATORS):
        part = ratios[ratios["estimator"] == estimator]
        for method in methods:
            chosen = part[part["method"] == method]
            last.scatter(
                [i] * len(chosen), chosen["value"], color=method_color(method), s=22, edgecolor="black", linewidth=0.4
            )
    last.axhline(0, color="#444444", linestyle=":", linewidth=0.9)
    last.set_xticks(range(len(ESTIMATORS)), list(ESTIMATORS.values()), fontsize=8)
    last.set_xlim(-0.5, len(ESTIMATORS) - 0.5)
    last.set_ylabel("log10 (merged matrices / LoRA factors)")
    last.set_title("Above 0: sharper in the full weights", fontsize=9)
    last.grid(alpha=0.3, axis="y")
    handles = [plt.Line2D([], [], color=method_color(m), marker="o", label=method_label(m)) for m in methods]
    style.set_title(fig, paper_title("Flat in LoRA space, sharp in full space? (Li et al. 2024, Flat-LoRA)", values))
    style.legend_below(fig, axes[0], handles)
    checkpoint = "/".join(sorted(map(str, values["checkpoint"].unique())))
    examples = "/".join(str(e) for e in sorted(values["examples"].unique()))
    style.add_note(
        fig,
        f"At each run's '{checkpoint}' checkpoint, on one fixed batch of {examples} training examples: the "
        "Hessian of the training loss over the LoRA factors (A, B of every adapted matrix) and over the same "
        "matrices with the update merged (W = W_0 + (alpha/r) B A); head and everything else fixed. Units "
        "differ (per squared factor vs weight unit): the trace per parameter divides out the dimensions.",
    )
    return fig
