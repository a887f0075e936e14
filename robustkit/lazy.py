"""Names a package re-exports but imports on first use (PEP 562 module ``__getattr__``).

A package whose heavy modules (torch, transformers, pandas) sit behind names it re-exports keeps
its light modules cheap to import: a read-only command that needs ``robustkit.store.collapse``
does not pay for the training loop (issue #57). One helper for every such package, so each
``__init__`` states only its name -> module map.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def exports(
    package: str, names: Mapping[str, str], namespace: dict, submodules: frozenset[str] = frozenset()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package`` whose ``names`` (name -> defining module)
    are imported on first access and then kept in ``namespace`` (the package's ``globals()``), so
    later lookups skip the function; ``submodules`` are the package's own submodules reached as
    attributes (``robustkit.figures``)."""

    def __getattr__(name: str) -> Any:
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        if name in names:
            value = getattr(importlib.import_module(names[name]), name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*namespace, *names, *submodules})

    return __getattr__, __dir__
