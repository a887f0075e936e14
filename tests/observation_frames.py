"""Per-run observation frames for claim tests: what :func:`robustkit.verdicts.rules.judge` reads."""

from __future__ import annotations

import numpy as np
import pandas as pd

from robustkit.verdicts.spec import Claim


def runs_frame(values: dict[str, np.ndarray], **columns) -> pd.DataFrame:
    """One row per run: group name -> its runs' values (seed = position), every run ``ok``,
    ``columns`` the same in every row (a cell such as ``task="rte"``)."""
    rows = [
        {
            "run_id": f"{m}-{i}-{sorted(columns.items())}",
            "method": m,
            "seed": i,
            "value": float(v),
            "outcome": "ok",
            **columns,
        }
        for m, vs in values.items()
        for i, v in enumerate(vs)
    ]
    return pd.DataFrame(rows)


def location_claim(**changes) -> Claim:
    """A test claim: adapters (houlsby, group a) score lower than full fine-tuning (group b) on
    ``scores.score``, a location claim; ``changes`` replace its keys."""
    table = {
        "id": "c",
        "says": "adapters score lower (test)",
        "statistic": "scores.score",
        "compare": "location",
        "a": "houlsby",
        "b": "full",
        "direction": "less",
        **changes,
    }
    return Claim.from_table(table, "test")
