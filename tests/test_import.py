"""``robustkit import`` (issue #14 item 6): a fine-tuned transformers folder, an AdapterHub adapter
folder and a Trainer checkpoint series, each saved by the test itself with transformers /
adapters, become runs that every analysis accepts, with the source's sha256 in the manifest and
what is unknown recorded as unknown."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch
from conftest import write_rte

from robustkit.analysis.pooling import PoolingError
from robustkit.analysis.registry import get as analysis

BASE = "bert-tiny"


@pytest.fixture(scope="module")
def glue(tmp_path_factory):
    return str(write_rte(tmp_path_factory.mktemp("import-glue"), train=16, dev=8))


def _inputs():
    from robustkit.models.pretrained import load_tokenizer

    return load_tokenizer(BASE)(["A man plays a guitar.", "The sky is green today."], return_tensors="pt", padding=True)


def _tuned_full(seed: int):
    """bert-tiny with a 2-class head, every weight moved a little: a stand-in fine-tuned model."""
    from robustkit.models.pretrained import load_classifier

    model = load_classifier(BASE, 2, seed=seed)
    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.02 * torch.randn_like(parameter))
    return model.eval()


def _logits(model, inputs):
    with torch.no_grad():
        return model(**inputs).logits


def test_full_model_folder(tmp_path, glue):
    from robustkit.models.pretrained import load_classifier
    from robustkit.store.atomic import sha256_file
    from robustkit.store.checkpoints import checkpoint_problems
    from robustkit.store.manifest import read_manifest
    from robustkit.store.tables import load_runs
    from robustkit.train.importing import import_run
    from robustkit.train.run_model import load_run_model

    tuned = _tuned_full(3)
    tuned.save_pretrained(tmp_path / "tuned")
    run_dir = import_run(tmp_path / "tuned", BASE, "rte", tmp_path / "runs", known={"seed": 3}, data_dir=glue)

    inputs = _inputs()
    assert torch.allclose(_logits(load_run_model(run_dir, "best"), inputs), _logits(tuned, inputs), atol=1e-6)
    assert torch.allclose(_logits(load_run_model(run_dir, "last"), inputs), _logits(tuned, inputs), atol=1e-6)
    # theta_0 is the base: its encoder is the pretrained one, not the tuned one
    base, start = load_classifier(BASE, 2, seed=0), load_run_model(run_dir, "step-0")
    assert torch.equal(base.bert.encoder.layer[0].output.dense.weight, start.bert.encoder.layer[0].output.dense.weight)

    manifest = read_manifest(run_dir)
    files = manifest["import"]["files"]["."]
    assert files["model.safetensors"] == sha256_file(tmp_path / "tuned" / "model.safetensors")
    assert manifest["import"]["source"] == str((tmp_path / "tuned").resolve())
    assert manifest["spec"]["seed"] == 3 and manifest["spec"]["lr"] is None and "lr" in manifest["unknown"]
    assert not checkpoint_problems(run_dir)

    runs = load_runs(tmp_path / "runs")
    row = runs.iloc[0]
    assert row["method"] == "full" and row["status"] == "complete" and row["seed"] == 3
    assert math.isnan(row["lr"]) and math.isnan(row["epochs"]) and row["imported_from"] == manifest["import"]["source"]
    assert row["outcome/best/test"] in ("ok", "collapsed") and 0 <= row["best/test/accuracy"] <= 1

    # the same files again: the same run, not a second one
    assert import_run(tmp_path / "tuned", BASE, "rte", tmp_path / "runs", known={"seed": 3}, data_dir=glue) == run_dir
    assert len(load_runs(tmp_path / "runs")) == 1


def test_adapter_folder(tmp_path, glue):
    """A LoRA adapter saved by AdapterHub's save_adapter (with its head) on the base."""
    import adapters

    from robustkit.models.pretrained import load_classifier
    from robustkit.store.manifest import read_manifest
    from robustkit.store.tables import load_runs
    from robustkit.train.importing import import_run
    from robustkit.train.run_model import load_run_model

    model = load_classifier(BASE, 2, seed=1)
    adapters.init(model)
    model.add_adapter("mine", config="lora[r=4,alpha=8]")
    model.train_adapter("mine")
    torch.manual_seed(1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn_like(parameter))
    model.eval()
    model.save_adapter(str(tmp_path / "adapter"), "mine")
    # seed 1: bert-tiny's checkpoint has no pooler, which transformers initialises from the seed
    run_dir = import_run(tmp_path / "adapter", BASE, "rte", tmp_path / "runs", known={"seed": 1}, data_dir=glue)

    inputs = _inputs()
    assert torch.allclose(_logits(load_run_model(run_dir, "best"), inputs), _logits(model, inputs), atol=1e-6)
    manifest = read_manifest(run_dir)
    # AdapterHub's LoRA config is robustkit's lora with its options, comparable with runs trained here
    assert manifest["spec"]["method"] == "lora"
    assert dict(map(tuple, manifest["spec"]["method_options"])) == {
        "r": 4,
        "alpha": 8,
        "dropout": 0.0,
        "matrices": "q,v",
    }
    lora = sum(p.numel() for n, p in model.named_parameters() if ".loras." in n)
    head = sum(p.numel() for n, p in model.named_parameters() if n.startswith("classifier."))
    assert manifest["trainable"]["count"] == lora + head
    assert set(manifest["import"]["files"]["."]) >= {
        "adapter_config.json",
        "pytorch_adapter.bin",
        "pytorch_model_head.bin",
    }
    row = load_runs(tmp_path / "runs").iloc[0]
    assert row["method"] == "lora" and row["lora.r"] == 4 and row["seed"] == 1 and math.isnan(row["lr"])
    assert row["trainable_params"] == lora + head and row["import_id"] == f"adapter #{run_dir.name.rsplit('-', 1)[-1]}"


def test_checkpoint_series_and_every_analysis(tmp_path, glue):
    """A Trainer-style series (checkpoint-2/, checkpoint-4/): one checkpoint per step, ``last`` the
    final one, ``best`` chosen on validation; then the analyses on imported runs."""
    from robustkit.analysis import scores, stability
    from robustkit.store.manifest import read_manifest
    from robustkit.store.tables import load_history, load_runs
    from robustkit.train.importing import import_run

    for step, seed in ((2, 5), (4, 6)):
        _tuned_full(seed).save_pretrained(tmp_path / "trainer" / f"checkpoint-{step}")
    (tmp_path / "trainer" / "runs").mkdir()  # a Trainer's other folders are not checkpoints
    run_dir = import_run(tmp_path / "trainer", BASE, "rte", tmp_path / "runs", data_dir=glue)
    manifest = read_manifest(run_dir)
    assert {"step-0", "step-2", "step-4", "best", "last"} == set(manifest["checkpoints"])
    assert manifest["checkpoints"]["last"]["step"] == 4 and manifest["best_step"] in (2, 4)
    assert set(manifest["import"]["files"]) == {"checkpoint-2", "checkpoint-4"}
    history = load_history(tmp_path / "runs")
    assert sorted(set(history["step"])) == [2, 4] and set(history["split"]) == {"validation"}

    _tuned_full(7).save_pretrained(tmp_path / "other")
    import_run(tmp_path / "other", BASE, "rte", tmp_path / "runs", known={"seed": 7}, data_dir=glue)
    assert len(load_runs(tmp_path / "runs")) == 2
    store = tmp_path / "runs"
    assert len(set(analysis("rsa").run(store, tokens=40, progress=False)["run_id"])) == 2
    assert len(set(analysis("landscape").run(store, alphas=[0.0, 1.0], progress=False)["run_id"])) == 2
    outcomes = scores.outcomes(store, checkpoint="best", split="test", metric=None)
    assert len(outcomes) == 2
    # two full imports, one of unknown seed: two different runs, never one box
    with pytest.raises(PoolingError, match="import_id"):
        stability.summarize(outcomes, by="method")
    summary = stability.summarize(outcomes, by="import_id")
    assert len(summary) == 2 and (summary["n"] + summary["n_failed"]).tolist() == [1, 1]


def test_refused_sources(tmp_path, glue):
    import adapters

    from robustkit.models.pretrained import load_classifier
    from robustkit.train.importing import ImportError_, import_run

    (tmp_path / "empty").mkdir()
    with pytest.raises(ImportError_, match="no model to import"):
        import_run(tmp_path / "empty", BASE, "rte", tmp_path / "runs", data_dir=glue)
    model = load_classifier(BASE, 2, seed=0)
    adapters.init(model)
    model.add_adapter("mine", config="lora")
    model.save_adapter(str(tmp_path / "headless"), "mine", with_head=False)
    with pytest.raises(ImportError_, match="not its classification head"):
        import_run(tmp_path / "headless", BASE, "rte", tmp_path / "runs", data_dir=glue)
    with pytest.raises(ImportError_, match="cannot record"):
        import_run(tmp_path / "headless", BASE, "rte", tmp_path / "runs", known={"dropout": 0.1}, data_dir=glue)


def test_cli(tmp_path, glue, capsys):
    from robustkit.cli import main

    _tuned_full(2).save_pretrained(tmp_path / "tuned")
    assert (
        main(
            [
                "import",
                str(tmp_path / "tuned"),
                "--base",
                BASE,
                "--task",
                "rte",
                "--store",
                str(tmp_path / "runs"),
                "--data-dir",
                glue,
                "--lr",
                "2e-5",
            ]
        )
        == 0
    )
    run_dir = capsys.readouterr().out.strip().splitlines()[0]
    manifest = json.loads((tmp_path / "runs" / run_dir.rsplit("/", 1)[-1] / "manifest.json").read_text())
    assert manifest["spec"]["lr"] == 2e-5 and "lr" not in manifest["unknown"] and "seed" in manifest["unknown"]
    assert (
        main(["import", str(tmp_path / "nowhere"), "--base", BASE, "--task", "rte", "--store", str(tmp_path / "runs")])
        == 2
    )


def test_manifest_unknown_is_checked():
    """Only spec fields may be unknown, and only they may hold null."""
    from robustkit.store.schema import manifest_problem

    manifest = {"run_id": "r", "kind": "finetune", "spec": {"seed": None, "lr": None}, "unknown": ["seed", "lr"]}
    assert manifest_problem(manifest) is None
    assert "seed" in manifest_problem({**manifest, "unknown": ["lr"]})
    assert "expected a list of spec fields" in manifest_problem({**manifest, "unknown": ["colour"]})


def _adapter(folder, config: str, seed: int) -> None:
    """An AdapterHub adapter of ``config`` on bert-tiny, every trained weight moved by ``seed``,
    saved with its head by save_adapter."""
    import adapters

    from robustkit.models.pretrained import load_classifier

    model = load_classifier(BASE, 2, seed=0)
    adapters.init(model)
    model.add_adapter("mine", config=config)
    model.train_adapter("mine")
    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn_like(parameter))
    model.save_adapter(str(folder), "mine")


def test_imports_are_never_pooled(tmp_path, glue):
    """Issue #28 item 2: a LoRA import, a second LoRA of the same config and a seq_bn import, all of
    unknown seed, are three runs under robustkit's method names, and three groups everywhere."""
    from robustkit.analysis.pooling import split_columns
    from robustkit.figures import draw
    from robustkit.figures.style import figure_texts
    from robustkit.store.tables import load_runs
    from robustkit.train.importing import import_run

    for name, config, seed in (
        ("lora-a", "lora[r=4,alpha=8]", 1),
        ("lora-b", "lora[r=4,alpha=8]", 2),
        ("bottleneck", "seq_bn", 3),
    ):
        _adapter(tmp_path / name, config, seed)
        import_run(tmp_path / name, BASE, "rte", tmp_path / "runs", data_dir=glue)
    runs = load_runs(tmp_path / "runs").sort_values("import_id", ignore_index=True)
    assert runs["method"].tolist() == ["pfeiffer", "lora", "lora"]
    assert runs["pfeiffer.reduction_factor"].iloc[0] == 16 and runs["lora.r"].iloc[1:].tolist() == [4, 4]
    assert str(runs["seed"].dtype) == "Int64" and runs["seed"].isna().all()  # unknown, not a float 1.0
    assert runs["import_id"].str.split(" #").str[0].tolist() == ["bottleneck", "lora-a", "lora-b"]
    groups = split_columns(runs, ["method"])
    assert "import_id" in groups and runs.groupby(groups, dropna=False).ngroups == 3
    fig = draw("rsa", tmp_path / "runs", tokens=40)
    lines = [t for t in figure_texts(fig) if "[import_id=" in t]  # one legend entry per line
    assert len(lines) == 3 and {" ".join(t.split()).split("[import_id=")[1].split(" #")[0] for t in lines} == {
        "lora-a",
        "lora-b",
        "bottleneck",
    }


def test_adapterhub_method_names(tmp_path):
    """AdapterHub's own names: accepted for robustkit's method of the same config (the run is that
    method's), answered with what to type where robustkit has none."""
    import adapters

    from robustkit.errors import MethodError
    from robustkit.methods.registry import (
        ADAPTERHUB_ALIASES,
        ADAPTERHUB_ONLY,
        ADAPTERHUB_WITH_OPTIONS,
        METHODS,
        get_method,
        method_of_config,
    )
    from robustkit.specs.spec import RunSpec

    for alias, name in ADAPTERHUB_ALIASES.items():
        method = METHODS[name]
        ours = method.adapter_config(method.resolve({}), None).to_dict()
        assert adapters.AdapterConfig.load(alias).to_dict() == ours, alias
        assert RunSpec(model=BASE, method=alias).resolved().method == name
        assert RunSpec(model=BASE, method=alias).run_id == RunSpec(model=BASE, method=name).run_id
    for alias, (name, options) in ADAPTERHUB_WITH_OPTIONS.items():
        assert method_of_config(adapters.AdapterConfig.load(alias).to_dict())[0] == name
        with pytest.raises(MethodError, match=f"--method {name} "):
            get_method(alias)
    for alias in ADAPTERHUB_ONLY:
        assert method_of_config(adapters.AdapterConfig.load(alias).to_dict()) is None, alias
        with pytest.raises(MethodError, match=re.escape(f"adapterhub:{alias}")):
            get_method(alias)
    # every config name AdapterHub has is one of the three
    from adapters.configuration.adapter_config import ADAPTER_CONFIG_MAP

    assert set(ADAPTER_CONFIG_MAP) <= {*METHODS, *ADAPTERHUB_ALIASES, *ADAPTERHUB_WITH_OPTIONS, *ADAPTERHUB_ONLY}
    # an import's config with a setting robustkit does not make stays adapterhub, shown short
    from robustkit.methods.adapterhub import config_json, short_config

    odd = adapters.AdapterConfig.load("seq_bn[non_linearity='gelu']").to_dict()
    assert method_of_config(odd) is None
    label = short_config(config_json(odd))
    assert label.startswith("bottleneck reduction_factor=16 non_linearity=gelu #") and len(label) < 60
    assert short_config(config_json(odd)) != short_config(config_json({**odd, "original_ln_after": False}))
