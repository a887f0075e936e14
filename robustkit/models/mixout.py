"""Mixout (Lee et al. 2020): dropout toward the weights at the start of tuning instead of toward 0.

During training, each input neuron of a linear layer has its outgoing weights (one column of the
``(out, in)`` weight) swapped for their values ``w0`` at the start of tuning with probability p,
rescaled so that the expectation is the current weight W::

    W_eff = w0 + M * (W - w0) / (1 - p),    M ~ Bernoulli(1 - p), one draw per input neuron

In evaluation ``W_eff = W``. He et al. 2021 table 7 apply it with p = 0.9.

:func:`apply_mixout` with p > 0 (p = 0 leaves the model untouched) switches off every dropout
of the model and makes every ``nn.Linear`` whose weight trains a :class:`MixLinear` whose ``w0``
is its weight at that moment (call it at step 0 of tuning); frozen linear layers stay as they
are. :class:`MixLinear` reuses the layer's own ``weight`` and ``bias`` and keeps ``w0`` in a
non-persistent buffer, so parameter names, the optimiser, ``state_dict`` and the checkpoints are
those of a run without mixout; its masks come from torch's global RNG, so resumed runs stay
bit-identical.

The derivation (the L2 view), which layers each method mixes, and the two deliberate differences
from the authors' reference code: ``docs/reference.md``, "robustkit/models/mixout.py".
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from robustkit.errors import MethodError


def check_probability(p: float) -> float:
    """``p`` as a float, if it is a mixout probability (0 <= p < 1).

    Raises
    ------
    MethodError
        Not a number, or outside [0, 1) (p = 1 would freeze every layer at w0 and divide by 0).
    """
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 1:
        raise MethodError(f"mixout probability must be a number with 0 <= p < 1, got {p!r}")
    return float(p)


def draw_mask(weight: torch.Tensor, p: float) -> torch.Tensor:
    """One Bernoulli(1 - p) keep-draw per input neuron, from torch's global RNG.

    Parameters
    ----------
    weight : Tensor, shape (out_features, in_features)
    p : float
        Mixout probability: the chance that an input neuron's weights are replaced by w0.

    Returns
    -------
    Tensor, shape (1, in_features)
        1 = keep W, 0 = take w0; broadcasts over the output rows, so a whole column (all
        outgoing weights of one input neuron) is kept or replaced together, as dropout of that
        neuron would.
    """
    return torch.empty(1, weight.shape[1], dtype=weight.dtype, device=weight.device).bernoulli_(1 - p)


def mix_weight(weight: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, p: float) -> torch.Tensor:
    """The mixed weight ``w0 + M (W - w0) / (1 - p)``; its expectation over M is W.

    Parameters
    ----------
    weight : Tensor, shape (out_features, in_features)
        W, the trained parameter (gradients flow to it, scaled by M / (1 - p)).
    target : Tensor, shape (out_features, in_features)
        w0, the weight at the start of tuning.
    mask : Tensor, shape (1, in_features) or (out_features, in_features)
        M, from :func:`draw_mask`.
    p : float
        Mixout probability, 0 <= p < 1.

    Returns
    -------
    Tensor, shape (out_features, in_features)
    """
    return target + (weight - target) * (mask / (1 - p))


class MixLinear(nn.Linear):
    """A linear layer with mixout toward its weight at the time of wrapping.

    Built from an existing ``nn.Linear``, it holds that layer's own ``weight`` and ``bias``
    parameter objects (names and optimiser state unchanged) and a copy of the weight as the
    non-persistent buffer ``target`` (w0, left out of ``state_dict``).

    Parameters
    ----------
    linear : nn.Linear
        The layer to wrap; its weight (out_features, in_features) at this moment becomes w0.
    p : float
        Mixout probability, 0 <= p < 1; with p = 0 the layer is exactly ``linear``.
    """

    def __init__(self, linear: nn.Linear, p: float):
        # nn.Linear.__init__ would allocate and initialise a new weight: take the layer's own.
        nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self.p = check_probability(p)
        self.register_buffer("target", linear.weight.detach().clone(), persistent=False)

    def forward(self, input: torch.Tensor) -> torch.Tensor:
        """``F.linear`` with the mixed weight in training mode, with W in evaluation mode.

        Parameters
        ----------
        input : Tensor, shape (..., in_features)

        Returns
        -------
        Tensor, shape (..., out_features)
        """
        if not self.training or self.p == 0:
            return F.linear(input, self.weight, self.bias)
        weight = mix_weight(self.weight, self.target, draw_mask(self.weight, self.p), self.p)
        return F.linear(input, weight, self.bias)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, p={self.p}"


def apply_mixout(model: nn.Module, p: float) -> list[str]:
    """Replace the model's dropout by mixout(w0, p) on its trained linear layers (in place).

    Call it when the weights are those of step 0 of tuning (after a TSP checkpoint is loaded):
    they become the targets w0. See the module docstring for which layers are mixed.

    Parameters
    ----------
    model : nn.Module
        A model whose trained parameters have ``requires_grad`` (see
        :func:`robustkit.methods.apply_method`).
    p : float
        Mixout probability, 0 <= p < 1; 0 changes nothing (the model keeps its dropout).

    Returns
    -------
    list of str
        Names of the modules now mixed, in ``named_modules`` order (empty for p = 0).

    Raises
    ------
    MethodError
        ``p`` out of range, or a trained linear layer of a subclass with its own forward (such
        as AdapterHub's LoRA layers), which mixout would silently change.
    """
    p = check_probability(p)
    if p == 0:
        return []
    disable_dropout(model)
    return mix_linears(model, p)


def disable_dropout(model: nn.Module) -> None:
    """Set every dropout probability of the model to 0 (in place).

    ``nn.Dropout`` modules and the float ``dropout_prob`` that transformers' SDPA attention
    passes to ``scaled_dot_product_attention`` instead of calling its ``nn.Dropout``.
    """
    for module in model.modules():
        if isinstance(module, nn.modules.dropout._DropoutNd):
            module.p = 0.0
        if isinstance(getattr(module, "dropout_prob", None), float):
            module.dropout_prob = 0.0


def mix_linears(model: nn.Module, p: float) -> list[str]:
    """Wrap every ``nn.Linear`` whose weight trains in a :class:`MixLinear` (in place).

    Leaves dropout as it is (see :func:`apply_mixout` for the method of Lee et al.). A layer
    reachable under several names (a shared adapter) is wrapped once and stays shared.

    Returns
    -------
    list of str
        Names of the wrapped modules (first name of a shared one).
    """
    wrapped: dict[int, MixLinear] = {}
    names = []
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if not isinstance(child, nn.Linear) or isinstance(child, MixLinear) or not child.weight.requires_grad:
                continue
            if type(child) is not nn.Linear:
                raise MethodError(
                    f"mixout cannot wrap the trained layer {parent_name}.{child_name} of type {type(child).__name__}"
                )
            if id(child) not in wrapped:
                wrapped[id(child)] = MixLinear(child, p)
                names.append(f"{parent_name}.{child_name}" if parent_name else child_name)
            setattr(parent, child_name, wrapped[id(child)])
    return names
