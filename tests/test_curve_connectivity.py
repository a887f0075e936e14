"""Curved mode connectivity (Garipov et al. 2018; issue #30, item 4): the Bezier curve's closed
form, a toy loss whose two minima are joined by a curved valley the line misses, a resumed training
that ends bit for bit where an uninterrupted one does, and the analysis on bert-tiny seed pairs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from robustkit import figures
from robustkit.analysis import bezier, curve_connectivity
from robustkit.analysis.batches import sampled_batches
from robustkit.analysis.registry import get, per_run
from robustkit.data.tasks import get_task
from robustkit.errors import RobustkitError
from robustkit.figures.style import save_pdf
from robustkit.store import collapse
from robustkit.store.folders import run_dirs
from robustkit.store.manifest import read_spec
from robustkit.train.evaluate import evaluate
from robustkit.train.run_model import load_run_model


class Point(torch.nn.Module):
    """A model that is a point in the plane."""

    def __init__(self):
        super().__init__()
        self.theta = torch.nn.Parameter(torch.zeros(2))


def ring(theta: torch.Tensor) -> torch.Tensor:
    """(|theta|^2 - 1)^2: every point of the unit circle is a minimum (loss 0)."""
    return (theta.pow(2).sum() - 1) ** 2


A, B = torch.tensor([-1.0, 0.0]), torch.tensor([0.0, 1.0])  # a quarter of the circle apart


def _path_barrier(place, model, ts=np.linspace(0, 1, 101)):
    values = []
    for t in ts:
        place(t)
        values.append(float(ring(model.theta.detach())))
    return bezier.barrier(values, ts)[0]


def test_the_curve_is_the_line_at_the_midpoint_and_hits_both_ends():
    start, end = {"x": torch.randn(3, 2)}, {"x": torch.randn(3, 2)}
    middle = bezier.midpoint(start, end)
    moved = {"x": torch.zeros(3, 2)}
    for t in (0.0, 0.3, 0.5, 1.0):
        bezier.place(moved, start, middle, end, t)
        torch.testing.assert_close(moved["x"], torch.lerp(start["x"], end["x"], t))
    bezier.place(moved, start, {"x": torch.full((3, 2), 7.0)}, end, 0.0)
    assert torch.equal(moved["x"], start["x"])  # exactly the run at t = 0, whatever the control point
    assert bezier.weights(0.5) == (0.25, 0.5, 0.25) and sum(bezier.weights(0.37)) == pytest.approx(1.0)


def test_the_trained_curve_finds_the_valley_the_line_misses(tmp_path):
    model = Point()
    line = _path_barrier(lambda t: bezier.place_line({"theta": model.theta}, {"theta": A}, {"theta": B}, t), model)
    assert line == pytest.approx(0.25, abs=1e-3)  # at t = 1/2 the line is at |theta|^2 = 1/2
    before = model.theta.detach().clone()
    control = bezier.train_control_point(
        model, {"theta": A}, {"theta": B}, lambda step: ring(model.theta), steps=300, lr=0.05, seed=0
    )
    assert torch.equal(model.theta.detach(), before)  # the model got its own value back
    curve = _path_barrier(lambda t: bezier.place({"theta": model.theta}, {"theta": A}, control, {"theta": B}, t), model)
    assert curve < 0.02 < line  # the curve bends out along the circle
    assert control["theta"][0] < -0.6 and control["theta"][1] > 0.6  # away from the midpoint, towards (-1, 1)


def test_a_resumed_training_ends_on_the_same_control_point(tmp_path):
    model = Point()

    def train(stop_after=None):
        return bezier.train_control_point(
            model,
            {"theta": A},
            {"theta": B},
            lambda step: ring(model.theta),
            steps=40,
            lr=0.05,
            seed=3,
            warmup=4,
            max_grad_norm=1.0,
            state_dir=tmp_path / "curve",
            save_every=7,
            stop_after=stop_after,
        )

    whole = bezier.train_control_point(
        model,
        {"theta": A},
        {"theta": B},
        lambda step: ring(model.theta),
        steps=40,
        lr=0.05,
        seed=3,
        warmup=4,
        max_grad_norm=1.0,
    )
    assert train(stop_after=17) is None  # interrupted after step 17, its state saved
    assert (tmp_path / "curve" / bezier.STEP_FILE).read_text() == '{"step": 17}'
    assert torch.equal(train()["theta"], whole["theta"])  # resumed from step 17: bit for bit
    with pytest.raises(RobustkitError, match="not finite"):
        bezier.train_control_point(
            model, {"theta": A}, {"theta": B}, lambda step: ring(model.theta) * math.inf, steps=3, lr=0.05, seed=0
        )


def _runs(store, method):
    return sorted((p for p in run_dirs(store) if read_spec(p).method == method), key=lambda p: read_spec(p).seed)


def test_disjoint_pairs_share_no_run():
    runs = pd.DataFrame(
        {"run_id": [f"r{i}" for i in range(7)], "method": ["a"] * 5 + ["b"] * 2, "seed": [4, 0, 3, 1, 2, 0, 1]}
    )
    pairs = [(a["run_id"], b["run_id"]) for a, b in curve_connectivity.disjoint_pairs(runs)]
    assert pairs == [("r1", "r3"), ("r4", "r2"), ("r5", "r6")]  # seeds 0-1, 2-3 (4 left out) and 0-1


@pytest.mark.slow
def test_curve_connectivity_of_runs_statistic_and_figure(lora_store, tmp_path, monkeypatch):
    options = {"ts": "0:1:3", "examples": 12, "steps": 4}
    paths = get("curve-connectivity").run(lora_store, ["method=full,lora"], progress=False, **options)
    assert set(paths["method"]) == {"full", "lora"} and set(paths["steps"]) == {4}
    assert len(paths[["run_id", "run_id_b"]].drop_duplicates()) == 2  # one disjoint pair per method
    loss = paths[paths["metric"] == "loss"]
    for method in ("full", "lora"):
        first, second = _runs(lora_store, method)
        spec = read_spec(first)
        batches = sampled_batches(spec, "train", 12, 0)
        part = loss[loss["method"] == method].set_index(["path", "t"])["value"]
        for t, run_dir in ((0.0, first), (1.0, second)):
            direct = evaluate(load_run_model(run_dir, "best"), batches, get_task(spec.task))["loss"]
            assert part[("line", t)] == pytest.approx(direct, abs=1e-6) and part[("curve", t)] == pytest.approx(
                direct, abs=1e-6
            )
    table = curve_connectivity.barriers(paths)
    wide = table[table["metric"] == "loss"].pivot_table(index="run_id", columns="path", values="barrier")
    claimed = per_run("curve-connectivity.barrier-drop", lora_store, ["method=full,lora"], **options)
    assert "run_id_b" not in claimed and set(claimed["outcome"]) <= set(collapse.OUTCOMES)
    assert claimed.set_index("run_id")["value"].to_dict() == pytest.approx((wide["line"] - wide["curve"]).to_dict())
    states = list((lora_store / ".cache" / "curve-connectivity").glob("*.state"))
    # one trained curve per pair, at its last step (lora_store is shared: other tests' curves may be there too)
    trained = {
        m
        for m in ("full", "lora")
        for s in states
        if s.name.startswith(f"rte-{m}-") and (s / bezier.STEP_FILE).read_text() == '{"step": 4}'
    }
    assert trained == {"full", "lora"}, sorted(s.name for s in states)
    assert (
        save_pdf(figures.draw("curve-connectivity", lora_store, ["method=full,lora"], **options), tmp_path / "c.pdf")
        .stat()
        .st_size
    )
    monkeypatch.setattr(curve_connectivity, "pair_paths", lambda *a, **k: pytest.fail("recomputed"))
    pd.testing.assert_frame_equal(
        get("curve-connectivity").run(lora_store, ["method=full,lora"], progress=False, **options), paths
    )
    with pytest.raises(RobustkitError, match="must hold 0 and 1"):
        get("curve-connectivity").run(lora_store, ts="0.2:0.8:3", progress=False)
