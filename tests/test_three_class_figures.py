"""Issue #57 Why 12: figures of a small model on three classes laid out so that nothing
overlaps or is cut: the ablation heatmap's panel titles and colour-bar label, the box-seeds
legend drawn into a user's Axes. Checked with matplotlib's renderer on small synthetic frames."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd


def _ablation_frame(n_layers: int, sizes: list[int]) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [
        {
            "run_id": f"mine-houlsby-{size}-{seed}",
            "model": "bert-tiny",
            "task": "mine",
            "method": "houlsby",
            "adapter_size": size,
            "adapter_sharing": "none",
            "seed": seed,
            "metric": "accuracy",
            "first": first,
            "last": last,
            "relative_change": -0.3 * rng.random(),
        }
        for size, seed in itertools.product(sizes, range(2))
        for first, last in itertools.product(range(n_layers), repeat=2)
        if first <= last
    ]
    return pd.DataFrame(rows)


def _inside(box, figure_box, slack: float = 1.0) -> bool:
    return (
        box.x0 >= figure_box.x0 - slack
        and box.y0 >= figure_box.y0 - slack
        and box.x1 <= figure_box.x1 + slack
        and box.y1 <= figure_box.y1 + slack
    )


def test_ablation_panels_of_a_two_layer_model_keep_apart():
    from robustkit.analysis.ablation import ablation_heatmap as view
    from robustkit.figures.ablation import ablation_heatmap

    fig = ablation_heatmap(**view(_ablation_frame(2, [8, 64, 256])))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    titles = [ax.title for ax in fig.axes if ax.get_title()]
    assert len(titles) == 3
    boxes = [t.get_window_extent(renderer) for t in titles]
    for a, b in itertools.combinations(boxes, 2):
        assert not a.overlaps(b), (a, b)
    figure_box = fig.bbox
    assert all(_inside(box, figure_box) for box in boxes)
    [bar] = [ax for ax in fig.axes if not ax.get_title() and ax.yaxis.label.get_text()]
    label = bar.yaxis.label
    assert "relative change" in label.get_text()
    assert _inside(label.get_window_extent(renderer), figure_box), (label.get_window_extent(renderer), figure_box)


def test_the_box_seeds_legend_in_a_users_axes_leaves_the_data_free():
    import matplotlib.pyplot as plt
    from test_plots_stability import FULL, HOULSBY, _runs

    from robustkit.analysis import boxes
    from robustkit.figures import canvas
    from robustkit.figures import stability as plots

    frame = _runs({"full": FULL, "houlsby": HOULSBY, "lora": [0.6, 0.62, 0.65, 0.66]})
    fig, (ax, neighbour) = plt.subplots(1, 2, figsize=(8, 3.2), constrained_layout=True)
    neighbour.plot([0, 1], [0, 1])
    with canvas.into(ax):
        plots.box_seeds(**boxes.box_seeds(frame))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend()
    assert legend is not None and len(legend.get_texts()) >= 4
    box = legend.get_window_extent(renderer)
    assert not box.overlaps(ax.get_window_extent(renderer)), "the legend covers the panel's data"
    assert not box.overlaps(neighbour.get_window_extent(renderer))
    assert _inside(box, fig.bbox)
    plt.close(fig)
