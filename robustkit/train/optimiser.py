"""The optimiser (AdamW over what the method trains, its state as named tensors for checkpoints)
and the learning-rate schedules, pure functions of the step so that a resumed run sets its rate
without replaying a scheduler."""

from __future__ import annotations

import torch

from robustkit.methods.model_parts import layer_groups


def linear_lr_factor(step: int, warmup: int, total: int) -> float:
    """Linear warmup to 1 over ``warmup`` steps, then linear decay to 0 at ``total``.

    The same schedule as ``transformers.get_linear_schedule_with_warmup``, written as a pure
    function of the step so a resumed run sets its learning rate without replaying a scheduler.
    ``total`` is the whole budget: a run stopped before it (``until_converged``) ends with its
    rate still at ``(total - step) / (total - warmup)`` of the peak, never annealed (issue #55
    item 5: why the cpu scale trains its budget to the end).
    """
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


def constant_lr_factor(step: int, warmup: int) -> float:
    """Linear warmup, then constant (TSP: independent of how long the run goes)."""
    return min(1.0, step / max(1, warmup))


class _Optimiser:
    """AdamW over the model's trainable parameters (``requires_grad``), with its state as named
    tensors for checkpoints."""

    def __init__(self, model: torch.nn.Module, lr: float, weight_decay: float):
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.named = named
        self.groups = layer_groups(model)
        self.lr = lr
        self.optimizer = torch.optim.AdamW([p for _, p in named], lr=lr, weight_decay=weight_decay, fused=True)

    def set_lr_factor(self, factor: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr * factor

    def state_tensors(self) -> dict[str, torch.Tensor]:
        out = {}
        for name, parameter in self.named:
            for key, value in self.optimizer.state.get(parameter, {}).items():
                out[f"{name}::{key}"] = torch.as_tensor(value).detach().cpu().clone()
        return out

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        for name, parameter in self.named:
            state = {k.split("::", 1)[1]: v for k, v in tensors.items() if k.split("::", 1)[0] == name}
            if state:
                self.optimizer.state[parameter] = {k: v.to(parameter.device) for k, v in state.items()}
