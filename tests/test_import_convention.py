"""Imports score like their neighbours (issue #38 item 2): an import into a store whose runs of
the task use the low-resource split convention (``train_size=N``: test is the task's validation
split, 1,281 rows for rt) gets that convention when none is given, a store of mixed conventions
refuses it naming each one, and ``robustkit import`` prints the run's scores and outcome."""

from __future__ import annotations

import pytest
import torch
from conftest import new_run

BASE = "bert-tiny"


def _tuned(folder):
    """bert-tiny with a 2-class head, every weight moved a little, saved as transformers does."""
    from robustkit.models.pretrained import load_classifier

    model = load_classifier(BASE, 2, seed=1)
    torch.manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.02 * torch.randn_like(parameter))
    model.save_pretrained(folder)
    return folder


def _neighbours(store, *train_sizes):
    store.mkdir(parents=True, exist_ok=True)
    for i, size in enumerate(train_sizes):
        new_run(store, f"rt-full-neighbour-{i}", spec={"task": "rt", "train_size": size, "split_seed": 0})
    # runs of another task never decide rt's convention
    new_run(store, "polarity-full-neighbour", spec={"task": "polarity", "train_size": None, "split_seed": 0})


def test_store_convention_is_the_neighbours_one(tmp_path):
    from robustkit.train.importing import ImportError_, store_convention

    assert store_convention(tmp_path / "none", "rt") is None
    _neighbours(tmp_path / "low", 1000, 1000)
    convention = store_convention(tmp_path / "low", "rt")
    assert (convention.train_size, convention.split_seed, convention.runs) == (1000, 0, 2)
    assert store_convention(tmp_path / "low", "polarity") is None  # full data: the default
    _neighbours(tmp_path / "mixed", 1000, None)
    with pytest.raises(ImportError_, match=r"full data.*: 1 run; train_size=1000, split_seed=0: 1 run.*--train-size"):
        store_convention(tmp_path / "mixed", "rt")


def test_import_without_train_size_scores_like_the_demo_runs(tmp_path, capsys):
    from robustkit.cli import main
    from robustkit.store.manifest import read_manifest

    _neighbours(tmp_path / "runs", 1000, 1000)
    source = _tuned(tmp_path / "tuned")
    assert main(["import", str(source), "--base", BASE, "--task", "rt", "--store", str(tmp_path / "runs")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    manifest = read_manifest(tmp_path / "runs" / lines[0].rsplit("/", 1)[-1])
    # the demo's convention: 1,000 validation rows from train, rt's validation (1,281) as test
    assert manifest["spec"]["train_size"] == 1000 and manifest["splits"]["test"] == 1281
    assert "as the store's 2 rt runs" in manifest["import"]["split_convention"]
    # what the run scored, on how many examples, and its outcome
    best = manifest["final"]["best"]["test"]["accuracy"]
    assert any(
        line.strip().startswith("best")
        and f"test accuracy {best:.4f} (1281 examples)" in line
        and "outcome: validation" in line
        for line in lines[1:]
    ), lines
    assert any("split convention: train_size=1000" in line for line in lines[1:]), lines

    # a store of mixed conventions refuses, naming both, before anything is scored
    _neighbours(tmp_path / "mixed", 1000, None)
    assert main(["import", str(source), "--base", BASE, "--task", "rt", "--store", str(tmp_path / "mixed")]) == 2
    error = capsys.readouterr().err
    assert "train_size=1000" in error and "full data" in error and len(error.strip().splitlines()) == 1
    # naming the convention outright imports: 0 is the full-data one (rt's own test split)
    assert (
        main(
            [
                "import",
                str(source),
                "--base",
                BASE,
                "--task",
                "rt",
                "--store",
                str(tmp_path / "mixed"),
                "--train-size",
                "0",
            ]
        )
        == 0
    )
    run = capsys.readouterr().out.strip().splitlines()[0]
    manifest = read_manifest(tmp_path / "mixed" / run.rsplit("/", 1)[-1])
    assert manifest["spec"]["train_size"] is None and manifest["splits"]["test"] == 1279
