"""The divergence guard: a run stops (:class:`Diverged`), before the step's update is applied or
anything is saved, at

- a non-finite training loss, gradient norm or weight; or
- an exploded training loss: a step's loss above :data:`LOSS_FACTOR` times the run's first
  training loss and above :data:`LOSS_FLOOR` nats. A finite run can blow up without ever
  reaching inf (``lr=1e3`` took the loss from 0.68 to 120,577 and was stored ``complete``); a
  run that learns or collapses stays near its start (cross-entropy of a 2-class head starts
  at ln 2 = 0.69 nats; a masked LM's at a few nats), and no mean cross-entropy over a batch
  reaches 20 times that without logits blown up. The floor keeps a run whose first loss is
  already tiny from stopping at ordinary noise.
"""

from __future__ import annotations

import math

import torch

from robustkit.errors import RobustkitError


class Diverged(RobustkitError):
    """Training met a non-finite number: the run stops (outcome ``diverged``, :mod:`robustkit.store.collapse`).

    Attributes
    ----------
    step : int
        Optimisation step (1-based) at which it was found.
    reason : str
        What was not finite: the training loss, the gradient norm of which layer groups, or
        the weights.
    loss : float or None
        The step's training loss where it was computed (possibly NaN or inf).
    """

    def __init__(self, step: int, reason: str, loss: float | None = None, run: str | None = None):
        self.step, self.reason, self.loss = step, reason, loss
        super().__init__(f"{f'run {run!r} ' if run else ''}diverged at step {step}: {reason}")

    def named(self, run: str) -> Diverged:
        """The same divergence, its message naming the run."""
        return Diverged(self.step, self.reason, self.loss, run)


# The exploded-loss rule (see the module docstring), stated before any run was judged by it.
LOSS_FACTOR = 20.0
LOSS_FLOOR = 10.0


def non_finite_reason(loss: float, norms: dict[str, float], first_loss: float | None = None) -> str | None:
    """Why a step's loss or gradient norms rule out its update (None: they do not).

    ``first_loss`` is the run's first training loss (None at the first step): a loss above
    :data:`LOSS_FACTOR` times it and above :data:`LOSS_FLOOR` has exploded.
    """
    if not math.isfinite(loss):
        return f"training loss {loss}"
    if first_loss is not None and loss > LOSS_FACTOR * first_loss and loss > LOSS_FLOOR:
        return f"training loss {loss:.4g} exploded (above {LOSS_FACTOR:g} x its first value {first_loss:.4g})"
    bad = [layer for layer, value in norms.items() if not math.isfinite(value)]
    return f"gradient norm not finite in {', '.join(bad)}" if bad else None


def weights_finite(named: list[tuple[str, torch.nn.Parameter]]) -> bool:
    """Whether every one of these parameters is finite (one device -> host transfer)."""
    if not named:
        return True
    return bool(torch.stack([torch.isfinite(p.detach()).all() for _, p in named]).all())
