"""Compact text tables of a store, for the terminal (`robustkit runs`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from robustkit.store import load_runs

SHOWN = ["run_id", "task", "method", "seed", "tsp_step", "lr", "train_size", "status", "trainable_params"]


def runs_table(store: str | Path, include_tsp: bool = False) -> pd.DataFrame:
    """One row per run: identity, status, trainable parameters and the main metric.

    Returns
    -------
    DataFrame
        :data:`SHOWN` columns + ``metric`` (the task's main metric) and its value on the
        validation and test splits at the best checkpoint (``best_val``, ``best_test``) and on
        test at the last one (``last_test``).
    """
    runs = load_runs(store, include_tsp=include_tsp)
    table = runs.reindex(columns=SHOWN).copy()
    metric = runs.get("main_metric", pd.Series([None] * len(runs)))
    table["metric"] = metric.values
    for column, (checkpoint, split) in {"best_val": ("best", "validation"), "best_test": ("best", "test"), "last_test": ("last", "test")}.items():
        table[column] = [
            round(float(row[f"{checkpoint}/{split}/{m}"]), 4) if m and f"{checkpoint}/{split}/{m}" in row and pd.notna(row[f"{checkpoint}/{split}/{m}"]) else None
            for m, (_, row) in zip(metric, runs.iterrows())
        ]
    return table
