"""A run's numeric precision: ``fp32`` (the default) or ``bf16`` autocast.

With ``bf16`` every forward pass of the run's model, in training (the loss the update follows, the
evaluations that pick ``best``) and in the analyses that load it, runs under
``torch.autocast(dtype=torch.bfloat16)``: matrix products and the other ops autocast lists in
bfloat16, reductions, softmax and the loss in float32. The weights, their gradients, AdamW's
moments and the checkpoints stay float32 (autocast casts copies), so a bf16 run is stored and
loaded like any other. It changes what a run computes, so it is part of the run's identity
(:class:`robustkit.specs.spec.RunSpec`), left out of the id at ``fp32`` as every field added after runs
existed.

Autocast is entered by a forward pre-hook and left by a forward hook of the model
(:func:`autocast_forward`), on the device its parameters are on at each call, so an analysis that
moves a model (RSA's representations) needs nothing of its own, and a deep copy (the attacks'
float32 twin) keeps it. Floating outputs (logits, hidden states) are returned in float32, as from
an fp32 run. Autocast never touches float64 tensors, so the attacks' float64 victim computes as
for any run; their float32 twin of a bf16 run screens in bfloat16, which their audited bound
catches (:mod:`robustkit.attacks.pwws`: wider margins, more float64 fallbacks, the same results).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where a model is wrapped: robustkit.specs.spec reads the names only
    from torch import nn

PRECISIONS = ("fp32", "bf16")
DEFAULT_PRECISION = "fp32"


def autocast_forward(model: nn.Module, precision: str) -> nn.Module:
    """``model`` with its forward passes under bfloat16 autocast where ``precision`` is ``bf16``
    (in place, once; returned for chaining). ``fp32`` leaves it as it is.

    Raises
    ------
    ValueError
        ``precision`` is not one of :data:`PRECISIONS`.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; known: {', '.join(PRECISIONS)}")
    if precision == "fp32" or hasattr(model, "_autocast_stack"):
        return model
    model._autocast_stack = []  # one entered context per forward call in progress
    model.register_forward_pre_hook(_enter)
    model.register_forward_hook(_leave, always_call=True)  # also when forward raises
    return model


def _enter(module: nn.Module, args) -> None:
    import torch

    context = torch.autocast(device_type=next(module.parameters()).device.type, dtype=torch.bfloat16)
    context.__enter__()
    module._autocast_stack.append(context)


def _leave(module: nn.Module, args, output):
    module._autocast_stack.pop().__exit__(None, None, None)
    return _float32(output)


def _float32(value):
    """``value`` with its bfloat16 tensors (in tuples, lists and model outputs too) as float32."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.float() if value.dtype == torch.bfloat16 else value
    if isinstance(value, dict):  # transformers' ModelOutput is an ordered dict of its fields
        for key in list(value.keys()):
            value[key] = _float32(value[key])
        return value
    if isinstance(value, (tuple, list)):
        return type(value)(_float32(v) for v in value)
    return value
