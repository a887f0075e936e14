"""Methods that combine several AdapterHub modules, as AdapterHub's presets: ``unipelt``, ``mam``.

unipelt
    Mao et al. 2022: prefix tuning (p = 10), a bottleneck adapter after the FFN (reduction 16)
    and LoRA (r = 8, alpha = 2, q and v), each behind a trained gate (a d -> 1 linear layer: one
    per layer for the prefix, per adapter, per LoRA matrix).
mam
    He et al. 2022's mix-and-match adapter: prefix tuning (p = 30, reparametrisation width 800)
    in the attention and a parallel adapter (reduction 2, scaling 4) beside the FFN.

Both are AdapterHub's presets, without options of their own (a variant is an ``adapterhub:``
config string, e.g. ``adapterhub:prefix_tuning[prefix_length=10]|par_bn``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from robustkit.methods.adapterhub import AdapterHubMethod
from robustkit.methods.base import Expected, ModelShape
from robustkit.methods.houlsby import houlsby_adapter_size
from robustkit.methods.prefix import prefix_parameters


@dataclass(frozen=True, kw_only=True)
class UniPelt(AdapterHubMethod):
    config_class: str = "UniPELTConfig"

    def expected(self, shape: ModelShape, options: Mapping[str, Any]) -> Expected:
        prefix, adapter, lora = self.adapter_config(options, None).configs  # the preset's own sizes
        L, d, p, b, r = shape.layers, shape.d, prefix.prefix_length, prefix.bottleneck_size, lora.r
        m, n = int(d // adapter.reduction_factor), len(lora.attn_matrices)
        gates = (d + 1) * (L + L + n * L)
        return Expected(
            prefix_parameters(shape, p, b) + L * houlsby_adapter_size(d, m) + L * n * 2 * r * d + gates,
            f"prefix (p={p}, b={b}) + L (2md + d + m), m={m} + L {n} (2rd), r={r} "
            f"+ (d + 1)(L + L + {n}L) gates, L={L}, d={d}",
        )


@dataclass(frozen=True, kw_only=True)
class MixAndMatch(AdapterHubMethod):
    config_class: str = "MAMConfig"

    def expected(self, shape: ModelShape, options: Mapping[str, Any]) -> Expected:
        prefix, adapter = self.adapter_config(options, None).configs
        L, d, p, b = shape.layers, shape.d, prefix.prefix_length, prefix.bottleneck_size
        m = int(d // adapter.reduction_factor)
        return Expected(
            prefix_parameters(shape, p, b) + L * houlsby_adapter_size(d, m),
            f"prefix (p={p}, b={b}) + L (2md + d + m), m={m}, L={L}, d={d}",
        )


UNIPELT = UniPelt(name="unipelt", label="UniPELT", colour="#393b79")
MAM = MixAndMatch(name="mam", label="mix-and-match adapter", colour="#843c39")

METHODS = (UNIPELT, MAM)
