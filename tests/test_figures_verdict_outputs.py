"""Issue #55 item 8: figures that never contradict themselves. Means on a log axis sit at their
x, no empty box, and each recipe's title names the figure it draws."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from robustkit.analysis import boxes
from robustkit.figures import stability as plots
from robustkit.figures.score_boxes import LOG_DODGE
from robustkit.figures.style import figure_texts
from robustkit.verdicts.recipes import load_recipe
from tests.test_plots_stability import _runs


def test_means_over_training_sizes_sit_at_their_x_on_a_log_axis():
    """cpu He fig 3 dodged the adapters' means additively on what reads as a log axis: they sat
    at about 420 and 1,200 examples of 300 and 1,000."""
    rng = np.random.default_rng(0)
    scores = {m: list(0.7 + 0.02 * rng.standard_normal(6)) for m in ("full", "houlsby")}
    fig = plots.train_size(**boxes.train_size(_runs(scores, train_size=[300, 1000])), kind="mean")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and [t.get_text() for t in ax.get_xticklabels()] == ["300", "1000"]
    drawn = [line for line in ax.lines if line.get_transform() == ax.transData and len(line.get_xdata())]
    assert drawn  # means, error bars and crosses (the baseline spans the axes)
    xs = np.concatenate([np.asarray(line.get_xdata(), float) for line in drawn])
    dots = [c.get_offsets()[:, 0] for c in ax.collections if c.get_gid() == "run-dots"]
    bars = [
        np.asarray(segment)[:, 0] for c in ax.collections if hasattr(c, "get_segments") for segment in c.get_segments()
    ]
    assert len(dots) == 4 and len(bars) == 4  # 2 methods x 2 sizes
    xs = np.concatenate([xs, *dots, *bars])
    nearest = np.where(np.abs(np.log(xs / 300)) < np.abs(np.log(xs / 1000)), 300, 1000)
    assert np.all(np.abs(np.log(xs / nearest)) <= np.log(LOG_DODGE)), xs  # within 3.5% of its x


def test_no_box_of_fewer_than_two_runs_and_an_empty_slot_says_why():
    """He fig 4 drew empty slots (every run failed) and flat boxes of one run."""
    one = _runs({"full": [0.70, 0.72], "houlsby": [0.53, 0.53]}, lr=[2e-5])
    two = _runs({"full": [0.70, 0.53], "houlsby": [0.76, 0.74]}, lr=[5e-4])
    frame = pd.concat([one, two], ignore_index=True).assign(run_id=lambda f: f["run_id"] + f.index.astype(str))
    ax = plots.box_lr(**boxes.box_lr(frame)).axes[0]
    assert len(ax.patches) == 2  # full at 2e-5, houlsby at 5e-4: the only groups of two runs kept
    assert [t.get_text() for t in ax.texts if t.get_gid() == "empty-slot"] == ["no box:\nno run kept"]


@pytest.mark.parametrize(
    ("recipe", "named"),
    [("he2021/fig2", "figure 2"), ("he2021/fig7", "figure 7"), ("houlsby2019/fig3-4", "figures 3 and 4")],
)
def test_each_recipe_title_names_its_own_figure(recipe, named):
    """houlsby2019/fig3-4 was titled 'figure 4'; He figs 2 and 7 were both 'figures 2 and 7'."""
    from robustkit import figures

    loaded = load_recipe(recipe)
    drawn = figures.get(loaded.figure)
    values = drawn.resolve(**loaded.figure_params("demo"))
    assert values["paper_figure"].endswith(named)
    if loaded.figure == "rsa":
        from robustkit.figures.similarity import rsa_by_layer

        rows = [
            {"run_id": f"{m}{s}", "task": "rt", "method": m, "model": "m", "layer": layer, "measure": "rsa"}
            | {"value": 0.5 + 0.1 * s, "outcome": "ok", "seed": s}
            for m in ("full", "houlsby")
            for s in (0, 1)
            for layer in (0, 1)
        ]
        fig = rsa_by_layer(pd.DataFrame(rows), "rsa", paper_figure=values["paper_figure"])
    else:
        from robustkit.analysis import tradeoff
        from robustkit.figures.tradeoff import tradeoff_figure
        from tests.test_tradeoff import _synthetic

        fig = tradeoff_figure(**tradeoff.tradeoff_points(_synthetic(2)), paper_figure=values["paper_figure"])
    titles = [t for t in figure_texts(fig) if " et al. " in t]
    assert titles and titles[0].split(" — ")[0] == values["paper_figure"]


def test_the_forgetting_bar_is_the_tested_statistic():
    """The bar was the median over every matrix of every run; the claims test the median over
    runs of each run's mean rank (robustkit.analysis.forgetting.update_ranks)."""
    from robustkit.figures.forgetting import forgetting_figure

    points = pd.DataFrame(
        {"run_id": ["a", "b", "c"], "method": "full", "score": 0.8, "metric": "accuracy"}
        | {"forgetting": 0.1, "outcome": "ok", "head": "own"}
    )
    # run a: 1, 1, 100 (mean 34); b: 2, 2, 2; c: 3, 3, 3: pooled median 2, median of run means 3
    values = {"a": [1, 1, 100], "b": [2, 2, 2], "c": [3, 3, 3]}
    ranks = pd.DataFrame(
        [{"run_id": r, "method": "full", "kind": "q", "value": v} for r, vs in values.items() for v in vs]
    )
    run_ranks = ranks.groupby(["run_id", "method"], as_index=False)["value"].mean()
    fig = forgetting_figure(points, ranks, "q,v", "energy_rank", run_ranks)
    bars = [c for c in fig.axes[1].collections if c.get_gid() == "median"]
    assert len(bars) == 1 and np.isclose(bars[0].get_segments()[0][0][1], 3.0)


def test_a_stalled_power_iteration_is_not_converged():
    """A top eigenvalue near 0 beside a large negative one: the shifted power iteration's quotient
    barely moves, and was called converged at 1e-4 (bars to 0.1) when the top one is 1e-3."""
    from robustkit.measures.hessian import HessianVectorProduct, top_eigenvalue
    from tests.test_hessian import _quadratic

    _, parts, loss = _quadratic([-100.0, 1e-3, 5e-4, 2e-4, -1e-4, 0.0, -50.0, 1e-5])
    estimate = top_eigenvalue(HessianVectorProduct(loss, parts), max_iterations=20)
    assert not estimate.converged and estimate.residual > abs(estimate.value)
    _, parts, loss = _quadratic([5.0, 2.0, 1.0, 0.5, -0.3, 0.1, 0.0, 3.0])
    assert top_eigenvalue(HessianVectorProduct(loss, parts), max_iterations=20).converged  # a clear top one


def _curvature_frame() -> pd.DataFrame:
    """Two methods x 3 runs at best: one eigenvalue at the cap, one negative trace; traces per
    layer block only (block_eigenvalues = false)."""
    rows = []
    for method, size in (("full", 50.0), ("houlsby", 5.0)):
        for seed in range(3):
            for estimator in ("top_eigenvalue", "trace"):
                capped = estimator == "top_eigenvalue" and seed == 2
                value = (
                    1e-3 if capped else -80.0 if estimator == "trace" and seed == 2 and method == "houlsby" else size
                )
                rows.append(
                    {"run_id": f"{method}{seed}", "task": "rte", "model": "minilm-l6", "method": method, "seed": seed}
                    | {"checkpoint": "best", "scope": "all", "group": "all", "estimator": estimator, "value": value}
                    | {"spread": 0.1, "spread_kind": "", "iterations": 20, "converged": not capped}
                    | {"n_params": 1000, "examples": 32}
                )
            rows.append({**rows[-1], "scope": "layer", "group": "layer.0", "estimator": "trace", "value": size})
    return pd.DataFrame(rows)


def test_curvature_draws_no_empty_panel_and_no_estimate_that_is_no_sharpness():
    """beyond/curvature drew a 'not computed' panel as a result, and capped eigenvalues and
    negative traces as sharpness, inside the means."""
    from robustkit.figures.curvature import curvature_figure

    fig = curvature_figure(_curvature_frame())
    visible = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert len(visible) == 3 and not any("not computed" in t.get_text() for ax in fig.axes for t in ax.texts)
    assert "were not computed (block_eigenvalues = false)" in " ".join(figure_texts(fig))
    top, trace = visible[0], visible[1]
    crosses = {ax: [line for line in ax.lines if line.get_gid() == "not-a-result"] for ax in (top, trace)}
    assert [len(line.get_xdata()) for line in crosses[top]] == [1, 1]  # each method's capped run
    assert [list(line.get_ydata()) for line in crosses[trace]] == [[-80.0]]
    means = [line for line in top.lines if line.get_linestyle() == "-" and line.get_gid() != "not-a-result"]
    assert all(np.allclose(line.get_ydata(), [50.0]) or np.allclose(line.get_ydata(), [5.0]) for line in means)
