"""The parts of a pretrained model that methods train: head, LayerNorms, encoder layers, and what
sits between them, found from the model's structure (not from one architecture's names).

- The task head is every parameter outside ``model.base_model`` (a classifier, a masked-LM
  head); a head weight tied to the input embeddings is the embeddings' (``named_parameters``
  lists a tied tensor once, under its first name), so it never trains with the head.
- The encoder layers are the base model's ``nn.ModuleList`` of ``num_hidden_layers`` modules
  (ALBERT: of its ``num_hidden_groups`` layer groups, which its passes share).
- The embeddings are the base model's child that holds the input embeddings.
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

from robustkit.errors import MethodError


def parameter_names(model: nn.Module) -> list[str]:
    """Every parameter's name, in ``named_parameters`` order (a shared one once)."""
    return [name for name, _ in model.named_parameters()]


def trainable_names(model: nn.Module) -> list[str]:
    """Names of the parameters with ``requires_grad``, in ``named_parameters`` order."""
    return [name for name, p in model.named_parameters() if p.requires_grad]


def count_parameters(model: nn.Module, names: Iterable[str] | None = None) -> int:
    """Number of scalar parameters; only those in ``names`` if given."""
    wanted = None if names is None else set(names)
    return sum(p.numel() for n, p in model.named_parameters() if wanted is None or n in wanted)


def set_trainable(model: nn.Module, names: Iterable[str]) -> None:
    """``requires_grad`` on exactly the parameters in ``names``."""
    wanted = set(names)
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(name in wanted)


def train(model: nn.Module, names: Iterable[str]) -> None:
    """``requires_grad`` on the parameters in ``names`` (the others unchanged)."""
    wanted = set(names)
    for name, parameter in model.named_parameters():
        if name in wanted:
            parameter.requires_grad_(True)


def base_prefix(model: nn.Module) -> str:
    """The name prefix of the base model's parameters (``"bert."``; ``""`` for a bare encoder)."""
    if model.base_model is model:
        return ""
    for name, module in model.named_children():
        if module is model.base_model:
            return f"{name}."
    raise MethodError(f"{describe(model)}: its base model is not one of its children")


def head_names(model: nn.Module) -> list[str]:
    """Parameters of the task head: those outside the base model."""
    prefix = base_prefix(model)
    return [n for n in parameter_names(model) if prefix and not n.startswith(prefix)]


def layer_norm_names(model: nn.Module) -> list[str]:
    """Parameters of the model's LayerNorm modules (2d each): ``nn.LayerNorm`` and the
    architectures' own classes of that name (DeBERTa's ``DebertaLayerNorm``)."""
    names = []
    for module_name, module in model.named_modules():
        if isinstance(module, nn.LayerNorm) or type(module).__name__.endswith("LayerNorm"):
            names += [f"{module_name}.{p}" for p, _ in module.named_parameters(recurse=False)]
    known = set(parameter_names(model))
    return [n for n in names if n in known]


def encoder_layers(model: nn.Module) -> list[str]:
    """Name prefixes of the encoder layers, lowest first (``["bert.encoder.layer.0.", ...]``).

    Raises
    ------
    MethodError
        The base model has no list of ``num_hidden_layers`` modules.
    """
    config = model.config
    n_layers = config.num_hidden_layers
    if getattr(config, "model_type", None) == "albert":  # its distinct (shared) layers, as ModelShape.of
        n_layers = config.num_hidden_groups * config.inner_group_num
    for name, module in model.base_model.named_modules():
        if isinstance(module, nn.ModuleList) and len(module) == n_layers and name:
            return [f"{base_prefix(model)}{name}.{i}." for i in range(n_layers)]
    raise MethodError(f"{describe(model)} has no list of its {n_layers} encoder layers")


def embedding_prefix(model: nn.Module) -> str:
    """Name prefix of the base model's child that holds the input embeddings (``"bert.embeddings."``)."""
    weight = model.get_input_embeddings().weight
    for name, child in model.base_model.named_children():
        if any(p is weight for p in child.parameters()):
            return f"{base_prefix(model)}{name}."
    raise MethodError(f"{describe(model)}: no child of its base model holds the input embeddings")


def describe(model: nn.Module) -> str:
    """The model in an error message: class and architecture (``BertForSequenceClassification (bert)``)."""
    return f"{type(model).__name__} ({getattr(model.config, 'model_type', '?')})"


def layer_groups(model: nn.Module) -> dict[str, str]:
    """The layer group each parameter's gradient norm is reported under, from the model's
    structure (:func:`encoder_layers`, :func:`embedding_prefix`, :func:`head_names`), for any
    encoder architecture:

    ``layer.<i>``
        Encoder layer i, with the method's modules inside it (adapters, LoRA, IA3, ReFT).
    ``embeddings``
        The input embeddings' module, and prompt tuning's prompt (prepended to them).
    ``shared``
        Other base-model parameters, outside the embeddings' module and any one layer: prefix
        tuning's pool (one MLP gives every layer's prefix), DeBERTa's relative embeddings,
        ELECTRA's and ALBERT's projection of the embeddings to the hidden size.
    ``pooler``, ``classifier``, ``mlm_head``
        The pooler (the base model's or the head's own, as DeBERTa's), the rest of the head.
    """
    try:
        layers = encoder_layers(model)
    except MethodError:
        layers = []
    try:
        embeddings = embedding_prefix(model)
    except (MethodError, AttributeError, NotImplementedError):
        embeddings = None
    head = set(head_names(model))
    mlm = "MaskedLM" in type(model).__name__ or any(n.startswith(("cls.", "lm_head.")) for n in head)
    groups = {}
    for name in parameter_names(model):
        if ".prompt_tuning." in name or name.startswith("prompt_tuning."):
            group = "embeddings"
        elif ".prefix_tuning.pool." in name or name.startswith("prefix_tuning."):
            group = "shared"
        elif name.startswith("pooler.") or ".pooler." in name:
            group = "pooler"
        elif name in head:
            group = "mlm_head" if mlm else "classifier"
        elif embeddings is not None and name.startswith(embeddings):
            group = "embeddings"
        else:
            group = next((f"layer.{i}" for i, prefix in enumerate(layers) if name.startswith(prefix)), "shared")
        groups[name] = group
    return groups
