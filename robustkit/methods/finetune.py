"""Methods that tune parameters the pretrained model already has: ``full``, ``topk``, ``layernorm``.

full
    Every parameter trains (Devlin et al. 2019 fine-tuning).
topk
    Houlsby et al. 2019 section 3.4 baseline (i), "variable fine-tuning" of section 3.3: only the
    top ``top_k`` encoder layers train (all of their parameters, LayerNorms included), plus what
    sits above them (the pooler) and the task head; embeddings and lower layers are frozen.
layernorm
    Houlsby et al. 2019 section 3.4 baseline (ii): only the LayerNorm parameters (embeddings and
    every layer, 2d per LayerNorm) and the task head train.

Heads always train. Top-k fine-tuning is fine-tuning of a part of the network, so it takes full
fine-tuning's defaults (lr 2e-5, Han et al. 2021 table 3); LayerNorm-only trains ~0.1% of the
weights of a frozen base, like adapters, so it takes the adapter runs' (lr 1e-4). Houlsby et al.
2019 section 3.4 tunes the baselines' lr over the same sweep as the other methods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from robustkit.errors import MethodError
from robustkit.methods.base import Method, Option

if TYPE_CHECKING:
    from torch import nn


@dataclass(frozen=True, kw_only=True)
class FineTuning(Method):
    """A method that trains a part of the pretrained model (no parameters added)."""

    default_lr: float = 2e-5
    default_epochs: int = 10
    default_max_length: int = 128

    def _apply(self, model: nn.Module, options: Mapping[str, Any]) -> None:
        from robustkit.methods import model_parts

        model_parts.set_trainable(model, {*self.trained(model, options), *model_parts.head_names(model)})

    def trained(self, model: nn.Module, options: Mapping[str, Any]) -> list[str]:
        """The pretrained parameters the method trains besides the head."""
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class Full(FineTuning):
    def trained(self, model: nn.Module, options: Mapping[str, Any]) -> list[str]:
        from robustkit.methods import model_parts

        return model_parts.parameter_names(model)


@dataclass(frozen=True, kw_only=True)
class TopLayers(FineTuning):
    def trained(self, model: nn.Module, options: Mapping[str, Any]) -> list[str]:
        from robustkit.methods import model_parts

        self.check_model(model.config, options)
        layers = model_parts.encoder_layers(model)
        top = tuple(layers[len(layers) - options["top_k"] :])
        # what sits above the top layer (the pooler) is on the head's path: it trains with it
        below = (model_parts.embedding_prefix(model), *layers)
        base = model_parts.base_prefix(model)
        return [
            n
            for n in model_parts.parameter_names(model)
            if n.startswith(top) or (n.startswith(base) and not n.startswith(below))
        ]

    def check_model(self, config, options: Mapping[str, Any]) -> None:
        check_top_k(options["top_k"], config.num_hidden_layers)


@dataclass(frozen=True, kw_only=True)
class LayerNorms(FineTuning):
    default_lr: float = 1e-4
    default_epochs: int = 20
    default_max_length: int = 256

    def trained(self, model: nn.Module, options: Mapping[str, Any]) -> list[str]:
        from robustkit.methods import model_parts

        return model_parts.layer_norm_names(model)


def check_top_k(top_k: int | None, n_layers: int) -> None:
    """Raise :class:`MethodError` (naming k) unless 1 <= k <= the model's encoder layers."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= n_layers:
        raise MethodError(
            f"method 'topk' needs top_k between 1 and {n_layers} (the model's encoder layers), got {top_k!r}"
        )


FULL = Full(name="full", label="without adapters (full fine-tuning)", colour="#d95f02")
TOPK = TopLayers(
    name="topk",
    label="fine-tuning the top k layers",
    colour="#1f78b4",
    curve_option="top_k",
    options=(
        Option(
            "top_k",
            int,
            None,
            "fine-tune the top K encoder layers (+ pooler and head), 1..number of layers "
            "(Houlsby et al. 2019 section 3.4)",
            minimum=1,
            required=True,
            spec_field="top_k",
            symbol="k",
        ),
    ),
)
LAYERNORM = LayerNorms(name="layernorm", label="LayerNorm parameters only", colour="#e7298a")

METHODS = (FULL, TOPK, LAYERNORM)
