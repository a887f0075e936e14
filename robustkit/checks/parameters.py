"""The rules every declared parameter meets (an analysis's, a statistic's, a figure's own)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable

from robustkit.params import Param

# an annotation naming one of these types, and not str: the parameter is not a string
_OTHER_TYPES = re.compile(r"\b(int|float|bool|list)\b")


def restated_defaults(params: Iterable[Param], where: str) -> list[str]:
    """``where --name`` of each help that restates its default (``--help`` prints it from ``default``).

    A flag (bool) is exempt: its help says what off means."""
    return [
        f"{where} --{p.name} help {p.help[-50:]!r} says its default"
        for p in params
        if "default" in p.help.lower() and not isinstance(p.default, bool)
    ]


def untyped_nones(params: Iterable[Param], signature: dict[str, inspect.Parameter], where: str) -> list[str]:
    """``where --name`` of each parameter whose default is None and whose type (``str`` then,
    unless ``kind=``) is not what the function of ``signature`` annotates it as (``int | None``)."""
    found = []
    for p in params:
        given = signature.get(p.name)
        if p.default is not None or p.kind is not None or given is None:
            continue
        annotation = (
            given.annotation if isinstance(given.annotation, str) else getattr(given.annotation, "__name__", "")
        )
        if _OTHER_TYPES.search(str(annotation)) and "str" not in str(annotation):
            found.append(f"{where} --{p.name} defaults to None, so it is read as str, but is annotated {annotation}")
    return found


def second_defaults(params: Iterable[Param], signature: dict[str, inspect.Parameter], where: str) -> list[str]:
    """``where name=value`` where a function's ``signature`` repeats a declared default."""
    return [
        f"{where} repeats {p.name}={p.default!r} in its signature"
        for p in params
        if p.name in signature
        and p.default is not None
        and signature[p.name].default is not inspect.Parameter.empty
        and signature[p.name].default == p.default
    ]
