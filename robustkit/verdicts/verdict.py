"""A claim's verdict as typed values between the stages: one cell's tests (:class:`CellTest`)
and one verdict row (:class:`Verdict`), built here and flattened here.

:func:`robustkit.verdicts.rules.judge` decides a claim into :class:`Verdict` values (one per cell
and, with several cells, the claim's ``all`` last); :func:`as_frame` flattens them with the claim's
own columns into the table that ``claims.csv``, the index and ``robustkit claims`` read, its
columns :data:`VERDICT_COLUMNS` in that order. The model is rsatoolbox's typed ``Result``: the
fields are named once, so no stage spells a column as a string.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from robustkit.verdicts.spec import INCONCLUSIVE, Claim, label

CLAIM_COLUMNS = ("claim", "says", "statistic", "compare", "test", "a", "b", "direction", "failures")


@dataclasses.dataclass
class CellTest:
    """One cell's two one-sided tests: the p in the claimed direction and in the opposite one
    (each in [0, 1]), what the test saw (``shown``), and the text that follows each side's p in
    the reason (``claimed_part`` after the claimed p; ``against_part`` says the opposite side,
    by default its one-sided p)."""

    p_claimed: float
    p_opposite: float
    shown: str
    claimed_part: str = ""
    against_part: str = ""

    def __post_init__(self) -> None:
        if not self.against_part:
            self.against_part = f"opposite direction, one-sided p = {self.p_opposite:.3g}"

    def p(self, claimed: bool) -> float:
        """The claimed side's p (``claimed``) or the opposite side's."""
        return self.p_claimed if claimed else self.p_opposite


@dataclasses.dataclass
class Verdict:
    """One row of a claim's verdict: a cell's (``cell`` names it, e.g. ``tsp_step=200``) or the
    claim's over its cells (``cell == "all"``).

    ``n_a`` / ``n_b`` count runs, ``cells`` the cells, ``n_failed`` the failed runs; ``effect``
    and its interval ``ci_low`` / ``ci_high`` are in the unit ``effect_name`` says (NaN: none);
    ``p_value`` is the deciding side's one-sided p and ``smallest_p`` the smallest p the test
    can give at these sizes; ``verdict`` is agrees / contradicts / inconclusive, ``reason_class``
    why it is inconclusive and ``reason`` the whole reason in words.
    """

    cell: str = "all"
    n_a: int = 0
    n_b: int = 0
    cells: int = 1
    n_failed: int = 0
    effect: float = np.nan
    effect_name: str = ""
    ci_low: float = np.nan
    ci_high: float = np.nan
    p_value: float = np.nan
    smallest_p: float = np.nan
    verdict: str = INCONCLUSIVE
    reason_class: str = ""
    reason: str = ""

    def __post_init__(self) -> None:
        for name in ("effect", "ci_low", "ci_high", "p_value", "smallest_p"):
            setattr(self, name, float(getattr(self, name)))

    def __getitem__(self, column: str):
        """A column by its name, as from a row of the table (``verdict["reason"]``): for callers
        that read rows; code of this package reads the fields."""
        if column not in self.__dataclass_fields__:
            raise KeyError(column)
        return getattr(self, column)

    def as_dict(self) -> dict:
        """The row's own columns, in :data:`VERDICT_COLUMNS` order."""
        return dataclasses.asdict(self)

    def to_row(self, claim: Claim) -> dict:
        """The flat row: the claim's columns (:func:`claim_columns`), then the row's own."""
        return {**claim_columns(claim), **self.as_dict()}


VERDICT_COLUMNS = ["recipe", *CLAIM_COLUMNS, *(field.name for field in dataclasses.fields(Verdict))]


def claim_columns(claim: Claim) -> dict:
    """The columns every row of ``claim`` repeats (:data:`CLAIM_COLUMNS`)."""
    return {
        "claim": claim.id,
        "says": claim.says,
        "statistic": claim.statistic,
        "compare": claim.compare,
        "test": claim.test,
        "a": label(claim.a),
        "b": label(claim.b),
        "direction": claim.direction or "both",
        "failures": claim.failures,
    }


def as_frame(claim: Claim, verdicts: list[Verdict]) -> pd.DataFrame:
    """``claim``'s verdict rows as a table: :data:`VERDICT_COLUMNS` without ``recipe``."""
    return pd.DataFrame([v.to_row(claim) for v in verdicts], columns=VERDICT_COLUMNS[1:])
