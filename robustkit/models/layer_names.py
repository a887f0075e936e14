"""Layer naming: the layer group of a parameter from its name alone (BERT-style names), as
gradient norms and curvature blocks report them."""

from __future__ import annotations

import re

_LAYER = re.compile(r"\.layer\.(\d+)\.")


def layer_group(name: str) -> str:
    """The layer group of a parameter from its name alone (BERT-style names); training groups
    by the model's structure instead (:func:`robustkit.methods.model_parts.layer_groups`) and
    uses this only for names that mapping lacks.

    ``embeddings``, ``layer.<i>`` (encoder layer i, adapters included), ``pooler``,
    ``classifier`` or ``mlm_head``.
    """
    match = _LAYER.search(name)
    if match:
        return f"layer.{match.group(1)}"
    if ".embeddings." in name or name.startswith("embeddings."):
        return "embeddings"
    if ".pooler." in name:
        return "pooler"
    if name.startswith(("cls.", "lm_head.")):
        return "mlm_head"
    return "classifier"
