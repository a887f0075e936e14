"""Whether a run's dev loss is still improving: one definition for the rule that stops a run
(``RunSpec.until_converged``) and the convergence guard every claim about final performance checks
(:mod:`robustkit.analysis.convergence`), so a run stopped by the rule passes the guard by
construction and a run that hit its budget still improving is said to.

    A run is **still improving** when, over its validation evaluations e_1 .. e_K of the dev
    loss, the lowest loss of the last ``w = max(2, ceil(K / 4))`` evaluations is below the
    lowest loss of all the evaluations before them by more than its **tolerance**, in nats: the
    larger of ``tolerance`` (1%) of that earlier low and the run's own **noise**, the median
    absolute change between successive evaluations over the second half of its history (what
    the dev loss moves from one evaluation to the next where a run has settled). A new low
    within that noise is not improvement. Runs with fewer than 4 evaluations are not judged
    (False).

As a stopping rule this is a patience that grows with training (a quarter of the evaluations so
far, at least 2), where Hugging Face's ``EarlyStoppingCallback`` waits a fixed number of
evaluations without improvement: a fixed patience stops a slow starter (the demo's adapters sit
at the majority class for a third of training) as early as a converged run. The rule also never
stops a run that has not yet learned (no validation score significantly above the majority
baseline, :func:`robustkit.store.collapse.ever_learned`): a flat dev loss at the majority class
is a run that has not started, not one that has converged. Replayed on the demo store's 78
histories (``tools/replay_stopping_rule.py``), the rule without that condition stops 21 runs at
the majority class, 6 of which learned later (0.70-0.73 dev accuracy); such a run trains to its
budget instead. Written by hand: it is a rule on a run's own history, not a statistic any
library names.

The rule ends a run mid-schedule: the linear schedule (:func:`robustkit.train.optimiser.linear_lr_factor`)
decays over the whole budget, so a run it stops early never anneals its rate. The cpu scale's
runs stopped this way at a median 25% of a budget twice the demo's, the rate above 80% of its
peak, and full fine-tuning scored about 3 points below its demo runs where adapters did not move
(issue #55 item 5); the cpu scale now trains a fixed budget (:mod:`robustkit.verdicts.sizing`).
A rate calibrated at a fixed budget is not the rate for a run stopped by this rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

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
    earlier = values[:-window].min()
    return bool(values[-window:].min() < earlier - max(tolerance * earlier, noise(values)))


def noise(losses: Sequence[float]) -> float:
    """A run's evaluation-to-evaluation noise (nats): the median absolute change between
    successive dev losses over the second half of its history (0 with fewer than 2 there).

    Parameters
    ----------
    losses : sequence of float, shape (K,)
        Finite validation losses in step order.
    """
    values = np.asarray(losses, float)
    late = values[len(values) // 2 :]
    return float(np.median(np.abs(np.diff(late)))) if len(late) > 1 else 0.0


def converged(losses: Sequence[float], tolerance: float = TOLERANCE, learned: bool | None = None) -> bool:
    """Whether a run stops here under ``until_converged``: judged (at least
    :data:`MIN_EVALUATIONS` finite dev losses), no longer :func:`improving`, and not ``learned``
    False (a run that has not yet left the majority class trains on; None where the metric has
    no majority baseline to judge against)."""
    if learned is False:
        return False
    finite = np.asarray(losses, float)
    return int(np.isfinite(finite).sum()) >= MIN_EVALUATIONS and not improving(losses, tolerance)
