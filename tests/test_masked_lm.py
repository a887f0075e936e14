"""Tests of :mod:`robustkit.models.masked_lm`: the masked-LM loss over the masked tokens only."""

import torch

from robustkit.models.pretrained import load_tokenizer


def test_sparse_masked_lm_loss_equals_the_models_own(tiny_model):
    from robustkit.data.batches import encode, masked_lm_collator
    from robustkit.models.masked_lm import masked_lm_loss
    from robustkit.models.pretrained import load_masked_lm

    model, _ = load_masked_lm(tiny_model, seed=0)
    tokenizer = load_tokenizer(tiny_model)
    torch.manual_seed(0)
    batch = masked_lm_collator(tokenizer, 0.15)(
        encode([("a fine and quite long film about the sea",)] * 8, tokenizer, 32)
    )
    model.eval()
    with torch.no_grad():
        assert torch.allclose(masked_lm_loss(model, batch), model(**batch).loss, atol=1e-6)
