"""Tests of :mod:`robustkit.train.divergence`: a run that meets a non-finite loss, gradient norm
or weight stops, keeps its last finite state, is marked diverged and is never trained again."""

import dataclasses
import math

import pandas as pd
import pytest
import torch

from robustkit.store.checkpoints import load_checkpoint
from robustkit.store.manifest import read_manifest
from robustkit.store.tables import load_runs
from robustkit.train import pretrain, train


def _history(run_dir):
    return pd.read_parquet(run_dir / "history.parquet")


def _all_finite(run_dir, name):
    tensors, _ = load_checkpoint(run_dir, name)
    return all(torch.isfinite(t).all() for t in tensors.values())


def test_infinite_lr_diverges_keeps_finite_checkpoints_and_counts_as_diverged(tmp_path, rte_folder):
    from conftest import TINY_RTE

    from robustkit.analysis import scores, stability

    glue = rte_folder(tmp_path / "glue")
    # the spec refuses lr=inf (issue #13); 1e300 is finite for it and inf in the float32 update
    spec = dataclasses.replace(TINY_RTE, method="full", lr=1e300, data_dir=str(glue))
    run_dir = train(spec, tmp_path / "runs", progress=False)
    manifest = read_manifest(run_dir)
    # step 1's update makes the weights infinite; step 2's loss is NaN: stopped there, before
    # its first evaluation, so the one finite state it has is theta_0
    assert manifest["status"] == "diverged"
    assert manifest["diverged"]["step"] == 2 and "training loss nan" in manifest["diverged"]["reason"]
    assert {"step-0", "last", "best"} <= set(manifest["checkpoints"])
    assert manifest["checkpoints"]["last"]["step"] == manifest["checkpoints"]["best"]["step"] == 0
    assert all(_all_finite(run_dir, name) for name in ("step-0", "last", "best"))
    assert {v for splits in manifest["outcome"].values() for v in splits.values()} == {"diverged"}
    assert math.isfinite(manifest["final"]["last"]["test"]["loss"])  # the kept state, scored honestly
    history = _history(run_dir).query("split == 'train'")
    assert history["step"].max() == 2 and math.isnan(history.query("step == 2")["value"].item())
    # finished: a second train() (a sweep) does not train it again
    before = (run_dir / "manifest.json").stat().st_mtime_ns
    assert train(spec, tmp_path / "runs", progress=False) == run_dir
    assert (run_dir / "manifest.json").stat().st_mtime_ns == before
    # the store and the statistics count it as diverged, never as a result
    runs = load_runs(tmp_path / "runs")
    assert runs["status"].tolist() == ["diverged"] and runs["outcome/best/test"].tolist() == ["diverged"]
    frame = scores.outcomes(tmp_path / "runs", checkpoint="best", split="test", metric=None)
    assert frame["outcome"].tolist() == ["diverged"]
    summary = stability.summarize(frame, by="method")
    assert summary[["n_runs", "n_diverged", "n"]].iloc[0].tolist() == [1, 1, 0]


def test_a_non_finite_gradient_stops_before_its_update_and_keeps_the_previous_step(tmp_path, rte_folder, monkeypatch):
    from conftest import TINY_RTE

    from robustkit.train import loop

    calls = []
    real = loop.gradient_norms

    def norms(named, groups=None):
        out = real(named, groups)
        calls.append(1)
        if len(calls) == 4:  # step 4: a NaN gradient norm in one layer group
            out["layer.0"] = math.nan
        return out

    monkeypatch.setattr(loop, "gradient_norms", norms)  # where the step looks it up
    glue = rte_folder(tmp_path / "glue")
    spec = dataclasses.replace(TINY_RTE, method="full", data_dir=str(glue))
    run_dir = train(spec, tmp_path / "runs", progress=False)
    manifest = read_manifest(run_dir)
    assert manifest["status"] == "diverged" and manifest["diverged"]["step"] == 4
    assert "layer.0" in manifest["diverged"]["reason"]
    # the update of step 4 was never applied: `last` is the state after step 3, `best` an
    # earlier evaluated one (evaluations at steps 2 and 3)
    assert manifest["checkpoints"]["last"]["step"] == 3 and manifest["checkpoints"]["best"]["step"] in (2, 3)
    assert all(_all_finite(run_dir, name) for name in ("last", "best"))
    grads = pd.read_parquet(run_dir / "gradnorms.parquet")
    assert math.isnan(grads.query("step == 4 and layer == 'layer.0'")["value"].item())  # logged all the same
    # `last` holds the weights after step 3: scored again, it gives step 3's evaluation exactly
    step3 = _history(run_dir).query("split == 'validation' and step == 3").set_index("metric")["value"]
    assert manifest["final"]["last"]["validation"]["loss"] == step3["loss"]
    assert manifest["final"]["last"]["validation"]["accuracy"] == step3["accuracy"]


def test_a_diverged_tsp_run_is_marked_and_not_retrained(tiny_spec, tmp_path, monkeypatch):
    from robustkit.train import Diverged, pretraining

    real = pretraining.masked_lm_loss
    calls = []

    def loss(model, batch):
        calls.append(1)
        value = real(model, batch)
        return value * math.nan if len(calls) == 3 else value

    monkeypatch.setattr(pretraining, "masked_lm_loss", loss)  # where the TSP loop looks it up
    tsp = dataclasses.replace(tiny_spec, tsp_step=4).tsp_spec()
    with pytest.raises(Diverged, match="diverged at step 3"):
        pretrain(tsp, [2, 4], tmp_path, progress=False)
    run_dir = tmp_path / tsp.run_id
    manifest = read_manifest(run_dir)
    assert manifest["status"] == "diverged" and manifest["tsp_steps"] == [2]
    assert _all_finite(run_dir, "tsp-2") and "tsp-4" not in manifest["checkpoints"]
    # asked again for the step it never reached: refused at once, nothing trained
    calls.clear()
    with pytest.raises(Diverged, match="no tsp-4"):
        pretrain(tsp, [4], tmp_path, progress=False)
    assert calls == []
    assert pretrain(tsp, [2], tmp_path, progress=False) == run_dir  # what it saved stays usable


def test_an_exploding_finite_loss_is_diverged_by_the_stated_rule(tmp_path, rte_folder):
    """lr=1e3 keeps every number finite but takes the loss far above its start: the run stops at
    the first step whose loss is above LOSS_FACTOR x its first loss and LOSS_FLOOR (issue #27.4),
    before that step's update, and is diverged wherever runs are counted."""
    from conftest import TINY_RTE

    from robustkit.train.divergence import LOSS_FACTOR, LOSS_FLOOR

    glue = rte_folder(tmp_path / "glue")
    spec = dataclasses.replace(TINY_RTE, method="full", lr=1e3, data_dir=str(glue))
    run_dir = train(spec, tmp_path / "runs", progress=False)
    manifest = read_manifest(run_dir)
    assert manifest["status"] == "diverged" and "exploded" in manifest["diverged"]["reason"]
    losses = _history(run_dir).query("split == 'train'").sort_values("step")["value"].tolist()
    assert all(math.isfinite(v) for v in losses)
    first, stop = losses[0], losses[-1]
    assert stop > LOSS_FACTOR * first and stop > LOSS_FLOOR
    assert all(v <= LOSS_FACTOR * first or v <= LOSS_FLOOR for v in losses[:-1])  # the first such step
    assert load_runs(tmp_path / "runs")["outcome/best/test"].tolist() == ["diverged"]


def test_a_run_that_learns_or_collapses_is_not_diverged(tmp_path, rte_folder):
    """The rule's other side: an ordinary lr and a too-high one that collapses (finite, loss near
    its start) both finish complete."""
    from conftest import TINY_RTE

    glue = rte_folder(tmp_path / "glue")
    for lr in (2e-5, 1e-1):
        run_dir = train(
            dataclasses.replace(TINY_RTE, method="full", lr=lr, data_dir=str(glue)), tmp_path / "runs", progress=False
        )
        assert read_manifest(run_dir)["status"] == "complete", lr
