"""Intruder dimensions (Shuttleworth et al. 2024; issue #30, item 1): the measure against a planted
rotation whose count is known in closed form, the merged matrices of a LoRA run against
W_0 + (alpha / r) B A by hand, and the analysis, statistic and figure on bert-tiny runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.linalg import hadamard

from robustkit import figures
from robustkit.analysis import intruders, weights
from robustkit.analysis.registry import get, per_run
from robustkit.figures.style import save_pdf
from robustkit.measures.intruders import intruder_count, max_cosines
from robustkit.store.folders import run_dirs
from robustkit.store.manifest import read_spec
from robustkit.train.run_model import load_run


def _planted(d: int = 32, block=(0, 3, 20, 21, 22, 23, 24, 25), seed: int = 0):
    """W_0 = U diag(s) V^T and W = U Q diag(s) V^T, Q the identity but for a normalised 8x8
    Hadamard block on the columns ``block``: the tuned singular vectors are the columns of U Q,
    so the cosine of tuned vector j with base vector i is Q_ij and each column of the block has
    max |cos| = 1/sqrt(8) ~ 0.354, the others 1."""
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.standard_normal((d, d)))
    v, _ = np.linalg.qr(rng.standard_normal((d, d)))
    s = np.linspace(10.0, 1.0, d)  # distinct, so every singular vector is defined up to sign
    q = np.eye(d)
    q[np.ix_(block, block)] = hadamard(len(block)) / np.sqrt(len(block))
    return u @ np.diag(s) @ v.T, (u @ q) @ np.diag(s) @ v.T, s


def test_a_planted_rotation_gives_its_closed_form_count():
    base, tuned, s = _planted()
    values, cosines = max_cosines(tuned, base, k=10)
    np.testing.assert_allclose(values, s[:10], rtol=1e-10)  # Q is orthogonal: the same singular values
    expected = np.ones(10)
    expected[[0, 3]] = 1 / np.sqrt(8)  # the block's columns among the top 10
    np.testing.assert_allclose(cosines, expected, atol=1e-10)
    assert (
        intruder_count(cosines, 0.5) == 2 and intruder_count(cosines, 0.3) == 0 and intruder_count(cosines, 0.99) == 2
    )
    assert intruder_count(max_cosines(tuned, base, k=32)[1], 0.5) == 8  # every column of the block
    assert intruder_count(max_cosines(base, base, k=10)[1], 0.5) == 0  # nothing changed
    assert intruder_count(max_cosines(-tuned, base, k=10)[1], 0.5) == 2  # blind to the sign


def test_bad_inputs_are_errors():
    base, tuned, _ = _planted()
    with pytest.raises(ValueError, match="one shape"):
        max_cosines(tuned[:, :5], base, 3)
    with pytest.raises(ValueError, match="k must be"):
        max_cosines(tuned, base, 33)
    with pytest.raises(ValueError, match="epsilon"):
        intruder_count([0.2], 0.0)


def _run(store, method, seed=0):
    return next(p for p in run_dirs(store) if read_spec(p).method == method and read_spec(p).seed == seed)


def test_a_lora_runs_matrices_are_its_update_merged_by_hand(lora_store):
    run_dir = _run(lora_store, "lora")
    loaded = load_run(run_dir, "last", "cpu")
    scale = loaded.spec.resolved().method_options
    options = dict(scale)
    factor = options["alpha"] / options["r"]
    pretrained = {n: p.detach().clone() for n, p in load_run(run_dir, "step-0", "cpu").model.named_parameters()}
    matrices = weights.layer_matrices(loaded.model)
    assert {m.kind for m in matrices.values()} == {"q", "k", "v", "attention-output", "intermediate", "output"}
    assert not any(".loras." in name or ".adapters." in name for name in matrices)
    merged = weights.effective_matrices(loaded)
    name = "bert.encoder.layer.1.attention.self.value.weight"
    a = loaded.tensors["bert.encoder.layer.1.attention.self.value.loras.task.lora_A"]
    b = loaded.tensors["bert.encoder.layer.1.attention.self.value.loras.task.lora_B"]
    assert b.abs().max() > 0  # the run moved its update
    torch.testing.assert_close(merged[name], pretrained[name] + factor * b @ a, rtol=1e-6, atol=1e-7)
    key = "bert.encoder.layer.1.attention.self.key.weight"
    assert torch.equal(merged[key], pretrained[key])  # LoRA left the key alone


def test_intruders_of_runs_statistic_and_figure(lora_store, tmp_path, monkeypatch):
    with pytest.warns(UserWarning, match="changed no weight matrix"):
        frame = get("intruders").run(lora_store, progress=False)
    assert set(frame["method"]) == {"full", "lora"}  # the adapter run has nothing to measure
    lora = frame[frame["method"] == "lora"]
    assert set(lora.loc[lora["changed"], "kind"]) == {"q", "v"}
    untouched = lora[~lora["changed"]]
    assert (untouched["max_cosine"] > 1 - 1e-6).all()  # the start's own singular vectors
    assert frame.groupby(["run_id", "layer", "matrix"])["rank"].max().eq(10).all()
    # the statistic is the count of the frame's cosines below epsilon over q and v
    claimed = per_run("intruders.count", lora_store, ["method=full,lora"], epsilon=0.9999999).set_index("run_id")[
        "value"
    ]
    direct = (
        frame[frame["kind"].isin(["q", "v"])]
        .groupby("run_id")["max_cosine"]
        .apply(lambda c: int((c < 0.9999999).sum()))
    )
    assert claimed.to_dict() == direct.to_dict() and direct.sum() > 0  # the runs moved a little
    assert intruders.count(frame, 0.5, "all")["value"].tolist() == [0] * frame["run_id"].nunique()
    with pytest.raises(Exception, match="no matrices of kind"):
        intruders.count(frame, 0.5, "qq")
    summary = get("intruders").summarize(frame)
    assert set(summary.columns) >= {"matrices", "epsilon=0.5"} and summary["matrices"].tolist() == [12, 12, 4, 4]
    fig = figures.draw("intruders", lora_store, ["method=full,lora"])
    assert save_pdf(fig, tmp_path / "intruders.pdf").stat().st_size > 0
    monkeypatch.setattr(intruders, "run_intruders", lambda *a, **k: pytest.fail("recomputed"))
    pd.testing.assert_frame_equal(
        get("intruders").run(lora_store, ["method=full,lora"], progress=False).reset_index(drop=True),
        frame[frame["method"] != "houlsby"].reset_index(drop=True),
    )


def test_no_run_with_an_updated_matrix_is_an_error(lora_store):
    with pytest.warns(UserWarning), pytest.raises(Exception, match="no selected run changed a weight matrix"):
        get("intruders").run(lora_store, ["method=houlsby"], progress=False)


def test_the_figure_never_pools_two_ranks_of_lora():
    """beyond/intruders draws LoRA at r = 8 and r = 64: one legend entry (and line style) each, with n."""
    from robustkit.figures.intruders import intruders_figure
    from robustkit.figures.style import figure_texts

    rows, cosines = [], []
    for method, rank, runs in (("full", None, 2), ("lora", 8.0, 3), ("lora", 64.0, 2)):
        for seed in range(runs):
            run = f"{method}-{rank}-{seed}"
            ident = {"run_id": run, "method": method, "seed": seed, "lora.r": rank, "lora.alpha": rank}
            rows += [{**ident, "epsilon": e, "value": int(10 * e)} for e in (0.1, 0.5, 0.9)]
            cosines += [{**ident, "rank": r, "max_cosine": 0.9, "checkpoint": "last"} for r in (1, 2)]
    fig = intruders_figure(pd.DataFrame(rows), pd.DataFrame(cosines), "q,v", 0.5)
    text = " ".join(figure_texts(fig))
    assert "lora.r=8" in text and "lora.r=64" in text and "(n=3 runs)" in text and text.count("(n=2 runs)") == 2
