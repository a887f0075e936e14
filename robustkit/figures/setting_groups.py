"""How a figure groups its rows by run setting: into panels and lines, in order.

Runs that differ in a setting are never drawn as one box or line: :func:`setting_combos` and
:func:`rows_matching` give a panel per combination of setting values, :func:`method_configs` a
line per method and combination (told apart by :data:`LINE_STYLES`), :func:`sort_key` their
order (numbers, then text, then missing values), :func:`is_missing` what counts as unknown.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def is_missing(value: object) -> bool:
    """Whether a setting is unknown or absent (None, NaN, NA); a list or array is a value."""
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or array is a value
        return False


def sort_key(value: object) -> tuple:
    """Setting values in panel order: numbers by value, then text, then missing (train_size: the
    whole set, last)."""
    if is_missing(value):
        return (2, 0.0, "")
    numeric = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    return (0, float(value), "") if numeric else (1, 0.0, str(value))


def setting_combos(data: pd.DataFrame, keys: Sequence[str]) -> list[tuple]:
    """The distinct value tuples of ``keys`` in ``data``, in :func:`sort_key` order (``[()]`` for
    no keys: one panel of everything)."""
    if not keys:
        return [()]
    combos = data[list(keys)].drop_duplicates().itertuples(index=False, name=None)
    return sorted(combos, key=lambda c: tuple(sort_key(v) for v in c))


def rows_matching(frame: pd.DataFrame, keys: Sequence[str], combo: tuple) -> pd.Series:
    """The rows of ``frame`` whose ``keys`` hold ``combo`` (a missing value matches missing ones)."""
    mask = pd.Series(True, index=frame.index)
    for key, value in zip(keys, combo):
        mask &= frame[key].isna() if is_missing(value) else frame[key] == value
    return mask


# The line styles that tell apart lines of one colour (one method's configurations, TSP steps).
LINE_STYLES = ("-", "--", ":", "-.")


def method_configs(frame: pd.DataFrame, split_by: Sequence[str]) -> list[tuple[str, dict, str, pd.DataFrame]]:
    """``frame`` per method (sorted), then per combination of the ``split_by`` values inside it,
    so that runs of different settings are never drawn as one line.

    Returns
    -------
    list of (method, settings, line style, rows)
        ``settings``: ``{column: value}`` of ``split_by`` (empty without it); the line style
        numbers a method's configurations (:data:`LINE_STYLES`, cycled).
    """
    split_by = list(split_by)
    groups = []
    for method, by_method in frame.groupby("method", sort=True):
        configs = list(by_method.groupby(split_by, dropna=False, sort=True)) if split_by else [((), by_method)]
        for index, (config, rows) in enumerate(configs):
            values = config if isinstance(config, tuple) else (config,)
            groups.append((method, dict(zip(split_by, values)), LINE_STYLES[index % len(LINE_STYLES)], rows))
    return groups
