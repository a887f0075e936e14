"""float32 linear layers through oneDNN's matrix product, for the attacks' float32 twin.

PyTorch's CPU builds run a float32 ``nn.Linear`` through the BLAS they link (MKL), which picks
its kernels by CPU vendor; oneDNN, also in every CPU build of PyTorch, picks them by the
instruction sets the CPU reports. On this project's machine (AMD EPYC with AVX-512, torch 2.13)
oneDNN reports running AVX-512 code (``ONEDNN_VERBOSE=1``) and MKL's sgemm runs at half its
rate, as AVX2 code would. Measured at the shapes of a minilm-l6 attack batch (240 tokens x 384
-> 1536):

=========================  =================  =================
kernel                     2 threads          1 thread
=========================  =================  =================
MKL (``F.linear``)         190-216 GFLOP/s    104-108 GFLOP/s
oneDNN                     430-460 GFLOP/s    204-224 GFLOP/s
=========================  =================  =================

Both are float32 products with float32 accumulation (relative error ~1e-6 against float64 in
either). Where MKL already runs AVX-512 (Intel CPUs) the gain is smaller; it is not measured here.

:class:`OneDNNLinear` is a ``TorchFunctionMode``: inside it, ``torch.nn.functional.linear`` on
float32 CPU tensors without gradients runs ``torch.ops.mkldnn._linear_pointwise``, the kernel
``torch.compile`` emits for CPU linear layers. The op is private to PyTorch; the public
``torch.utils.mkldnn.to_mkldnn`` replaces ``nn.Linear`` modules (which drops AdapterHub's LoRA
wrappers) and converts each input to oneDNN's layout and back, which was slower than MKL at these
sizes (175 GFLOP/s). A mode changes no module: AdapterHub's layers, ``first_token_only``'s
last layer and any method's own linear layers all go through it. Whether it is used is *checked*
(:func:`onednn_linear_keeps_logits`): the op must exist and give the model's own logits on a
probe batch, else the twin keeps MKL. Written by hand: neither transformers nor PyTorch offers
this outside ``torch.compile``, whose tracing costs more than a short attack (measured 14 s).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from robustkit.attacks.probe import probe_batch, same_logits


def _onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


class OneDNNLinear(TorchFunctionMode):
    """Within this mode, float32 CPU ``F.linear`` without gradients runs oneDNN's kernel.

    ``F.linear(x, weight, bias)``: ``x`` of shape (..., in), ``weight`` (out, in), ``bias``
    (out,) or None; the result (..., out) as ``F.linear`` gives it, up to float32 rounding. Other
    calls (other dtypes, devices, or with gradients) run as they would outside the mode.

    Attributes
    ----------
    calls : int
        Linear layers run through oneDNN in this mode so far.
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x = args[0] if args else kwargs["input"]
            weight = args[1] if len(args) > 1 else kwargs["weight"]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            if _routable(x, weight, bias):
                self.calls += 1
                return _onednn_linear(x, weight, bias)
        return func(*args, **kwargs)


def _routable(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    tensors = [x, weight] + ([bias] if bias is not None else [])
    return all(t.dtype == torch.float32 and t.device.type == "cpu" for t in tensors) and not (
        torch.is_grad_enabled() and any(t.requires_grad for t in tensors)
    )


def onednn_linear_keeps_logits(model: nn.Module) -> bool:
    """Whether ``model`` (a float32 sequence classifier on the CPU, in eval mode) gives its own
    logits on a probe batch (:func:`robustkit.attacks.probe.probe_batch`) under
    :class:`OneDNNLinear`, with at least one linear layer run by oneDNN.

    False where the model is not float32 on the CPU, where this PyTorch lacks the op, or where
    anything fails.
    """
    first = next(model.parameters())
    if first.dtype != torch.float32 or first.device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    probe = probe_batch(model)
    try:
        with torch.inference_mode():
            expected = model(**probe).logits
            with OneDNNLinear() as mode:
                got = model(**probe).logits
    except Exception:  # noqa: BLE001 - a missing or failing op keeps MKL
        return False
    return mode.calls > 0 and same_logits(got, expected)
