"""rliable's summaries beside the exact tests (issue #38 item 10): the interquartile mean and the
probability of improvement P(A > B) with stratified-bootstrap intervals over tasks x seeds."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from robustkit.analysis import aggregates


def test_probability_of_improvement_by_hand():
    """[1, 2, 3] over [2, 2, 0]: 1 beats 0 (1); 2 ties 2 twice and beats 0 (1/2 + 1/2 + 1);
    3 beats all three (3): 6 of 9 pairs. Ties split, so P(B > A) is the rest."""
    a, b = np.array([1.0, 2, 3]), np.array([2.0, 2, 0])
    assert aggregates.probability_of_improvement([a], [b]) == pytest.approx(6 / 9)
    assert aggregates.probability_of_improvement([b], [a]) == pytest.approx(3 / 9)
    # over tasks: the mean of the per-task values (a task where A always wins: 1)
    assert aggregates.probability_of_improvement([a, np.array([5.0])], [b, np.array([4.0, 4.5])]) == pytest.approx(
        (6 / 9 + 1) / 2
    )
    assert aggregates.probability_of_improvement([a, np.array([])], [b, np.array([1.0])]) == pytest.approx(
        6 / 9
    )  # no run of A: left out


def test_iqm_by_hand():
    """The mean of the middle half: sorted [-50, 1, 2, 3, 4, 5, 6, 100] keeps [2, 3, 4, 5]."""
    assert aggregates.iqm(np.arange(8.0)) == pytest.approx(3.5)
    assert aggregates.iqm([np.array([1.0, 100, -50, 2]), np.array([3.0, 4, 5, 6])]) == pytest.approx(3.5)
    assert aggregates.iqm(np.arange(8.0).reshape(4, 2)) == pytest.approx(3.5)  # runs x tasks, as rliable takes it
    assert np.isnan(aggregates.iqm([np.array([])]))


def test_intervals_are_seeded_cover_the_estimate_and_are_stratified():
    rng = np.random.default_rng(3)
    a = [rng.normal(0.80, 0.02, 10), rng.normal(0.60, 0.05, 7)]
    b = [rng.normal(0.78, 0.02, 10), rng.normal(0.58, 0.05, 9)]
    first = aggregates.iqm_interval(a, seed=1)
    assert first == aggregates.iqm_interval(a, seed=1) and first != aggregates.iqm_interval(a, seed=2)
    point, low, high = first
    assert point == pytest.approx(stats.trim_mean(np.concatenate(a), 0.25)) and low < point < high
    point, low, high = aggregates.improvement_interval(a, b, seed=1)
    assert (point, low, high) == aggregates.improvement_interval(a, b, seed=1)
    assert 0.0 <= low < point < high <= 1.0
    # stratified: each resample keeps every task's run count, so two tasks of constant scores
    # (0 and 1, two runs each) give the same IQM in every resample; pooled resampling would not
    assert aggregates.iqm_interval([np.zeros(2), np.ones(2)]) == (0.5, 0.5, 0.5)
    # where every run of A beats every run of B on every task, every resample says so
    assert aggregates.improvement_interval([np.array([2.0, 3.0])], [np.array([0.0, 1.0])]) == (1.0, 1.0, 1.0)


def test_tables_per_cell_pool_tasks_and_leave_failed_runs_out():
    rows = [
        {"task": t, "method": m, "seed": s, "tsp_step": 0, "value": v, "outcome": "ok"}
        for t, scores in (
            ("rte", {"full": [0.6, 0.7, 0.8], "houlsby": [0.5, 0.6, 0.7]}),
            ("sst2", {"full": [0.9, 0.91], "houlsby": [0.9, 0.92]}),
        )
        for m, values in scores.items()
        for s, v in enumerate(values)
    ]
    rows.append({"task": "rte", "method": "full", "seed": 9, "tsp_step": 0, "value": 0.0, "outcome": "collapsed"})
    iqm, improvement = aggregates.tables(pd.DataFrame(rows), "method", within=["task", "tsp_step"], n_resamples=500)
    assert list(iqm.columns) == ["tsp_step", *aggregates.IQM_COLUMNS]  # the task is the stratum, not a cell
    full = iqm.set_index("group").loc["full"]
    assert full["n_tasks"] == 2 and full["n_runs"] == 5  # the collapsed run left out
    assert full["iqm"] == pytest.approx(stats.trim_mean([0.6, 0.7, 0.8, 0.9, 0.91], 0.25))
    pair = improvement.iloc[0]
    assert (pair["group_a"], pair["group_b"], pair["n_a"], pair["n_b"]) == ("full", "houlsby", 5, 5)
    # rte: 0.6 beats 0.5 and ties 0.6 (1.5), 0.7 (2.5), 0.8 (3): 7 of 9; sst2: 0.9 ties 0.9 (0.5),
    # 0.91 beats 0.9 (1), both lose to 0.92: 1.5 of 4; P(A > B) is their mean
    assert pair["p_improvement"] == pytest.approx((7 / 9 + 1.5 / 4) / 2)
    assert pair["ci_low"] <= pair["p_improvement"] <= pair["ci_high"]
    with_failed, _ = aggregates.tables(pd.DataFrame(rows), "method", include_failed=True, n_resamples=50)
    assert with_failed.set_index("group").loc["full", "n_runs"] == 6


def test_stats_reports_them_beside_the_exact_tests(tiny_store, tmp_path, capsys):
    from robustkit.cli import main

    argv = ["stats", str(tiny_store), "--metric", "accuracy", "--within", "task", "--include-failed", "--no-aso"]
    assert main([*argv, "--format", "json"]) == 0
    tables = json.loads(capsys.readouterr().out)
    assert {"tests", "iqm", "improvement"} <= set(tables)
    assert {r["group"] for r in tables["iqm"]} == {"houlsby", "full"}
    assert [(r["group_a"], r["group_b"]) for r in tables["improvement"]] == [("full", "houlsby")]
    assert main([*argv, "-o", str(tmp_path / "s.csv")]) == 0
    assert "IQM over tasks x seeds" in capsys.readouterr().out
    assert list(pd.read_csv(tmp_path / "s-improvement.csv").columns)[-3:] == ["p_improvement", "ci_low", "ci_high"]
