"""robustkit: robustness and stability of adapter-based tuning vs full fine-tuning.

Train into a run store (``robustkit.train``, ``robustkit.sweep``), then read it as tidy
DataFrames::

    import robustkit
    runs = robustkit.load_runs("runs/")        # one row per run
    history = robustkit.load_history("runs/")  # one row per run x eval step x metric

    verdicts = robustkit.claims("runs/demo")  # each paper claim: agrees / contradicts / inconclusive

``import robustkit`` itself imports nothing heavy: every ``robustkit`` command imports this
package first, and ``robustkit --help`` must answer at once, so the notebook functions load
their modules (pandas, torch) on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for type checkers and IDEs only; at run time __getattr__ imports them
    from robustkit.store import load_gradnorms, load_history, load_runs

# Name -> module that defines it, imported on first access (PEP 562 module __getattr__).
_LAZY = {"load_runs": "robustkit.store", "load_history": "robustkit.store", "load_gradnorms": "robustkit.store"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'robustkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def claims(store=None, recipes=None, scale: str = "demo", include_failed: bool = False):
    """The verdict of each paper claim on the runs behind its figure (see
    :func:`robustkit.reproduce.claims`): a tidy DataFrame, one row per recipe x claim x cell."""
    from robustkit.reproduce import claims as judge

    return judge(store, recipes, scale=scale, include_failed=include_failed)


__all__ = ["load_runs", "load_history", "load_gradnorms", "claims"]
__version__ = "0.1.0"
