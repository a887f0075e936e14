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
topk
    Houlsby et al. 2019 section 3.4 baseline (i), "variable fine-tuning" of section 3.3: only the
    top ``top_k`` encoder layers train (all of their parameters, LayerNorms included), plus what
    sits above them (pooler) and the task head; embeddings and lower layers are frozen.
layernorm
    Houlsby et al. 2019 section 3.4 baseline (ii): only the LayerNorm parameters (embeddings and
    every layer, 2d per LayerNorm) and the task head train.

Variants of ``houlsby`` (Houlsby et al. 2019 section 3.6; Mohebbi's course report section 6):

- ``init_std``: the std of the truncated-normal (+-2 std) init of the adapters' projection
  weights (biases zero); None keeps AdapterHub's ``houlsby`` init, which is the same
  distribution with std 1e-2 (drawn before any re-init, so None and 1e-2 are equal in law but
  not in values).
- ``sharing``: ``none`` (two adapters per layer), ``layer`` (one module per layer, used at both
  positions: the report's "Houlsby" row of table 1) or ``3-layer`` (one module for both positions
  of three consecutive layers: the report's "3-shared" row).

Heads always train. In a masked-LM model the decoder weight is tied to the word embeddings: it
is a pretrained (frozen) tensor for adapter methods, so only the head's transform and bias train.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import adapters
import torch
from adapters import DoubleSeqBnConfig
from torch import nn

from robustkit.errors import MethodError
from robustkit.models import quiet_loading

ADAPTER_NAME = "task"
ADAPTER_SIZE = 64
HOULSBY_INIT_STD = 1e-2  # Houlsby et al. 2019 section 3.6; AdapterHub's "houlsby" init uses it too
# Houlsby et al. 2019 section 3.4 tunes the baselines' lr over the same sweep as fine-tuning and
# adapters (section 3.2: 3e-5 .. 3e-3). Defaults: top-k is fine-tuning of a part of the network, so
# it takes full fine-tuning's 2e-5 (Han et al. 2021 table 3); LayerNorm-only trains ~0.1% of the
# weights of a frozen base, like adapters, so it takes the adapter runs' 1e-4.
DEFAULT_LR = {"full": 2e-5, "houlsby": 1e-4, "adapterhub-houlsby": 1e-4, "topk": 2e-5, "layernorm": 1e-4}
SHARING = ("none", "layer", "3-layer")
# Consecutive encoder layers that share one adapter module, per sharing mode.
_SHARED_LAYERS = {"layer": 1, "3-layer": 3}

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
        ``full``, ``houlsby``, ``adapterhub-houlsby``, ``topk`` or ``layernorm``.
    uses_adapters : bool
        Whether AdapterHub bottleneck adapters are added (and the pretrained weights frozen).
    train_layer_norms : bool
        Whether the pretrained LayerNorm parameters train.
    train_all : bool
        Whether every parameter trains (full fine-tuning).
    train_top_layers : bool
        Whether the top ``top_k`` encoder layers (and the pooler) train.
    """

    name: str
    uses_adapters: bool
    train_layer_norms: bool
    train_all: bool = False
    train_top_layers: bool = False


# robustkit.spec.METHOD_NAMES lists these names without importing this module (tests/test_spec.py).
METHODS: dict[str, Method] = {
    "full": Method("full", uses_adapters=False, train_layer_norms=True, train_all=True),
    "houlsby": Method("houlsby", uses_adapters=True, train_layer_norms=True),
    "adapterhub-houlsby": Method("adapterhub-houlsby", uses_adapters=True, train_layer_norms=False),
    "topk": Method("topk", uses_adapters=False, train_layer_norms=False, train_top_layers=True),
    "layernorm": Method("layernorm", uses_adapters=False, train_layer_norms=True),
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


def apply_method(
    model: nn.Module,
    method: str,
    adapter_size: int = ADAPTER_SIZE,
    *,
    top_k: int | None = None,
    init_std: float | None = None,
    sharing: str = "none",
) -> list[str]:
    """Add the method's adapters to ``model`` (in place) and set which parameters train.

    Parameters
    ----------
    model : transformers.PreTrainedModel
        A freshly loaded classification or masked-LM model.
    top_k : int, optional
        ``topk`` only: how many of the top encoder layers train (1..number of layers).
    init_std : float, optional
        Adapter methods: std of the truncated-normal re-init of the adapters' projection
        weights (see :func:`reinit_adapters`); None keeps the method's own init.
    sharing : str
        Adapter methods: ``none``, ``layer`` or ``3-layer`` (see :func:`share_adapters`).

    Returns
    -------
    list of str
        Names of the trainable parameters, in ``named_parameters`` order (a shared parameter
        once, under its first name).

    Raises
    ------
    MethodError
        ``top_k`` missing or out of range for ``topk``, or adapter options given to a method
        without adapters (values named).
    """
    spec = get_method(method)
    first_trained = _first_trained_layer(model, top_k) if spec.train_top_layers else None
    if not spec.uses_adapters and (init_std is not None or sharing != "none"):
        raise MethodError(f"method {method!r} has no adapters: adapter_init_std={init_std!r}, adapter_sharing={sharing!r} do not apply")
    if spec.uses_adapters:
        config = adapter_config(method, model.config.hidden_size, adapter_size)
        with quiet_loading():
            adapters.init(model)
            model.add_adapter(ADAPTER_NAME, config=config)
            model.set_active_adapters(ADAPTER_NAME)
        share_adapters(model, sharing)
        if init_std is not None:
            reinit_adapters(model, init_std)
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(_trains(spec, name, first_trained))
    return trainable_names(model)


def _trains(spec: Method, name: str, first_trained: int | None = None) -> bool:
    if spec.train_all or _HEAD.match(name):
        return True
    if spec.uses_adapters and f".adapters.{ADAPTER_NAME}." in name:
        return True
    if spec.train_top_layers:
        layer = _layer_index(name)
        # The pooler sits above the top encoder layer, on the head's path: it trains with it.
        return (layer is not None and layer >= first_trained) or ".pooler." in name
    return spec.train_layer_norms and bool(_LAYER_NORM.search(name))


_LAYER = re.compile(r"\.layer\.(\d+)\.")


def _layer_index(name: str) -> int | None:
    """Encoder layer of a parameter (``...encoder.layer.<i>...``), None outside the layers."""
    match = _LAYER.search(name)
    return int(match.group(1)) if match else None


def _first_trained_layer(model: nn.Module, top_k: int | None) -> int:
    """Index of the lowest encoder layer that ``topk`` trains: L - k."""
    n_layers = model.config.num_hidden_layers
    check_top_k(top_k, n_layers)
    return n_layers - top_k


def check_top_k(top_k: int | None, n_layers: int) -> None:
    """Raise :class:`MethodError` (naming k) unless 1 <= k <= the model's encoder layers."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= n_layers:
        raise MethodError(f"method 'topk' needs top_k between 1 and {n_layers} (the model's encoder layers), got {top_k!r}")


def adapter_layers(model: nn.Module) -> list[nn.Module]:
    """AdapterHub's bottleneck layers holding the task adapter, in ``named_modules`` order.

    For BERT-style models: per encoder layer, the attention-output then the FFN-output
    position; each has ``layer_idx`` and ``adapters[ADAPTER_NAME]``.
    """
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
    the caller, see :func:`robustkit.run_model.build_classifier`); each shared module is
    drawn once.
    """
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
    d, n_layers = model.config.hidden_size, model.config.num_hidden_layers
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
