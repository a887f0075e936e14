"""Selecting runs by setting values, as claims and plans name them: the one rule both use.

A claim's groups and ``where`` filters name run settings by value (``a = [64, 256]``,
``where = {"lora.r": [8, "unset"]}``); :func:`matches` says which rows a list of such values
selects and :func:`text` how a value is written in a cell's name (``train_size=1000``). Apart from
:mod:`robustkit.verdicts.rules` so that the plan (:mod:`robustkit.verdicts.decidability`), which the claims read,
needs no import of the claims.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

UNSET = "unset"  # a ``where`` value: the runs without a value in that column


def matches(column: pd.Series, values: tuple) -> pd.Series:
    """Rows whose value is one of ``values``: numbers compare as numbers (64 == 64.0, "64" == 64),
    the rest as text; :data:`UNSET` matches a missing value (a run of a method without that
    option). Decided once per distinct value (speed: the simulation's many small frames)."""
    codes, uniques = pd.factorize(column, use_na_sentinel=False)
    wanted = {float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}
    texts = {str(v) for v in values if v != UNSET}
    hits = np.array([_selected(value, wanted, texts, UNSET in values) for value in uniques], dtype=bool)
    return pd.Series(hits[codes], index=column.index)


def _selected(value, wanted: set, texts: set, unset: bool) -> bool:
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return unset
    number = pd.to_numeric(value, errors="coerce") if isinstance(value, str) else value
    try:
        if float(number) in wanted:
            return True
    except (TypeError, ValueError):
        pass
    return str(value) in texts


def text(value) -> str:
    """A setting value as a cell names it: whole floats as integers, NaN as ``all``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "all"
    return f"{value:g}" if isinstance(value, float) else str(value)
