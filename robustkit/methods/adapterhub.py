"""Methods that add AdapterHub (``adapters``) modules to a frozen base, and the generic
``adapterhub`` method that takes any AdapterHub config string.

An :class:`AdapterHubMethod` names one of AdapterHub's config classes and maps its options onto
the config's fields; applying it is AdapterHub's own sequence: ``adapters.init(model)``,
``add_adapter``, then ``train_adapter``, which freezes the base model and unfreezes the adapter
(AdapterHub's definition of what trains). The task head trains too (a masked-LM head's weight
stays tied to the frozen word embeddings). Switching the method off is
``set_active_adapters(None)``.

adapterhub
    ``adapterhub:<config string>`` (or ``--method adapterhub --method-option config=...``):
    any config AdapterHub resolves from a string, e.g. ``lora[r=4,alpha=16]``, ``seq_bn``,
    ``prefix_tuning|par_bn`` (a union). The string is the run's identity; config files are
    refused (their content would not be). No formula: the manifest records AdapterHub's count.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from robustkit.errors import MethodError
from robustkit.methods.base import ADAPTER_NAME, Method, Option

if TYPE_CHECKING:
    from adapters import AdapterConfig
    from torch import nn


@dataclass(frozen=True, kw_only=True)
class AdapterHubMethod(Method):
    """A method that is one AdapterHub config.

    Attributes
    ----------
    config_class : str
        The config's class in ``adapters`` (``"LoRAConfig"``).
    fixed : tuple of (str, object)
        Config fields this method sets besides its options.
    train_layer_norms : bool
        The pretrained LayerNorms train too (Houlsby et al. 2019), besides AdapterHub's choice.
    """

    config_class: str = ""
    fixed: tuple[tuple[str, Any], ...] = ()
    train_layer_norms: bool = False
    uses_adapters: bool = True
    layer_ablation: bool = True

    def adapter_config(self, options: Mapping[str, Any], model_config) -> AdapterConfig:
        """The AdapterHub config of a run with these options on a model of this (transformers)
        config."""
        import adapters

        return getattr(adapters, self.config_class)(**dict(self.fixed), **self.config_fields(options))

    def config_fields(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The config fields set by the options (by default, the options' own names)."""
        return dict(options)

    def config_options(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The options that :meth:`config_fields` turns into ``config`` (an AdapterHub config as
        a dict), read back: the inverse of :meth:`config_fields` where ``config`` is one of this
        method's (:func:`robustkit.methods.registry.method_of_config` checks that it is)."""
        return {o.name: config[o.name] for o in self.options if o.name in config}

    def _apply(self, model: nn.Module, options: Mapping[str, Any]) -> None:
        from robustkit.methods import model_parts

        add_adapter(model, self.name, self.adapter_config(options, model.config))
        model_parts.train(model, model_parts.head_names(model))
        if self.train_layer_norms:
            model_parts.train(model, model_parts.layer_norm_names(model))
        self.after_adding(model, options)

    def after_adding(self, model: nn.Module, options: Mapping[str, Any]) -> None:
        """What the method does to the model after AdapterHub added its adapter (nothing)."""

    def deactivate(self, model: nn.Module) -> None:
        model.set_active_adapters(None)


def add_adapter(model: nn.Module, method: str, config: AdapterConfig) -> None:
    """AdapterHub's own setup: ``adapters.init``, ``add_adapter`` and ``train_adapter`` (the base
    frozen, the adapter trainable and active); the model's train/eval mode is kept. A prompt
    (prompt tuning, alone or in a union) is removed from the base model's token states
    (:class:`PromptRemover`).

    Raises
    ------
    MethodError
        AdapterHub does not support the config on this model (method and model named).
    """
    import adapters

    from robustkit.methods.model_parts import describe
    from robustkit.models.pretrained import quiet_loading

    with quiet_loading():
        adapters.init(model)
        if not model.supports_adapter(config):
            raise MethodError(
                f"method {method!r}: AdapterHub does not support {type(config).__name__} on {describe(model)}"
            )
        try:
            model.add_adapter(ADAPTER_NAME, config=config)
        except (ValueError, TypeError, NotImplementedError, ImportError, AssertionError, RuntimeError) as error:
            raise MethodError(f"method {method!r} cannot be added to {describe(model)}: {error}") from error
        training = model.training
        model.train_adapter(ADAPTER_NAME)
        model.train(training)  # train_adapter switches to training mode; the caller decides
    for part in getattr(config, "configs", None) or (config,):
        if isinstance(part, adapters.PromptTuningConfig):
            model.base_model.register_forward_hook(PromptRemover(part.prompt_length, part.combine))


class PromptRemover:
    """Forward hook of the base model: remove a prompt's positions from its token states.

    Prompt tuning makes the encoder's outputs p positions longer than its input. AdapterHub's own
    heads cut them off (``adapters/heads/base.py``); transformers' heads, which robustkit uses, do
    not, so this hook does it on ``last_hidden_state`` and ``hidden_states``: a masked-LM head and
    per-token analyses see one state per input token. The pooled output is computed before,
    from the whole sequence. Nothing is removed while the adapter is switched off.
    """

    def __init__(self, length: int, combine: str):
        self.length, self.combine = length, combine

    def __call__(self, module, args, output):
        states = output[0]
        if states.shape[1] <= self.length or not module.adapters_config.active_setup:
            return output
        if isinstance(output, tuple):  # return_dict=False: the token states come first
            return (self.strip(states), *output[1:])
        output["last_hidden_state"] = self.strip(states)
        if output.get("hidden_states") is not None:
            output["hidden_states"] = tuple(self.strip(h) for h in output["hidden_states"])
        return output

    def strip(self, states):
        """``states`` (batch x (p + n) x d) without the prompt's p positions (batch x n x d)."""
        import torch

        if self.combine == "prefix":
            return states[:, self.length :]
        return torch.cat([states[:, :1], states[:, 1 + self.length :]], dim=1)


def load_config_string(text: str) -> AdapterConfig:
    """AdapterHub's config for a config string (``lora[r=4]``, ``seq_bn|prefix_tuning``) or a
    config written out as a JSON object (``{"architecture": "lora", ...}``).

    Raises
    ------
    ValueError
        A string AdapterHub does not know, or a file (whose content would not be part of a
        run's identity).
    """
    from adapters import AdapterConfig

    if os.path.exists(text):
        raise ValueError(
            "config files are not accepted (a run's identity is the config string): write the config as a string"
        )
    config = AdapterConfig.load(json.loads(text) if text.lstrip().startswith("{") else text)
    if config is None:
        raise ValueError("empty config")
    _check_sizes(config.to_dict())
    return config


# Fields AdapterHub takes without checking that only a positive number makes a model of: a
# config string with ``r=-1`` would pass and fail minutes later, at model build.
_POSITIVE = ("r", "alpha", "reduction_factor", "prefix_length", "prompt_length", "bottleneck_size", "low_rank_w")


def _check_sizes(config: Mapping[str, Any]) -> None:
    """Refuse a size or rank that is not positive, and a dropout outside [0, 1), in ``config``
    and in each part of a union."""
    for key, value in config.items():
        if isinstance(value, Mapping):
            _check_sizes(value)
        elif isinstance(value, list):
            for part in value:
                if isinstance(part, Mapping):
                    _check_sizes(part)
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        elif key in _POSITIVE and not value > 0:
            raise ValueError(f"{key}={value} must be positive")
        elif key.endswith("dropout") and not 0 <= value < 1:
            raise ValueError(f"{key}={value} must be in [0, 1)")


def config_json(config: Mapping[str, Any]) -> str:
    """A config's one JSON spelling (keys sorted, no spaces): the same config, the same run id."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def short_config(text: str, width: int = 32) -> str:
    """A config string short enough for a legend or a table cell: a string config as it is
    (``lora[r=4]``) where it fits; a JSON config (an import's) as its architecture, the fields
    that say most of it (``r``, ``reduction_factor``, ...) and a digest of the whole, so two
    different configs never read the same: ``lora r=8 alpha=16 #3f9a2c``."""
    import hashlib

    if len(text) <= width and not text.lstrip().startswith("{"):
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:6]
    try:
        config = json.loads(text)
    except ValueError:
        config = None
    if not isinstance(config, dict):
        return f"{text[: width - 8]}… #{digest}"
    # AdapterHub's bottleneck configs carry no architecture field: their reduction factor says it
    name = config.get("architecture") or (
        "union" if "configs" in config else "bottleneck" if "reduction_factor" in config else "config"
    )
    shown = [
        f"{key}={config[key]:g}" if isinstance(config[key], float) else f"{key}={config[key]}"
        for key in _SALIENT
        if key in config and not isinstance(config[key], (dict, list))
    ]
    return " ".join([str(name), *shown[:3], f"#{digest}"])


# The fields of an AdapterHub config that say most about it, in the order a short label shows them.
_SALIENT = ("r", "alpha", "reduction_factor", "prefix_length", "prompt_length", "non_linearity")


def _config_string(text: str) -> str:
    """Normalise (no spaces; a JSON config in its one spelling) and check an AdapterHub config string."""
    try:
        text = config_json(json.loads(text)) if text.lstrip().startswith("{") else "".join(text.split())
    except ValueError as error:
        raise ValueError(f"not a JSON config ({error})") from None
    try:
        load_config_string(text)
    except (ValueError, TypeError, KeyError) as error:
        raise ValueError(f"not an AdapterHub config string ({error})") from None
    return text


@dataclass(frozen=True, kw_only=True)
class AnyAdapterHubConfig(AdapterHubMethod):
    """The generic method: the config comes from AdapterHub's config-string syntax."""

    layer_ablation: bool = False  # depends on the config (prompt tuning has no layers)

    def adapter_config(self, options: Mapping[str, Any], model_config) -> AdapterConfig:
        return load_config_string(options["config"])


ADAPTERHUB = AnyAdapterHubConfig(
    name="adapterhub",
    label="AdapterHub config",
    colour="#525252",
    argument="config",
    options=(
        Option(
            "config",
            str,
            None,
            "an AdapterHub config string, e.g. lora[r=4,alpha=16], seq_bn, "
            "prefix_tuning|par_bn (--method adapterhub:<config> sets it)",
            required=True,
            normalise=_config_string,
        ),
    ),
)

METHODS = (ADAPTERHUB,)
