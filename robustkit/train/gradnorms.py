"""Per-layer gradient norms, logged at every step (before clipping)."""

from __future__ import annotations

import torch

from robustkit.layer_names import layer_group


def gradient_norms(named: list[tuple[str, torch.nn.Parameter]], groups: dict[str, str] | None = None) -> dict[str, float]:
    """L2 norm of the gradient per layer group (before clipping).

    ``groups`` maps parameter names to groups (:func:`robustkit.methods.model_parts.layer_groups`,
    from the model's structure: any encoder architecture, a method's own parameters under their
    layer); names it lacks are grouped by :func:`robustkit.layer_names.layer_group`.
    """
    groups = groups or {}
    squares: dict[str, torch.Tensor] = {}
    for name, parameter in named:
        if parameter.grad is not None:
            group = groups.get(name) or layer_group(name)
            squares[group] = squares.get(group, 0.0) + parameter.grad.detach().float().pow(2).sum()
    # one device -> host transfer per step, not one per parameter
    values = torch.stack(list(squares.values())).sqrt().tolist() if squares else []
    return dict(zip(squares, values))
