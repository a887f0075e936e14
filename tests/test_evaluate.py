"""The one evaluation (robustkit.train.evaluate): batches as training makes them, one reduction of
losses and metrics, and an analysis' evaluation equal to the run's own history."""

import numpy as np
import pytest
import torch

from robustkit.data.metrics import compute_metrics
from robustkit.data.tasks import get_task
from robustkit.specs.spec import RunSpec
from robustkit.store.folders import run_dirs
from robustkit.store.manifest import read_manifest
from robustkit.train.evaluate import MetricAccumulator, eval_batches, evaluate, split_batches
from robustkit.train.run_model import load_run_model


def test_batches_cover_every_example_once_sorted_by_length():
    features = [{"input_ids": list(range(n)), "labels": n % 2} for n in (5, 2, 9, 3, 7)]

    def collate(chosen):
        return {
            "labels": torch.tensor([f["labels"] for f in chosen]),
            "length": torch.tensor([len(f["input_ids"]) for f in chosen]),
        }

    batches = eval_batches(features, 2, collate)
    assert [len(b["labels"]) for b in batches] == [2, 2, 1]
    order = torch.cat([b["order"] for b in batches]).tolist()
    assert sorted(order) == list(range(5))  # each example exactly once, its row in `order`
    assert torch.cat([b["length"] for b in batches]).tolist() == [2, 3, 5, 7, 9]


def test_loss_is_the_mean_per_example_over_unequal_batches():
    # batch means 1.0 (3 examples) and 4.0 (1 example): 7 / 4 per example, not (1 + 4) / 2
    task = get_task("rte")
    accumulator = MetricAccumulator(task)
    accumulator.add(torch.tensor(1.0), torch.tensor([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0]]), torch.tensor([0, 1, 1]))
    accumulator.add(4.0, torch.tensor([[0.0, 5.0]]), torch.tensor([0]))
    result = accumulator.result(shares=True)
    assert result["loss"] == pytest.approx(7 / 4)
    predicted, labels = np.array([0, 1, 0, 1]), np.array([0, 1, 1, 0])
    for metric, value in compute_metrics(task, predicted, labels).items():
        assert result[metric] == value
    assert result["top_class_share"] == 0.5


@pytest.mark.slow
def test_an_analysis_evaluation_equals_the_runs_own_history(tiny_store):
    # split_batches rebuilds the validation batches from the run's spec alone; the loss and
    # metrics of its `last` checkpoint must be the ones training logged at that step, exactly
    for run_dir in run_dirs(tiny_store):
        manifest = read_manifest(run_dir)
        spec = RunSpec(**manifest["spec"])
        batches = split_batches(spec, ["validation"])["validation"]
        scored = evaluate(load_run_model(run_dir, "last"), batches, spec.task)
        assert scored == {k: v for k, v in manifest["final"]["last"]["validation"].items() if k != "top_class_share"}
