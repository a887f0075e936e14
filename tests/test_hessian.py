"""Curvature (issue #16 item 1): power iteration and Hutchinson against exact Hessians (a
quadratic with known spectrum, a small MLP whose Hessian autograd forms), per block; and the
curvature analysis on bert-tiny runs (cache, trained tensors only)."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.stats import ortho_group

from robustkit.analysis import curvature
from robustkit.analysis.registry import get as analysis
from robustkit.measures.hessian import HessianVectorProduct, hutchinson_trace, top_eigenvalue
from robustkit.store.folders import run_dirs
from robustkit.store.manifest import read_manifest


def _quadratic(eigenvalues, seed=0):
    """f(x) = 1/2 x^T A x with A = Q diag(eigenvalues) Q^T, as two parameter tensors (3 + rest)."""
    n = len(eigenvalues)
    q = torch.from_numpy(ortho_group.rvs(n, random_state=seed))
    a = q @ torch.diag(torch.tensor(eigenvalues, dtype=torch.float64)) @ q.T
    x = torch.randn(n, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    parts = [x[:3].clone().requires_grad_(), x[3:].clone().requires_grad_()]
    return a, parts, lambda: 0.5 * torch.cat(parts) @ a @ torch.cat(parts)


def test_power_iteration_finds_the_top_eigenvalue_of_a_quadratic():
    eigenvalues = [5.0, 2.0, 1.0, 0.5, -0.3, 0.1, 0.0, 3.0]
    a, parts, loss = _quadratic(eigenvalues)
    estimate = top_eigenvalue(HessianVectorProduct(loss, parts), max_iterations=500, tol=1e-10)
    assert estimate.converged and estimate.value == pytest.approx(5.0, rel=1e-8)
    assert estimate.residual < 1e-3  # an eigenvalue lies within the residual: here 5 itself
    assert abs(estimate.value - 5.0) <= estimate.residual + 1e-12
    assert estimate.iterations == len(estimate.history) < 500


@pytest.mark.parametrize(
    "eigenvalues, top", [([-4.0, 1.0, 2.0, 0.5, 0.1], 2.0), ([-4.0, -1.0, -2.0, -0.5, -3.0], -0.5)]
)
def test_a_negative_dominant_eigenvalue_is_shifted_away(eigenvalues, top):
    # power iteration finds -4 (largest magnitude); the shifted second phase finds the largest
    a, parts, loss = _quadratic(eigenvalues)
    estimate = top_eigenvalue(HessianVectorProduct(loss, parts), max_iterations=2000, tol=1e-12)
    assert estimate.dominant == pytest.approx(-4.0, rel=1e-7)
    assert estimate.value == pytest.approx(top, rel=1e-6) and abs(estimate.value - top) <= estimate.residual + 1e-9


def test_hutchinson_is_exact_for_a_diagonal_hessian_and_unbiased_otherwise():
    diagonal = torch.tensor([3.0, -1.0, 0.5, 2.0, 7.0], dtype=torch.float64)
    x = torch.ones(5, dtype=torch.float64, requires_grad=True)
    trace = hutchinson_trace(HessianVectorProduct(lambda: 0.5 * (diagonal * x * x).sum(), [x]), samples=3)["all"]
    assert trace.value == pytest.approx(11.5, abs=1e-12) and trace.std_error == pytest.approx(0.0, abs=1e-12)
    a, parts, loss = _quadratic([5.0, 2.0, 1.0, 0.5, -0.3, 0.1, 0.0, 3.0])
    estimates = hutchinson_trace(HessianVectorProduct(loss, parts), {"first": [0], "rest": [1]}, samples=400, seed=1)
    exact = {
        "all": float(torch.trace(a)),
        "first": float(torch.trace(a[:3, :3])),
        "rest": float(torch.trace(a[3:, 3:])),
    }
    for name, value in exact.items():
        # Rademacher variance of v_B^T (A v)_B, closed form: 2 sum_{i != j in B} A_ij^2 within the
        # block plus sum_{i in B, j not in B} A_ij^2 from the cross terms
        inside = {"all": slice(0, 8), "first": slice(0, 3), "rest": slice(3, 8)}[name]
        block, rows = a[inside, inside], a[inside, :]
        within = float((block**2).sum() - (torch.diagonal(block) ** 2).sum())
        sd = math.sqrt((2 * within + float((rows**2).sum() - (block**2).sum())) / 400)
        assert abs(estimates[name].value - value) < 4 * sd, name
        assert estimates[name].std_error == pytest.approx(sd, rel=0.3), name
    assert estimates["first"].value + estimates["rest"].value == pytest.approx(estimates["all"].value, rel=1e-10)


def _mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(), torch.nn.Linear(6, 3)).double()
    x = torch.randn(16, 4, dtype=torch.float64)
    y = torch.randint(0, 3, (16,))
    return model, x, y


def _exact_hessian(model, x, y, names):
    """The Hessian over ``names`` (flattened, in order), formed whole by autograd."""
    params = dict(model.named_parameters())
    shapes = [params[n].shape for n in names]
    sizes = [params[n].numel() for n in names]

    def loss(flat):
        pieces = dict(zip(names, (p.view(s) for p, s in zip(torch.split(flat, sizes), shapes))))
        values = {**{n: p.detach() for n, p in params.items()}, **pieces}
        return torch.nn.functional.cross_entropy(torch.func.functional_call(model, values, (x,)), y)

    flat = torch.cat([params[n].detach().reshape(-1) for n in names])
    return torch.autograd.functional.hessian(loss, flat), sizes


def test_mlp_eigenvalue_trace_and_blocks_equal_the_exact_hessian():
    model, x, y = _mlp()
    names = [n for n, _ in model.named_parameters()]
    hessian, sizes = _exact_hessian(model, x, y, names)
    params = [p for _, p in model.named_parameters()]
    hvp = HessianVectorProduct(lambda: torch.nn.functional.cross_entropy(model(x), y), params)
    eigenvalues = torch.linalg.eigvalsh(hessian)
    top = eigenvalues.max()
    assert top_eigenvalue(hvp, max_iterations=2000, tol=1e-12).value == pytest.approx(float(top), rel=1e-6)
    # the block of the second layer (its weight and bias): the diagonal block of the exact Hessian
    start = sum(sizes[:2])
    block = hessian[start:, start:]
    block_top = torch.linalg.eigvalsh(block)
    estimate = top_eigenvalue(hvp, [2, 3], max_iterations=2000, tol=1e-12)
    assert estimate.value == pytest.approx(float(block_top.max()), rel=1e-6)
    traces = hutchinson_trace(hvp, {"second": [2, 3]}, samples=2000, seed=3)
    for name, exact in (("all", torch.trace(hessian)), ("second", torch.trace(block))):
        assert abs(traces[name].value - float(exact)) < 4 * traces[name].std_error, name


def test_a_loss_in_weighted_parts_gives_the_whole_batchs_products():
    """Micro-batches of unequal sizes, weighted by their share of the examples: the same H v as
    the whole batch (and as the exact Hessian), the same gradient, one part's graph at a time."""
    model, x, y = _mlp()
    names = [n for n, _ in model.named_parameters()]
    hessian, _ = _exact_hessian(model, x, y, names)
    params = [p for _, p in model.named_parameters()]
    loss = torch.nn.functional.cross_entropy
    whole = HessianVectorProduct(lambda: loss(model(x), y), params)
    cuts = [(0, 5), (5, 6), (6, 16)]  # 5, 1 and 10 examples
    parts = HessianVectorProduct(
        [((b - a) / 16, lambda a=a, b=b: loss(model(x[a:b]), y[a:b])) for a, b in cuts], params
    )
    v = [torch.randn(p.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) for p in params]
    exact = hessian @ torch.cat([t.reshape(-1) for t in v])
    in_parts = torch.cat([t.reshape(-1) for t in parts(v)])
    assert parts.products == 1  # counted per product, not per part
    torch.testing.assert_close(in_parts, torch.cat([t.reshape(-1) for t in whole(v)]), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(in_parts, exact, rtol=1e-10, atol=1e-12)
    for a, b in zip(parts.gradient(), whole.gradient()):
        torch.testing.assert_close(a, b.detach(), rtol=1e-12, atol=1e-12)
    block = parts([t for t in v[2:]], [2, 3])  # a block of a loss in parts, too
    start = sum(p.numel() for p in params[:2])
    torch.testing.assert_close(
        torch.cat([t.reshape(-1) for t in block]),
        hessian[start:, start:] @ torch.cat([t.reshape(-1) for t in v[2:]]),
        rtol=1e-10,
        atol=1e-12,
    )
    assert top_eigenvalue(parts, max_iterations=2000, tol=1e-12).value == pytest.approx(
        float(torch.linalg.eigvalsh(hessian).max()), rel=1e-6
    )


def test_micro_batches_weigh_parts_by_their_loss_terms():
    batch = {"input_ids": torch.arange(10).reshape(5, 2), "labels": torch.tensor([0, 1, 1, 0, 1])}
    parts = curvature.micro_batches(batch, 2)
    assert [w for w, _ in parts] == [0.4, 0.4, 0.2]
    assert torch.equal(torch.cat([p["input_ids"] for _, p in parts]), batch["input_ids"])
    # a masked-LM batch: the loss is a mean over masked tokens (labels other than -100)
    masked = {
        "input_ids": torch.zeros(3, 4, dtype=torch.long),
        "labels": torch.tensor([[-100, 5, -100, 7], [-100] * 4, [3, -100, -100, -100]]),
    }
    parts = curvature.micro_batches(masked, 1)
    assert [w for w, _ in parts] == [pytest.approx(2 / 3), pytest.approx(1 / 3)]  # the all -100 row has no term
    assert torch.equal(parts[1][1]["labels"], masked["labels"][2:])
    regression = {"labels": torch.tensor([0.5, -100.0, 2.0])}
    assert [w for w, _ in curvature.micro_batches(regression, 2)] == [pytest.approx(2 / 3), pytest.approx(1 / 3)]
    with pytest.raises(Exception, match="at least 1"):
        curvature.micro_batches(batch, 0)


def test_blocks_follow_the_gradient_norm_layer_groups():
    names = [
        "bert.embeddings.word_embeddings.weight",
        "bert.encoder.layer.0.attention.self.query.weight",
        "bert.encoder.layer.0.attention.self.query.bias",
        "bert.encoder.layer.1.output.dense.weight",
        "bert.pooler.dense.weight",
        "classifier.weight",
    ]
    assert curvature.blocks(names, "layer") == {
        "embeddings": [0],
        "layer.0": [1, 2],
        "layer.1": [3],
        "pooler": [4],
        "classifier": [5],
    }
    assert curvature.blocks(names, "module")["bert.encoder.layer.0.attention.self.query"] == [1, 2]
    assert curvature.blocks(names, "none") == {}


def test_blocks_take_the_models_own_layer_groups():
    """Names that do not say their layer (ALBERT's one shared layer, a prefix pool) take the
    group the model's structure gives them, as the gradient norms do."""
    names = [
        "albert.encoder.albert_layer_groups.0.albert_layers.0.attention.query.weight",
        "albert.encoder.embedding_hidden_mapping_in.weight",
        "classifier.weight",
    ]
    layer_of = {names[0]: "layer.0", names[1]: "shared"}
    assert curvature.blocks(names, "layer") == {"classifier": [0, 1, 2]}  # names alone cannot tell
    assert curvature.blocks(names, "layer", layer_of) == {"layer.0": [0], "shared": [1], "classifier": [2]}


@pytest.mark.parametrize("method", ["houlsby", "full"])
def test_curvature_of_runs_is_cached_and_over_trained_tensors_only(tiny_store, method, monkeypatch):
    options = dict(
        select=[f"method={method}"],
        checkpoints=["step-0", "best"],
        examples=8,
        max_iterations=3,
        samples=3,
        progress=False,
    )
    frame = analysis("curvature").run(tiny_store, **options)
    assert set(frame["checkpoint"]) == {"step-0", "best"}
    whole = frame[(frame["scope"] == "all")].set_index(["checkpoint", "estimator"])
    run_dir = next(p for p in run_dirs(tiny_store) if read_manifest(p)["spec"]["method"] == method)
    trained = read_manifest(run_dir)["trainable"]["count"]
    assert (whole["n_params"] == trained).all()  # the Hessian is over the trained tensors, all of them
    layers = frame[(frame["scope"] == "layer") & (frame["estimator"] == "trace")]
    assert layers.groupby("checkpoint")["n_params"].sum().eq(trained).all()  # blocks partition them
    assert {"layer.0", "layer.1", "classifier"} <= set(layers["group"])
    for checkpoint, group in layers.groupby("checkpoint"):  # block traces add up to the whole trace
        assert group["value"].sum() == pytest.approx(whole.loc[(checkpoint, "trace"), "value"], rel=1e-6)
    assert np.isfinite(frame["value"]).all() and (frame["spread"].dropna() >= 0).all()
    # in micro-batches of 3 (parts of 3, 3, 2 examples): the same numbers up to float32 rounding
    parts = curvature.curvature_run(run_dir, "best", examples=8, max_iterations=3, samples=3, micro_batch=3)
    best = frame[frame["checkpoint"] == "best"].reset_index(drop=True)
    np.testing.assert_allclose(parts["value"], best["value"], rtol=1e-3, atol=1e-6)
    assert parts[["scope", "group", "estimator", "n_params"]].equals(best[["scope", "group", "estimator", "n_params"]])
    # the second call reads the cache: nothing is computed
    monkeypatch.setattr(curvature, "curvature_run", lambda *a, **k: pytest.fail("recomputed"))
    pd.testing.assert_frame_equal(analysis("curvature").run(tiny_store, **options), frame)


def test_curvature_claim_statistic_reads_the_analysis(tiny_store):
    from robustkit.analysis import registry

    run_ids = [p.name for p in run_dirs(tiny_store)]
    frame = registry.per_run(
        "curvature.sharpness",
        tiny_store,
        {"run_id": run_ids},
        **{"checkpoint": "best", "estimator": "trace", "examples": 8, "max_iterations": 3, "samples": 3},
    )
    assert sorted(frame["run_id"]) == sorted(run_ids) and np.isfinite(frame["value"]).all()
    assert set(frame["outcome"]) <= {"ok", "not-learned", "collapsed", "undecided", "diverged"}


def test_curvature_at_the_tsp_checkpoint_uses_the_masked_lm_loss(tmp_path, rte_folder):
    import dataclasses

    from conftest import TINY_RTE

    from robustkit.train import train

    glue = rte_folder(tmp_path / "glue")
    train(
        dataclasses.replace(TINY_RTE, method="houlsby", tsp_step=2, data_dir=str(glue)),
        tmp_path / "runs",
        progress=False,
    )
    frame = analysis("curvature").run(
        tmp_path / "runs",
        checkpoints=["tsp", "step-0"],
        examples=8,
        max_iterations=3,
        samples=3,
        grouping="none",
        progress=False,
    )
    whole = frame[frame["scope"] == "all"].set_index(["checkpoint", "estimator"])["value"]
    assert set(frame["checkpoint"]) == {"tsp", "step-0"} and np.isfinite(whole).all()
    # a different loss (masked LM) over different parameters (the TSP run's, MLM head included)
    tsp_dir = next(p for p in (tmp_path / "runs").iterdir() if p.name.startswith("tsp-"))
    trained = read_manifest(tsp_dir)["trainable"]["count"]
    assert (frame.loc[frame["checkpoint"] == "tsp", "n_params"] == trained).all()
    assert whole[("tsp", "trace")] != whole[("step-0", "trace")]
    # the masked-LM loss in micro-batches: parts weighted by their masked tokens give the same numbers
    run_dir = next(
        p
        for p in (tmp_path / "runs").iterdir()
        if not p.name.startswith("tsp-") and p.is_dir() and not p.name.startswith(".")
    )
    parts = curvature.tsp_curvature_run(
        run_dir, examples=8, max_iterations=3, samples=3, grouping="none", micro_batch=3
    )
    np.testing.assert_allclose(parts["value"], frame[frame["checkpoint"] == "tsp"]["value"], rtol=1e-3, atol=1e-6)


def test_the_curvature_summary_splits_runs_of_other_settings():
    """Two seeds at one setting are one row; a run of another max_grad_norm is a row of its own."""
    import pandas as pd

    from robustkit.analysis.curvature import summarize

    rows = [
        {
            "run_id": f"r{i}",
            "task": "rt",
            "method": "houlsby",
            "seed": seed,
            "lr": 1e-4,
            "max_grad_norm": norm,
            "checkpoint": "last",
            "scope": "all",
            "group": "all",
            "estimator": "trace",
            "value": value,
            "converged": True,
        }
        for i, (seed, norm, value) in enumerate([(0, 1.0, 2.0), (1, 1.0, 4.0), (0, 0.5, 10.0)])
    ]
    summary = summarize(pd.DataFrame(rows)).set_index("max_grad_norm")
    assert summary.loc[1.0, "mean"] == 3.0 and summary.loc[1.0, "runs"] == 2
    assert summary.loc[0.5, "mean"] == 10.0 and summary.loc[0.5, "runs"] == 1
