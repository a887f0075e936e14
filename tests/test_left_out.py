"""Analyses leave out, and name, the runs that lack what they read (issue #28 item 4): a run
without the checkpoint an analysis asks for is named with what it has, the others are measured;
when no selected run has it, the analysis ends in one error naming them, not a traceback."""

from __future__ import annotations

import logging
import shutil

import pandas as pd
import pytest

from robustkit.analysis import connectivity, similarity
from robustkit.analysis.each_run import each_run, leave_out
from robustkit.analysis.select import select_runs
from robustkit.errors import RobustkitError, RunLacksError
from robustkit.store.tables import load_runs


@pytest.fixture(scope="module")
def store_with_series(tiny_store, tmp_path_factory):
    """The tiny store (houlsby and full, checkpoints step-0, best, last) plus an imported
    checkpoint series, which alone has ``step-2`` and ``step-4``."""
    from robustkit.models.pretrained import load_classifier
    from robustkit.train.importing import import_run

    root = tmp_path_factory.mktemp("left-out")
    store = root / "runs"
    shutil.copytree(tiny_store, store, ignore=shutil.ignore_patterns(".cache"))
    for step in (2, 4):
        load_classifier("bert-tiny", 2, seed=step).save_pretrained(root / "series" / f"checkpoint-{step}")
    glue = next(iter(load_runs(store)["data_dir"]))
    imported = import_run(root / "series", "bert-tiny", "rte", store, data_dir=glue)
    return store, imported.name


def test_runs_without_the_checkpoint_are_left_out_by_name(store_with_series, caplog):
    store, imported = store_with_series
    trained = sorted(set(load_runs(store)["run_id"]) - {imported})
    with caplog.at_level(logging.WARNING, logger="robustkit"):
        frame = similarity.run(store, tokens=30, seed=0, checkpoint="step-2", progress=False)
    assert set(frame["run_id"]) == {imported}
    message = " ".join(r.getMessage() for r in caplog.records)
    assert all(run in message for run in trained), message
    assert "2 of 3 run(s) left out" in message and "checkpoint 'step-2' (has: best, last, step-0)" in message


def test_an_analysis_none_of_whose_runs_has_it_is_one_error(store_with_series):
    store, imported = store_with_series
    trained = ",".join(run for run in load_runs(store)["run_id"] if run != imported)
    with pytest.raises(RobustkitError, match="none of the 2 selected run"):
        similarity.run(store, [f"run_id={trained}"], tokens=30, seed=0, checkpoint="step-2", progress=False)


def test_each_run_leaves_out_what_compute_says_a_run_lacks(tiny_store, caplog):
    runs = select_runs(tiny_store)
    lacking = runs["run_id"].iloc[0]

    def compute(row):
        if row["run_id"] == lacking:
            raise RunLacksError(row["run_id"], "LoRA update")
        return pd.DataFrame({"value": [1.0]})

    with caplog.at_level(logging.WARNING, logger="robustkit"):
        frame = each_run(runs, "unit-left-out", {"case": "some"}, ["best"], compute)
    assert lacking not in set(frame["run_id"]) and len(frame) == len(runs) - 1
    assert f"{lacking} has no LoRA update" in caplog.text
    with pytest.raises(RobustkitError, match=f"none of the {len(runs)} selected.*has no LoRA update"):
        each_run(
            runs,
            "unit-left-out",
            {"case": "all"},
            ["best"],
            lambda row: (_ for _ in ()).throw(RunLacksError(row["run_id"], "LoRA update")),
        )


def test_leave_out_names_four_and_counts_the_rest(caplog):
    with caplog.at_level(logging.WARNING, logger="robustkit"):
        leave_out([(f"run-{i}", "gradient norms") for i in range(6)], "gradnorm", 10)
    assert "run-3 has no gradient norms" in caplog.text and "run-4" not in caplog.text and "and 2 more" in caplog.text


def test_a_pair_with_a_run_lacking_the_checkpoint_is_left_out(lora_store, tmp_path, caplog):
    """Pair analyses (connectivity, curve connectivity) leave a pair out the same way."""
    store = tmp_path / "runs"
    shutil.copytree(lora_store, store, ignore=shutil.ignore_patterns(".cache"))
    with pytest.raises(RobustkitError, match="none of the .* has what it reads.*checkpoint 'step-9'"):
        connectivity.run(
            store,
            ["method=full"],
            checkpoint="step-9",
            alphas="0,1",
            split="validation",
            examples=4,
            seed=0,
            progress=False,
        )
