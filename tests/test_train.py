"""End-to-end training on bert-tiny: determinism, kill + resume, TSP sharing, frozen base."""

import dataclasses
import signal
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
import torch

from robustkit.data.batches import classification_collator, encode_labelled
from robustkit.errors import StoreError
from robustkit.methods import ADAPTER_NAME, houlsby_adapter_size
from robustkit.models.pretrained import load_tokenizer
from robustkit.specs.spec import RunSpec
from robustkit.store.checkpoints import load_checkpoint, save_checkpoint
from robustkit.store.manifest import read_manifest
from robustkit.train import pretrain, train
from robustkit.train.loop import _Loop
from robustkit.train.optimiser import _Optimiser
from robustkit.train.run_model import build_classifier, load_run_model


def _history(run_dir):
    return pd.read_parquet(run_dir / "history.parquet")


@pytest.mark.slow
def test_same_seed_gives_identical_metrics(tiny_spec, tmp_path):
    a = train(tiny_spec, tmp_path / "a", progress=False)
    b = train(tiny_spec, tmp_path / "b", progress=False)
    pd.testing.assert_frame_equal(_history(a), _history(b))
    pd.testing.assert_frame_equal(pd.read_parquet(a / "gradnorms.parquet"), pd.read_parquet(b / "gradnorms.parquet"))
    assert read_manifest(a)["final"] == read_manifest(b)["final"]
    other = train(dataclasses.replace(tiny_spec, seed=2), tmp_path / "a", progress=False)
    assert not _history(a)["value"].equals(_history(other)["value"])


def test_run_folder_manifest_and_checkpoints(tiny_spec, tmp_path):
    run_dir = train(tiny_spec, tmp_path, progress=False)
    manifest = read_manifest(run_dir)
    assert manifest["status"] == "complete" and manifest["kind"] == "finetune"
    assert set(manifest["checkpoints"]) == {"step-0", "best", "last"}
    assert set(manifest["trainable"]["method_check"]["adapter"]["counts"]) == {houlsby_adapter_size(128, 16)}
    assert manifest["trainable"]["count"] == sum(t.numel() for t in load_checkpoint(run_dir, "last")[0].values())
    assert {"torch", "transformers", "adapters"} <= set(manifest["versions"])
    assert "bert-tiny" in manifest["assets"] and "rt" in manifest["assets"]
    assert 0.0 <= manifest["final"]["best"]["test"]["accuracy"] <= 1.0
    grads = pd.read_parquet(run_dir / "gradnorms.parquet")
    steps = _history(run_dir).query("split == 'train'")["step"]
    assert set(grads["step"]) == set(steps)  # every step
    assert {"layer.0", "layer.1", "embeddings", "classifier"} <= set(grads["layer"])
    # adapter runs store only what trains
    saved = load_checkpoint(run_dir, "best")[0]
    assert all("adapters" in n or "LayerNorm" in n or n.startswith("classifier") for n in saved)
    # the share of the most predicted validation class, kept from the evaluations during training,
    # is what a fresh pass over each saved checkpoint gives, and is not logged as a metric
    from robustkit.data.tasks import get_task
    from robustkit.train.evaluate import evaluate, split_batches

    batches = split_batches(tiny_spec.resolved(), ["validation"])["validation"]
    for name in ("best", "last"):
        fresh = evaluate(load_run_model(run_dir, name), batches, get_task("rt"), shares=True)["top_class_share"]
        assert manifest["final"][name]["validation"]["top_class_share"] == pytest.approx(fresh, abs=1e-12), name
    assert "top_class_share" not in set(_history(run_dir)["metric"])


def test_complete_run_is_never_rerun(tiny_spec, tmp_path):
    run_dir = train(tiny_spec, tmp_path, progress=False)
    before = (run_dir / "manifest.json").stat().st_mtime_ns
    train(tiny_spec, tmp_path, progress=False)
    assert (run_dir / "manifest.json").stat().st_mtime_ns == before


KILL_AT_STEP = 5
_KILLER = textwrap.dedent(
    """
    import os, signal, sys
    import torch
    torch.set_num_threads({threads})  # the reference's thread count: reductions stay bit-identical
    from robustkit.specs.spec import RunSpec
    from robustkit.train import train
    from robustkit.train.loop import _Loop
    original = _Loop.step
    def step(self, model, batch, optimiser, factor, step, max_grad_norm):
        if step == {kill}:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, model, batch, optimiser, factor, step, max_grad_norm)
    _Loop.step = step
    train(RunSpec(**{spec}), sys.argv[1], progress=False)
    """
)


def test_a_training_call_resolves_its_spec_once_and_loads_its_data_once(tmp_path, rte_folder, monkeypatch):
    from conftest import TINY_RTE

    from robustkit.data import tasks

    calls = {"resolved": 0, "load_splits": 0}
    resolve, load = RunSpec.resolved, tasks.load_splits

    def resolved(spec):
        calls["resolved"] += 1
        return resolve(spec)

    def load_splits(*args, **kwargs):
        calls["load_splits"] += 1
        return load(*args, **kwargs)

    monkeypatch.setattr(RunSpec, "resolved", resolved)  # a resolved spec's own resolved() is not counted: it is free
    monkeypatch.setattr(tasks, "load_splits", load_splits)
    # a folder no other test checked in this process; with TSP: the data checked before training
    # is the data the TSP run and the run train on
    spec = dataclasses.replace(TINY_RTE, data_dir=str(rte_folder(tmp_path / "glue")), tsp_step=2, epochs=1)
    train(spec, tmp_path / "runs", progress=False)
    assert calls == {"resolved": 1, "load_splits": 1}


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_result(tiny_spec, tmp_path):
    reference = train(tiny_spec, tmp_path / "reference", progress=False)
    script = _KILLER.format(kill=KILL_AT_STEP, spec=repr(tiny_spec.to_dict()), threads=torch.get_num_threads())
    killed = subprocess.run([sys.executable, "-c", script, str(tmp_path / "killed")], capture_output=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
    run_dir = tmp_path / "killed" / tiny_spec.run_id
    manifest = read_manifest(run_dir)
    assert manifest["status"] == "running" and manifest["checkpoints"]["last"]["step"] == KILL_AT_STEP - 1
    resumed = train(tiny_spec, tmp_path / "killed", progress=False)
    pd.testing.assert_frame_equal(_history(resumed), _history(reference))
    pd.testing.assert_frame_equal(
        pd.read_parquet(resumed / "gradnorms.parquet"), pd.read_parquet(reference / "gradnorms.parquet")
    )
    assert read_manifest(resumed)["final"] == read_manifest(reference)["final"]


def test_adapter_training_leaves_the_frozen_base_bit_identical(tiny_spec, tiny_model):
    model, names, _ = build_classifier(tiny_spec, num_labels=2)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if n not in names}
    tokenizer = load_tokenizer(tiny_spec.model)
    features = encode_labelled([("a fine film",), ("dull and long",)] * 4, [1, 0] * 4, tokenizer, 16)
    batch = classification_collator(tokenizer)(features)
    optimiser = _Optimiser(model, lr=1e-2, weight_decay=0.1)
    trained_before = {n: p.detach().clone() for n, p in model.named_parameters() if n in names}
    loop = _Loop(run_dir=None, seed=0, progress=False)
    for step in range(1, 4):
        loop.step(model, batch, optimiser, 1.0, step, 1.0)
    for name, parameter in model.named_parameters():
        if name in frozen:
            assert torch.equal(parameter, frozen[name]), name
    assert any(not torch.equal(p, trained_before[n]) for n, p in model.named_parameters() if n in names)


def test_removing_no_adapter_changes_no_output(tiny_spec, tmp_path):
    run_dir = train(tiny_spec, tmp_path, progress=False)
    model = load_run_model(run_dir, "best")
    ids = torch.tensor([[101, 2023, 3185, 2003, 2307, 102]])
    with torch.no_grad():
        adapted = model(input_ids=ids).logits
        model.set_active_adapters(ADAPTER_NAME, skip_layers=[])
        assert torch.equal(model(input_ids=ids).logits, adapted)


def test_checkpoint_from_another_base_model_is_refused(tiny_spec, tmp_path):
    run_dir = train(tiny_spec, tmp_path, progress=False)
    manifest = read_manifest(run_dir)
    tensors, meta = load_checkpoint(run_dir, "best")
    meta["base_fingerprint"] = "0" * 64
    save_checkpoint(run_dir, "best", tensors, meta, manifest["checkpoints"]["best"]["step"])
    with pytest.raises(StoreError, match="not the model it is being loaded onto"):
        load_run_model(run_dir, "best")


@pytest.mark.slow
def test_one_tsp_run_serves_every_tsp_step_and_extends_exactly(tiny_spec, tmp_path):
    tsp = dataclasses.replace(tiny_spec, tsp_step=4).tsp_spec()
    first = pretrain(tsp, [0, 2, 4], tmp_path / "a", progress=False)
    assert set(read_manifest(first)["checkpoints"]) == {"tsp-2", "tsp-4", "last"}
    extended = pretrain(tsp, [6], tmp_path / "a", progress=False)
    assert extended == first and {"tsp-2", "tsp-4", "tsp-6"} <= set(read_manifest(first)["checkpoints"])
    straight = pretrain(tsp, [6], tmp_path / "b", progress=False)
    for name in ("tsp-6",):
        a, _ = load_checkpoint(first, name)
        b, _ = load_checkpoint(straight, name)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # supervised runs from two TSP steps reuse the one TSP run
    for step in (2, 4):
        run_dir = train(dataclasses.replace(tiny_spec, tsp_step=step), tmp_path / "a", progress=False)
        assert read_manifest(run_dir)["tsp_run"] == first.name
    assert len([d for d in (tmp_path / "a").iterdir() if d.name.startswith("tsp-")]) == 1
    # the adapters of step-0 are the TSP adapters, not a fresh init
    tsp_tensors, _ = load_checkpoint(first, "tsp-4")
    start, _ = load_checkpoint(tmp_path / "a" / dataclasses.replace(tiny_spec, tsp_step=4).run_id, "step-0")
    adapter = next(n for n in start if ".adapters." in n)
    assert torch.equal(start[adapter], tsp_tensors[adapter])


def test_local_model_folder_and_local_glue_tsv(tiny_model, tmp_path, rte_folder):
    """The non-embedded path: --model as a folder, a GLUE task from --data-dir TSV files."""
    rte_folder(tmp_path / "glue", train=24, dev=8)
    spec = RunSpec(
        model=tiny_model,
        task="rte",
        method="full",
        epochs=1,
        batch_size=8,
        max_length=32,
        data_dir=str(tmp_path / "glue"),
    )
    run_dir = train(spec, tmp_path / "runs", progress=False)
    manifest = read_manifest(run_dir)
    assert manifest["status"] == "complete" and manifest["splits"] == {"train": 24, "validation": 8, "test": 8}
