"""Tuning methods: one object per method (:class:`robustkit.methods.base.Method`), one module per
family, all listed in :mod:`robustkit.methods.registry`.

==================  ===========================================  ==================================
family (module)     methods                                       mechanism
==================  ===========================================  ==================================
finetune            full, topk, layernorm                         pretrained parameters train
houlsby             houlsby, adapterhub-houlsby                   AdapterHub bottleneck adapters
bottleneck          pfeiffer, parallel, compacter                 AdapterHub bottleneck adapters
lora                lora, dora, vera, ia3                         AdapterHub LoRA-family configs
prefix              prefix, prompt                                AdapterHub prefix / prompt tuning
reft                loreft                                        AdapterHub ReFT
combined            unipelt, mam                                  AdapterHub config unions
adapterhub          adapterhub (any AdapterHub config string)     AdapterHub
==================  ===========================================  ==================================

A method is applied with ``get_method(name).adapt(model, options)``; :func:`apply_method` is
the same with options as keywords. This package imports neither torch nor AdapterHub; the
helpers that inspect models (:mod:`robustkit.methods.model_parts`) are loaded on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from robustkit.methods.base import ADAPTER_NAME, Method, Option, adaptation_of
from robustkit.methods.finetune import check_top_k
from robustkit.methods.houlsby import (
    ADAPTER_SIZE,
    HOULSBY_INIT_STD,
    SHARING,
    adapter_layers,
    adapter_parameter_counts,
    check_houlsby_counts,
    check_sharing_counts,
    houlsby_adapter_size,
    reinit_adapters,
    share_adapters,
    shared_adapter_modules,
    sharing_adapter_parameters,
)
from robustkit.methods.registry import METHOD_NAMES, METHODS, get_method

if TYPE_CHECKING:
    from torch import nn

    from robustkit.methods.model_parts import count_parameters, trainable_names

# Names loaded on first access (PEP 562): they import torch.
_LAZY = {"count_parameters": "robustkit.methods.model_parts", "trainable_names": "robustkit.methods.model_parts"}
# Keywords of apply_method from before method options (houlsby's options then had short names).
_OLD_KEYWORDS = {"init_std": "adapter_init_std", "sharing": "adapter_sharing"}


def apply_method(model: nn.Module, method: str, **options: Any) -> list[str]:
    """Apply ``method`` to ``model`` (in place) with these options; see :meth:`Method.adapt`.

    ``apply_method(model, "lora", r=4)``, ``apply_method(model, "houlsby", adapter_size=16,
    adapter_sharing="layer")``, ``apply_method(model, "adapterhub:seq_bn")``.

    Returns
    -------
    list of str
        Names of the trainable parameters, in ``named_parameters`` order.
    """
    from robustkit.methods.registry import split_method

    found, argument = split_method(method)
    return found.adapt(model, {**argument, **{_OLD_KEYWORDS.get(k, k): v for k, v in options.items()}})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'robustkit.methods' has no attribute {name!r}")


__all__ = [
    "ADAPTER_NAME",
    "ADAPTER_SIZE",
    "HOULSBY_INIT_STD",
    "METHODS",
    "METHOD_NAMES",
    "SHARING",
    "Method",
    "Option",
    "adaptation_of",
    "adapter_layers",
    "adapter_parameter_counts",
    "apply_method",
    "check_houlsby_counts",
    "check_sharing_counts",
    "check_top_k",
    "count_parameters",
    "get_method",
    "houlsby_adapter_size",
    "reinit_adapters",
    "share_adapters",
    "shared_adapter_modules",
    "sharing_adapter_parameters",
    "trainable_names",
]
