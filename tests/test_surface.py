"""2-D loss surfaces (Li et al. 2018) and linear mode connectivity (Frankle et al. 2020), issue #16
item 2: filter normalisation, the surface's centre, the barrier's closed form, seed pairs."""

import dataclasses
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from robustkit.analysis import connectivity, surface
from robustkit.analysis.batches import sampled_batches
from robustkit.analysis.registry import get as analysis
from robustkit.data.tasks import get_task
from robustkit.errors import RobustkitError
from robustkit.figures.connectivity import connectivity_figure
from robustkit.figures.style import save_pdf
from robustkit.figures.surface import surface_contours
from robustkit.store.checkpoints import load_checkpoint
from robustkit.store.folders import run_dirs
from robustkit.store.manifest import read_manifest, read_spec
from robustkit.store.tables import IDENTITY
from robustkit.train import train
from robustkit.train.evaluate import evaluate
from robustkit.train.run_model import load_run_model


def _run_dir(runs, method, seed=0):
    return next(
        p
        for p in run_dirs(runs)
        if read_manifest(p)["spec"]["method"] == method and read_manifest(p)["spec"]["seed"] == seed
    )


def test_filter_normalised_directions_match_each_rows_norm():
    weights = {
        "w": torch.randn(5, 3) * torch.arange(1, 6).view(-1, 1),
        "conv": torch.randn(4, 2, 3, 3),
        "bias": torch.randn(5),
        "zero": torch.zeros(2, 3),
    }
    d = surface.filter_normalized_direction(weights, torch.Generator().manual_seed(0))
    np.testing.assert_allclose(d["w"].norm(dim=1), weights["w"].norm(dim=1), rtol=1e-5)
    np.testing.assert_allclose(d["conv"].flatten(1).norm(dim=1), weights["conv"].flatten(1).norm(dim=1), rtol=1e-5)
    assert torch.equal(d["bias"], torch.zeros(5)) and torch.equal(d["zero"], torch.zeros(2, 3))
    assert not torch.allclose(
        d["w"] / d["w"].norm(dim=1, keepdim=True), weights["w"] / weights["w"].norm(dim=1, keepdim=True)
    )
    again = surface.filter_normalized_direction(weights, torch.Generator().manual_seed(0))
    assert all(torch.equal(d[k], again[k]) for k in d)  # seeded
    kept = surface.filter_normalized_direction(weights, torch.Generator().manual_seed(0), ignore="none")
    assert torch.equal(kept["bias"], weights["bias"])  # Li et al.'s code without 'biasbn'


def test_surface_centre_is_the_checkpoint_and_the_model_is_restored(tiny_store):
    run_dir = _run_dir(tiny_store, "houlsby")
    frame = analysis("surface").run(tiny_store, ["method=houlsby"], grid="-1:1:3", examples=12, progress=False)
    assert len(frame) == 9 * 2 and set(frame["metric"]) == {"loss", "accuracy"} and set(frame["examples"]) == {12}
    spec = read_spec(run_dir)
    model = load_run_model(run_dir, "best")
    centre = frame[(frame["a"] == 0) & (frame["b"] == 0) & (frame["metric"] == "loss")]["value"].item()
    direct = evaluate(model, sampled_batches(spec, "train", 12, 0), get_task(spec.task))["loss"]
    assert centre == pytest.approx(direct, abs=1e-6)
    assert frame[frame["metric"] == "loss"]["value"].nunique() > 1
    # only the checkpoint's tensors move, and they come back bit for bit
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    tensors = load_checkpoint(run_dir, "best")[0]
    generator = torch.Generator().manual_seed(0)
    directions = tuple(surface.filter_normalized_direction(tensors, generator) for _ in range(2))
    surface.surface(model, tensors, directions, [0.5], [-0.5], sampled_batches(spec, "train", 12, 0), spec.task)
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())


def test_barrier_is_the_maximum_above_the_mean_of_the_ends():
    alphas = np.linspace(0, 1, 5)
    loss = [0.2, 0.5, 0.9, 0.6, 0.4]
    accuracy = [0.8, 0.7, 0.5, 0.6, 0.9]
    base = {
        "run_id": "a",
        "method": "full",
        "seed": 0,
        "run_id_b": "b",
        "seed_b": 1,
        "checkpoint": "best",
        "split": "train",
    }
    frame = pd.DataFrame(
        [
            {**base, "alpha": a, "metric": m, "value": v}
            for m, values in (("loss", loss), ("accuracy", accuracy))
            for a, v in zip(alphas, values)
        ]
    )
    frame = frame.assign(**{c: None for c in IDENTITY if c not in frame})
    table = connectivity.barriers(frame).set_index("metric")
    assert table.loc["loss", "barrier"] == pytest.approx(0.9 - 0.3) and table.loc["loss", "argmax_alpha"] == 0.5
    assert table.loc["accuracy error", "barrier"] == pytest.approx(0.5 - 0.15)  # error = 1 - accuracy
    assert (table.loc["loss", "end_a"], table.loc["loss", "end_b"]) == (0.2, 0.4)


@pytest.fixture(scope="module")
def seeds_store(tiny_store, tmp_path_factory):
    """tiny_store + a second seed of the houlsby run (same data)."""
    runs = tmp_path_factory.mktemp("connectivity") / "runs"
    shutil.copytree(tiny_store, runs, ignore=shutil.ignore_patterns(".cache"))
    spec = read_spec(_run_dir(runs, "houlsby"))
    train(dataclasses.replace(spec, seed=1), runs, progress=False)
    return runs


def test_connectivity_pairs_seeds_of_one_configuration_and_its_ends_are_the_runs(seeds_store, tmp_path, monkeypatch):
    lines = analysis("connectivity").run(seeds_store, alphas="0:1:3", examples=12, progress=False)
    assert set(lines["method"]) == {"houlsby"}  # the full run has no second seed: no pair, no line
    assert set(zip(lines["seed"], lines["seed_b"])) == {(0, 1)}
    loss = lines[lines["metric"] == "loss"].set_index("alpha")["value"]
    spec = read_spec(_run_dir(seeds_store, "houlsby"))
    batches = sampled_batches(spec, "train", 12, 0)
    for alpha, seed in ((0.0, 0), (1.0, 1)):
        direct = evaluate(load_run_model(_run_dir(seeds_store, "houlsby", seed), "best"), batches, get_task(spec.task))[
            "loss"
        ]
        assert loss[alpha] == pytest.approx(direct, abs=1e-6)
    table = connectivity.barriers(lines)
    assert set(table["metric"]) == {"loss", "accuracy error"} and len(table) == 2
    assert table.set_index("metric").loc["loss", "barrier"] == pytest.approx(loss.max() - (loss[0.0] + loss[1.0]) / 2)
    with pytest.raises(RobustkitError, match="must hold 0 and 1"):
        analysis("connectivity").run(seeds_store, alphas="0.2:0.8:3", progress=False)
    with pytest.raises(RobustkitError, match="differ in"):
        connectivity.pair_line(_run_dir(seeds_store, "houlsby"), _run_dir(seeds_store, "full"))
    save_pdf(connectivity_figure(lines, table), tmp_path / "connectivity.pdf")
    from robustkit.analysis import registry

    claimed = registry.per_run(
        "connectivity.barrier",
        seeds_store,
        {"run_id": list(lines["run_id"].unique()) + list(lines["run_id_b"].unique())},
        **{"alphas": "0:1:3", "examples": 12},
    )
    assert claimed["value"].tolist() == pytest.approx([table.set_index("metric").loc["loss", "barrier"]])
    monkeypatch.setattr(connectivity, "pair_line", lambda *a, **k: pytest.fail("recomputed"))
    pd.testing.assert_frame_equal(
        analysis("connectivity").run(seeds_store, alphas="0:1:3", examples=12, progress=False), lines
    )


def test_surface_figure(tiny_store, tmp_path):
    frame = analysis("surface").run(tiny_store, grid="-1:1:3", examples=12, progress=False)
    assert save_pdf(surface_contours(frame), tmp_path / "surface.pdf").stat().st_size > 0
