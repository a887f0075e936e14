"""Representation fine-tuning as AdapterHub configs: ``loreft``, ``direft``.

loreft
    Wu et al. 2024 (ReFT): the hidden states of the first ``prefix_positions`` and last
    ``suffix_positions`` tokens of every layer's output are edited in a rank-r subspace,
    h + R^T (W h + b - R h), R (r x d, orthonormal rows) and W, b trained. AdapterHub keeps one
    unit for the prefix and one for the suffix positions (one if ``tied``): per layer and unit
    r (2d + 1) parameters. The lr (1e-3) is a starting point, to be tuned.
direft
    Wu et al. 2024's DiReFT: the same edit without the orthonormal R (AdapterHub's
    ``DiReftConfig``: ``orthogonality = False``), the same r (2d + 1) parameters per layer and unit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from robustkit.methods.adapterhub import AdapterHubMethod
from robustkit.methods.base import Expected, ModelShape, Option


@dataclass(frozen=True, kw_only=True)
class LoReft(AdapterHubMethod):
    config_class: str = "LoReftConfig"

    def config_fields(self, options: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "r": options["r"],
            "prefix_positions": options["prefix_positions"],
            "suffix_positions": options["suffix_positions"],
            "tied_weights": options["tied"],
        }

    def config_options(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "r": config.get("r"),
            "prefix_positions": config.get("prefix_positions"),
            "suffix_positions": config.get("suffix_positions"),
            "tied": config.get("tied_weights"),
        }

    def expected(self, shape: ModelShape, options: Mapping[str, Any]) -> Expected:
        units = 1 if options["tied"] else 2
        return Expected(
            shape.layers * units * options["r"] * (2 * shape.d + 1),
            f"L x units x r (2d + 1), L={shape.layers}, units={units}, r={options['r']}, d={shape.d}",
        )


LOREFT = LoReft(
    name="loreft",
    label="LoReFT",
    colour="#d62728",
    default_lr=1e-3,
    curve_option="r",
    options=(
        Option("r", int, 1, "rank of the edited subspace", minimum=1, symbol="r"),
        Option("prefix_positions", int, 3, "first tokens edited in every layer", minimum=0),
        Option("suffix_positions", int, 0, "last tokens edited in every layer", minimum=0),
        Option("tied", bool, False, "one unit for prefix and suffix positions instead of one each"),
    ),
)

DIREFT = LoReft(
    name="direft",
    label="DiReFT",
    colour="#ff7f0e",
    default_lr=1e-3,
    curve_option="r",
    config_class="DiReftConfig",
    options=LOREFT.options,
)

METHODS = (LOREFT, DIREFT)
