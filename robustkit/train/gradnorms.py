"""Per-layer gradient norms, logged at every step (before clipping)."""

from __future__ import annotations

import torch

from robustkit.models.layer_names import layer_group


def gradient_norms(
    named: list[tuple[str, torch.nn.Parameter]], groups: dict[str, str] | None = None
) -> dict[str, float]:
    """L2 norm of the gradient per layer group (before clipping).

    ``groups`` maps parameter names to groups (:func:`robustkit.methods.model_parts.layer_groups`,
    from the model's structure: any encoder architecture, a method's own parameters under their
    layer); names it lacks are grouped by :func:`robustkit.models.layer_names.layer_group`.

    Returns ``{group: norm}`` in the order the groups first appear in ``named``; each norm is
    ``sqrt(sum over the group's parameters of ||grad||_2^2)``, in float32.
    """
    groups = groups or {}
    grads: list[torch.Tensor] = []
    names: dict[str, int] = {}
    index: list[int] = []
    for name, parameter in named:
        if parameter.grad is not None:
            grads.append(parameter.grad.detach().float())
            index.append(names.setdefault(groups.get(name) or layer_group(name), len(names)))
    if not grads:
        return {}
    # One fused kernel for every tensor's norm (as clip_grad_norm_ does), then one group sum:
    # a loop of pow/sum/add per parameter cost three launches per tensor, which on a GPU made
    # the adapter methods' many small tensors launch-bound (bench/trainers.py).
    squares = torch.stack(torch._foreach_norm(grads, 2)).pow(2)
    totals = torch.zeros(len(names), dtype=squares.dtype, device=squares.device)
    totals.index_add_(0, torch.tensor(index, device=squares.device), squares)
    # one device -> host transfer per step, not one per parameter
    return dict(zip(names, totals.sqrt().tolist()))
