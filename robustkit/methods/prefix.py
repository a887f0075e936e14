"""Methods that add trained vectors to the sequence, as AdapterHub configs: ``prefix``, ``prompt``.

prefix
    Li & Liang 2021: ``length`` trained key and value vectors prepended in the self-attention of
    every layer. With ``reparametrise`` (their choice, AdapterHub's default) the vectors are
    computed by an MLP from a ``length`` x d embedding: p d + (d b + b) + (b 2Ld + 2Ld)
    parameters (b = ``bottleneck``) train and are saved; without it the p 2Ld vectors train
    directly. AdapterHub merges the MLP into flat vectors only when it saves an adapter in its
    own format; run checkpoints keep what trains, so a resumed run continues exactly.
prompt
    Lester et al. 2021: ``length`` trained input embeddings (p d parameters) joined to the
    token embeddings (``combine``: ``prefix`` puts them first, AdapterHub's default;
    ``prefix_after_bos`` after the first token, so a [CLS]-pooling head still reads it). The
    encoder's outputs then have p more positions than the input: they are removed from the
    base model's outputs (``last_hidden_state``, ``hidden_states``), as AdapterHub's own heads
    do, so a masked-LM head and per-token analyses see one state per input token (the pooled
    output is computed before, from the full sequence). AdapterHub cannot skip prompt tuning
    per layer, so it has no layer ablation.

Learning rates are starting points: prompt tuning's 3e-1 (Lester et al., with Adafactor) is far
from AdamW's scale, so both take 1e-3 here, to be tuned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from robustkit.methods.adapterhub import AdapterHubMethod
from robustkit.methods.base import Expected, ModelShape, Option

if TYPE_CHECKING:
    from torch import nn


def prefix_parameters(shape: ModelShape, length: int, bottleneck: int | None) -> int:
    """Trained parameters of prefix tuning: p 2Ld flat, p d + (d b + b) + (b 2Ld + 2Ld) through the MLP."""
    out = 2 * shape.layers * shape.d
    if bottleneck is None:
        return length * out
    return length * shape.d + (shape.d * bottleneck + bottleneck) + (bottleneck * out + out)


@dataclass(frozen=True, kw_only=True)
class PrefixTuning(AdapterHubMethod):
    config_class: str = "PrefixTuningConfig"

    def config_fields(self, options: Mapping[str, Any]) -> dict[str, Any]:
        return {"prefix_length": options["length"], "flat": not options["reparametrise"],
                "bottleneck_size": options["bottleneck"]}

    def expected(self, shape: ModelShape, options: Mapping[str, Any]) -> Expected:
        p, b = options["length"], options["bottleneck"] if options["reparametrise"] else None
        text = ("p d + (d b + b) + (b 2Ld + 2Ld)" if b else "p 2Ld") + f", p={p}, L={shape.layers}, d={shape.d}" + (f", b={b}" if b else "")
        return Expected(prefix_parameters(shape, p, b), text)


@dataclass(frozen=True, kw_only=True)
class PromptTuning(AdapterHubMethod):
    config_class: str = "PromptTuningConfig"
    layer_ablation: bool = False

    def config_fields(self, options: Mapping[str, Any]) -> dict[str, Any]:
        return {"prompt_length": options["length"], "combine": options["combine"]}

    def expected(self, shape: ModelShape, options: Mapping[str, Any]) -> Expected:
        return Expected(options["length"] * shape.d, f"p d, p={options['length']}, d={shape.d}")

    def after_adding(self, model: nn.Module, options: Mapping[str, Any]) -> None:
        model.base_model.register_forward_hook(_PromptRemover(options["length"], options["combine"]))


class _PromptRemover:
    """Forward hook of the base model: drop the prompt's positions from its token states."""

    def __init__(self, length: int, combine: str):
        self.length, self.combine = length, combine

    def __call__(self, module, args, output):
        states = output[0]
        expected = states.shape[1] - self.length
        if expected < 1 or not _has_prompt(module):
            return output
        if isinstance(output, tuple):  # return_dict=False: the token states come first
            return (self.strip(states), *output[1:])
        output["last_hidden_state"] = self.strip(states)
        if output.get("hidden_states") is not None:
            output["hidden_states"] = tuple(self.strip(h) for h in output["hidden_states"])
        return output

    def strip(self, states):
        import torch

        if self.combine == "prefix":
            return states[:, self.length:]
        return torch.cat([states[:, :1], states[:, 1 + self.length:]], dim=1)


def _has_prompt(module) -> bool:
    """Whether the forward pass ran with the prompt (it is off when the adapter is switched off)."""
    setup = module.adapters_config.active_setup
    return bool(setup) and len(setup) > 0


PREFIX = PrefixTuning(
    name="prefix", label="prefix tuning", colour="#9467bd", default_lr=1e-3, curve_option="length",
    options=(
        Option("length", int, 30, "prefix vectors per layer (p)", minimum=1, symbol="p"),
        Option("reparametrise", bool, True, "compute the prefix with an MLP from an embedding (Li & Liang 2021) "
               "instead of training it directly"),
        Option("bottleneck", int, 512, "hidden size of the reparametrisation MLP (used with reparametrise)", minimum=1),
    ),
)
PROMPT = PromptTuning(
    name="prompt", label="prompt tuning", colour="#8c564b", default_lr=1e-3, curve_option="length",
    options=(
        Option("length", int, 10, "trained prompt embeddings (p)", minimum=1, symbol="p"),
        Option("combine", str, "prefix", "where the prompt goes: prefix (first) or prefix_after_bos (after the first token)",
               choices=("prefix", "prefix_after_bos")),
    ),
)

METHODS = (PREFIX, PROMPT)
