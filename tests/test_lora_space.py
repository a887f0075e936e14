"""Flat-LoRA (Li et al. 2024; issue #30, item 3): sharpness over the LoRA factors and over the
merged matrices, on a toy quadratic whose full-space eigenvalues are known (the diagonal D) and
whose LoRA-space Hessian J^T D J is formed directly, and the analysis on bert-tiny LoRA runs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from robustkit import figures
from robustkit.analysis import lora_space
from robustkit.analysis.registry import get, per_run
from robustkit.figures.style import save_pdf
from robustkit.methods.base import ADAPTER_NAME
from robustkit.specs.spec import RunSpec
from robustkit.train.run_model import build_classifier


def _lora_model(seed: int = 0):
    """bert-tiny with LoRA r = 1 on the query matrices (2 layers: 512 factor entries), B drawn
    nonzero so that both factors' directions move W."""
    model, _, _ = build_classifier(
        RunSpec(model="bert-tiny", task="rt", method="lora", seed=seed, method_options={"r": 1, "matrices": "q"}), 2
    )
    generator = torch.Generator().manual_seed(seed)
    modules = {n: m for n, m in model.named_modules() if hasattr(m, "loras") and ADAPTER_NAME in m.loras}
    with torch.no_grad():
        for module in modules.values():
            lora = module.loras[ADAPTER_NAME]
            lora.lora_B.copy_(torch.randn(lora.lora_B.shape, generator=generator) * 0.5)
    return model.eval(), modules


def _effective(module):
    lora = module.loras[ADAPTER_NAME]
    return module.weight if module.merged else module.weight + lora.scaling * lora.lora_B @ lora.lora_A


def test_the_two_spaces_of_a_toy_quadratic_match_their_closed_forms():
    model, modules = _lora_model()
    target = {n: _effective(m).detach().clone() for n, m in modules.items()}  # the minimum: gradient 0
    generator = torch.Generator().manual_seed(1)
    curvature = {
        n: torch.rand(t.shape, generator=generator, dtype=torch.float64).float() + 0.1 for n, t in target.items()
    }
    curvature["bert.encoder.layer.1.attention.self.query"][3, 5] = 4.0  # the top eigenvalue in full space

    def loss(model, inputs):  # 0.5 sum D (W - W*)^2 of the effective matrices, however they are held
        return sum(0.5 * (curvature[n] * (_effective(m) - target[n]) ** 2).sum() for n, m in modules.items())

    batch = {"labels": torch.zeros(1, dtype=torch.long)}
    frame = lora_space.two_spaces(model, batch, max_iterations=200, samples=40, seed=0, tol=1e-7, loss=loss)
    values = frame.set_index(["space", "estimator"])
    # full space: H = diag(D): top eigenvalue max D, trace sum D (Hutchinson is exact for a diagonal H)
    assert values.loc[("full", "top_eigenvalue"), "value"] == pytest.approx(4.0, rel=1e-4)
    total = sum(float(d.double().sum()) for d in curvature.values())
    assert values.loc[("full", "trace"), "value"] == pytest.approx(total, rel=1e-5)
    assert values.loc[("full", "trace"), "n_params"] == sum(d.numel() for d in curvature.values())
    # LoRA space: the Hessian of the same loss as a function of the factors, formed entry by entry
    factors = [(n, m.loras[ADAPTER_NAME]) for n, m in modules.items()]
    flat = torch.cat(
        [torch.cat([lora.lora_A.detach().flatten(), lora.lora_B.detach().flatten()]) for _, lora in factors]
    ).double()

    def as_factors(theta):
        total, at = 0.0, 0
        for name, lora in factors:
            a_size, b_size = lora.lora_A.numel(), lora.lora_B.numel()
            a = theta[at : at + a_size].view(lora.lora_A.shape)
            b = theta[at + a_size : at + a_size + b_size].view(lora.lora_B.shape)
            at += a_size + b_size
            w = modules[name].weight.double() + lora.scaling * b @ a
            total = total + 0.5 * (curvature[name].double() * (w - target[name].double()) ** 2).sum()
        return total

    hessian = torch.autograd.functional.hessian(as_factors, flat).numpy()
    eigenvalues = np.linalg.eigvalsh(hessian)
    assert values.loc[("lora", "top_eigenvalue"), "value"] == pytest.approx(eigenvalues.max(), rel=1e-3)
    trace = values.loc[("lora", "trace")]
    assert abs(trace["value"] - np.trace(hessian)) <= 4 * trace["spread"] + 1e-6 * abs(np.trace(hessian))
    assert values.loc[("lora", "top_eigenvalue"), "n_params"] == flat.numel() == 512
    assert all(m.merged for m in modules.values())  # the full space was measured merged


def test_factor_names_are_loras_own():
    model, _ = _lora_model()
    names = lora_space.factor_names(model)
    assert sorted(names) == [f"bert.encoder.layer.{i}.attention.self.query.weight" for i in (0, 1)]
    assert all(len(v) == 2 and v[0].endswith("lora_A") for v in names.values())
    ia3, _, _ = build_classifier(RunSpec(model="bert-tiny", task="rt", method="ia3", seed=0), 2)
    assert lora_space.factor_names(ia3) == {}  # a rescaling is no low-rank factorisation


def test_lora_sharpness_of_runs_statistic_and_figure(lora_store, tmp_path, monkeypatch):
    options = {"examples": 8, "max_iterations": 5, "samples": 3}
    with pytest.warns(UserWarning, match="no LoRA factors"):
        frame = get("lora-sharpness").run(lora_store, progress=False, **options)
    assert set(frame["method"]) == {"lora"} and len(frame) == 2 * 2 * 2  # runs x spaces x estimators
    assert frame["seed"].dtype.kind == "i"  # the left-out runs do not turn identity columns to float
    wide = frame[frame["estimator"] == "top_eigenvalue"].pivot_table(index="run_id", columns="space", values="value")
    claimed = per_run("lora-sharpness.full-over-lora", lora_store, ["method=lora"], **options).set_index("run_id")[
        "value"
    ]
    assert claimed.to_dict() == pytest.approx(np.log10(wide["full"] / wide["lora"]).to_dict())
    per = lora_space.log_ratio(frame, "trace_per_parameter").set_index("run_id")["value"]
    traces = frame[frame["estimator"] == "trace"].set_index(["run_id", "space"])
    for run_id, value in per.items():
        full, lora = traces.loc[(run_id, "full")], traces.loc[(run_id, "lora")]
        assert value == pytest.approx(
            math.log10((full["value"] / full["n_params"]) / (lora["value"] / lora["n_params"]))
        )
    assert (
        save_pdf(figures.draw("lora-sharpness", lora_store, ["method=lora"], **options), tmp_path / "f.pdf")
        .stat()
        .st_size
    )
    monkeypatch.setattr(lora_space, "run_sharpness", lambda *a, **k: pytest.fail("recomputed"))
    pd.testing.assert_frame_equal(
        get("lora-sharpness").run(lora_store, ["method=lora"], progress=False, **options), frame
    )
