"""Every encoder architecture AdapterHub supports for sequence classification, through its own
layer accessors: tiny randomly initialised models built from each architecture's config (no
download), trained a few steps with houlsby and lora, then every analysis on the store."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY_RTE, write_rte

from robustkit.analysis.registry import get as analysis

ARCHITECTURES = ("bert", "roberta", "xlm-roberta", "distilbert", "deberta", "deberta-v2", "electra", "albert")
METHODS = ("houlsby", "lora")
N_LAYERS = 2


def tiny_config(architecture: str, vocab_size: int):
    """A 2-layer, hidden-32 config of ``architecture`` (``transformers`` model type)."""
    from transformers import AutoConfig

    if architecture == "distilbert":
        sizes = dict(dim=32, n_layers=N_LAYERS, n_heads=2, hidden_dim=37)
    else:
        sizes = dict(hidden_size=32, num_hidden_layers=N_LAYERS, num_attention_heads=2, intermediate_size=37)
    if architecture == "albert":
        sizes["embedding_size"] = 16
    return AutoConfig.for_model(architecture, vocab_size=vocab_size, max_position_embeddings=64, **sizes)


def tiny_model_folder(architecture: str, folder: Path) -> Path:
    """A model folder (config, random weights, the embedded bert-tiny WordPiece tokenizer)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from robustkit.assets import asset_path

    # no token types where the architecture's own tokenizer has none (DistilBERT has no such
    # input; RoBERTa-style models one type)
    names = ["input_ids", "attention_mask"] if architecture in ("distilbert", "roberta", "xlm-roberta") else None
    tokenizer = AutoTokenizer.from_pretrained(
        asset_path("bert-tiny"), **({"model_input_names": names} if names else {})
    )
    torch.manual_seed(0)
    config = tiny_config(architecture, len(tokenizer))
    config.pad_token_id = tokenizer.pad_token_id
    AutoModelForSequenceClassification.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module", params=ARCHITECTURES)
def arch_store(request, tmp_path_factory):
    """(architecture, store) with a houlsby and a lora run of a tiny ``architecture`` model."""
    from robustkit.train import train

    root = tmp_path_factory.mktemp(f"encoder-{request.param}")
    folder = tiny_model_folder(request.param, root / "model")
    glue = write_rte(root / "glue", train=16, dev=8)
    for method in METHODS:
        spec = dataclasses.replace(
            TINY_RTE, model=str(folder), method=method, data_dir=str(glue), epochs=1, adapter_size=4
        )
        train(spec, root / "runs", progress=False)
    return request.param, root / "runs"


def test_every_analysis_runs_on_every_encoder(arch_store):
    from robustkit.analysis import gradnorm, scores, stability
    from robustkit.store.tables import load_runs

    architecture, store = arch_store
    runs = load_runs(store)
    assert sorted(runs["method"]) == sorted(METHODS) and (runs["status"] == "complete").all()

    # gradient norms: every method's own parameters under their layer, never BERT names
    norms = gradnorm.run(store)
    for method in METHODS:
        groups = set(norms.loc[norms["method"] == method, "layer"])
        distinct = 1 if architecture == "albert" else N_LAYERS  # ALBERT's passes share one layer
        assert {f"layer.{i}" for i in range(distinct)} <= groups, (architecture, method, groups)
        assert "classifier" in groups
    assert np.isfinite(norms["value"]).all()

    # RSA / CKA: embeddings + every encoder layer, from output_hidden_states
    sim = analysis("rsa").run(store, tokens=40, progress=False)
    assert set(sim["layer"]) == set(range(N_LAYERS + 1)) and set(sim["measure"]) == {"rsa", "cka"}

    # loss landscape between the initial and the tuned state
    land = analysis("landscape").run(store, alphas=[0.0, 1.0], progress=False)
    assert set(land["method"]) == set(METHODS) and np.isfinite(land["value"]).all()

    # layer-span ablation of both methods (their modules live in layers)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spans = analysis("ablation").run(store, progress=False)
    assert set(spans["method"]) == set(METHODS)
    assert np.isfinite(spans["value"]).all()

    # stability of the outcomes per method
    summary = stability.summarize(scores.outcomes(store, checkpoint="best", split="test", metric=None), by="method")
    assert set(summary["method"]) == set(METHODS)

    # trade-off: every method on one parameters-vs-score frame
    points = analysis("tradeoff").run(store)
    assert set(points["method"]) == set(METHODS)


def test_pwws_attacks_every_encoder(arch_store, shared_nltk_data, monkeypatch):
    """The attack victim on each architecture (word embeddings, token types from the tokenizer):
    PWWS on one sentence of each run, float64 as the attack analysis runs it."""
    from robustkit.attacks.pwws import attack_fast
    from robustkit.attacks.victim import Victim
    from robustkit.models.pretrained import load_tokenizer
    from robustkit.store.manifest import read_spec
    from robustkit.store.tables import load_runs
    from robustkit.train.run_model import load_run_model

    monkeypatch.setenv("NLTK_DATA", shared_nltk_data)
    architecture, store = arch_store
    for path in load_runs(store)["path"]:
        spec = read_spec(path)
        victim = Victim(
            load_run_model(path, "best"), load_tokenizer(spec.model), max_length=spec.max_length, dtype=torch.float64
        )
        sentence = "a good film with a fine cast"
        target = int(victim.get_pred([sentence])[0])
        result = attack_fast(victim, sentence, target, query_budget=60)
        assert result.target == target and victim.queries > 0, architecture


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_unsupported_method_names_architecture_and_method(architecture, tmp_path):
    """Where AdapterHub 1.3 lacks a method for an architecture, the error names both."""
    from transformers import AutoModelForSequenceClassification

    from robustkit.errors import MethodError
    from robustkit.methods import apply_method

    # at hidden size 32 compacter cannot be added anywhere (its bottleneck 1 is not divisible by
    # phm_dim 4); AdapterHub 1.3 cannot add dora to DeBERTa (its fused q,k,v)
    for method in (
        "houlsby",
        "pfeiffer",
        "parallel",
        "compacter",
        "lora",
        "dora",
        "vera",
        "ia3",
        "prefix",
        "prompt",
        "loreft",
    ):
        model = AutoModelForSequenceClassification.from_config(tiny_config(architecture, 120))
        try:
            apply_method(model, method)
        except MethodError as error:
            assert repr(method) in str(error) and architecture.replace("-", "_") in str(error).replace("-", "_"), str(
                error
            )


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("method", ["houlsby", "lora", "prefix"])
def test_fast_ablation_equals_naive_on_every_encoder(architecture, method):
    """The fast span replay holds on every encoder (ALBERT, one shared layer: the naive path)."""
    from transformers import AutoModelForSequenceClassification

    from robustkit.analysis import ablation
    from robustkit.methods import apply_method

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(tiny_config(architecture, 120))
    apply_method(model, method)
    model.eval()
    with torch.no_grad():  # off the (near) identity initialisation: spans must differ
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.add_(0.3 * torch.randn_like(parameter))
    ids = torch.randint(5, 120, (3, 8), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[0, 5:] = 0
    batches = [{"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([0, 1, 0])}]
    layers = ablation.encoder_layers(model)
    assert len(layers) == (1 if architecture == "albert" else N_LAYERS)
    assert ablation._fast_applies(model, layers, {"input_ids": ids, "attention_mask": mask}) == (
        architecture != "albert"
    )
    fast, naive = ablation.fast_spans(model, batches, "rte"), ablation.naive_spans(model, batches, "rte")
    np.testing.assert_allclose(fast["value"], naive["value"], rtol=0, atol=1e-5)
    if architecture != "albert":
        assert fast.attrs["layer_evaluations"] < naive.attrs["layer_evaluations"]


# every method, one run each, on the tiny BERT: the options that make them fit hidden size 32
_EVERY_METHOD_OPTIONS = {
    "topk": (("top_k", 1),),
    "compacter": (("reduction_factor", 2.0),),
    "adapterhub": (("config", "lora[r=2]"),),
}


@pytest.mark.slow
def test_every_analysis_runs_for_every_method(tmp_path):
    """Item 3 of issue #14: every method through every analysis (one tiny BERT, a few steps)."""
    from robustkit.analysis import gradnorm, scores, stability
    from robustkit.methods import METHODS
    from robustkit.store.tables import load_runs
    from robustkit.train import train

    folder = tiny_model_folder("bert", tmp_path / "model")
    glue = write_rte(tmp_path / "glue", train=16, dev=8)
    for method in METHODS:
        spec = dataclasses.replace(
            TINY_RTE,
            model=str(folder),
            method=method,
            data_dir=str(glue),
            epochs=1,
            method_options=_EVERY_METHOD_OPTIONS.get(method, ()),
        )
        train(spec, tmp_path / "runs", progress=False)
    store = tmp_path / "runs"
    runs = load_runs(store)
    assert set(runs["method"]) == set(METHODS) and (runs["status"] == "complete").all()

    norms = gradnorm.run(store)
    for method in METHODS:
        groups = set(norms.loc[norms["method"] == method, "layer"])
        assert groups and groups <= {
            "embeddings",
            "shared",
            "pooler",
            "classifier",
            *(f"layer.{i}" for i in range(N_LAYERS)),
        }, (method, groups)
    assert set(norms.loc[norms["method"] == "prompt", "layer"]) == {"embeddings", "classifier"}
    assert set(norms.loc[norms["method"] == "prefix", "layer"]) == {"shared", "classifier"}
    assert set(analysis("rsa").run(store, tokens=40, progress=False)["method"]) == set(METHODS)
    assert set(analysis("landscape").run(store, alphas=[0.0, 1.0], progress=False)["method"]) == set(METHODS)
    with pytest.warns(UserWarning, match=r"\(prompt\)"):
        spans = analysis("ablation").run(store, progress=False)
    assert set(spans["method"]) == {n for n, m in METHODS.items() if m.layer_ablation} | {"adapterhub"}
    assert set(
        stability.summarize(scores.outcomes(store, checkpoint="best", split="test", metric=None), by="method")["method"]
    ) == set(METHODS)
    assert set(analysis("tradeoff").run(store)["method"]) == set(METHODS)
