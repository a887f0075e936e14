"""The attack's per-run statistic, until the attack's module declares it (issue #40).

Every other analysis declares its statistics in its own module, next to its computation
(``DECLARED = Analysis(..., statistics=(Statistic("name", ":function", ...),))``:
:mod:`robustkit.analysis.declare`). ``with_outcome`` and ``OUTCOME_ON`` are
:mod:`robustkit.analysis.scores`'s, importable from here as before.

Signature: ``statistic(frame, store=None, **its own parameters) -> DataFrame``. Nothing here
runs an analysis: the frame is given, so a claim reads its figure's cache entry.
"""

from __future__ import annotations

import pandas as pd

from robustkit.analysis.scores import OUTCOME_ON, with_outcome  # noqa: F401  (kept importable from here)
from robustkit.store.tables import IDENTITY


def attack_success(frame: pd.DataFrame, convention: str, attacker: str) -> pd.DataFrame:
    """Attack success rate of each run under ``attacker`` (fraction; Han et al. 2021 §4)."""
    from robustkit.analysis import attack

    summary = attack.summarize(frame[frame["attacker"] == attacker])
    summary = summary[summary["convention"] == convention].rename(columns={"success_rate": "value"})
    return summary[[*IDENTITY, "value"]]
