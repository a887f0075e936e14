"""Tuning methods: which parameters of a pretrained model train, and which adapters are added.

A method is applied to a freshly loaded model (classification or masked-LM). The adapter modules
are AdapterHub's (``adapters``): the bottleneck layers are not written by hand here.

Methods
-------
full
    Every parameter trains (Devlin et al. 2019 fine-tuning).
houlsby
    Houlsby et al. 2019 as published (section 2.1): two bottleneck adapters per layer, after the
    attention-output and the FFN-output projections, before the residual add; bottleneck size
    ``adapter_size`` (m, default 64); GELU; near-identity init (truncated normal, std 1e-2); the
    pretrained weights frozen; the LayerNorms and the task head train.
    Each adapter has 2md + d + m parameters.
adapterhub-houlsby
    AdapterHub's ``houlsby`` (double bottleneck) preset as Han et al. 2021 used it: swish,
    reduction factor 16, ``bert`` init, pretrained LayerNorms frozen; adapters and head train.

Heads always train. In a masked-LM model the decoder weight is tied to the word embeddings: it
is a pretrained (frozen) tensor for adapter methods, so only the head's transform and bias train.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import adapters
from adapters import DoubleSeqBnConfig
from torch import nn

from robustkit.errors import MethodError
from robustkit.models import quiet_loading

ADAPTER_NAME = "task"
ADAPTER_SIZE = 64
DEFAULT_LR = {"full": 2e-5, "houlsby": 1e-4, "adapterhub-houlsby": 1e-4}

# Parameters that belong to a task head rather than the pretrained encoder, across BERT-style
# architectures: classification heads and masked-LM heads (BERT `cls`, RoBERTa `lm_head`).
_HEAD = re.compile(r"^(classifier|cls|lm_head|score)\.")
_LAYER_NORM = re.compile(r"LayerNorm|layer_norm|\.ln_")


@dataclass(frozen=True)
class Method:
    """How a model is adapted.

    Attributes
    ----------
    name : str
        ``full``, ``houlsby`` or ``adapterhub-houlsby``.
    uses_adapters : bool
        Whether AdapterHub bottleneck adapters are added (and the pretrained weights frozen).
    train_layer_norms : bool
        Whether the pretrained LayerNorm parameters train.
    """

    name: str
    uses_adapters: bool
    train_layer_norms: bool


METHODS: dict[str, Method] = {
    "full": Method("full", uses_adapters=False, train_layer_norms=True),
    "houlsby": Method("houlsby", uses_adapters=True, train_layer_norms=True),
    "adapterhub-houlsby": Method("adapterhub-houlsby", uses_adapters=True, train_layer_norms=False),
}


def get_method(name: str) -> Method:
    """Look a method up by name; the error names the bad value and the known ones."""
    try:
        return METHODS[name]
    except KeyError:
        raise MethodError(f"unknown method {name!r}; known methods: {', '.join(METHODS)}") from None


def adapter_config(method: str, hidden_size: int, adapter_size: int = ADAPTER_SIZE) -> DoubleSeqBnConfig:
    """The AdapterHub config of an adapter method.

    Parameters
    ----------
    hidden_size : int
        d, the model's hidden size.
    adapter_size : int
        m, the bottleneck size (``houlsby`` only; the AdapterHub preset fixes d/16).
    """
    if method == "houlsby":
        if adapter_size < 1:
            raise MethodError(f"adapter size must be a positive integer, got {adapter_size}")
        # reduction_factor = d/m gives a bottleneck of exactly m units.
        return DoubleSeqBnConfig(
            reduction_factor=hidden_size / adapter_size, non_linearity="gelu", init_weights="houlsby"
        )
    if method == "adapterhub-houlsby":
        return DoubleSeqBnConfig()
    raise MethodError(f"method {method!r} has no adapters")


def apply_method(model: nn.Module, method: str, adapter_size: int = ADAPTER_SIZE) -> list[str]:
    """Add the method's adapters to ``model`` (in place) and set which parameters train.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A freshly loaded classification or masked-LM model.

    Returns
    -------
    list of str
        Names of the trainable parameters, in ``named_parameters`` order.
    """
    spec = get_method(method)
    if spec.uses_adapters:
        config = adapter_config(method, model.config.hidden_size, adapter_size)
        with quiet_loading():
            adapters.init(model)
            model.add_adapter(ADAPTER_NAME, config=config)
            model.set_active_adapters(ADAPTER_NAME)
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(_trains(spec, name))
    return trainable_names(model)


def _trains(spec: Method, name: str) -> bool:
    if not spec.uses_adapters:
        return True
    if f".adapters.{ADAPTER_NAME}." in name or _HEAD.match(name):
        return True
    return spec.train_layer_norms and bool(_LAYER_NORM.search(name))


def trainable_names(model: nn.Module) -> list[str]:
    """Names of the parameters with ``requires_grad``, in ``named_parameters`` order."""
    return [name for name, p in model.named_parameters() if p.requires_grad]


def count_parameters(model: nn.Module, names: list[str] | None = None) -> int:
    """Number of scalar parameters; only those in ``names`` if given."""
    wanted = None if names is None else set(names)
    return sum(p.numel() for n, p in model.named_parameters() if wanted is None or n in wanted)


def adapter_parameter_counts(model: nn.Module) -> dict[str, int]:
    """Parameters of each adapter module, keyed by its module path.

    For ``houlsby`` every value must equal 2md + d + m (Houlsby et al. 2019, section 2.1).
    """
    counts: dict[str, int] = {}
    for name, parameter in model.named_parameters():
        if f".adapters.{ADAPTER_NAME}." in name:
            module = name.split(f".adapters.{ADAPTER_NAME}.")[0]
            counts[module] = counts.get(module, 0) + parameter.numel()
    return counts


def houlsby_adapter_size(d: int, m: int) -> int:
    """Parameters of one Houlsby adapter with biases: 2md + d + m."""
    return 2 * m * d + d + m


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
        raise MethodError(f"adapter parameter counts {sorted(set(counts.values()))} differ from 2md+d+m = {expected} (d={d}, m={adapter_size})")
    return {"expected": expected, "counts": sorted(set(counts.values())), "adapters": len(counts)}
