"""The screening twin's last layer on the first token only: same logits, or left as it was."""

import copy

import pytest
import torch
from test_encoders import ARCHITECTURES, tiny_config

from robustkit.attacks.first_token import first_token_only

# Layers built like BERT's (BERT, RoBERTa, XLM-R, ELECTRA) can take the shortcut, the others
# keep their full last layer. Where it is taken (measured): ReFT acts on the last layer's other positions and
# AdapterHub's
# ELECTRA attention with adapters gives other logits through its cross-attention path, so the
# probe turns both down.
TAKEN = {(a, m) for a in ("bert", "roberta", "xlm-roberta") for m in ("full", "houlsby", "lora", "prefix")} | {
    ("electra", "full")
}


def _model(architecture: str, method: str):
    from transformers import AutoModelForSequenceClassification

    from robustkit.methods import apply_method

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(tiny_config(architecture, 120))
    if method != "full":
        apply_method(model, method)
    model.eval()
    with torch.no_grad():  # off the adapters' (near) identity initialisation
        for name, parameter in model.named_parameters():
            if method == "full" or parameter.requires_grad:
                parameter.add_(0.3 * torch.randn_like(parameter))
    return model


def _inputs() -> dict[str, torch.Tensor]:
    """Four seeded rows of 11 token ids of the tiny models' vocabulary, two of them padded."""
    ids = torch.randint(5, 120, (4, 11), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[0, 6:], mask[2, 3:] = 0, 0
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("method", ["full", "houlsby", "lora", "prefix", "loreft"])
def test_first_token_only_keeps_the_logits_or_is_not_taken(architecture, method):
    from robustkit.errors import MethodError

    try:
        model = _model(architecture, method)
    except MethodError:
        pytest.skip(f"AdapterHub 1.3 has no {method} for {architecture}")  # tested in test_encoders
    inputs = _inputs()
    with torch.inference_mode():
        expected = model(**inputs).logits
    twin = copy.deepcopy(model)
    taken = first_token_only(twin)
    with torch.inference_mode():
        got = twin(**inputs).logits
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    assert taken == ((architecture, method) in TAKEN)
    if taken:  # the shortcut is really used where it applies
        # and it computes less: the last layer's feed-forward block sees one row per sentence
        rows = []
        last = twin.base_model.encoder.layer[-1]
        hook = last.intermediate.register_forward_hook(lambda module, args, out: rows.append(args[0].shape[1]))
        with torch.inference_mode():
            twin(**inputs)
        hook.remove()
        assert rows == [1]


def test_a_shortcut_that_changes_the_logits_is_undone(monkeypatch):
    """A last layer whose other rows matter (here: a wrong first-token forward) fails the probe
    and keeps the class's own forward."""
    from robustkit.attacks import first_token

    model = _model("bert", "houlsby")
    monkeypatch.setattr(
        first_token, "_first_token_forward", lambda self, hidden_states, *a, **k: (hidden_states[:, -1:] * 2,)
    )
    assert not first_token_only(model)
    assert "forward" not in vars(model.base_model.encoder.layer[-1])  # the instance override is gone


def test_the_screening_twin_takes_it_and_the_victim_does_not():
    from robustkit.attacks.victim import Victim
    from robustkit.models.pretrained import load_tokenizer
    from robustkit.specs.spec import RunSpec
    from robustkit.train.run_model import build_classifier

    model, _, _ = build_classifier(RunSpec(model="bert-tiny", task="rt", method="houlsby"), num_labels=2)
    victim = Victim(model, load_tokenizer("bert-tiny"), max_length=64)
    twin = victim.screening()
    assert twin.first_token_only and not victim.first_token_only
    assert "forward" not in vars(victim.model.bert.encoder.layer[-1])  # the float64 victim is untouched
    assert not victim.screening(first_token=False).first_token_only
    sentences = ["a good film", "the cast is fine but the plot drags on and on", "bad"]
    assert abs(twin.get_prob(sentences) - victim.get_prob(sentences)).max() < 1e-5
