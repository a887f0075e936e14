"""RSA, linear CKA, debiased CKA and Procrustes distance per layer, side by side, each run with
its token-bootstrap interval (issue #16, item 3)."""

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
        "similarity-ci",
        "RSA, linear CKA, debiased linear CKA and orthogonal Procrustes distance of each layer to the base model, "
        "side by side, each run with a bootstrap interval over the token sample",
        "similarity-ci",
        ":similarity_panels",
        order=230,
        module=__name__,
    )
)


MEASURE_LABELS = {
    "rsa": "RSA (cosine RDMs, Pearson r)",
    "cka": "linear CKA",
    "cka-debiased": "debiased linear CKA",
    "procrustes": "Procrustes distance (0 = same)",
}


def similarity_panels(frame: pd.DataFrame) -> Figure:
    """One panel per measure (columns) and task (rows): per layer, a dot per run with its
    interval as error bar, the runs of a method joined by their mean.

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.similarity_ci.run` output.
    """
    import matplotlib.pyplot as plt

    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title

    if frame.empty:
        raise figures.NothingToDraw("nothing to plot: the frame is empty")
    measures = [m for m in MEASURE_LABELS if m in set(frame["measure"])]
    tasks = sorted(frame["task"].unique())
    methods = sorted(frame["method"].unique())
    fig, axes = canvas.subplots(
        len(tasks),
        len(measures),
        figsize=(3.3 * len(measures), 3.3 * len(tasks)),
        squeeze=False,
        constrained_layout=True,
    )
    for row, task in zip(axes, tasks):
        for ax, measure in zip(row, measures):
            data = frame[(frame["task"] == task) & (frame["measure"] == measure)]
            _panel(ax, data, methods)
            ax.set_title(f"{task}: {MEASURE_LABELS[measure]}", fontsize=8.5)
            ax.set_xlabel("layer (emb = embedding output)")
        row[0].set_ylabel("tuned vs base model")
    runs = frame.drop_duplicates("run_id").groupby("method")["run_id"].size()
    handles = [
        plt.Line2D(
            [], [], color=method_color(m), marker="o", markersize=3, label=f"{method_label(m)} (n={runs[m]} runs)"
        )
        for m in methods
    ]
    style.set_title(
        fig,
        paper_title(
            "Similarity of each layer to the base model: four measures (He et al. 2021 §2.2 and beyond)", frame
        ),
    )
    style.legend_below(fig, axes[0][0], handles)
    style.add_note(fig, _note(frame))
    return fig


def _panel(ax, data: pd.DataFrame, methods: list[str]) -> None:
    import numpy as np

    layers = sorted(data["layer"].unique())
    runs_per_method = {m: sorted(data.loc[data["method"] == m, "run_id"].unique()) for m in methods}
    width = 0.6
    slots = [(m, r) for m in methods for r in runs_per_method[m]]
    offsets = {slot: (i - (len(slots) - 1) / 2) * width / max(len(slots), 1) for i, slot in enumerate(slots)}
    for method in methods:
        color = method_color(method)
        for run_id in runs_per_method[method]:
            rows = data[data["run_id"] == run_id].sort_values("layer")
            x = rows["layer"].to_numpy(float) + offsets[(method, run_id)]
            errors = np.vstack(
                [(rows["value"] - rows["ci_low"]).clip(lower=0), (rows["ci_high"] - rows["value"]).clip(lower=0)]
            )
            ax.errorbar(
                x,
                rows["value"],
                yerr=np.nan_to_num(errors),
                fmt="o",
                color=color,
                markersize=2.5,
                capsize=1.5,
                linewidth=0.8,
                alpha=0.85,
            )
            # the interval itself, where it lies beside the value (a biased estimator's bootstrap shifts)
            ax.vlines(x, rows["ci_low"], rows["ci_high"], color=color, linewidth=2.2, alpha=0.35)
        means = data[data["method"] == method].groupby("layer")["value"].mean().reindex(layers)
        ax.plot(layers, means.to_numpy(), color=color, linewidth=1.0)
    ax.set_xticks(layers, ["emb" if layer == 0 else str(layer) for layer in layers])
    ax.ticklabel_format(axis="y", useOffset=False)
    ax.grid(alpha=0.3)


def _note(frame: pd.DataFrame) -> str:
    tokens = "/".join(str(int(t)) for t in sorted(frame["tokens"].unique()))
    groups = "/".join(str(int(g)) for g in sorted(frame["groups"].unique()))
    confidence = "/".join(f"{c:.0%}" for c in sorted(frame["confidence"].unique()))
    resamples = int(frame["resamples"].max())
    checkpoint = "/".join(sorted(frame["checkpoint"].unique()))
    return (
        f"Each run's '{checkpoint}' checkpoint vs the pretrained model on the same {tokens} sampled dev tokens. Dots: "
        f"a run's value on the whole sample; thick bars: its {confidence} basic bootstrap interval over the tokens "
        f"(random halves of {groups} random token groups, {resamples} halves, no token paired with its own copy), "
        "thin bars join it to the dot where it lies beside it: the reflected interval corrects a half-sample's larger "
        "small-sample bias, which for linear CKA (biased upwards) and the Procrustes distance shifts the interval away "
        "from the whole-sample value. Intervals say how much the token sample moves a run's value, not how runs "
        "(seeds) vary; lines join the means over the runs of a method."
    )
