"""The curvature figure's signed (symlog) axes print no tick label over another."""

import numpy as np
import pandas as pd

from robustkit.figures import curvature
from robustkit.figures.style import plt


def _overlapping_labels(values: np.ndarray, height_in: float) -> list[tuple[str, str]]:
    fig, ax = plt.subplots(figsize=(3.0, height_in))
    ax.plot(np.zeros_like(values), values, "o")
    curvature._scale(ax, pd.Series(values))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = [
        t
        for t in ax.get_yticklabels()
        if t.get_visible() and t.get_text() and ax.get_ylim()[0] <= t.get_position()[1] <= ax.get_ylim()[1]
    ]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in labels]
    plt.close(fig)
    return [(a, b) for i, (a, box_a) in enumerate(boxes) for b, box_b in boxes[i + 1 :] if box_a.overlaps(box_b)]


def test_signed_values_over_many_decades_keep_their_tick_labels_apart():
    # The Hessian trace of runs at a saddle: -30 to 700, with small values near 0 (the panel that
    # printed "10^-1", "0" and "-10^0" over each other).
    values = np.array([700.0, 300.0, 30.0, 12.0, 2.0, 1.1, 0.3, 0.05, -0.8, -30.0, -45.0])
    assert _overlapping_labels(values, height_in=1.6) == []


def test_symlog_ticks_keep_zero_the_top_decades_and_their_step():
    values = np.array([700.0, 0.05, -30.0])
    assert curvature._symlog_ticks(values, linthresh=0.01, step=1) == [
        -10.0,
        -1.0,
        -0.1,
        -0.01,
        0.0,
        0.01,
        0.1,
        1.0,
        10.0,
        100.0,
    ]
    # Every 2nd decade, and none within 2 decades of 0 (0.01 is 1 decade away, 0.1 is 2).
    assert curvature._symlog_ticks(values, linthresh=0.01, step=2) == [-10.0, -0.1, 0.0, 1.0, 100.0]


def test_positive_values_keep_a_plain_log_axis():
    fig, ax = plt.subplots()
    curvature._scale(ax, pd.Series([0.001, 5.0, 700.0]))
    assert ax.get_yscale() == "log"
    plt.close(fig)
