"""A probe batch that checks a change to a classifier keeps its logits.

The screening twin's shortcuts (:mod:`robustkit.attacks.first_token`,
:mod:`robustkit.attacks.onednn`) are taken only where the changed model gives the original's
logits on this batch; else they are undone.
"""

from __future__ import annotations

import torch
from torch import nn

# The probe's logits must agree within this (absolute, plus the same relative to the logits' size).
PROBE_TOLERANCE = 1e-4


def probe_batch(model: nn.Module) -> dict[str, torch.Tensor]:
    """Two seeded rows of ordinary token ids, the second padded after 5 of its 9 tokens.

    Returns
    -------
    dict of str to torch.Tensor
        ``input_ids`` and ``attention_mask`` (and ``token_type_ids`` where the model has token
        types), each of shape (2, 9), on the model's device.
    """
    device = next(model.parameters()).device
    vocab = int(model.config.vocab_size)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(min(1000, vocab // 2), vocab, (2, 9), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    ids[1, 5:] = int(getattr(model.config, "pad_token_id", 0) or 0)
    inputs = {"input_ids": ids, "attention_mask": mask}
    if getattr(model.config, "type_vocab_size", 0):
        inputs["token_type_ids"] = torch.zeros_like(ids)
    return {k: v.to(device) for k, v in inputs.items()}


def same_logits(got: torch.Tensor, expected: torch.Tensor) -> bool:
    """Whether ``got`` has ``expected``'s shape and values within :data:`PROBE_TOLERANCE`
    (absolute, plus relative to the largest logit), both of shape (batch, num_labels)."""
    return got.shape == expected.shape and bool(
        ((got - expected).abs() <= PROBE_TOLERANCE * (1 + expected.abs().max())).all()
    )
