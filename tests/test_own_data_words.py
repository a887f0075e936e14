"""Issue #57 items 10-13 on the user's own data: the plan names local data as local, a moved data
file is said to be gone, macro-F1 beside accuracy and MCC for more than two classes."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from robustkit.sweeps import plan as run_plan


def _three_class_csv(path):
    """A small three-class CSV with word labels (55/25/20%)."""
    rng = np.random.default_rng(0)
    labels = rng.choice(["pos", "neg", "meh"], size=120, p=[0.55, 0.25, 0.20])
    texts = [f"text number {i} about {label} things" for i, label in enumerate(labels)]
    pd.DataFrame({"text": texts, "label": labels}).to_csv(path, index=False)
    return path


def test_the_plan_names_local_data_local(tmp_path, rte_folder):
    mine = _three_class_csv(tmp_path / "mine.csv")
    glue = rte_folder(tmp_path / "glue")
    runs = pd.DataFrame(
        {
            "model": ["bert-tiny"] * 4,
            "task": ["mine", "rte", "rte", "rt"],
            "data_dir": [str(mine), str(glue), None, None],
        }
    )
    lines = run_plan.fetch_list(runs)
    [own] = [line for line in lines if line.startswith("task mine")]
    assert own.startswith("task mine: local") and str(mine) in own and "hub" not in own, own
    assert any(line.startswith("task rte: local, GLUE TSV folder") and str(glue) in line for line in lines), lines
    assert "task rte: Hugging Face hub, nyu-mll/glue config rte" in lines
    assert any(line.startswith("task rt: embedded") for line in lines)


def test_the_plan_of_a_swapped_recipe_lists_the_users_file(tmp_path):
    from robustkit.data.user_data import run_fields
    from robustkit.verdicts.recipes import load_defaults, load_recipe
    from robustkit.verdicts.reproduce import RECIPE_DIR

    mine = _three_class_csv(tmp_path / "mine.csv")
    recipe = load_recipe("houlsby2019/fig6-ablation", RECIPE_DIR).swapped(model="bert-tiny", **run_fields(str(mine)))
    per_recipe, runs = run_plan.plan([recipe], "demo", tmp_path / "store", load_defaults(RECIPE_DIR))
    text = run_plan.describe(per_recipe, runs, "demo")
    assert f"task mine: local, your data at {mine}" in text
    assert "config None" not in text


def test_a_moved_data_file_is_said_gone(tmp_path):
    from robustkit.store.run_data import changed_data

    gone = tmp_path / "reviews.csv"  # never written: moved away after training
    runs = pd.DataFrame(
        {
            "run_id": ["r1", "r2"],
            "task": ["reviews"] * 2,
            "data_dir": [str(gone)] * 2,
            "data_fingerprint": ["user:x"] * 2,
        }
    )
    why = changed_data(runs)
    assert set(why) == {"r1", "r2"}
    assert why["r1"] == f"the training data {gone} is not there any more (moved or deleted?)"
    assert "unknown task" not in why["r1"]


def test_macro_f1_weighs_each_class_alike():
    from robustkit.data.metrics import RECORDED, compute_metrics, macro_f1
    from robustkit.data.user_columns import task_of

    labels = np.array([0] * 6 + [1] * 2 + [2] * 2)
    majority = np.zeros(10, dtype=int)
    # class 0: precision 0.6, recall 1 -> F1 0.75; classes 1 and 2 never predicted -> 0
    assert macro_f1(majority, labels) == pytest.approx(0.75 / 3)
    assert macro_f1(labels, labels) == 1.0
    assert "macro_f1" in RECORDED
    three = task_of("mine", ("text",), ("meh", "neg", "pos"))
    assert three.main_metric == "accuracy" and set(three.metrics) == {"accuracy", "macro_f1", "mcc"}
    scores = compute_metrics(three, majority, labels)
    assert scores["accuracy"] == pytest.approx(0.6) and scores["macro_f1"] == pytest.approx(0.25)
    assert "macro_f1" not in task_of("two", ("text",), ("neg", "pos")).metrics  # binary: F1 of class 1


def test_runs_show_macro_f1_for_three_classes(tmp_path):
    from conftest import new_run

    from robustkit.cli.report import runs_table

    store = tmp_path / "runs"
    store.mkdir()
    scores = {"accuracy": 0.6, "macro_f1": 0.25, "mcc": 0.0}
    new_run(store, "mine-full", status="complete", main_metric="accuracy", final={"best": {"test": scores}})
    table = runs_table(store)
    assert table["best_test_macro_f1"].tolist() == [0.25]
    assert table["best_test"].tolist() == [0.6]


def test_tokens_are_counted_at_the_runs_length():
    from robustkit.analysis.representations import MAX_LENGTH, analysis_length

    assert analysis_length(pd.Series([64, 64, 128])) == 64  # no run sees a position it never trained on
    assert analysis_length(pd.Series([np.nan, 256.0])) == 256
    assert analysis_length([]) == MAX_LENGTH


def test_the_ablation_skip_note_is_one_robustkit_line():
    """Issue #57 Why 12: `plot ablation` printed a raw `UserWarning ... declare.py:235` and its source line."""
    import warnings

    from robustkit.analysis.ablation import _adapter_runs
    from robustkit.analysis.notes import AnalysisNote
    from robustkit.cli import _one_line_warnings

    runs = pd.DataFrame({"run_id": ["mine-houlsby", "mine-full"], "method": ["houlsby", "full"]})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept = _adapter_runs(runs)
    assert kept["run_id"].tolist() == ["mine-houlsby"]
    [note] = caught
    assert issubclass(note.category, AnalysisNote)
    _one_line_warnings()
    shown = warnings.formatwarning(note.message, note.category, note.filename, note.lineno)
    assert shown == "warning: skipping runs without per-layer adapters (nothing to ablate): mine-full (full)\n"


def test_attack_frames_name_the_users_labels(tmp_path):
    from conftest import new_run

    from robustkit.analysis.attack import with_label_names
    from robustkit.data.tasks import TASKS

    mine = _three_class_csv(tmp_path / "mine.csv")
    store = tmp_path / "runs"
    store.mkdir()
    own = new_run(store, "mine-full", spec={"model": "bert-tiny", "task": "mine", "data_dir": str(mine)})
    built_in = new_run(store, "rt-full", spec={"model": "bert-tiny", "task": "rt"})
    runs = pd.DataFrame({"run_id": ["mine-full", "rt-full"], "path": [str(own), str(built_in)]})
    frame = pd.DataFrame(
        {
            "run_id": ["mine-full", "mine-full", "rt-full"],
            "label": [0, 2, 1],
            "prediction": [1, 2, 0],
            "success": [1, 0, 1],
        }
    )
    named = with_label_names(frame, runs)
    assert named["label_name"].tolist() == ["meh", "pos", TASKS["rt"].label_names[1]]
    assert named["prediction_name"].tolist() == ["neg", "pos", TASKS["rt"].label_names[0]]
    assert named["label"].tolist() == [0, 2, 1]  # the ids stay


def test_the_lr_note_names_the_model_the_rates_were_calibrated_on():
    from robustkit.specs.calibration import calibrated_on, lr_note

    demo = {"base": {"model": "minilm-l6"}, "lr": {"houlsby": 5e-4, "full": 1e-4}}
    note = lr_note("demo", demo, "bert-tiny", lr_flag=True)
    assert note.startswith("the demo learning rates ([demo.lr] of recipes/defaults.toml) were calibrated on minilm-l6")
    assert "robustkit reproduce he2021/fig4 --model bert-tiny" in note and note.endswith("or give --lr")
    assert "\n" not in note
    assert lr_note("demo", demo, "minilm-l6") is None and lr_note("demo", demo, None) is None
    assert calibrated_on({"base": {"model": "bert-base-uncased"}}) is None  # no rates of its own: nothing to say


def test_reproduce_with_another_model_says_where_the_rates_come_from(tmp_path):
    """In a fresh process, as a user runs it (the same model: no note, test above)."""
    import subprocess
    import sys

    argv = [sys.executable, "-m", "robustkit", "reproduce", "houlsby2019/fig6-ablation", "--plan"]
    done = subprocess.run(
        [*argv, "--store", str(tmp_path / "s"), "--model", "bert-tiny"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stderr.splitlines() if "learning rates" in x]
    assert line.startswith("note: the demo learning rates") and "calibrated on minilm-l6, not bert-tiny" in line
