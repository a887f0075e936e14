"""The pre-trained model's masked-LM head, and masked-LM losses of any encoder under it.

Forgetting (:mod:`robustkit.analysis.forgetting`) reads a tuned encoder's hidden states with the
*pre-trained* model's masked-LM head: how well the encoder still supports the pre-training task
through the readout it was pre-trained with. Where that head comes from:

``own``
    The model's checkpoint holds its masked-LM head (BERT-base, the embedded bert-tiny).
``fitted``
    robustkit's TSP head (the masked-LM head task-specific pretraining puts on a model,
    :func:`robustkit.models.pretrained.load_masked_lm`: BERT's transform, LayerNorm and output bias, the
    decoder tied to the word embeddings), re-initialised from ``seed`` and fitted alone on the
    frozen pre-trained encoder's hidden states at the masked positions of held-out glosses
    (:mod:`robustkit.data.heldout`, none of them the evaluated ones): Adam at :data:`FIT_LR`, batches
    of :data:`FIT_BATCH` masked positions drawn with ``seed``. The embedded minilm-l6 has no
    masked-LM head, and a TSP run's head would carry that run's encoder (or adapters) with it;
    a head fitted on the frozen pre-trained encoder reads the pre-trained representation, which
    is what "the base model's head" means there. Measured on minilm-l6 (10,000 fitting glosses,
    24,082 masked tokens; 1,000 other glosses scored): a fresh head 10.80 nats per masked token
    (ln of the vocabulary: 10.33), fitted 7.08 after 100 steps, 6.71 after 300 (the default),
    6.50 after 1,000; at 3e-3 instead of 1e-3 no lower (6.70 after 1,000). minilm-l6 was last
    trained as a sentence encoder, not on masked tokens, so its readout stays weak; forgetting
    is the change of this loss, not its level.

The loss is the masked-LM cross-entropy over the masked tokens only, as
:func:`robustkit.models.masked_lm.masked_lm_loss` computes it, summed over every text and divided by the
number of masked tokens (nats per masked token). Masks are BERT's (15%; 80% [MASK], 10% random,
10% kept), drawn once from ``seed`` (:func:`masked_batches`), so every encoder is scored on the
same masked texts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from robustkit.data import batches as data
from robustkit.errors import RobustkitError
from robustkit.methods.model_parts import head_names
from robustkit.models import pretrained as models

MAX_LENGTH = 64  # tokens per gloss (glosses are ~10 words; the longest are cut)
BATCH = 64  # glosses per evaluation batch
MLM_PROBABILITY = 0.15
FIT_LR = 1e-3
FIT_BATCH = 256  # masked positions per fitting step (each projects onto the whole vocabulary)


def masked_batches(texts: Sequence[str], model_name: str, seed: int) -> list[dict[str, torch.Tensor]]:
    """``texts`` tokenised for ``model_name`` and masked once, in batches of :data:`BATCH`.

    Returns
    -------
    list of dict of str to Tensor
        Model inputs with ``labels`` (-100 except at the masked tokens), on the CPU.
    """
    tokenizer = models.load_tokenizer(model_name)
    features = data.encode([(t,) for t in texts], tokenizer, MAX_LENGTH)
    collator = data.masked_lm_collator(tokenizer, MLM_PROBABILITY)
    generator_state = torch.get_rng_state()
    torch.manual_seed(seed)  # the collator masks from the global RNG
    try:
        return [dict(collator(features[i : i + BATCH])) for i in range(0, len(features), BATCH)]
    finally:
        torch.set_rng_state(generator_state)


def has_own_head(model_name: str) -> bool:
    """Whether the model's checkpoint holds a masked-LM head (nothing of it initialised on load)."""
    mlm, initialised = models.load_masked_lm(model_name, seed=0)
    return not set(initialised) & set(head_names(mlm))


def _head(mlm: nn.Module) -> nn.Module:
    return mlm.cls if hasattr(mlm, "cls") else mlm.lm_head


@torch.no_grad()
def encoder_states(encoder: nn.Module, batches: Sequence[dict[str, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """The encoder's last hidden states at the masked positions, and their labels.

    Parameters
    ----------
    encoder : nn.Module
        A base model (``model.base_model`` of a classifier or a masked-LM model, with whatever
        adapters it carries); run in eval mode where its parameters are.

    Returns
    -------
    states : Tensor, shape (n_masked, hidden)
    labels : Tensor, shape (n_masked,)
        On the CPU.
    """
    device = next(encoder.parameters()).device
    was_training = encoder.training
    encoder.eval()
    states, labels = [], []
    try:
        for batch in batches:
            inputs = {k: v.to(device) for k, v in batch.items() if k != "labels"}
            hidden = encoder(**inputs)[0]
            selected = batch["labels"].to(device) != -100
            states.append(hidden[selected].float().cpu())
            labels.append(batch["labels"][batch["labels"] != -100])
    finally:
        encoder.train(was_training)
    if not states or sum(len(s) for s in states) == 0:
        raise RobustkitError("no masked token in the texts: nothing to score")
    return torch.cat(states), torch.cat(labels)


@torch.no_grad()
def loss(head: nn.Module, states: torch.Tensor, labels: torch.Tensor, chunk: int = 4096) -> float:
    """Mean cross-entropy of ``head`` over masked positions (nats per masked token).

    Parameters
    ----------
    states : Tensor, shape (n, hidden)
    labels : Tensor, shape (n,)
    chunk : int
        Positions per forward (memory: ``chunk`` x vocabulary logits).
    """
    device = next(head.parameters()).device
    head.eval()
    total = 0.0
    for start in range(0, len(labels), chunk):
        logits = head(states[start : start + chunk].to(device))
        total += float(
            nn.functional.cross_entropy(logits.float(), labels[start : start + chunk].to(device), reduction="sum")
        )
    return total / len(labels)


def pretrained_masked_lm(model_name: str, device: torch.device) -> nn.Module:
    """The pre-trained masked-LM model (its own head where it has one), frozen, in eval mode."""
    mlm, _ = models.load_masked_lm(model_name, seed=0)
    for parameter in mlm.parameters():
        parameter.requires_grad_(False)
    return mlm.to(device).eval()


def reinitialise(mlm: nn.Module, seed: int) -> list[str]:
    """Draw the head's own parameters afresh from ``seed`` (weights N(0, initializer_range),
    biases 0, LayerNorms 1 and 0); a decoder tied to the word embeddings keeps them.

    Returns
    -------
    list of str
        The names of the head parameters drawn (the ones a fit trains).
    """
    names = head_names(mlm)  # a tied decoder weight is listed once, under the embeddings
    generator = torch.Generator().manual_seed(seed)
    owners = {
        f"{m}.{p}" if m else p: module
        for m, module in mlm.named_modules()
        for p, _ in module.named_parameters(recurse=False)
    }
    parameters = dict(mlm.named_parameters())
    std = getattr(mlm.config, "initializer_range", 0.02)
    with torch.no_grad():
        for name in names:
            parameter, owner = parameters[name], owners[name]
            if "layernorm" in type(owner).__name__.lower():
                parameter.fill_(1.0 if name.endswith("weight") else 0.0)
            elif parameter.dim() >= 2:
                parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype) * std)
            else:
                parameter.zero_()
    return names


def fit_head(
    model_name: str, texts: Sequence[str], steps: int, seed: int, device: torch.device
) -> dict[str, torch.Tensor]:
    """robustkit's TSP head fitted on the frozen pre-trained encoder (module docstring).

    Returns
    -------
    dict of str to Tensor
        The head's trained tensors by parameter name (on the CPU).
    """
    if steps < 1:
        raise RobustkitError(f"head_steps must be at least 1, got {steps}")
    mlm = pretrained_masked_lm(model_name, device)
    names = reinitialise(mlm, seed)
    states, labels = encoder_states(mlm.base_model, masked_batches(texts, model_name, seed))
    parameters = dict(mlm.named_parameters())
    trained = [parameters[n] for n in names]
    for parameter in trained:
        parameter.requires_grad_(True)
    head = _head(mlm)
    head.train()
    optimiser = torch.optim.Adam(trained, lr=FIT_LR)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        index = torch.from_numpy(rng.choice(len(labels), min(FIT_BATCH, len(labels)), replace=False))
        logits = head(states[index].to(device))
        nn.functional.cross_entropy(logits, labels[index].to(device)).backward()
        optimiser.step()
        optimiser.zero_grad(set_to_none=True)
    return {n: parameters[n].detach().cpu().clone() for n in names}


def head_of(mlm: nn.Module, tensors: dict[str, torch.Tensor] | None = None) -> nn.Module:
    """The masked-LM head of :func:`pretrained_masked_lm`'s model: its own (``tensors`` None), or
    a fitted head's tensors (:func:`fit_head`) loaded into it."""
    if tensors is not None:
        parameters = dict(mlm.named_parameters())
        with torch.no_grad():
            for name, tensor in tensors.items():
                parameters[name].copy_(tensor)
    return _head(mlm)
