"""Houlsby et al. 2019 adapters: ``houlsby`` (as published) and ``adapterhub-houlsby`` (AdapterHub's preset).

houlsby
    Houlsby et al. 2019 as published (section 2.1): two bottleneck adapters per layer, after the
    attention-output and the FFN-output projections, before the residual add; bottleneck size
    ``adapter_size`` (m, default 64); GELU; near-identity init (truncated normal, std 1e-2); the
    pretrained weights frozen; the LayerNorms and the task head train.
    Each adapter has 2md + d + m parameters.
adapterhub-houlsby
    AdapterHub's ``houlsby`` (double bottleneck) preset as Han et al. 2021 used it: swish,
    reduction factor 16, ``bert`` init, pretrained LayerNorms frozen; adapters and head train.

Variants of ``houlsby`` (Houlsby et al. 2019 section 3.6; Mohebbi's course report section 6):

- ``adapter_init_std``: the std of the truncated-normal (+-2 std) init of the adapters'
  projection weights (biases zero); None keeps AdapterHub's ``houlsby`` init, which is the same
  distribution with std 1e-2 (drawn before any re-init, so None and 1e-2 are equal in law but
  not in values).
- ``adapter_sharing``: ``none`` (two adapters per layer), ``layer`` (one module per layer, used
  at both positions: the report's "Houlsby" row of table 1) or ``3-layer`` (one module for both
  positions of three consecutive layers: the report's "3-shared" row).

These options are run-spec fields (they existed before method options), so the ids of the runs
made then stay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from robustkit.errors import MethodError
from robustkit.methods.adapterhub import AdapterHubMethod
from robustkit.methods.base import ADAPTER_NAME, Expected, ModelShape, Option

if TYPE_CHECKING:
    from adapters import AdapterConfig
    from torch import nn

ADAPTER_SIZE = 64
HOULSBY_INIT_STD = 1e-2  # Houlsby et al. 2019 section 3.6; AdapterHub's "houlsby" init uses it too
SHARING = ("none", "layer", "3-layer")
# Consecutive encoder layers that share one adapter module, per sharing mode.
_SHARED_LAYERS = {"layer": 1, "3-layer": 3}
ADAPTERHUB_REDUCTION = 16  # AdapterHub's DoubleSeqBnConfig default: m = d // 16


@dataclass(frozen=True, kw_only=True)
class Houlsby(AdapterHubMethod):
    """Houlsby et al. 2019 adapters with their bottleneck size, init scale and sharing."""

    train_layer_norms: bool = True

    def adapter_config(self, options: Mapping[str, Any], model_config) -> AdapterConfig:
        from adapters import DoubleSeqBnConfig

        # reduction_factor = d/m gives a bottleneck of exactly m units
        return DoubleSeqBnConfig(
            reduction_factor=model_config.hidden_size / options["adapter_size"],
            non_linearity="gelu",
            init_weights="houlsby",
        )

    def after_adding(self, model: nn.Module, options: Mapping[str, Any]) -> None:
        share_adapters(model, options["adapter_sharing"])
        if options["adapter_init_std"] is not None:
            reinit_adapters(model, options["adapter_init_std"])

    def expected(self, shape: ModelShape, options: Mapping[str, Any]) -> Expected:
        m, sharing = options["adapter_size"], options["adapter_sharing"]
        modules = shared_adapter_modules(shape.layers, sharing)
        return Expected(
            modules * houlsby_adapter_size(shape.d, m),
            f"{modules} adapter modules ({sharing} sharing) x (2md + d + m), d={shape.d}, m={m}",
        )

    def check(self, model: nn.Module, options: Mapping[str, Any], added: list[str], own: list[str]) -> dict:
        return {
            **super().check(model, options, added, own),
            "adapter": check_houlsby_counts(model, options["adapter_size"]),
            "sharing": check_sharing_counts(model, options["adapter_size"], options["adapter_sharing"]),
        }


@dataclass(frozen=True, kw_only=True)
class AdapterHubHoulsby(AdapterHubMethod):
    """AdapterHub's double-bottleneck preset, 2L adapters of m = d // 16."""

    config_class: str = "DoubleSeqBnConfig"

    def expected(self, shape: ModelShape, options: Mapping[str, Any]) -> Expected:
        m = shape.d // ADAPTERHUB_REDUCTION
        return Expected(
            2 * shape.layers * houlsby_adapter_size(shape.d, m),
            f"2L adapters x (2md + d + m), L={shape.layers}, d={shape.d}, m=d//16={m}",
        )


def houlsby_adapter_size(d: int, m: int) -> int:
    """Parameters of one Houlsby adapter with biases: 2md + d + m."""
    return 2 * m * d + d + m


def adapter_layers(model: nn.Module) -> list[nn.Module]:
    """AdapterHub's bottleneck layers holding the task adapter, in ``named_modules`` order.

    For BERT-style models: per encoder layer, the attention-output then the FFN-output
    position; each has ``layer_idx`` and ``adapters[ADAPTER_NAME]``.
    """
    from torch import nn

    return [
        module
        for _, module in model.named_modules()
        if isinstance(getattr(module, "adapters", None), nn.ModuleDict) and ADAPTER_NAME in module.adapters
    ]


def share_adapters(model: nn.Module, sharing: str) -> None:
    """Tie the task adapter modules (in place) so that one module serves several positions.

    AdapterHub 1.3 has no option for this, so it is written here: after ``add_adapter``, every
    position of a group gets the group's first module object (``layer``: both positions of one
    layer; ``3-layer``: both positions of layers 3g..3g+2, the course report's "3-shared";
    with L not a multiple of 3 the last group has the remaining layers). The same object means
    the same parameters: ``named_parameters`` lists each once (under the first position's name),
    so the optimiser, trainable counts and checkpoints see it once. The skipped modules' initial
    weights are dropped; AdapterHub's per-layer skipping (``skip_layers``) still works, as it
    acts on the positions, not the modules.

    Raises
    ------
    MethodError
        Unknown sharing mode (named).
    """
    if sharing not in SHARING:
        raise MethodError(f"unknown adapter sharing {sharing!r}; known: {', '.join(SHARING)}")
    if sharing == "none":
        return
    group_size = _SHARED_LAYERS[sharing]
    owners: dict[int, nn.Module] = {}
    for position in adapter_layers(model):
        group = position.layer_idx // group_size
        owner = owners.setdefault(group, position.adapters[ADAPTER_NAME])
        position.adapters[ADAPTER_NAME] = owner


def reinit_adapters(model: nn.Module, std: float) -> None:
    """Re-draw the adapters' projection weights from N(0, std^2) truncated to +-2 std; biases 0.

    Houlsby et al. 2019 section 3.6 (figure 6 right) sweeps this std over [1e-7, 1]. AdapterHub
    1.3's ``init_weights="houlsby"`` hard-codes std 1e-2 (``adapters/methods/modeling.py``,
    ``Adapter.__init__``) and its config has no std option, so the re-init is written here,
    with the same truncation and zero biases. Draws come from torch's global RNG (seeded by
    the caller, see :func:`robustkit.train.run_model.build_classifier`); each shared module is
    drawn once.
    """
    import torch
    from torch import nn

    if isinstance(std, bool) or not isinstance(std, (int, float)) or not std > 0:
        raise MethodError(f"adapter init std must be a positive number, got {std!r}")
    seen: set[int] = set()
    with torch.no_grad():
        for position in adapter_layers(model):
            adapter = position.adapters[ADAPTER_NAME]
            if id(adapter) in seen:
                continue
            seen.add(id(adapter))
            for linear in (m for m in adapter.modules() if isinstance(m, nn.Linear)):
                nn.init.trunc_normal_(linear.weight, mean=0.0, std=std, a=-2 * std, b=2 * std)
                nn.init.zeros_(linear.bias)


def adapter_parameter_counts(model: nn.Module) -> dict[str, int]:
    """Parameters of each bottleneck adapter module, keyed by its module path.

    For ``houlsby`` every value must equal 2md + d + m (Houlsby et al. 2019, section 2.1).
    """
    counts: dict[str, int] = {}
    for name, parameter in model.named_parameters():
        if f".adapters.{ADAPTER_NAME}." in name:
            module = name.split(f".adapters.{ADAPTER_NAME}.")[0]
            counts[module] = counts.get(module, 0) + parameter.numel()
    return counts


def check_houlsby_counts(model: nn.Module, adapter_size: int) -> dict:
    """Verify that every adapter has 2md + d + m parameters (Houlsby et al. 2019, section 2.1).

    Returns
    -------
    dict
        ``expected`` (2md + d + m), ``counts`` (the distinct per-adapter counts found) and
        ``adapters`` (how many adapter modules).

    Raises
    ------
    MethodError
        If any adapter's count differs.
    """
    d = model.config.hidden_size
    expected = houlsby_adapter_size(d, adapter_size)
    counts = adapter_parameter_counts(model)
    if set(counts.values()) != {expected}:
        raise MethodError(
            f"adapter parameter counts {sorted(set(counts.values()))} differ from 2md+d+m = {expected} (d={d}, "
            f"m={adapter_size})"
        )
    return {"expected": expected, "counts": sorted(set(counts.values())), "adapters": len(counts)}


def shared_adapter_modules(n_layers: int, sharing: str) -> int:
    """Distinct adapter modules of a ``houlsby`` model with L encoder layers.

    ``none``: 2L; ``layer``: L; ``3-layer``: ceil(L / 3) (L / 3 in the report, L = 12).
    """
    if sharing not in SHARING:
        raise MethodError(f"unknown adapter sharing {sharing!r}; known: {', '.join(SHARING)}")
    if sharing == "none":
        return 2 * n_layers
    return -(-n_layers // _SHARED_LAYERS[sharing])


def sharing_adapter_parameters(d: int, m: int, n_layers: int, sharing: str) -> int:
    """Adapter parameters of a ``houlsby`` model under a sharing mode (course report, table 1).

    ``layer``: L (2md + d + m) ("Houlsby" row: 1,189,632 for BERT-base, d=768, m=64, L=12);
    ``3-layer``: L/3 (2md + d + m) ("3-shared" row: 396,544); ``none``: L (4md + 2d + 2m), the
    adapter part of the "not shared" row (which adds the LayerNorms and a second classifier).
    """
    return shared_adapter_modules(n_layers, sharing) * houlsby_adapter_size(d, m)


def check_sharing_counts(model: nn.Module, adapter_size: int, sharing: str) -> dict:
    """Verify the distinct adapter modules and their parameters against the report's formulas.

    Returns
    -------
    dict
        ``sharing``, ``expected`` (formula: adapter parameters in total), ``found`` (counted
        once per distinct parameter), ``modules`` (distinct adapter modules) and ``positions``
        (adapter positions: 2L).

    Raises
    ------
    MethodError
        If the count of modules or parameters differs from the formula.
    """
    d, n_layers = model.config.hidden_size, ModelShape.of(model.config).layers
    positions = adapter_layers(model)
    modules = len({id(p.adapters[ADAPTER_NAME]) for p in positions})
    found = sum(adapter_parameter_counts(model).values())
    expected = sharing_adapter_parameters(d, adapter_size, n_layers, sharing)
    if modules != shared_adapter_modules(n_layers, sharing) or found != expected:
        raise MethodError(
            f"adapter sharing {sharing!r}: {modules} modules with {found} parameters, the formula "
            f"gives {shared_adapter_modules(n_layers, sharing)} with {expected} (d={d}, m={adapter_size}, L={n_layers})"
        )
    return {"sharing": sharing, "expected": expected, "found": found, "modules": modules, "positions": len(positions)}


HOULSBY = Houlsby(
    name="houlsby",
    label="with adapters (Houlsby)",
    colour="#1b9e77",
    curve_option="adapter_size",
    options=(
        Option(
            "adapter_size",
            int,
            ADAPTER_SIZE,
            "adapter bottleneck size m",
            minimum=1,
            spec_field="adapter_size",
            symbol="m",
        ),
        Option(
            "adapter_init_std",
            float,
            None,
            "std of the adapters' truncated-normal (+-2 std) weight init, e.g. 1e-7..1 "
            "(Houlsby et al. 2019 figure 6 right); none: AdapterHub's houlsby init (std 1e-2)",
            minimum=0,
            open_minimum=True,
            spec_field="adapter_init_std",
        ),
        Option(
            "adapter_sharing",
            str,
            "none",
            "none = two adapters per layer; layer = one adapter for both positions of a "
            "layer; 3-layer = one adapter for both positions of three consecutive layers (Mohebbi's report, section 6)",
            choices=SHARING,
            spec_field="adapter_sharing",
        ),
    ),
)
ADAPTERHUB_HOULSBY = AdapterHubHoulsby(
    name="adapterhub-houlsby", label="with adapters (AdapterHub preset)", colour="#7570b3"
)

METHODS = (HOULSBY, ADAPTERHUB_HOULSBY)
