"""No silent pooling: runs put into one group must differ only in their seed and in what is shown.

A box, a mean, a test or a curve pools runs. If two runs in one group also differ in, say, their
number of epochs or their warmup, the group mixes two populations (a bimodal box, a variance
test on a mixture) and nothing on the figure says so. Every field of the run spec is a column
of the analyses' frames (:data:`robustkit.store.tables.IDENTITY`); :func:`mixed_settings` finds the
fields that vary inside a group, and every grouping either splits on them
(:func:`split_columns`) or stops with a message naming them (:func:`check_pooling`).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from robustkit.errors import RobustkitError, did_you_mean
from robustkit.store.identity import IDENTITY

# What may differ between the replicates of one group.
REPLICATE_FIELDS = ("run_id", "seed")
# Settings that only mean something through another one: the TSP run's own settings are
# normalised away at tsp_step 0 (RunSpec.resolved), so pooling TSP lengths pools them too.
DEPENDENT_FIELDS = {"tsp_step": ("tsp_lr", "tsp_batch_size", "tsp_seed")}


class PoolingError(RobustkitError):
    """Runs of different settings would be pooled into one group (the message names the fields)."""


def setting_columns(frame: pd.DataFrame) -> list[str]:
    """The run-spec columns of ``frame`` that are settings (not replicate labels), in order."""
    return [c for c in IDENTITY if c in frame.columns and c not in REPLICATE_FIELDS]


class ColumnError(RobustkitError):
    """A grouping names a column the frame does not have (the message lists the ones it has)."""


def require_columns(frame: pd.DataFrame, columns: Sequence[str], what: str = "group by") -> None:
    """Raise :class:`ColumnError` unless ``frame`` has every one of ``columns``: a misspelt
    ``--by`` or ``--within`` names the valid columns (and the closest one) rather than failing
    as a bare KeyError.

    Parameters
    ----------
    what : str
        What the columns are for, as the message says it (``"group by"``, ``"split cells by"``).
    """
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        hint = did_you_mean(missing[0], frame.columns)
        raise ColumnError(
            f"cannot {what} {', '.join(map(repr, missing))}: no such column{hint}; "
            f"the columns are {', '.join(map(str, frame.columns))}"
        )


def mixed_settings(frame: pd.DataFrame, groups: Sequence[str], pooled: Sequence[str] = ()) -> dict[str, list[str]]:
    """Settings that vary inside some group of ``groups``, other than the ``pooled`` ones.

    Parameters
    ----------
    frame : DataFrame
        One row per observation, with run-spec columns.
    groups : sequence of str
        The columns that define a group (a box, a line, a table row).
    pooled : sequence of str
        Settings deliberately pooled inside a group (e.g. ``tsp_step`` for Han et al. 2021
        figure 4, one box per method over TSP lengths; the TSP run's own settings
        (:data:`DEPENDENT_FIELDS`) are pooled with it).

    Returns
    -------
    dict of str to list of str
        Field -> its distinct values (as text) in the frame, for every field that varies inside
        at least one group; empty when the grouping pools replicates only.
    """
    if not frame.empty:
        require_columns(frame, list(groups))
    pooled = {*pooled, *(d for p in pooled for d in DEPENDENT_FIELDS.get(p, ()))}
    groups, skip = list(groups), set(groups) | pooled
    candidates = [c for c in setting_columns(frame) if c not in skip]
    if frame.empty or not candidates:
        return {}
    text = frame[candidates].map(str)  # None and NaN (e.g. train_size "all") compare as text
    keys = [frame[g].map(str) for g in groups] if groups else [pd.Series("", index=frame.index)]
    varying = text.groupby(keys, dropna=False).nunique().max()
    return {c: sorted(text[c].unique()) for c in candidates if varying[c] > 1}


def check_pooling(frame: pd.DataFrame, groups: Sequence[str], pooled: Sequence[str] = (), what: str = "group") -> None:
    """Raise :class:`PoolingError` if a group of ``groups`` holds runs of different settings.

    Raises
    ------
    PoolingError
        Naming each differing field and its values, and how to proceed (add it to the
        grouping, select one value, or declare it pooled).
    """
    mixed = mixed_settings(frame, groups, pooled)
    if mixed:
        fields = "; ".join(f"{field} = {', '.join(values)}" for field, values in mixed.items())
        raise PoolingError(
            f"cannot {what} by {', '.join(groups) or 'nothing'}: runs in one group differ in {fields}. "
            f"Group by these fields too, select one value (--select FIELD=VALUE), or pool them on purpose."
        )


def split_columns(frame: pd.DataFrame, groups: Sequence[str], pooled: Sequence[str] = ()) -> list[str]:
    """``groups`` + every setting that varies inside one of them: a grouping that never pools
    runs of different settings."""
    return [*groups, *[c for c in mixed_settings(frame, groups, pooled) if c not in groups]]
