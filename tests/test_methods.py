import pytest
import torch

from robustkit.errors import MethodError
from robustkit.methods import (
    ADAPTER_NAME,
    adapter_parameter_counts,
    apply_method,
    count_parameters,
    get_method,
    houlsby_adapter_size,
)
from robustkit.models import load_classifier, load_masked_lm


def test_unknown_method_is_named():
    with pytest.raises(MethodError, match="'lora'"):
        get_method("lora")


def test_houlsby_adapter_counts_match_the_paper(tiny_model):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    names = apply_method(model, "houlsby", adapter_size=16)
    counts = adapter_parameter_counts(model)
    d, m, layers = 128, 16, 2
    assert len(counts) == 2 * layers  # two adapters per layer
    assert set(counts.values()) == {houlsby_adapter_size(d, m)} == {2 * m * d + d + m}
    adapter_total = sum(counts.values())
    layer_norms = [n for n in names if "LayerNorm" in n]
    assert len(layer_norms) == 2 * (1 + 2 * layers)  # embeddings + two per layer, weight and bias
    heads = [n for n in names if n.startswith("classifier.")]
    assert count_parameters(model, names) == adapter_total + count_parameters(model, layer_norms) + count_parameters(model, heads)
    assert not any(n.startswith("bert.encoder") and "adapters" not in n and "LayerNorm" not in n for n in names)


def test_adapterhub_preset_freezes_layer_norms(tiny_model):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    names = apply_method(model, "adapterhub-houlsby")
    assert not any("LayerNorm" in n for n in names)
    assert set(adapter_parameter_counts(model).values()) == {houlsby_adapter_size(128, 128 // 16)}


def test_full_trains_everything(tiny_model):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    names = apply_method(model, "full")
    assert count_parameters(model, names) == count_parameters(model)


def test_masked_lm_head_trains_but_not_the_tied_word_embeddings(tiny_model):
    model, initialised = load_masked_lm(tiny_model, seed=0)
    assert initialised == []  # bert-tiny ships its MLM head
    names = apply_method(model, "houlsby", adapter_size=16)
    assert "bert.embeddings.word_embeddings.weight" not in names
    assert any(n.startswith("cls.predictions.transform") for n in names)


def test_skipping_every_adapter_gives_the_adapter_free_model(tiny_model):
    plain = load_classifier(tiny_model, num_labels=2, seed=0).eval()
    adapted = load_classifier(tiny_model, num_labels=2, seed=0).eval()
    apply_method(adapted, "houlsby", adapter_size=16)
    with torch.no_grad():  # make the adapters far from the identity so skipping matters
        for name, p in adapted.named_parameters():
            if f"adapters.{ADAPTER_NAME}" in name:
                p.normal_(0, 0.5)
    ids = torch.tensor([[101, 2023, 3185, 2003, 2307, 102]])
    with torch.no_grad():
        reference = plain(input_ids=ids).logits
        assert not torch.allclose(adapted(input_ids=ids).logits, reference)
        adapted.set_active_adapters(ADAPTER_NAME, skip_layers=[0, 1])
        assert torch.equal(adapted(input_ids=ids).logits, reference)
