"""The marks score figures share: runs as dots, failed runs as grey crosses, the baseline.

A run's dots are jittered the same way every time (:func:`strip_points`); a collapsed, diverged
or not-learned run (:mod:`robustkit.store.collapse`) is a grey cross (:data:`COLLAPSED_STYLE`)
or left out of a line (:func:`without_failed`); the majority-class baseline is a dashed line
(:func:`draw_baseline`) kept in view (:func:`include_baseline`). Each has its legend entry.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from robustkit.store.collapse import FAILED_WORDS

# The grey x marks every run that is no result, in the outcome words of robustkit.store.collapse.
COLLAPSED_LABEL = f"failed run ({FAILED_WORDS})"
COLLAPSED_STYLE = {"marker": "x", "color": "#7f7f7f", "linestyle": "none", "markersize": 5, "markeredgewidth": 1.2}
BASELINE_LABEL = "majority-class baseline"
BASELINE_STYLE = {"color": "#444444", "linestyle": "--", "linewidth": 1.0}


def strip_points(**kwargs) -> None:
    """``seaborn.stripplot(**kwargs)`` with the same jitter every time the figure is drawn.

    seaborn 0.13 draws its jitter from NumPy's global random state, which is seeded from the
    operating system: the same frame gave a figure that differed from one drawing to the next
    (6,100 pixels of a connectivity figure). Here the jitter is drawn from a fixed seed, and the
    caller's global state is put back afterwards.
    """
    import seaborn as sns

    state = np.random.get_state()
    np.random.seed(0)
    try:
        sns.stripplot(**kwargs)
    finally:
        np.random.set_state(state)


def without_failed(runs: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The rows of runs whose ``outcome`` is ``ok`` (all rows without the column), and what was
    left out, for a legend (``"2 collapsed left out"``; empty when nothing was).

    A collapsed or diverged run is no result (:mod:`robustkit.store.collapse`): a line's mean is over
    the other runs, and the legend counts the rest.
    """
    if "outcome" not in runs:
        return runs, ""
    failed = runs[runs["outcome"] != "ok"]
    left_out = ", ".join(
        f"{n} {outcome} left out" for outcome, n in failed.groupby("outcome")["run_id"].nunique().items()
    )
    return runs.drop(failed.index), left_out


def collapsed_handle() -> Line2D:
    """Legend entry of the failed-run marker (not-learned, collapsed, undecided or diverged)."""
    return Line2D([], [], **COLLAPSED_STYLE, label=COLLAPSED_LABEL)


def baseline_handle() -> Line2D:
    """Legend entry of the dashed majority-class baseline."""
    return Line2D([], [], **BASELINE_STYLE, label=BASELINE_LABEL)


def draw_baseline(ax: Axes, value: float) -> bool:
    """A dashed horizontal majority-class baseline at ``value`` (shown units); False if NaN."""
    if value is None or not np.isfinite(value):
        return False
    ax.axhline(value, **BASELINE_STYLE, zorder=1)
    return True


def include_baseline(ax: Axes, values: Iterable[float], margin: float = 0.04) -> None:
    """Widen the y limits of ``ax`` so that every finite value (baselines) stays in view."""
    finite = [v for v in values if v is not None and np.isfinite(v)]
    if not finite:
        return
    low, high = ax.get_ylim()
    span = max(high, max(finite)) - min(low, min(finite))
    ax.set_ylim(min(low, min(finite) - margin * span), max(high, max(finite) + margin * span))
