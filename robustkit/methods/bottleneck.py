"""Bottleneck adapters besides Houlsby's, as AdapterHub configs: ``pfeiffer``, ``parallel``, ``compacter``.

pfeiffer
    Pfeiffer et al. 2021 (AdapterFusion): one bottleneck after the FFN of each layer
    (AdapterHub's ``SeqBnConfig``: ReLU, reduction factor 16, the original LayerNorm before it).
    L adapters of 2md + d + m parameters, m = d // reduction_factor.
parallel
    He et al. 2022 ("Towards a unified view of parameter-efficient transfer learning") parallel
    adapter: a bottleneck beside the FFN, its output scaled by 4 and added (AdapterHub's
    ``ParBnConfig``: ReLU, reduction factor 2, LoRA-style init). L adapters of 2md + d + m.
compacter
    Mahabadi et al. 2021: Houlsby-placed adapters whose projections are sums of Kronecker
    products (PHM layers, rank-1 factors, rule matrices shared across layers; AdapterHub's
    ``CompacterConfig``: GELU, reduction factor 32, n = phm_dim). No formula here: the manifest
    records AdapterHub's count.

Default learning rates: 1e-4 (adapters in Pfeiffer et al. 2021 and Han et al. 2021);
Compacter 3e-3 (Mahabadi et al. 2021).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from robustkit.methods.adapterhub import AdapterHubMethod
from robustkit.methods.base import Expected, ModelShape, Option
from robustkit.methods.houlsby import houlsby_adapter_size


def _reduction(default: float) -> Option:
    return Option(
        "reduction_factor",
        float,
        default,
        "bottleneck size m = d // reduction_factor",
        minimum=0,
        open_minimum=True,
        symbol="d/m",
    )


@dataclass(frozen=True, kw_only=True)
class OneAdapterPerLayer(AdapterHubMethod):
    """A bottleneck at one position of every layer: L (2md + d + m) parameters."""

    def expected(self, shape: ModelShape, options: Mapping[str, Any]) -> Expected:
        m = int(shape.d // options["reduction_factor"])
        return Expected(
            shape.layers * houlsby_adapter_size(shape.d, m),
            f"L adapters x (2md + d + m), L={shape.layers}, d={shape.d}, m=d//{options['reduction_factor']:g}={m}",
        )


PFEIFFER = OneAdapterPerLayer(
    name="pfeiffer",
    label="Pfeiffer adapter (after the FFN)",
    colour="#2ca02c",
    config_class="SeqBnConfig",
    curve_option="reduction_factor",
    options=(_reduction(16.0),),
)
PARALLEL = OneAdapterPerLayer(
    name="parallel",
    label="parallel adapter (He et al. 2022)",
    colour="#bcbd22",
    config_class="ParBnConfig",
    curve_option="reduction_factor",
    options=(
        _reduction(2.0),
        Option(
            "scaling", float, 4.0, "factor on the adapter's output before it is added", minimum=0, open_minimum=True
        ),
    ),
)
COMPACTER = AdapterHubMethod(
    name="compacter",
    label="Compacter",
    colour="#17becf",
    config_class="CompacterConfig",
    default_lr=3e-3,
    options=(
        _reduction(32.0),
        Option("phm_dim", int, 4, "n: Kronecker factors per projection (divides d and m)", minimum=1),
    ),
)

METHODS = (PFEIFFER, PARALLEL, COMPACTER)
