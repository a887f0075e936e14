"""The screening twin's linear layers on oneDNN's float32 kernel: same numbers, or left on BLAS."""

import pytest
import torch
import torch.nn.functional as F
from test_encoders import ARCHITECTURES
from test_first_token import _inputs, _model

from robustkit.attacks import onednn
from robustkit.attacks.onednn import OneDNNLinear, onednn_linear_keeps_logits


@pytest.mark.parametrize("shape", [(7,), (5, 7), (3, 5, 7), "transposed"])
@pytest.mark.parametrize("with_bias", [True, False])
def test_float32_linear_runs_onednn_with_the_same_result(shape, with_bias):
    generator = torch.Generator().manual_seed(0)
    x = (
        torch.randn(3, 7, 5, generator=generator).transpose(1, 2)
        if shape == "transposed"
        else torch.randn(*shape, generator=generator)
    )
    weight, bias = torch.randn(4, 7, generator=generator), torch.randn(4, generator=generator) if with_bias else None
    expected = F.linear(x, weight, bias)
    module = torch.nn.Linear(7, 4, bias=with_bias)
    with torch.no_grad():  # the module's parameters require gradients
        with OneDNNLinear() as mode:
            got = F.linear(x, weight, bias)
            by_keywords = F.linear(input=x, weight=weight, bias=bias)
            by_module = module(x)
        by_blas = module(x)
    assert mode.calls == 3  # the functional calls and nn.Linear's
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)
    assert torch.equal(by_keywords, got)
    torch.testing.assert_close(by_module, by_blas, rtol=1e-6, atol=1e-6)


def test_other_dtypes_and_gradients_are_left_to_pytorch():
    x, weight = torch.randn(5, 7, dtype=torch.float64), torch.randn(4, 7, dtype=torch.float64)
    with OneDNNLinear() as mode:
        same = F.linear(x, weight)
        x32 = torch.randn(5, 7, requires_grad=True)
        F.linear(x32, weight.float()).sum().backward()  # the private op has no backward: not routed
    assert mode.calls == 0
    assert torch.equal(same, F.linear(x, weight))
    assert x32.grad is not None


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("method", ["full", "houlsby", "lora", "loreft"])
def test_every_encoder_and_method_keeps_its_logits_on_onednn(architecture, method):
    from robustkit.errors import MethodError

    try:
        model = _model(architecture, method)
    except MethodError:
        pytest.skip(f"AdapterHub 1.3 has no {method} for {architecture}")  # tested in test_encoders
    assert onednn_linear_keeps_logits(model)
    inputs = _inputs()
    with torch.inference_mode():
        expected = model(**inputs).logits
        with OneDNNLinear() as mode:
            got = model(**inputs).logits
    assert mode.calls > 0
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_a_kernel_that_changes_the_logits_or_fails_is_not_used(monkeypatch):
    model = _model("bert", "houlsby")
    monkeypatch.setattr(onednn, "_onednn_linear", lambda x, w, b: F.linear(x, w, b) * 1.01)
    assert not onednn_linear_keeps_logits(model)

    def missing(x, w, b):
        raise RuntimeError("No such operator mkldnn::_linear_pointwise")

    monkeypatch.setattr(onednn, "_onednn_linear", missing)
    assert not onednn_linear_keeps_logits(model)
    assert not onednn_linear_keeps_logits(_model("bert", "full").double())  # float64: BLAS only


def test_the_screening_twin_runs_onednn_and_the_victim_does_not(monkeypatch):
    from robustkit.attacks.victim import Victim
    from robustkit.models.pretrained import load_tokenizer
    from robustkit.specs.spec import RunSpec
    from robustkit.train.run_model import build_classifier

    model, _, _ = build_classifier(RunSpec(model="bert-tiny", task="rt", method="houlsby"), num_labels=2)
    victim = Victim(model, load_tokenizer("bert-tiny"), max_length=64)
    twin = victim.screening()
    assert twin.onednn and not victim.onednn
    assert not victim.screening(onednn=False).onednn
    calls = []
    kernel = onednn._onednn_linear
    monkeypatch.setattr(onednn, "_onednn_linear", lambda x, w, b: calls.append(1) or kernel(x, w, b))
    sentences = ["a good film", "the cast is fine but the plot drags on and on", "bad"]
    rough, exact = twin.get_prob(sentences), victim.get_prob(sentences)
    assert len(calls) >= 2 * 6  # bert-tiny: two layers of six linear layers, plus its adapters
    assert abs(rough - exact).max() < 1e-5
    calls.clear()
    victim.screening(onednn=False).get_prob(sentences)
    assert not calls
