"""Did a run converge? The guard a claim about final performance checks first.

A claim about the final score of runs says nothing when the runs are still improving at the
end of their budget (the demo's adapters leave the majority class a third into training and
their dev loss still falls at the end). The rule, stated before it was applied to any run, is
:func:`robustkit.train.convergence_rule.improving`, the same that stops a run trained
``until_converged``: a run stopped by it passes this guard by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from robustkit.store.tables import load_history
from robustkit.train.convergence_rule import MIN_EVALUATIONS, TOLERANCE, improving

__all__ = ["MIN_EVALUATIONS", "TOLERANCE", "improving", "still_improving"]  # the rule's names, re-exported


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
