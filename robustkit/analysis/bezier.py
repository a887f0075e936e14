"""A quadratic Bezier curve between two sets of weights, its control point trained on a loss
(Garipov et al. 2018, "Loss Surfaces, Mode Connectivity, and Fast Ensembling of DNNs", §3).

The curve from theta_A (t = 0) to theta_B (t = 1) with control point theta_C::

    phi(t) = (1 - t)^2 theta_A + 2 t (1 - t) theta_C + t^2 theta_B,    t in [0, 1]

With theta_C at the midpoint (theta_A + theta_B) / 2 it is the straight line (1 - t) theta_A +
t theta_B; Garipov et al. start there and minimise the loss averaged over the curve,
E_{t ~ U(0, 1)} L(phi(t)), by stochastic gradient steps on theta_C alone: at each step one t is
drawn uniformly and the gradient of L at phi(t), scaled by d phi / d theta_C = 2 t (1 - t), is
the control point's gradient.

:func:`train_control_point` does this the way robustkit trains a run: each step seeded from
(seed, step) alone (the t drawn, dropout), AdamW at the caller's learning rate with its
schedule (:func:`robustkit.train.optimiser.linear_lr_factor`: warmup, then linear decay to 0),
gradient clipping, and a resumable state (the control point, AdamW's moments, the step)
written every ``save_every`` steps, so an interrupted training resumes and ends on the same
control point bit for bit. A non-finite loss stops it with an error.

Written here: Garipov et al.'s ``dnn-mode-connectivity`` is research code for image models
whose curves are layer classes of their own (``curves.Linear``, ``curves.Conv2d``); a
Hugging Face model's tensors need the curve as weights placed into the model, which is this
module. Tested on a toy loss whose two minima are joined by a curved valley the line misses.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path

import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from robustkit.errors import RobustkitError
from robustkit.store.atomic import atomic_write_bytes
from robustkit.train.loop import seed_step
from robustkit.train.optimiser import linear_lr_factor

STAGE = "curve"  # seed_step's stage: the curve's draws differ from the runs' own
STATE_FILE = "curve-state.safetensors"
STEP_FILE = "curve-state.json"


def weights(t: float) -> tuple[float, float, float]:
    """The curve's coefficients of theta_A, theta_C, theta_B at ``t``: (1-t)^2, 2t(1-t), t^2."""
    return (1 - t) ** 2, 2 * t * (1 - t), t**2


def midpoint(start: Mapping[str, torch.Tensor], end: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The control point that makes the curve the straight line: (theta_A + theta_B) / 2."""
    return {name: (start[name] + end[name]) / 2 for name in start}


@torch.no_grad()
def place(parameters: Mapping[str, torch.Tensor], start: Mapping, control: Mapping, end: Mapping, t: float) -> None:
    """Set ``parameters`` (the model's, in place) to phi(t)."""
    a, c, b = weights(t)
    for name, parameter in parameters.items():
        parameter.copy_(a * start[name] + c * control[name] + b * end[name])


@torch.no_grad()
def place_line(parameters: Mapping[str, torch.Tensor], start: Mapping, end: Mapping, t: float) -> None:
    """Set ``parameters`` to the straight line's (1 - t) theta_A + t theta_B (exact at both ends)."""
    for name, parameter in parameters.items():
        parameter.copy_(torch.lerp(start[name], end[name], t))


def train_control_point(
    model: torch.nn.Module,
    start: Mapping[str, torch.Tensor],
    end: Mapping[str, torch.Tensor],
    loss_of: Callable[[int], torch.Tensor],
    steps: int,
    lr: float,
    seed: int,
    warmup: int = 0,
    weight_decay: float = 0.0,
    max_grad_norm: float | None = None,
    state_dir: str | Path | None = None,
    save_every: int = 50,
    stop_after: int | None = None,
) -> dict[str, torch.Tensor] | None:
    """Train the control point of the curve from ``start`` to ``end`` (module docstring).

    Parameters
    ----------
    model : nn.Module
        The model whose parameters named in ``start`` move along the curve (on any device;
        ``start`` and ``end`` are moved there). They get their values back afterwards, bit for
        bit; the model is left in train mode's opposite only if it came that way.
    start, end : dict of str to Tensor
        theta_A and theta_B, the same names and shapes as the model's parameters.
    loss_of : callable
        ``loss_of(step) -> Tensor``: the model's loss on step ``step``'s batch (1-based), called
        with the model at phi(t) and in train mode; the caller picks the batch.
    steps : int
        Optimiser steps in all.
    lr, warmup, weight_decay, max_grad_norm
        AdamW's rate (peak of the schedule), warmup steps, decoupled weight decay, and the
        clipping norm of the control point's gradient (None: no clipping).
    seed : int
        Seed of each step's draws (:func:`robustkit.train.loop.seed_step` with stage ``curve``).
    state_dir : path, optional
        Where the resumable state is kept; a state found there is resumed from.
    save_every : int
        Steps between saved states (the last step is always saved).
    stop_after : int, optional
        Stop after this step with the state saved, as an interruption would (None: train to
        ``steps``).

    Returns
    -------
    dict of str to Tensor or None
        The trained control point (on the CPU), or None when stopped by ``stop_after`` first.

    Raises
    ------
    RobustkitError
        A non-finite loss, or a saved state that does not fit these tensors.
    """
    from robustkit.analysis.landscape import (  # a registered analysis: imported when used
        moving_parameters,
        restore_parameters,
    )

    if steps < 1:
        raise RobustkitError(f"the control point needs at least 1 step, got {steps}")
    parameters = moving_parameters(model, dict(start), dict(end))
    device = next(iter(parameters.values())).device
    start = {n: start[n].to(device=device, dtype=p.dtype) for n, p in parameters.items()}
    end = {n: end[n].to(device=device, dtype=p.dtype) for n, p in parameters.items()}
    control = {n: tensor.clone().requires_grad_(True) for n, tensor in midpoint(start, end).items()}
    optimiser = torch.optim.AdamW(list(control.values()), lr=lr, weight_decay=weight_decay)
    done = _resume(state_dir, control, optimiser) if state_dir is not None else 0
    original = {n: p.detach().clone() for n, p in parameters.items()}
    grad_state = {n: p.requires_grad for n, p in parameters.items()}
    was_training = model.training
    try:
        for parameter in parameters.values():
            parameter.requires_grad_(True)
        for step in range(done + 1, steps + 1):
            seed_step(seed, step, STAGE)
            t = float(torch.rand(()))
            _, scale, _ = weights(t)
            place(parameters, start, control, end, t)
            model.train()
            loss = loss_of(step)
            if not torch.isfinite(loss):
                raise RobustkitError(
                    f"the curve's loss is not finite at step {step} (t = {t:.3f}): {float(loss.detach())}"
                )
            gradients = torch.autograd.grad(loss, list(parameters.values()), allow_unused=True)
            for tensor, gradient in zip(control.values(), gradients):
                tensor.grad = torch.zeros_like(tensor) if gradient is None else scale * gradient.detach()
            if max_grad_norm:
                torch.nn.utils.clip_grad_norm_(list(control.values()), max_grad_norm)
            for group in optimiser.param_groups:
                group["lr"] = lr * linear_lr_factor(step, warmup, steps)
            optimiser.step()
            optimiser.zero_grad(set_to_none=True)
            if state_dir is not None and (step % save_every == 0 or step == steps or step == stop_after):
                _save(state_dir, control, optimiser, step)
            if stop_after is not None and step >= stop_after and step < steps:
                return None
    finally:
        restore_parameters(parameters, original)
        for name, parameter in parameters.items():
            parameter.requires_grad_(grad_state[name])
        model.train(was_training)
    return {n: tensor.detach().cpu().clone() for n, tensor in control.items()}


def _save(state_dir: str | Path, control: dict, optimiser: torch.optim.Optimizer, step: int) -> None:
    """The control point and AdamW's state, then the step (written last: it commits the state)."""
    state_dir = Path(state_dir)
    tensors = {f"control::{n}": t.detach().cpu().contiguous() for n, t in control.items()}
    for name, tensor in control.items():
        for key, value in optimiser.state.get(tensor, {}).items():
            tensors[f"{key}::{name}"] = torch.as_tensor(value).detach().cpu().contiguous()
    atomic_write_bytes(state_dir / STATE_FILE, save_safetensors(tensors))
    atomic_write_bytes(state_dir / STEP_FILE, json.dumps({"step": step}).encode())


def _resume(state_dir: str | Path, control: dict, optimiser: torch.optim.Optimizer) -> int:
    """Load a saved state into ``control`` and ``optimiser``; the step it was saved at (0: none)."""
    state_dir = Path(state_dir)
    if not (state_dir / STEP_FILE).exists():
        return 0
    step = int(json.loads((state_dir / STEP_FILE).read_text())["step"])
    tensors = load_safetensors((state_dir / STATE_FILE).read_bytes())
    names = {key.split("::", 1)[1] for key in tensors if key.startswith("control::")}
    if names != set(control):
        raise RobustkitError(f"the saved curve state in {state_dir} holds other tensors than this curve's")
    with torch.no_grad():
        for name, tensor in control.items():
            tensor.copy_(tensors[f"control::{name}"])
            # AdamW keeps its step count on the CPU (not capturable), its moments with the tensor
            state = {
                key.split("::", 1)[0]: value if key.startswith("step::") else value.to(tensor.device)
                for key, value in tensors.items()
                if key.split("::", 1)[1] == name and not key.startswith("control::")
            }
            if state:
                optimiser.state[tensor] = state
    return step


def barrier(values, ts) -> tuple[float, float]:
    """max over the path of ``values`` minus the mean of its two ends, and where the maximum is.

    Parameters
    ----------
    values, ts : sequence of float
        The path's values and their t (both ends, t = 0 and t = 1, among them).
    """
    pairs = sorted(zip(ts, values))
    ends = [v for t, v in pairs if t in (0.0, 1.0)]
    if len(ends) != 2:
        raise RobustkitError("a barrier needs the path's values at t = 0 and t = 1")
    finite = [(v, t) for t, v in pairs if math.isfinite(v)]
    top, where = max(finite) if finite else (math.nan, math.nan)
    return top - (ends[0] + ends[1]) / 2, where
