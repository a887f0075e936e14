"""Low-rank and rescaling methods on the weight matrices, as AdapterHub configs: ``lora``,
``dora``, ``vera``, ``ia3``.

The adapted matrices are named by ``matrices``: the attention's ``q``, ``k``, ``v`` (d x d) and
the feed-forward block's ``intermediate`` (d -> ffn) and ``output`` (ffn -> d), in every layer.
Per adapted matrix of input size d_in and output size d_out:

lora
    Hu et al. 2021: W + (alpha / r) B A, A (r x d_in) and B (d_out x r) trained, B = 0 at init:
    r (d_in + d_out) parameters, 2rd for a d x d matrix. Defaults as Hu et al. for RoBERTa-base
    on GLUE (their table 9): q and v, r = 8, alpha = 8, lr 5e-4.
dora
    Liu et al. 2024: LoRA on the direction of W plus a trained magnitude per output unit:
    r (d_in + d_out) + d_out.
vera
    Kopiczko et al. 2024: frozen random A and B shared by all layers, scaled by trained
    diagonal matrices. AdapterHub 1.3 keeps the two scalings as full r x r and d_out x d_out
    matrices (initialised diagonal) and trains every entry, so a matrix adds r^2 + d_out^2
    trained parameters (the paper's vectors would be r + d_out); the shared random matrices
    are frozen, not saved, and redrawn from the run's seed when the model is rebuilt.
ia3
    Liu et al. 2022: the output of each adapted matrix scaled by a trained vector (1 at init):
    d_out; keys, values and the FFN's intermediate layer as in the paper, lr 3e-3 as in T-Few.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from robustkit.errors import MethodError
from robustkit.methods.adapterhub import AdapterHubMethod
from robustkit.methods.base import Expected, ModelShape, Option, matrix_list

MATRICES = ("q", "k", "v", "intermediate", "output")
_ATTENTION = ("q", "k", "v")


def _matrices(default: str) -> Option:
    return Option(
        "matrices",
        str,
        default,
        f"adapted matrices of every layer: a comma-separated subset of {', '.join(MATRICES)}",
        normalise=matrix_list(MATRICES),
    )


def matrix_shapes(shape: ModelShape, matrices: str) -> list[tuple[int, int]]:
    """(d_in, d_out) of each adapted matrix of one layer."""
    if shape.ffn is None and any(m in matrices.split(",") for m in ("intermediate", "output")):
        raise MethodError(
            "the model's config gives no feed-forward size (intermediate_size): no formula for its FFN matrices"
        )
    sizes = {
        "q": (shape.d, shape.d),
        "k": (shape.d, shape.d),
        "v": (shape.d, shape.d),
        "intermediate": (shape.d, shape.ffn),
        "output": (shape.ffn, shape.d),
    }
    return [sizes[name] for name in matrices.split(",")]


@dataclass(frozen=True, kw_only=True)
class WeightMethod(AdapterHubMethod):
    """A LoRAConfig-family method: options map onto AdapterHub's LoRA fields.

    Attributes
    ----------
    per_matrix : str
        ``lora``, ``dora``, ``vera`` or ``ia3``: which count formula applies per matrix.
    """

    per_matrix: str = "lora"

    def config_fields(self, options: Mapping[str, Any]) -> dict[str, Any]:
        fields = {k: v for k, v in options.items() if k != "matrices"}
        names = options["matrices"].split(",")
        return {
            **fields,
            "attn_matrices": [m for m in names if m in _ATTENTION],
            "selfattn_lora": any(m in _ATTENTION for m in names),
            "intermediate_lora": "intermediate" in names,
            "output_lora": "output" in names,
        }

    def config_options(self, config: Mapping[str, Any]) -> dict[str, Any]:
        names = [m for m in _ATTENTION if config.get("selfattn_lora") and m in (config.get("attn_matrices") or ())]
        names += [m for m, key in (("intermediate", "intermediate_lora"), ("output", "output_lora")) if config.get(key)]
        return {**{o.name: config[o.name] for o in self.options if o.name in config}, "matrices": ",".join(names)}

    def expected(self, shape: ModelShape, options: Mapping[str, Any]) -> Expected:
        r = options.get("r")
        per = {
            "lora": (lambda i, o: r * (i + o), "r (d_in + d_out)"),
            "dora": (lambda i, o: r * (i + o) + o, "r (d_in + d_out) + d_out"),
            "vera": (lambda i, o: r * r + o * o, "r^2 + d_out^2 (AdapterHub's full scaling matrices)"),
            "ia3": (lambda i, o: o, "d_out"),
        }
        count, text = per[self.per_matrix]
        shapes = matrix_shapes(shape, options["matrices"])
        total = shape.layers * sum(count(i, o) for i, o in shapes)
        names = options["matrices"].split(",")
        n = sum(m in _ATTENTION for m in names)
        if self.per_matrix == "vera" and shape.fused_attention and n:
            # one merged module for the n attention matrices: rank n r, output n d
            rest = sum(count(i, o) for m, (i, o) in zip(names, shapes) if m not in _ATTENTION)
            total = shape.layers * ((n * r) ** 2 + (n * shape.d) ** 2 + rest)
            text += f"; fused attention (DeBERTa): its {n} matrices one module of (n r)^2 + (n d)^2"
        sizes = ", ".join(f"{i}x{o}" for i, o in shapes)
        return Expected(
            total,
            f"L x sum over adapted matrices of {text}, L={shape.layers}, "
            f"matrices {options['matrices']} (d_in x d_out: {sizes}){f', r={r}' if r else ''}",
        )


def _rank(default: int) -> Option:
    return Option("r", int, default, "rank r of the update", minimum=1, symbol="r")


_ALPHA = Option("alpha", int, 8, "scaling numerator: the update is scaled by alpha / r", minimum=1)
_DROPOUT = Option("dropout", float, 0.0, "dropout on the LoRA branch's input", minimum=0, maximum=1, open_maximum=True)

LORA = WeightMethod(
    name="lora",
    label="LoRA",
    colour="#e6ab02",
    config_class="LoRAConfig",
    default_lr=5e-4,
    curve_option="r",
    options=(_rank(8), _ALPHA, _DROPOUT, _matrices("q,v")),
)
DORA = WeightMethod(
    name="dora",
    label="DoRA",
    colour="#a6761d",
    config_class="DoRAConfig",
    default_lr=5e-4,
    curve_option="r",
    per_matrix="dora",
    options=(_rank(8), _ALPHA, _DROPOUT, _matrices("q,v")),
)
VERA = WeightMethod(
    name="vera",
    label="VeRA",
    colour="#66a61e",
    config_class="VeraConfig",
    default_lr=4e-3,
    curve_option="r",
    per_matrix="vera",
    options=(_rank(8), _matrices("q,v")),
)
IA3 = WeightMethod(
    name="ia3",
    label="(IA)³",
    colour="#b15928",
    config_class="IA3Config",
    default_lr=3e-3,
    per_matrix="ia3",
    options=(_matrices("k,v,intermediate"),),
)

METHODS = (LORA, DORA, VERA, IA3)
