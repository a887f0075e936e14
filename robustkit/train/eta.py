"""How long a run will take, measured on its own first steps: one warning before hours of CPU
training (issue #28: the papers' defaults, 20 epochs at length 256, train for hours on a CPU
where the calibrated demo settings take minutes).

The projection is measured, not modelled: the median time of a few optimisation steps after the
first (which pays for allocations; the median, so that one step slowed by another process does
not scale the whole run), times the steps left, plus the evaluations, each a forward
pass over the validation split costed at a third of a training step per batch of the same size
(forward only, where a step is a forward and a backward pass of about twice its cost).
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger(__name__)

MEASURED_STEPS = 10  # steps timed, after one warm-up step
WARN_OVER_S = 600.0  # a projection longer than this, on a CPU, is worth a line before it starts
FORWARD_SHARE = 1 / 3  # an evaluation batch's cost per example, as a share of a training step's


def duration(seconds: float) -> str:
    """``5400`` -> ``"1.5 h"``; ``600`` -> ``"10 min"``; ``42`` -> ``"42 s"``."""
    if seconds >= 5400:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 90:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"


class Projection:
    """Times a run's first steps and warns once when the whole run will take long on a CPU.

    Parameters
    ----------
    label : str
        The run, as its progress bar names it.
    device_type : str
        ``cpu`` warns; other devices never do.
    first_step, total_steps : int
        The step the run starts from (a resumed run's) and its last step.
    eval_steps : int
        Evaluations still to come.
    eval_examples, batch_size : int
        Examples per evaluation (the validation split) and per training step.
    hint : str
        Appended to the warning (what to change).
    """

    def __init__(
        self,
        label: str,
        device_type: str,
        first_step: int,
        total_steps: int,
        eval_steps: int,
        eval_examples: int,
        batch_size: int,
        hint: str = "",
    ):
        self.label, self.active = label, device_type == "cpu"
        self.first, self.total = first_step, total_steps
        self.eval_steps, self.eval_examples, self.batch_size, self.hint = eval_steps, eval_examples, batch_size, hint
        self.started: float | None = None
        self.times: list[float] = []
        self.seconds: float | None = None  # the projected duration, once measured

    def step_done(self, step: int) -> None:
        """Call after each optimisation step (``step``: its number)."""
        if not self.active:
            return
        done, now = step - self.first, time.perf_counter()
        if done > 1 and self.started is not None:  # the warm-up step is not timed
            self.times.append(now - self.started)
        self.started = now
        if len(self.times) == MEASURED_STEPS or (step == self.total and self.times):
            self.active = False
            per_step = sorted(self.times)[len(self.times) // 2]
            self.seconds = self.project(per_step)
            if self.seconds > WARN_OVER_S:
                log.warning(self.message(per_step))

    def project(self, per_step: float) -> float:
        """Seconds the whole run takes at ``per_step`` seconds per training step."""
        evaluation = per_step * FORWARD_SHARE * self.eval_examples / self.batch_size
        return per_step * (self.total - self.first) + evaluation * self.eval_steps

    def message(self, per_step: float) -> str:
        return (
            f"{self.label}: about {duration(self.seconds)} on this CPU ({self.total - self.first:,} steps at "
            f"{per_step:.2f} s each, measured, and {self.eval_steps} evaluations of {self.eval_examples:,} "
            f"examples){self.hint}"
        )
