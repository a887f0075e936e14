"""Loss landscape (He et al. 2021 section 5): endpoints, exact restore, grid parsing, cache, figure."""

import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from robustkit.analysis import landscape
from robustkit.analysis.registry import get as analysis
from robustkit.data.tasks import get_task
from robustkit.errors import RobustkitError
from robustkit.figures import landscape as landscape_plots
from robustkit.figures.style import save_pdf
from robustkit.specs.spec import RunSpec
from robustkit.store.checkpoints import load_checkpoint, save_checkpoint
from robustkit.store.folders import HISTORY, run_dirs
from robustkit.store.manifest import read_manifest
from robustkit.train.evaluate import evaluate, split_batches
from robustkit.train.run_model import load_run_model


def _run_dir(runs: Path, method: str) -> Path:
    return next(p for p in run_dirs(runs) if read_manifest(p)["spec"]["method"] == method)


def _dev(run_dir: Path) -> tuple[RunSpec, list[dict]]:
    spec = RunSpec(**read_manifest(run_dir)["spec"])
    return spec, split_batches(spec, ["validation"])["validation"]


def _parameters(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _assert_identical(model, before: dict[str, torch.Tensor]) -> None:
    after = dict(model.named_parameters())
    assert after.keys() == before.keys()
    changed = [n for n in before if not torch.equal(after[n], before[n])]
    assert not changed, changed[:3]


def test_parse_alphas():
    grid = landscape.parse_alphas("-2:2:20")
    assert grid.shape == (20,) and grid[0] == -2.0 and grid[-1] == 2.0
    np.testing.assert_allclose(np.diff(grid), 4 / 19)
    assert landscape.parse_alphas("-1:2:4").tolist() == [-1.0, 0.0, 1.0, 2.0]
    assert {0.0, 1.0} <= set(landscape.parse_alphas("-2:2:21").tolist())  # exact after rounding
    assert landscape.parse_alphas(" 0, 0.5,1 ").tolist() == [0.0, 0.5, 1.0]
    for bad in ("-2:2", "a:b:3", "-2:2:1", "2:-2:5", "-2:2:2.5", "", "0,x", "-2:inf:5"):
        with pytest.raises(RobustkitError, match=re.escape(f"bad alpha grid {bad!r}")):
            landscape.parse_alphas(bad)


@pytest.mark.parametrize("method", ["houlsby", "full"])
def test_endpoints_equal_the_checkpoints_evaluated_directly(tiny_store, method):
    run_dir = _run_dir(tiny_store, method)
    frame = analysis("landscape").run(tiny_store, select=[f"method={method}"], alphas="-1:2:4", progress=False)
    assert len(frame) == 4 * 2 and set(frame["metric"]) == {"loss", "accuracy"}
    assert set(frame["checkpoint"]) == {"best"} and set(frame["split"]) == {"validation"}
    loss = frame[frame["metric"] == "loss"].set_index("alpha")["value"]
    spec, batches = _dev(run_dir)
    for alpha, checkpoint in ((0.0, "step-0"), (1.0, "best")):
        direct = evaluate(load_run_model(run_dir, checkpoint), batches, get_task(spec.task))["loss"]
        assert abs(loss[alpha] - direct) < 1e-6, (alpha, loss[alpha], direct)
    # and f(1) is the dev loss that training logged when it kept `best`
    best_step = read_manifest(run_dir)["best_step"]
    history = pd.read_parquet(run_dir / HISTORY)
    logged = history[
        (history["split"] == "validation") & (history["metric"] == "loss") & (history["step"] == best_step)
    ]["value"]
    assert abs(loss[1.0] - logged.item()) < 1e-6
    assert loss[-1.0] != loss[0.0] != loss[2.0]  # the parameters did move


def test_interpolate_restores_every_parameter_bit_for_bit(tiny_store):
    run_dir = _run_dir(tiny_store, "full")
    spec, batches = _dev(run_dir)
    model = load_run_model(run_dir, "step-0").train()
    before = _parameters(model)
    theta0, theta1 = (load_checkpoint(run_dir, name)[0] for name in ("step-0", "best"))
    assert theta0.keys() == before.keys()  # a full run moves every parameter
    frame = landscape.interpolate(model, theta0, theta1, [0.5, -2.0, 2.0], {"validation": batches}, spec.task)
    assert list(frame.columns) == ["alpha", "split", "metric", "value"] and len(frame) == 6
    _assert_identical(model, before)
    assert model.training  # its mode is restored too


def test_interpolate_restores_after_an_exception(tiny_store, monkeypatch):
    run_dir = _run_dir(tiny_store, "houlsby")
    spec, batches = _dev(run_dir)
    model = load_run_model(run_dir, "best")
    before = _parameters(model)
    theta0, theta1 = (load_checkpoint(run_dir, name)[0] for name in ("step-0", "best"))
    moved, frozen = next(n for n in theta0 if ".adapters." in n), "bert.embeddings.word_embeddings.weight"
    assert frozen not in theta0  # adapter runs interpolate only what they trained
    calls = []

    def failing_evaluate(model, batches, task):
        calls.append(1)
        parameters = dict(model.named_parameters())
        assert not torch.equal(parameters[moved], before[moved]) and torch.equal(parameters[frozen], before[frozen])
        if len(calls) == 2:
            raise RuntimeError("evaluation failed")
        return {"loss": 0.0}

    monkeypatch.setattr("robustkit.train.evaluate.evaluate", failing_evaluate)  # landscape imports it on call
    with pytest.raises(RuntimeError, match="evaluation failed"):
        landscape.interpolate(model, theta0, theta1, [-2.0, 2.0, 0.5], batches, spec.task)
    assert len(calls) == 2
    _assert_identical(model, before)


def test_mismatched_thetas_are_refused(tiny_store):
    run_dir = _run_dir(tiny_store, "houlsby")
    model = load_run_model(run_dir, "best")
    theta0 = load_checkpoint(run_dir, "step-0")[0]
    theta1 = dict(theta0)
    theta1.pop(next(iter(theta1)))
    with pytest.raises(RobustkitError, match="different parameters"):
        landscape.interpolate(model, theta0, theta1, [0.0], [], "rte")
    with pytest.raises(RobustkitError, match="bad split"):
        analysis("landscape").run(tiny_store, splits=("dev",), progress=False)


def test_cache_hit_and_recompute_after_a_changed_checkpoint(tiny_store, tmp_path, monkeypatch):
    source = _run_dir(tiny_store, "houlsby")
    run_dir = shutil.copytree(source, tmp_path / "runs" / source.name)  # a private store: we change it
    calls = []
    real = landscape.interpolate

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(landscape, "interpolate", counting)
    first = analysis("landscape").run(tmp_path / "runs", alphas="0,1", progress=False)
    again = analysis("landscape").run(tmp_path / "runs", alphas="0,1", progress=False)
    assert len(calls) == 1
    pd.testing.assert_frame_equal(first, again)
    tensors, metadata = load_checkpoint(run_dir, "best")
    tensors["classifier.bias"] = tensors["classifier.bias"] + torch.tensor([0.5, -0.5])
    save_checkpoint(run_dir, "best", tensors, metadata, read_manifest(run_dir)["checkpoints"]["best"]["step"])
    changed = analysis("landscape").run(tmp_path / "runs", alphas="0,1", progress=False)
    assert len(calls) == 2
    assert _loss_at(changed, 0.0) == _loss_at(first, 0.0) and _loss_at(changed, 1.0) != _loss_at(first, 1.0)


def _loss_at(frame: pd.DataFrame, alpha: float) -> float:
    return frame.query("metric == 'loss' and alpha == @alpha")["value"].item()


def landscape_curves(frame: pd.DataFrame, **params):
    """The landscape figure of ``frame``, through its view (the mean lines)."""
    return landscape_plots.landscape_curves(**landscape.landscape_lines(frame, **params))


def test_landscape_figure_renders_as_pdf(tiny_store, tmp_path):
    frame = analysis("landscape").run(tiny_store, alphas="-1:2:4", progress=False)
    seeds = pd.concat([frame, frame.assign(run_id=frame["run_id"] + "-copy", value=frame["value"] * 1.1)])
    fig = landscape_curves(seeds)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("n=2 runs" in label for label in labels)
    path = save_pdf(fig, tmp_path / "landscape.pdf")
    assert path.read_bytes()[:5] == b"%PDF-"
    with pytest.raises(ValueError, match="no rows"):
        landscape_curves(frame, split="train")


def test_figure_leaves_collapsed_runs_out_and_counts_them():
    """A collapsed run's loss curve is no result: not in the mean line, counted in the legend."""
    rows = [
        {
            "run_id": f"r{seed}",
            "task": "rt",
            "method": "prefix",
            "tsp_step": 0,
            "checkpoint": "best",
            "alpha": alpha,
            "split": "validation",
            "metric": "loss",
            "value": value + alpha,
            "outcome": outcome,
        }
        for seed, (value, outcome) in enumerate([(0.5, "ok"), (3.0, "collapsed")])
        for alpha in (0.0, 1.0)
    ]
    fig = landscape_curves(pd.DataFrame(rows))
    line = fig.axes[0].get_lines()[0]
    assert list(line.get_ydata()) == [0.5, 1.5]
    assert "n=1 run; 1 collapsed left out" in line.get_label()


# ---------------------------------------------------------------------------------------------
# factorised updates move along their merged update (issue #55)


def test_lora_moves_along_its_merged_update_not_its_factors(lora_store):
    """A LoRA run's line is W_0 + alpha (s B_1 A_1 - s B_0 A_0) in the matrices it adapts: the
    factors are replaced by the merged matrices, the ends evaluate as the checkpoints, and the
    midpoint is the model with the mean of the ends' matrices (and of the rest) and no LoRA
    branch; interpolating the factors instead is off the line (A_1 = -A_0: zero update at 1/2)."""
    from robustkit.analysis.lora_space import factor_names
    from robustkit.train.run_model import load_run

    run_dir = _run_dir(lora_store, "lora")
    run = load_run(run_dir, "best", "cpu")
    factors = factor_names(run.model)
    raw0, raw1 = run.checkpoint_tensors("step-0"), dict(run.tensors)
    start, end = landscape.merged_update(run.model, raw0, raw1)
    assert factors and set(factors) <= set(start) and set(start) == set(end)
    assert not any(n in start for names in factors.values() for n in names)  # no factor moves
    matrix, (a_name, b_name) = next(iter(factors.items()))
    layer = run.model.get_submodule(matrix.rsplit(".", 1)[0])
    scale = layer.loras[a_name.partition(".loras.")[2].split(".")[0]].scaling
    torch.testing.assert_close(
        end[matrix] - start[matrix], scale * (raw1[b_name] @ raw1[a_name] - raw0[b_name] @ raw0[a_name])
    )
    spec, batches = _dev(run_dir)
    frame = landscape.interpolate(run.model, start, end, [0.0, 0.5, 1.0], batches, spec.task)
    loss = frame[frame["metric"] == "loss"].set_index("alpha")["value"]
    for alpha, checkpoint in ((0.0, "step-0"), (1.0, "best")):
        direct = evaluate(load_run_model(run_dir, checkpoint), batches, get_task(spec.task))["loss"]
        assert abs(loss[alpha] - direct) < 1e-5, (alpha, loss[alpha], direct)
    # the midpoint, built by hand: every moving tensor at its mean, the LoRA branch off (B = 0)
    reference = load_run(run_dir, "best", "cpu").model
    parameters = dict(reference.named_parameters())
    with torch.no_grad():
        for name in start:
            parameters[name].copy_((start[name] + end[name]) / 2)
        for names in factors.values():
            parameters[next(n for n in names if n.endswith("lora_B"))].zero_()
    assert abs(loss[0.5] - evaluate(reference, batches, get_task(spec.task))["loss"]) < 1e-5
    # factors that turn round (A_1 = -A_0) cancel at the factors' midpoint; the merged line does not
    turned = {**raw1, a_name: -raw0[a_name]}
    start2, end2 = landscape.merged_update(load_run(run_dir, "best", "cpu").model, raw0, turned)
    factor_mid = scale * ((raw0[b_name] + turned[b_name]) / 2) @ ((raw0[a_name] + turned[a_name]) / 2)
    assert torch.count_nonzero(factor_mid) == 0
    torch.testing.assert_close((end2[matrix] - start2[matrix]) / 2, scale * turned[b_name] @ turned[a_name] / 2)
    assert landscape.update_norm(start, end) > 0


def test_the_landscape_records_the_update_norm(lora_store):
    frame = analysis("landscape").run(lora_store, select=["method=lora", "seed=0"], alphas="0,1", progress=False)
    assert frame["update_norm"].nunique() == 1 and frame["update_norm"].iloc[0] > 0


def _curve(run_id: str, alphas, losses, norm: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            **{c: run_id if c == "run_id" else 0 for c in landscape.IDENTITY},
            "alpha": alphas,
            "split": "validation",
            "metric": "loss",
            "value": losses,
            "update_norm": norm,
        }
    )


def test_curvature_at_the_minimum_per_squared_weight_unit():
    """f(alpha) = c (alpha - m)^2 + f0 on He et al.'s grid: 2 c at the minimum whatever m (alpha =
    1 would sit on a slope for m = -1 and read a cubic's term), divided by ||update||^2; two runs
    on one landscape with updates of different length give the same curvature per weight unit."""
    grid = landscape.parse_alphas("-2:2:20")
    frame = pd.concat(
        [
            _curve("short", grid, 3.0 * (grid - 0.8) ** 2 + 0.5, norm=2.0),
            # the same landscape along a 5x longer update: f(alpha) = 3 (5 alpha - 0.8)^2 / 25 ... scaled
            _curve("long", grid, 3.0 * 25 * (grid - 0.8 / 5) ** 2 + 0.5, norm=10.0),
            _curve("cubic", grid, (grid + 1.0) ** 2 + 0.4 * (grid + 1.0) ** 3, norm=1.0),
        ]
    )
    value = landscape.landscape_curvature(frame, "validation", "minimum", "distance").set_index("run_id")["value"]
    assert value["short"] == pytest.approx(6.0 / 4) and value["long"] == pytest.approx(6.0 / 4)
    per_alpha = landscape.landscape_curvature(frame, "validation", "minimum", "alpha").set_index("run_id")["value"]
    assert per_alpha["long"] == pytest.approx(25 * per_alpha["short"])
    at_one = landscape.landscape_curvature(frame, "validation", "theta1", "alpha").set_index("run_id")["value"]
    assert per_alpha["cubic"] < 3.0 < at_one["cubic"]  # 2 + 2.4 (alpha + 1) near the minimum vs at alpha = 1
    with pytest.raises(RobustkitError, match="update_norm"):
        landscape.landscape_curvature(frame.drop(columns="update_norm"), "validation", "minimum", "distance")
