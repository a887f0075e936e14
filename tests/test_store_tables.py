"""Tests of :mod:`robustkit.store.tables`: the store as tidy DataFrames."""

import pandas as pd
from conftest import new_run

from robustkit.store.tables import load_history, load_runs


def test_tidy_loaders(tmp_path):
    run_dir = new_run(tmp_path, final={"best": {"test": {"accuracy": 0.8}}}, status="complete")
    pd.DataFrame(
        {"step": [1, 2], "epoch": [0.5, 1.0], "split": "validation", "metric": "accuracy", "value": [0.6, 0.7]}
    ).to_parquet(run_dir / "history.parquet")
    runs = load_runs(tmp_path)
    assert runs.loc[0, "best/test/accuracy"] == 0.8 and runs.loc[0, "status"] == "complete"
    history = load_history(tmp_path)
    assert list(history.columns[:3]) == ["run_id", "model", "task"] and len(history) == 2


def test_empty_store_gives_empty_frames(tmp_path):
    assert load_runs(tmp_path).empty and "run_id" in load_history(tmp_path).columns
