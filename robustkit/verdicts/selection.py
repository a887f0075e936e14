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
    """Rows whose value is one of ``values``: numbers compare as numbers (64 == 64.0), the rest
    as text; :data:`UNSET` matches a missing value (a run of a method without that option)."""
    numbers = pd.to_numeric(column, errors="coerce")
    wanted = {float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}
    texts = {str(v) for v in values if v != UNSET}
    unset = column.isna() if UNSET in values else pd.Series(False, index=column.index)
    return numbers.isin(wanted) | (column.notna() & column.map(str).isin(texts)) | unset


def text(value) -> str:
    """A setting value as a cell names it: whole floats as integers, NaN as ``all``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "all"
    return f"{value:g}" if isinstance(value, float) else str(value)
