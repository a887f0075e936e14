"""Did a run converge? The rule a claim about final performance checks first.

A claim about the final score of runs says nothing when the runs are still improving at the
end of their budget (the demo's adapters leave the majority class a third into training and
their dev loss still falls at the end). The rule, stated before it was applied to any run:

    A run is **still improving** when, over its validation evaluations e_1 .. e_K of the dev
    loss, the lowest loss of the last ``w = max(2, ceil(K / 4))`` evaluations is more than
    ``tolerance`` (1%) below the lowest loss of all the evaluations before them: its dev loss
    reached a new low in the last quarter of training. Runs with fewer than 4 evaluations are
    not judged (False).

Written by hand: it is a rule on a run's own history, not a statistic any library names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from robustkit.store.tables import load_history

TOLERANCE = 0.01
MIN_EVALUATIONS = 4


def improving(losses: Sequence[float], tolerance: float = TOLERANCE) -> bool:
    """Whether a run with these dev losses (in evaluation order) is still improving (module rule).

    Parameters
    ----------
    losses : sequence of float, shape (K,)
        The validation loss at each evaluation, in step order (nats).
    """
    values = np.asarray(losses, float)
    values = values[np.isfinite(values)]
    if len(values) < MIN_EVALUATIONS:
        return False
    window = max(2, math.ceil(len(values) / 4))
    return bool(values[-window:].min() < values[:-window].min() * (1 - tolerance))


def still_improving(store: str | Path, run_ids: Sequence[str]) -> pd.Series:
    """run_id -> whether the run was still improving at its end (:func:`improving` of its dev loss).

    Returns
    -------
    Series of bool, indexed by run_id (runs without a validation loss history: False).
    """
    history = load_history(store)
    history = history[
        history["run_id"].isin(list(run_ids)) & (history["split"] == "validation") & (history["metric"] == "loss")
    ].sort_values("step")
    found = history.groupby("run_id")["value"].apply(lambda v: improving(v.to_numpy()))
    return found.reindex(list(run_ids), fill_value=False).astype(bool)
