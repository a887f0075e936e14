"""Choosing runs from a store: ``--select task=rt --select method=houlsby,full``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from robustkit.errors import RobustkitError
from robustkit.store.identity import IDENTITY
from robustkit.store.schema import FINISHED
from robustkit.store.tables import load_runs


def parse_filters(filters: list[str] | None) -> dict[str, list[str]]:
    """``["task=rt", "method=houlsby,full"]`` -> ``{"task": ["rt"], "method": ["houlsby", "full"]}``."""
    parsed: dict[str, list[str]] = {}
    for item in filters or []:
        key, sep, values = item.partition("=")
        if not sep or not key or not values:
            raise RobustkitError(f"bad selection {item!r}: expected key=value[,value...]")
        parsed.setdefault(key.strip(), []).extend(v.strip() for v in _top_level_split(values))
    return parsed


def _top_level_split(values: str) -> list[str]:
    """Split at commas outside brackets: an AdapterHub config string keeps its own commas
    (``adapterhub:lora[r=4,alpha=8],full`` is two values)."""
    parts, depth, current = [], 0, []
    for char in values:
        if char in "[(":
            depth += 1
        elif char in "])":
            depth = max(depth - 1, 0)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def select_runs(
    store: str | Path, filters: dict[str, list[str]] | list[str] | None = None, complete: bool = True
) -> pd.DataFrame:
    """Fine-tuning runs of a store matching every filter (values compared as text, and numbers
    as numbers).

    Parameters
    ----------
    filters : dict or list of str, optional
        Column -> accepted values, or ``key=value[,value]`` strings.
    complete : bool
        Keep only finished runs: complete or diverged (:data:`robustkit.store.schema.FINISHED`; a
        diverged run is counted as such by the analyses, :mod:`robustkit.store.collapse`).

    Raises
    ------
    RobustkitError
        A filter on a column the runs table lacks (named), or no run matches.
    """
    if not isinstance(filters, dict):
        filters = parse_filters(filters)
    runs = load_runs(store)
    if complete and not runs.empty:
        runs = runs[runs["status"].isin(FINISHED)]
    return selected(runs, filters, str(store), "complete ")


def selected(runs: pd.DataFrame, filters: dict[str, list[str]], store: str, kind: str = "") -> pd.DataFrame:
    """The rows of a store's table ``runs`` matching every filter (see :func:`select_runs`).

    Raises
    ------
    RobustkitError
        A filter on a column the table lacks (named), or no row matches.
    """
    for column, values in filters.items():
        if column not in runs.columns:
            raise RobustkitError(f"cannot select on {column!r}: runs have columns {', '.join(runs.columns)}")
        runs = runs[_matches(runs[column], values)]
    if runs.empty:
        raise RobustkitError(f"no {kind}run in {store!r} matches {filters or 'the selection'}")
    return runs.reset_index(drop=True)


def _matches(column: pd.Series, values: list[str]) -> pd.Series:
    """Rows whose value is one of ``values`` as text, or as a number (``lora.r=4`` selects 4.0:
    a column that is missing for runs of other methods holds floats)."""
    numbers = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").dropna()
    numeric = (
        pd.to_numeric(column, errors="coerce")
        if column.dtype.kind in "iuf"
        else pd.Series(float("nan"), index=column.index)
    )
    return column.astype(str).isin(values) | numeric.isin(list(numbers))


def with_identity(frame: pd.DataFrame, run: pd.Series) -> pd.DataFrame:
    """``frame`` (one run's result) with the run's identity columns in front.

    Parameters
    ----------
    run : Series
        The run's row of :func:`select_runs`.
    """
    identity = pd.DataFrame({column: [run.get(column)] * len(frame) for column in IDENTITY}, index=frame.index)
    return pd.concat([identity, frame.drop(columns=[c for c in IDENTITY if c in frame.columns])], axis=1)
