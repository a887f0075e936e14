"""The masked-LM loss of task-specific pretraining, over the masked tokens only."""

from __future__ import annotations

import torch


def masked_lm_loss(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy over the masked tokens, the value ``model(**batch).loss`` gives.

    Written out because transformers' masked-LM forward projects EVERY token onto the
    vocabulary (30k x d per token, as much compute as the encoder of a small BERT), while only
    the ~15% masked tokens count: the head here sees only those.
    """
    labels = batch["labels"]
    hidden = model.base_model(**{k: v for k, v in batch.items() if k != "labels"})[0]
    selected = labels != -100
    head = model.cls if hasattr(model, "cls") else model.lm_head
    return torch.nn.functional.cross_entropy(head(hidden[selected]), labels[selected])
