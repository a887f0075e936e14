"""bf16 autocast (robustkit.models.precision): part of a run's identity, applied to every forward pass of
the run's model, weights and outputs float32. Here on the CPU; on CUDA in tests/test_gpu.py."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from conftest import TINY_RTE

from robustkit.models.precision import autocast_forward
from robustkit.specs.spec import RunSpec, SpecError
from robustkit.train.run_model import build_classifier, load_run


def test_precision_is_part_of_the_id_and_fp32_keeps_the_old_ones():
    assert RunSpec().run_id == "rt-houlsby-minilm-l6-s0-tsp0-605128a5"  # as before the field existed
    assert RunSpec(precision="fp32").run_id == RunSpec().run_id
    assert RunSpec(precision="bf16").run_id != RunSpec().run_id
    bf16 = RunSpec(precision="bf16", tsp_step=100).resolved()
    assert bf16.tsp_spec().precision == "bf16" and bf16.tsp_spec().run_id != RunSpec(tsp_step=100).tsp_spec().run_id
    with pytest.raises(SpecError, match="precision must be one of fp32, bf16, got 'fp16'"):
        RunSpec(precision="fp16").resolved()


def _inputs() -> dict:
    return {
        "input_ids": torch.tensor([[101, 2023, 3185, 2001, 2307, 102]]),
        "attention_mask": torch.ones(1, 6, dtype=torch.long),
        "labels": torch.tensor([1]),
    }


def test_bf16_autocasts_every_forward_and_returns_float32():
    spec = RunSpec(model="bert-tiny", task="rt", method="full")
    fp32, _, _ = build_classifier(spec, 2)
    bf16, _, _ = build_classifier(dataclasses.replace(spec, precision="bf16"), 2)
    assert not fp32._forward_pre_hooks and bf16._forward_pre_hooks  # fp32 models are left as they are
    seen = []
    bf16.bert.encoder.layer[0].attention.self.query.register_forward_hook(lambda m, a, out: seen.append(out.dtype))
    with torch.no_grad():
        a, b = fp32(**_inputs(), output_hidden_states=True), bf16(**_inputs(), output_hidden_states=True)
    assert seen == [torch.bfloat16]  # the products ran in bfloat16
    assert b.logits.dtype == b.loss.dtype == b.hidden_states[-1].dtype == torch.float32
    assert not torch.equal(a.logits, b.logits) and torch.allclose(a.logits, b.logits, atol=0.05)
    assert all(p.dtype == torch.float32 for p in bf16.parameters())
    twin = copy.deepcopy(bf16)  # the attacks' screening twin: a copy keeps its autocast
    with torch.no_grad():
        assert torch.equal(twin(**_inputs()).logits, b.logits)
        # autocast leaves float64 alone: the attacks' float64 victim of a bf16 run is exact
        double = copy.deepcopy(bf16).double()
        assert double(**{k: v for k, v in _inputs().items()}).logits.dtype == torch.float64
        assert torch.allclose(double(**_inputs()).logits.float(), a.logits, atol=1e-5)
    assert autocast_forward(bf16, "bf16") is bf16 and len(bf16._forward_pre_hooks) == 1  # once
    with pytest.raises(ValueError, match="unknown precision 'half'"):
        autocast_forward(fp32, "half")


def test_a_bf16_run_trains_as_a_run_of_its_own(tmp_path, rte_folder):
    from robustkit.store.manifest import read_manifest
    from robustkit.train import train

    glue = rte_folder(tmp_path / "glue")
    base = dataclasses.replace(TINY_RTE, method="full", epochs=1, data_dir=str(glue))
    runs = [train(dataclasses.replace(base, precision=p), tmp_path / "runs", progress=False) for p in ("fp32", "bf16")]
    assert runs[0].name != runs[1].name
    manifests = [read_manifest(r) for r in runs]
    assert [m["status"] for m in manifests] == ["complete", "complete"]
    assert manifests[1]["spec"]["precision"] == "bf16"
    assert manifests[0]["final"] != manifests[1]["final"]  # another computation, other numbers
    loaded = load_run(runs[1], "last", "cpu")
    assert loaded.spec.precision == "bf16" and loaded.model._forward_pre_hooks  # the analyses autocast it too
