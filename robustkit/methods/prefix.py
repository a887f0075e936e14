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
    encoder's outputs then have p more positions than the input; they are removed from the
    base model's token states (:class:`robustkit.methods.adapterhub.PromptRemover`). AdapterHub
    cannot skip prompt tuning per layer, so it has no layer ablation.

Learning rates are starting points: prompt tuning's 3e-1 (Lester et al., with Adafactor) is far
from AdamW's scale, so both take 1e-3 here, to be tuned.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from robustkit.methods.adapterhub import AdapterHubMethod
from robustkit.methods.base import Expected, ModelShape, Option


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
        return {
            "prefix_length": options["length"],
            "flat": not options["reparametrise"],
            "bottleneck_size": options["bottleneck"],
        }

    def config_options(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "length": config.get("prefix_length"),
            "reparametrise": not config.get("flat"),
            "bottleneck": config.get("bottleneck_size"),
        }

    def expected(self, shape: ModelShape, options: Mapping[str, Any]) -> Expected:
        p, b = options["length"], options["bottleneck"] if options["reparametrise"] else None
        text = (
            ("p d + (d b + b) + (b 2Ld + 2Ld)" if b else "p 2Ld")
            + f", p={p}, L={shape.layers}, d={shape.d}"
            + (f", b={b}" if b else "")
        )
        return Expected(prefix_parameters(shape, p, b), text)


@dataclass(frozen=True, kw_only=True)
class PromptTuning(AdapterHubMethod):
    config_class: str = "PromptTuningConfig"
    layer_ablation: bool = False

    def config_fields(self, options: Mapping[str, Any]) -> dict[str, Any]:
        return {"prompt_length": options["length"], "combine": options["combine"]}

    def config_options(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"length": config.get("prompt_length"), "combine": config.get("combine")}

    def expected(self, shape: ModelShape, options: Mapping[str, Any]) -> Expected:
        e = shape.embedding or shape.d  # the prompt is in the input embeddings' space
        return Expected(options["length"] * e, f"p e, p={options['length']}, e={e} (embedding size)")


PREFIX = PrefixTuning(
    name="prefix",
    label="prefix tuning",
    colour="#9467bd",
    default_lr=1e-3,
    curve_option="length",
    options=(
        Option("length", int, 30, "prefix vectors per layer (p)", minimum=1, symbol="p"),
        Option(
            "reparametrise",
            bool,
            True,
            "compute the prefix with an MLP from an embedding (Li & Liang 2021) instead of training it directly",
        ),
        Option("bottleneck", int, 512, "hidden size of the reparametrisation MLP (used with reparametrise)", minimum=1),
    ),
)
PROMPT = PromptTuning(
    name="prompt",
    label="prompt tuning",
    colour="#8c564b",
    default_lr=1e-3,
    curve_option="length",
    options=(
        Option("length", int, 10, "trained prompt embeddings (p)", minimum=1, symbol="p"),
        Option(
            "combine",
            str,
            "prefix",
            "where the prompt goes: prefix (first) or prefix_after_bos (after the first token)",
            choices=("prefix", "prefix_after_bos"),
        ),
    ),
)

METHODS = (PREFIX, PROMPT)
