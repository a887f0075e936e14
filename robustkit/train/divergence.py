"""The divergence guard: a run stops at a non-finite loss, gradient norm or weight
(:class:`Diverged`), before anything non-finite is applied or saved."""

from __future__ import annotations

import math

import torch

from robustkit.errors import RobustkitError


class Diverged(RobustkitError):
    """Training met a non-finite number: the run stops (outcome ``diverged``, :mod:`robustkit.collapse`).

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


def non_finite_reason(loss: float, norms: dict[str, float]) -> str | None:
    """Why a step's loss or gradient norms rule out its update (None: they do not)."""
    if not math.isfinite(loss):
        return f"training loss {loss}"
    bad = [layer for layer, value in norms.items() if not math.isfinite(value)]
    return f"gradient norm not finite in {', '.join(bad)}" if bad else None


def weights_finite(named: list[tuple[str, torch.nn.Parameter]]) -> bool:
    """Whether every one of these parameters is finite (one device -> host transfer)."""
    if not named:
        return True
    return bool(torch.stack([torch.isfinite(p.detach()).all() for _, p in named]).all())
