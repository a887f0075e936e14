"""How a figure shows a tuning method: its label, its label wrapped for a tick, its colour.

Each method's label and colour are its own (:mod:`robustkit.methods`); a method robustkit does
not know is shown by its name, in grey.
"""

from __future__ import annotations

import textwrap

from robustkit.methods.registry import method_colours, method_labels

METHOD_LABELS = method_labels()
METHOD_COLORS = method_colours()


def method_label(method: str) -> str:
    """The method's label in legends and titles (``houlsby``: ``with adapters (Houlsby)``); its name if unknown."""
    return METHOD_LABELS.get(method, method)


def method_tick(method: str, width: int = 18) -> str:
    """The method's label wrapped for an x tick: side by side, long labels ("without adapters
    (full fine-tuning)") would run into each other."""
    return textwrap.fill(method_label(method), width)


def method_color(method: str) -> str:
    """The method's colour; grey if unknown."""
    return METHOD_COLORS.get(method, "#666666")
