"""A paper's claim and its verdict: the notebook's one import path to the three modules.

The claim spec is :mod:`robustkit.verdicts.spec` (what a claim says: the ``[[claim]]`` table of a
recipe), the decision rules :mod:`robustkit.verdicts.rules` (how one claim is decided from its
per-run observations) and the tally :mod:`robustkit.verdicts.tally` (the observations computed from
a store, every claim of the recipes judged, the verdict table and its summary line). This module
only re-exports their public names; the library imports them from where they live.
"""

from __future__ import annotations

from robustkit.verdicts.rules import (
    DEPENDS_ON_FAILED,
    EFFECT_NAMES,
    NO_DATA,
    NOT_CONVERGED,
    NOT_SIGNIFICANT,
    TOO_FEW,
    UNTESTABLE,
    VERDICT_COLUMNS,
    judge,
    tested_rows,
)
from robustkit.verdicts.spec import (
    AGREES,
    COMPARES,
    CONTRADICTS,
    FAILURE_POLICIES,
    INCONCLUSIVE,
    NOT_REPORTED,
    QUANTIFIERS,
    VERDICTS,
    Claim,
    ClaimError,
)
from robustkit.verdicts.tally import observations, parameters, summary_line, verdicts

__all__ = [
    "AGREES",
    "COMPARES",
    "CONTRADICTS",
    "DEPENDS_ON_FAILED",
    "EFFECT_NAMES",
    "FAILURE_POLICIES",
    "INCONCLUSIVE",
    "NOT_CONVERGED",
    "NOT_REPORTED",
    "NOT_SIGNIFICANT",
    "NO_DATA",
    "QUANTIFIERS",
    "TOO_FEW",
    "UNTESTABLE",
    "VERDICTS",
    "VERDICT_COLUMNS",
    "Claim",
    "ClaimError",
    "judge",
    "observations",
    "parameters",
    "summary_line",
    "tested_rows",
    "verdicts",
]
