"""Layer-span ablation of every method whose modules live in layers: removing every layer's
modules gives the base model's outputs (the method switched off; head and LayerNorms kept), per
method; a method that cannot be ablated by layer (prompt tuning) says so. Also: gradient-norm
groups of a method's own parameters from the model's structure."""

from __future__ import annotations

import pytest
import torch

from robustkit.analysis import ablation
from robustkit.errors import RobustkitError
from robustkit.methods import METHODS, apply_method, get_method

LAYERED = [name for name, method in METHODS.items() if method.layer_ablation]
N_LAYERS = 3


def tiny_bert(hidden: int = 64):
    from transformers import AutoConfig, AutoModelForSequenceClassification

    torch.manual_seed(0)
    config = AutoConfig.for_model(
        "bert",
        vocab_size=50,
        hidden_size=hidden,
        num_hidden_layers=N_LAYERS,
        num_attention_heads=2,
        intermediate_size=37,
        max_position_embeddings=32,
    )
    return AutoModelForSequenceClassification.from_config(config)


def batches(n: int = 2):
    generator = torch.Generator().manual_seed(1)
    out = []
    for _ in range(n):
        ids = torch.randint(5, 50, (4, 9), generator=generator)
        mask = torch.ones_like(ids)
        mask[0, 6:] = 0
        out.append({"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([0, 1, 1, 0])})
    return out


def adapted(method: str):
    """A tiny BERT with ``method`` added and its own parameters moved off their (often identity)
    initialisation, so that removing them changes the outputs."""
    model = tiny_bert(128 if method == "compacter" else 64)  # compacter: bottleneck d/32 divisible by phm_dim 4
    apply_method(model, method)
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.requires_grad and not name.startswith("classifier."):
                parameter.add_(0.3 * torch.randn(parameter.shape, generator=generator))
    return model.eval()


def test_the_layered_methods_are_those_expected():
    assert {"houlsby", "pfeiffer", "parallel", "lora", "ia3", "prefix", "loreft", "unipelt", "mam"} <= set(LAYERED)
    assert "prompt" not in LAYERED and "full" not in LAYERED


@pytest.mark.parametrize("method", LAYERED)
@torch.no_grad()
def test_removing_every_layer_is_the_base_model(method):
    model = adapted(method)
    data = batches()
    inputs = {k: v for k, v in data[0].items() if k != "labels"}
    with_method = model(**inputs).logits
    model.set_active_adapters(ablation.ADAPTER_NAME, skip_layers=list(range(N_LAYERS)))
    skipped = model(**inputs).logits
    get_method(method).deactivate(model)
    base = model(**inputs).logits
    model.set_active_adapters(ablation.ADAPTER_NAME)
    torch.testing.assert_close(skipped, base, rtol=0, atol=1e-6)
    assert not torch.allclose(with_method, base, atol=1e-4), f"{method}: its modules change nothing"
    # the spans' all-removed corner is the base model's evaluation; fast == naive
    from robustkit.train.evaluate import evaluate

    fast = ablation.fast_spans(model, data, "rte")
    naive = ablation.naive_spans(model, data, "rte")
    torch.testing.assert_close(
        torch.tensor(fast["value"].to_numpy()), torch.tensor(naive["value"].to_numpy()), rtol=0, atol=1e-5
    )
    corner = fast[(fast["first"] == 0) & (fast["last"] == N_LAYERS - 1)].set_index("metric")["value"].to_dict()
    get_method(method).deactivate(model)
    reference = evaluate(model, data, "rte")
    assert corner == pytest.approx(reference, abs=1e-5)


@pytest.mark.parametrize("method", ["prompt", "adapterhub:prompt_tuning", "adapterhub:prompt_tuning|lora"])
def test_prompt_tuning_cannot_be_ablated_by_layer(method):
    model = tiny_bert()
    apply_method(model, method)
    for spans in (ablation.fast_spans, ablation.naive_spans):
        with pytest.raises(RobustkitError, match="prompt tuning.*cannot be ablated by layer"):
            spans(model, batches(1), "rte")


def test_full_fine_tuning_cannot_be_ablated():
    model = tiny_bert()
    apply_method(model, "full")
    with pytest.raises(RobustkitError, match="full fine-tuning"):
        ablation.fast_spans(model, batches(1), "rte")


@pytest.mark.parametrize("method, group", [("prompt", "embeddings"), ("prefix", "shared")])
def test_gradient_norm_groups_of_prompt_and_prefix(method, group):
    from robustkit.methods.model_parts import layer_groups

    model = tiny_bert()
    apply_method(model, method)
    groups = layer_groups(model)
    own = [n for n, p in model.named_parameters() if p.requires_grad and not n.startswith("classifier.")]
    assert own and {groups[n] for n in own} == {group}
    assert groups["classifier.weight"] == "classifier" and groups["bert.pooler.dense.weight"] == "pooler"
    assert groups["bert.embeddings.word_embeddings.weight"] == "embeddings"
    assert groups["bert.encoder.layer.2.output.dense.weight"] == "layer.2"


def test_gradient_norm_groups_put_lora_under_its_layer():
    from robustkit.methods.model_parts import layer_groups

    model = tiny_bert()
    apply_method(model, "lora")
    groups = layer_groups(model)
    for name, parameter in model.named_parameters():
        if parameter.requires_grad and ".loras." in name:
            layer = name.split(".layer.")[1].split(".")[0]
            assert groups[name] == f"layer.{layer}"


def test_store_runs_are_kept_by_their_method_and_adapterhub_config():
    import pandas as pd

    runs = pd.DataFrame(
        {
            "run_id": ["a", "b", "c", "d", "e"],
            "method": ["lora", "prompt", "adapterhub", "adapterhub", "full"],
            "adapterhub.config": [None, None, "lora[r=4]", "prompt_tuning|lora", None],
        }
    )
    with pytest.warns(UserWarning, match=r"b \(prompt\), d \(adapterhub\), e \(full\)"):
        kept = ablation._adapter_runs(runs)
    assert list(kept["run_id"]) == ["a", "c"]
