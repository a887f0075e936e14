"""robustkit on a CUDA GPU: training, every analysis that loads weights, PWWS, bf16.

Every test here is marked ``gpu``: skipped (with the reason) where torch sees no CUDA device; run
them on a GPU machine with ``pytest -m gpu`` (``bench/gpu_check.sh`` does, offline). The runs are
bert-tiny on the embedded ``rt`` data, a few steps each.

Tolerances, CUDA vs CPU on the same checkpoints: every float result within ``rtol=1e-4,
atol=1e-6`` (curvature: ``rtol=1e-3, atol=1e-5``: its eigenvalues after 5 power-iteration
products and its Hutchinson traces amplify rounding); measured on an H100 before these tests
existed: <= 5e-8 relative (curvature 3e-5). Non-float columns (layers, spans, checkpoints) equal. PWWS: identical
adversarial texts, success,
queries and modified words (its decisions are certified; robustkit.attacks.pwws).
"""

from __future__ import annotations

import dataclasses
import math
import shutil

import numpy as np
import pandas as pd
import pytest

from robustkit.specs.spec import RunSpec

pytestmark = pytest.mark.gpu

BASE = RunSpec(
    model="bert-tiny", task="rt", train_size=64, epochs=1, batch_size=16, max_length=32, adapter_size=16, eval_every=2
)
METHODS = ("full", "houlsby", "lora")
TOLERANCE = {"rtol": 1e-4, "atol": 1e-6}
CURVATURE_TOLERANCE = {"rtol": 1e-3, "atol": 1e-5}
# One cheap setting of each analysis that loads weights (their defaults take minutes per run).
ANALYSES = {
    "rsa": {"tokens": 300},
    "similarity-ci": {"tokens": 300, "groups": 4, "resamples": 20},
    "ablation": {"checkpoint": "last"},
    "landscape": {"alphas": "-1:1:5", "checkpoint": "last"},
    # tol 1e-12: every power iteration runs its 5 products on both devices (a stop at a borderline
    # relative change could differ by one), so the 5th iterates are compared
    "curvature": {"checkpoints": ["step-0", "last"], "examples": 8, "max_iterations": 5, "tol": 1e-12, "samples": 4},
    "surface": {"grid": "-1:1:3", "examples": 32, "checkpoint": "last"},
    "connectivity": {"alphas": "0:1:3", "examples": 32, "checkpoint": "last"},
}


@pytest.fixture(scope="module", autouse=True)
def _cpu_threads():
    """The CPU side of the comparisons on the GPU machine's cores (conftest sets one thread)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(8)
    yield
    torch.set_num_threads(before)


def _train(spec: RunSpec, store, device: str):
    from robustkit.train import train

    return train(spec, store, progress=False, device=device)


def _first_loss(run_dir) -> float:
    history = pd.read_parquet(run_dir / "history.parquet")
    return float(
        history[(history["split"] == "train") & (history["metric"] == "loss")].sort_values("step")["value"].iloc[0]
    )


@pytest.fixture(scope="module")
def cuda_store(tmp_path_factory):
    """full, houlsby and lora (seed 0) and full seed 1 (a connectivity pair), trained on CUDA."""
    store = tmp_path_factory.mktemp("gpu") / "runs"
    specs = [dataclasses.replace(BASE, method=m) for m in METHODS] + [dataclasses.replace(BASE, method="full", seed=1)]
    return store, [_train(spec, store, "cuda") for spec in specs]


def test_training_on_cuda(cuda_store, tmp_path):
    """Each method trains on CUDA (the manifest says where) from the CPU's theta_0 (initialised on
    the CPU, then moved: step-0 is the same bytes) on the same batches. Its first loss is near the
    CPU's, not equal: CUDA draws dropout masks from its own generator (Philox), so even step 1
    differs (measured on an H100: 0.6896 vs 0.6812 for full fine-tuning of bert-tiny)."""
    from robustkit.store.manifest import read_manifest

    store, runs = cuda_store
    for run_dir, method in zip(runs, METHODS):
        manifest = read_manifest(run_dir)
        assert manifest["status"] == "complete" and manifest["device"].startswith("cuda"), run_dir.name
        assert all(
            math.isfinite(v)
            for split in manifest["final"]["last"].values()
            for v in split.values()
            if isinstance(v, float)
        )
        cpu = _train(dataclasses.replace(BASE, method=method), tmp_path / "cpu", "cpu")
        assert cpu.name == run_dir.name  # the device is not part of the run's identity
        assert (
            read_manifest(run_dir)["checkpoints"]["step-0"]["files"]
            == read_manifest(cpu)["checkpoints"]["step-0"]["files"]
        )
        assert _first_loss(run_dir) == pytest.approx(_first_loss(cpu), rel=0.05), method


def _compare(name: str, cpu: pd.DataFrame, cuda: pd.DataFrame) -> None:
    keys = [c for c in cpu.columns if not pd.api.types.is_float_dtype(cpu[c]) and c not in ("seconds", "path")]
    cpu, cuda = (f.sort_values(keys, kind="stable").reset_index(drop=True) for f in (cpu, cuda))
    assert len(cpu) == len(cuda) > 0, name
    pd.testing.assert_frame_equal(cpu[keys], cuda[keys], obj=name)
    tolerance = CURVATURE_TOLERANCE if name == "curvature" else TOLERANCE
    for column in (c for c in cpu.columns if pd.api.types.is_float_dtype(cpu[c])):
        a, b = cpu[column].to_numpy(), cuda[column].to_numpy()
        assert np.allclose(a, b, equal_nan=True, **tolerance), (name, column, np.nanmax(np.abs(a - b)))


@pytest.mark.parametrize("name", sorted(ANALYSES))
def test_analysis_on_cuda_agrees_with_cpu(cuda_store, tmp_path, name):
    """The same checkpoints, computed once per device in two copies of the store (the device is not
    in the cache key: one store would return the first result twice); provenance names each."""
    from robustkit.analysis.registry import get

    store, _ = cuda_store
    frames = {}
    for device in ("cpu", "cuda"):
        copy = tmp_path / device
        shutil.copytree(store, copy, ignore=shutil.ignore_patterns(".cache"))
        frames[device] = get(name).run(copy, device=device, progress=False, **ANALYSES[name])
        assert {r["device"].split(":")[0] for r in frames[device].attrs["provenance"].values()} == {device}
    _compare(name, frames["cpu"], frames["cuda"])


def test_pwws_on_cuda_equals_pwws_on_cpu(cuda_store, tmp_path, shared_nltk_data, monkeypatch):
    """robustkit's fast engine (certified float32 screening, float64 decisions) on CUDA's kernels
    gives the CPU's adversarial texts, success, queries and modified words."""
    import nltk

    from robustkit.analysis.registry import get

    monkeypatch.setenv("NLTK_DATA", shared_nltk_data)
    monkeypatch.setattr(nltk.data, "path", list(nltk.data.path))
    store, _ = cuda_store
    frames = {}
    for device in ("cpu", "cuda"):
        copy = tmp_path / device
        shutil.copytree(store, copy, ignore=shutil.ignore_patterns(".cache"))
        frames[device] = (
            get("attack")
            .run(copy, ["method=full,houlsby", "seed=0"], n=10, checkpoint="last", device=device, progress=False)
            .sort_values(["run_id", "example"])
            .reset_index(drop=True)
        )
    same = ["run_id", "example", "prediction", "adversarial", "success", "queries", "modified_words", "words"]
    assert len(frames["cpu"]) == 20
    pd.testing.assert_frame_equal(frames["cpu"][same], frames["cuda"][same])


def test_bf16_trains_on_cuda_as_a_run_of_its_own(cuda_store, tmp_path):
    from robustkit.store.manifest import read_manifest

    store, runs = cuda_store
    bf16 = _train(dataclasses.replace(BASE, method="full", precision="bf16"), store, "cuda")
    assert bf16.name != runs[0].name
    manifest = read_manifest(bf16)
    assert manifest["status"] == "complete" and manifest["spec"]["precision"] == "bf16"
    # bfloat16 products round to ~3 significant digits: the first loss moves, a little
    assert _first_loss(bf16) == pytest.approx(_first_loss(runs[0]), abs=2e-2)
    assert _first_loss(bf16) != _first_loss(runs[0])
