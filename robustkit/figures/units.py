"""How a stored score is shown: its factor (fractions as %, correlations x 100) and its unit.

Accuracy and F1 are stored as fractions and shown in % (:data:`PERCENT`), correlations and MCC x
100 (:data:`SCALED`), as in the papers' tables; an attack's success rate in the unit its module
declares (:mod:`robustkit.attacks.registry`). :func:`score_label` names a score axis with its
one unit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Set

from robustkit.attacks.registry import success_metrics


class _GrowingSet(Set):
    """Fixed names plus those a registry holds when asked: a set that grows with the registry
    (an attack registered after this module was imported is in it at once)."""

    def __init__(self, fixed: Iterable[str], more: Callable[[], Iterable[str]]) -> None:
        self._fixed, self._more = frozenset(fixed), more

    def __contains__(self, name: object) -> bool:
        return name in self._fixed or name in set(self._more())

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._fixed | set(self._more())))

    def __len__(self) -> int:
        return len(self._fixed | set(self._more()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({sorted(self)})"

    @classmethod
    def _from_iterable(cls, names: Iterable[str]) -> frozenset[str]:  # what |, & and - return: a plain set
        return frozenset(names)


# Scores shown x 100: accuracy and F1 in %, correlations x 100 (as in the papers' tables). An
# attack's success rate is shown in the unit its module declares (robustkit.attacks.registry).
PERCENT = _GrowingSet({"accuracy", "f1", "macro_f1"}, lambda: success_metrics("%"))
SCALED = {"mcc", "pearson", "spearman"}


def scale(metric: str) -> float:
    """Factor from stored values (fractions for accuracy/F1) to shown values (%, x 100)."""
    return 100.0 if metric in PERCENT | SCALED else 1.0


def unit(metric: str) -> str:
    """Unit suffix of a shown metric: ``" (%)"``, ``" (x 100)"`` or ``""``."""
    return " (%)" if metric in PERCENT else " (x 100)" if metric in SCALED else ""


def score_label(metrics: Iterable[str], splits: Iterable[str] = ()) -> str:
    """Axis label of scores: split, metric and one unit (e.g. ``"test accuracy (%)"``)."""
    metrics, splits = sorted(set(map(str, metrics))), sorted(set(map(str, splits)))
    units = {unit(m) for m in metrics}
    shown = "/".join(metrics) + (units.pop() if len(units) == 1 else "")
    return f"{'/'.join(splits)} {shown}".strip()
