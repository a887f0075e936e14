"""``robustkit.check``: every rule an extension must meet, run on one registered object.

The model is scikit-learn's ``check_estimator``: one call runs every rule of a kind (an
analysis, a figure, an attack or a recipe) on one object, and each failure is one line naming
its rule and how to meet it. One module per kind (:mod:`robustkit.checks.analysis`,
:mod:`~robustkit.checks.figure`, :mod:`~robustkit.checks.attack`, :mod:`~robustkit.checks.recipe`)
holds its rules as :class:`Rule` records beside the functions that test them; the suite calls
:func:`check` for every registered object, so a rule lives here and not in a test's reading of
the source. Where a rule can only be read from source (an import, a call), the check reads it.

The package is named ``checks`` (not ``check``): a package ``robustkit.check`` would replace the
notebook function :func:`robustkit.check` on the ``robustkit`` module as soon as one of its
modules is imported (``tests/test_layout.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from robustkit.errors import RobustkitError

# kind -> the module of its rules (imported when that kind is checked)
KINDS = {
    "analysis": "robustkit.checks.analysis",
    "figure": "robustkit.checks.figure",
    "attack": "robustkit.checks.attack",
    "recipe": "robustkit.checks.recipe",
}


class CheckError(RobustkitError):
    """An unknown kind or name given to :func:`check`."""


@dataclass(frozen=True)
class Rule:
    """One rule of extending.

    Attributes
    ----------
    name : str
        Short name, as a failure line starts (``parameter help``).
    how : str
        How to meet it, in one sentence (the failure line ends with it).
    test : callable
        ``test(obj, context) -> iterable of str``: what breaks the rule in ``obj``, one phrase
        each (empty: the rule is met). ``context`` holds what a kind's rules share (the
        recipe folder).
    """

    name: str
    how: str
    test: Callable[..., Iterable[str]]


@dataclass(frozen=True)
class Failure:
    """One broken rule of one object."""

    kind: str
    name: str
    rule: Rule
    what: str

    def __str__(self) -> str:
        return f"{self.kind} {self.name!r} breaks rule '{self.rule.name}': {self.what}; {self.rule.how}"


def rules(kind: str) -> tuple[Rule, ...]:
    """The rules of ``kind`` (``analysis``, ``figure``, ``attack``, ``recipe``), in the order they run."""
    return _module(kind).RULES


def failures(kind: str, name: str, recipe_dir: str | Path | None = None) -> list[Failure]:
    """Every rule of ``kind`` that the registered object ``name`` breaks (empty: it meets them all).

    Raises
    ------
    CheckError
        An unknown kind; an unknown name (the kind's registry's own error, which lists the known).
    """
    module = _module(kind)
    obj, context = module.resolve(name, recipe_dir)
    found = []
    for rule in module.RULES:
        found += [Failure(kind, name, rule, what) for what in rule.test(obj, context)]
    return found


def check(kind: str, name: str, recipe_dir: str | Path | None = None) -> list[str]:
    """Run every rule an extension of ``kind`` must meet on the registered ``name``.

    Parameters
    ----------
    kind : str
        ``analysis``, ``figure``, ``attack`` or ``recipe``.
    name : str
        Its registered name (a recipe's ``<paper>/<figure>``).
    recipe_dir : path, optional
        The recipe folder (recipes only); default: this checkout's ``recipes/``.

    Returns
    -------
    list of str
        One line per broken rule, naming the rule and how to meet it; empty when all are met.
    """
    return [str(f) for f in failures(kind, name, recipe_dir)]


def _module(kind: str):
    if kind not in KINDS:
        raise CheckError(f"unknown kind {kind!r} to check; known: {', '.join(KINDS)}")
    return importlib.import_module(KINDS[kind])
