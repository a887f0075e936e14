"""Typed parameters, declared once: what an analysis, a figure or a statistic accepts.

A :class:`Param` carries a parameter's default, help, type and allowed values. The registries
(:mod:`robustkit.analysis.registry` for analyses and their statistics, :mod:`robustkit.figures`
for figures) declare each parameter once; the command line's flags, the notebook functions'
keyword checks and the recipes' checks are all generated from these declarations, so a default
has one home. An unknown name is an error that lists the valid ones (:func:`resolve`), never
dropped silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from robustkit.errors import RobustkitError


class ParamError(RobustkitError):
    """An unknown parameter or a value of the wrong type (the message names both and the valid ones)."""


@dataclass(frozen=True)
class Param:
    """One typed parameter.

    Attributes
    ----------
    name : str
        Python name; the command-line flag is ``--<name with dashes>``.
    default : Any
        Value when not given; its type is the parameter's type unless ``kind`` says otherwise.
    help : str
        What it does (shown by ``--help``).
    choices : tuple
        Allowed values (empty = any).
    kind : type, optional
        ``int``, ``float``, ``str``, ``bool`` or ``list`` (a list of str; comma-separated on
        the command line). Default: the type of ``default``, ``str`` when it is None.
    minimum : float, optional
        The smallest value of a number (counts, seeds, levels and tolerances are never
        negative); None: any number. Default: 0.
    check : str, optional
        ``"module:function"`` that raises a :class:`robustkit.errors.RobustkitError` naming a
        value it refuses (a device this machine lacks, an unknown metric): checks that need
        more than the choices, imported only when a value is given.
    default_note : str, optional
        Words on the default, printed after it: where it comes from (``He et al. 2021``), or
        what None means (``each task's main metric``). The default itself is never restated in
        ``help``: :attr:`described` prints it from ``default``.
    """

    name: str
    default: Any
    help: str
    choices: tuple = ()
    kind: type | None = None
    minimum: float | None = 0
    check: str | None = None
    default_note: str = ""

    @property
    def described(self) -> str:
        """``help`` and the default, as ``--help`` and the docs print it (``...; default: 32``).

        A flag (bool) is described by its help alone: its words say what off means."""
        if self.type is bool or isinstance(self.default, bool):
            return self.help
        shown = "" if self.default is None else shown_value(self.default)
        if not shown:  # None, an empty list or string: nothing to print but the note
            return f"{self.help}; default: {self.default_note}" if self.default_note else self.help
        return f"{self.help}; default: {shown}" + (f" ({self.default_note})" if self.default_note else "")

    @property
    def type(self) -> type:
        if self.kind is not None:
            return self.kind
        return str if self.default is None else type(self.default)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def coerce(self, value: Any) -> Any:
        """``value`` as this parameter's type (a comma-separated str becomes a list)."""
        if value is None:
            return None
        kind = self.type
        try:
            if kind is list:
                value = [v.strip() for v in value.split(",")] if isinstance(value, str) else [str(v) for v in value]
            elif kind is bool:
                if not isinstance(value, bool):
                    raise TypeError(f"expected true or false, got {value!r}")
            elif kind is float:
                value = float(value)
            elif kind is int:
                if isinstance(value, bool) or float(value) != int(float(value)):
                    raise TypeError(f"expected an integer, got {value!r}")
                value = int(float(value))
            elif isinstance(value, (list, tuple)):  # a comma list given as a sequence, e.g. alphas [0.0, 1.0]
                value = ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
            else:
                value = str(value)
        except (TypeError, ValueError) as error:
            raise ParamError(f"parameter {self.name!r}: {error}") from None
        if self.choices:
            bad = [v for v in (value if kind is list else [value]) if v not in self.choices]
            if bad:
                raise ParamError(f"parameter {self.name!r} must be one of {list(self.choices)}, got {bad[0]!r}")
        if kind in (int, float) and self.minimum is not None and not value >= self.minimum:  # NaN fails too
            raise ParamError(f"parameter {self.name!r} must be >= {self.minimum:g}, got {value!r}")
        if self.check is not None:
            import importlib

            module, _, function = self.check.partition(":")
            try:
                getattr(importlib.import_module(module), function)(value)
            except RobustkitError as refused:
                raise ParamError(f"parameter {self.name!r}: {refused}") from None
        return value


def shown_value(value: Any) -> str:
    """A default as the command line takes it: a list comma-separated, a float in ``%g``."""
    if isinstance(value, (list, tuple)):
        return ",".join(shown_value(v) for v in value)
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def resolve(
    params: Iterable[Param], given: Mapping[str, Any], owner: str, error: type[RobustkitError] = ParamError
) -> dict[str, Any]:
    """Every parameter's value: ``given`` (checked and typed) over the defaults.

    Parameters
    ----------
    params : iterable of Param
        The declared parameters.
    given : mapping
        Name -> value; None keeps a parameter's default only where the default is None.
    owner : str
        Who the parameters belong to, for the error message (``"analysis 'rsa'"``).
    error : exception class
        Raised for an unknown name or a bad value (a subclass of RobustkitError).

    Raises
    ------
    error
        An unknown name (the valid ones are listed) or a value of the wrong type.
    """
    known = {p.name: p for p in params}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise error(f"{owner} has no parameter(s) {unknown}; it has: {', '.join(sorted(known)) or 'none'}")
    try:
        return {name: p.coerce(given[name]) if name in given else p.default for name, p in known.items()}
    except ParamError as bad:
        raise error(f"{owner}: {bad}") from None
