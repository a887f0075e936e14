"""Curvature of the training loss per method: top Hessian eigenvalue and Hessian trace, for the
whole trained set at each checkpoint and per layer at one checkpoint (issue #16, item 1)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.figure import Figure
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import numpy as np

from robustkit import figures
from robustkit.figures.method_style import method_color, method_label
from robustkit.params import Param

# The figure, as robustkit.figures reads it from this source (its analysis declares its data and view).
DECLARED = figures.register_figure(
    figures.Figure(
        "curvature",
        "Curvature of the training loss: top Hessian eigenvalue (power iteration) and trace (Hutchinson) over the "
        "trained parameters, per checkpoint and per layer block",
        "curvature",
        ":curvature_figure",
        (
            Param(
                "layer_checkpoint",
                "best",
                "checkpoint of the per-layer panels",
                choices=("step-0", "best", "last"),
            ),
        ),
        order=200,
        module=__name__,
    )
)


ESTIMATOR_LABELS = {"top_eigenvalue": "top Hessian eigenvalue", "trace": "Hessian trace"}
# An estimate that is no sharpness (issue #55): a top eigenvalue whose power iteration stopped at
# its cap (the value is wherever the iteration was) or a negative Hessian trace (no minimum's
# curvature: a saddle or the estimate's noise). Drawn as grey crosses, out of the means.
NOT_A_RESULT_STYLE = {"marker": "x", "color": "#7f7f7f", "linestyle": "none", "markersize": 4, "markeredgewidth": 1.0}
CHECKPOINT_ORDER = ("tsp", "step-0", "best", "last")


def curvature_figure(frame: pd.DataFrame, layer_checkpoint: str = "best") -> Figure:
    """Rows: top eigenvalue, trace. Left: the whole trained set per checkpoint (a dot per run,
    its estimate's spread as error bar, the mean over runs joined per method); right: per layer
    at ``layer_checkpoint`` (a dot per run, the means joined). Estimates that are no sharpness
    (:func:`results`: eigenvalues at the iteration cap, negative traces) are grey crosses, left
    out of the means and counted in the note; a panel with nothing computed is not drawn (the
    note says so).

    Parameters
    ----------
    frame : DataFrame
        :func:`robustkit.analysis.curvature.run` output.
    layer_checkpoint : str
        Checkpoint of the per-layer panels (``best`` by default).
    """
    import matplotlib.pyplot as plt

    from robustkit.figures import canvas, style
    from robustkit.figures.labels import paper_title

    if frame.empty:
        raise figures.NothingToDraw("nothing to plot: the frame is empty")
    methods = sorted(frame["method"].unique())
    checkpoints = [c for c in CHECKPOINT_ORDER if c in set(frame["checkpoint"])]
    layers = frame[(frame["scope"] == "layer") & (frame["checkpoint"] == layer_checkpoint)]
    fig, axes = canvas.subplots(
        2,
        2 if not layers.empty else 1,
        figsize=(10.5 if not layers.empty else 5.2, 6.6),
        squeeze=False,
        constrained_layout=True,
    )
    for row, estimator in zip(axes, ("top_eigenvalue", "trace")):
        _by_checkpoint(
            row[0], frame[(frame["scope"] == "all") & (frame["estimator"] == estimator)], methods, checkpoints
        )
        row[0].set_ylabel(f"{ESTIMATOR_LABELS[estimator]}\n(nats per squared parameter unit)")
        row[0].set_title(f"{ESTIMATOR_LABELS[estimator]}, whole trained set", fontsize=9)
        if not layers.empty:
            block = layers[layers["estimator"] == estimator]
            if block.empty:  # block_eigenvalues=False: traces per block only; the note says so
                row[1].set_visible(False)
                continue
            _by_layer(row[1], block, methods)
            row[1].set_title(f"{ESTIMATOR_LABELS[estimator]} per layer block at '{layer_checkpoint}'", fontsize=9)
    axes[-1][0].set_xlabel("checkpoint (tsp: the masked-LM loss at the TSP checkpoint; step-0 = before tuning)")
    if not layers.empty:
        axes[-1][1].set_xlabel("layer block (only that block's parameters move)")
    style.set_title(fig, paper_title("Curvature of the training loss (PyHessian's estimators, Yao et al. 2020)", frame))
    runs = frame.drop_duplicates("run_id").groupby("method")["run_id"].size()
    params = frame[frame["scope"] == "all"].groupby("method")["n_params"].max()
    handles = [
        plt.Line2D(
            [],
            [],
            color=method_color(m),
            marker="o",
            label=f"{method_label(m)} (n={runs[m]} runs, {_count(params[m])} trained parameters)",
        )
        for m in methods
    ]
    if not results(frame).all():
        handles.append(
            plt.Line2D(
                [], [], **NOT_A_RESULT_STYLE, label="no sharpness: eigenvalue at the iteration cap, or a negative trace"
            )
        )
    style.legend_below(fig, axes[0][0], handles, ncols=1)
    style.add_note(fig, _note(frame, layer_checkpoint))
    return fig


def results(frame: pd.DataFrame) -> pd.Series:
    """Whether each estimate is a sharpness to draw and average: a top eigenvalue whose power
    iteration converged (``converged``), a Hessian trace that is positive."""
    import numpy as np

    converged = frame["converged"].astype(bool)
    return np.where(frame["estimator"] == "trace", frame["value"] > 0, converged) & np.isfinite(frame["value"])


def _not_results(ax, x: np.ndarray, rows: pd.DataFrame) -> None:
    """Grey crosses at the estimates that are no result (:func:`results`)."""
    if len(rows):
        ax.plot(x, rows["value"].to_numpy(float), **NOT_A_RESULT_STYLE, zorder=4, gid="not-a-result")


def _by_checkpoint(ax, data: pd.DataFrame, methods: list[str], checkpoints: list[str]) -> None:
    import numpy as np

    offsets = _offsets(len(methods))
    where = {c: i for i, c in enumerate(checkpoints)}
    for offset, method in zip(offsets, methods):
        rows = data[data["method"] == method]
        kept = results(rows)
        _not_results(ax, rows.loc[~kept, "checkpoint"].map(where).to_numpy(float) + offset, rows[~kept])
        rows = rows[kept]
        x = rows["checkpoint"].map(where).to_numpy(float) + offset
        ax.errorbar(
            x,
            rows["value"],
            yerr=_spread(rows),
            fmt="o",
            color=method_color(method),
            markersize=3.5,
            capsize=2,
            alpha=0.8,
            linewidth=0.8,
        )
        means = rows.groupby("checkpoint")["value"].mean().reindex(checkpoints)
        ax.plot(np.arange(len(checkpoints)) + offset, means.to_numpy(), color=method_color(method), linewidth=1.2)
    ax.set_xticks(range(len(checkpoints)), checkpoints)
    _scale(ax, data["value"])
    ax.grid(alpha=0.3)


def _by_layer(ax, data: pd.DataFrame, methods: list[str]) -> None:
    import numpy as np

    groups = sorted(data["group"].unique(), key=_layer_key)
    offsets = _offsets(len(methods))
    position = {g: i for i, g in enumerate(groups)}
    for offset, method in zip(offsets, methods):
        rows = data[data["method"] == method]
        kept = results(rows)
        _not_results(ax, rows.loc[~kept, "group"].map(position).to_numpy(float) + offset, rows[~kept])
        rows = rows[kept]
        # a dot per run (an error bar of the spread over runs would cross zero on a log axis)
        ax.plot(
            rows["group"].map(position).to_numpy(float) + offset,
            rows["value"],
            "o",
            color=method_color(method),
            markersize=3,
            alpha=0.8,
        )
        means = rows.groupby("group")["value"].mean().reindex(groups)
        ax.plot(np.arange(len(groups)) + offset, means.to_numpy(), "-", color=method_color(method), linewidth=1.0)
    ax.set_xticks(range(len(groups)), [g.replace("layer.", "L") for g in groups], rotation=30, fontsize=7)
    _scale(ax, data["value"])
    ax.grid(alpha=0.3)


def _spread(rows: pd.DataFrame) -> np.ndarray:
    """Error bar half-widths: the eigenvalue's residual bound, or 2 standard errors of the trace."""
    import numpy as np

    factor = np.where(rows["estimator"] == "trace", 2.0, 1.0)
    return rows["spread"].fillna(0).to_numpy() * factor


def _scale(ax, values: pd.Series) -> None:
    import numpy as np

    finite = values[np.isfinite(values)]
    if finite.empty:
        return
    magnitudes = finite.abs()[finite != 0]
    if magnitudes.empty or magnitudes.max() / magnitudes.min() <= 20:
        return  # a linear axis shows a narrow range best
    if (finite > 0).all():
        ax.set_yscale("log")
    else:  # signed values (negative curvature away from a minimum): log-like on both sides
        linthresh = 10.0 ** np.floor(np.log10(magnitudes.min()))
        ax.set_yscale("symlog", linthresh=linthresh)
        ax.set_yticks(_symlog_ticks(finite.to_numpy(), linthresh, _decades_per_label(ax, finite, linthresh)))
        ax.minorticks_off()


def _decades_per_label(ax, values: pd.Series, linthresh: float) -> int:
    """How many decades apart two tick labels must be not to print over each other on ``ax``.

    From the panel's height and the tick font: on a short panel spanning many decades,
    Matplotlib's own locator labels every decade and the labels around 0 collide.
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.font_manager import FontProperties

    magnitudes = values.abs()
    decades = 2.0  # the linear range, one decade's height on each side of 0 (linscale = 1)
    for side in (magnitudes[values > 0], magnitudes[values < 0]):
        if not side.empty:
            decades += max(0.0, np.log10(side.max() / linthresh))
    height_pt = ax.get_window_extent().height * 72.0 / ax.figure.dpi
    label_pt = FontProperties(size=plt.rcParams["ytick.labelsize"]).get_size_in_points()
    return max(1, int(np.ceil(1.8 * label_pt * decades / max(height_pt, 1.0))))


def _symlog_ticks(values: np.ndarray, linthresh: float, step: int = 1) -> list[float]:
    """Ticks of a symlog axis: 0, and on each side every ``step``-th decade from the top one
    down, none closer to 0 than ``step`` decades of the axis (``linthresh`` is one decade from 0).
    """
    import numpy as np

    ticks = [0.0]
    for sign in (1.0, -1.0):
        side = values[values * sign > 0] * sign
        if side.size == 0:
            continue
        top = np.floor(np.log10(side.max()))
        lowest = np.log10(linthresh) - 1 + step  # a decade d sits d - log10(linthresh) + 1 from 0
        ticks += [sign * 10.0**d for d in np.arange(top, lowest - 0.5, -float(step))]
    return sorted(ticks)


def _offsets(n: int) -> np.ndarray:
    import numpy as np

    return (np.arange(n) - (n - 1) / 2) * 0.12


def _layer_key(group: str) -> tuple:
    match = re.fullmatch(r"layer\.(\d+)", group)
    order = {"embeddings": 0, "pooler": 2, "classifier": 3, "mlm_head": 4}
    return (1, int(match.group(1))) if match else (order.get(group, 5), 0)


def _count(n: float) -> str:
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}k" if n >= 1e3 else f"{int(n)}"


def _note(frame: pd.DataFrame, layer_checkpoint: str) -> str:
    examples = "/".join(str(int(e)) for e in sorted(frame["examples"].unique()))
    iterations = frame[frame["estimator"] == "top_eigenvalue"]
    capped = int((~iterations["converged"].astype(bool)).sum())
    traces = frame[frame["estimator"] == "trace"]
    negative = int((traces["value"] <= 0).sum())
    layers = frame[(frame["scope"] == "layer") & (frame["checkpoint"] == layer_checkpoint)]
    blockless = not layers.empty and not (layers["estimator"] == "top_eigenvalue").any()
    capped_text = (
        f"; {capped} of {len(iterations)} stopped at the cap before converging: grey crosses, out of the means"
        if capped
        else ""
    )
    negative_text = (
        f"; {negative} of {len(traces)} negative (no minimum: a saddle or noise): grey crosses, out of the means"
        if negative
        else ""
    )
    samples = "/".join(str(int(s)) for s in sorted(frame.loc[frame["estimator"] == "trace", "iterations"].unique()))
    return (
        f"Hessian of the mean training cross-entropy (eval mode) on one fixed batch of {examples} training "
        "examples, the same for every run, over the parameters each run trains: full fine-tuning's and the "
        "adapters' Hessians are over different parameter sets. Top eigenvalue: the largest, by power iteration "
        "(a second, shifted one where the largest-magnitude eigenvalue is negative), "
        f"{int(iterations['iterations'].min())}-{int(iterations['iterations'].max())} Hessian-vector products"
        f"{capped_text}; error bar: the residual "
        "||Hv - λv|| (an eigenvalue lies within it). Trace: Hutchinson with "
        f"{samples} Rademacher samples; error bar: ±2 standard errors"
        f"{negative_text}. "
        f"Left: a dot per run, lines join the means over runs; right ('{layer_checkpoint}'): a dot per run for the "
        "diagonal Hessian block of each layer (robustkit.models.layer_names.layer_group; only that block moves), lines "
        "join the means over runs."
        + (" Top eigenvalues per layer block were not computed (block_eigenvalues = false)." if blockless else "")
    )
