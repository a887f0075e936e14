"""Per-run observation frames for claim tests: what :func:`robustkit.verdicts.rules.judge` reads."""

from __future__ import annotations

import numpy as np
import pandas as pd


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
