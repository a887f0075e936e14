"""From task splits to model batches: tokenisation, a seeded step -> batch order, collation.

The batch of step ``s`` is a pure function of (seed, s): a run resumed from a checkpoint at step
``s`` sees exactly the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

import math

import numpy as np
from transformers import DataCollatorForLanguageModeling, DataCollatorWithPadding, PreTrainedTokenizerBase

from robustkit.errors import TaskError

Features = list[dict[str, list[int] | int | float]]


def split_texts(split, text_fields: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The text of each example of a split: a 1-tuple (sentence) or 2-tuple (sentence pair)."""
    return list(zip(*(split[field] for field in text_fields)))


def encode(texts: list[tuple[str, ...]], tokenizer: PreTrainedTokenizerBase, max_length: int) -> Features:
    """Tokenise single sentences or sentence pairs (truncated to ``max_length`` tokens)."""
    if not texts:
        raise TaskError("cannot train or evaluate on an empty split")
    columns = list(zip(*texts))
    encoded = tokenizer(*columns, truncation=True, max_length=max_length)
    keys = list(encoded.keys())
    return [{k: encoded[k][i] for k in keys} for i in range(len(texts))]


def encode_labelled(texts: list[tuple[str, ...]], labels, tokenizer, max_length: int) -> Features:
    """Like :func:`encode`, with a ``labels`` entry per example."""
    features = encode(texts, tokenizer, max_length)
    for feature, label in zip(features, labels):
        feature["labels"] = label
    return features


def steps_per_epoch(n_examples: int, batch_size: int) -> int:
    return math.ceil(n_examples / batch_size)


def batch_indices(n_examples: int, batch_size: int, seed: int, step: int) -> np.ndarray:
    """Indices of the examples in the batch of ``step`` (0-based).

    Each epoch is a fresh permutation drawn from ``(seed, epoch)``; the last batch of an epoch
    may be smaller.
    """
    per_epoch = steps_per_epoch(n_examples, batch_size)
    epoch, position = divmod(step, per_epoch)
    order = np.random.default_rng([seed, epoch]).permutation(n_examples)
    return order[position * batch_size : (position + 1) * batch_size]


def classification_collator(tokenizer: PreTrainedTokenizerBase) -> DataCollatorWithPadding:
    """Pads each batch to its longest sequence (dynamic padding)."""
    return DataCollatorWithPadding(tokenizer, return_tensors="pt")


def masked_lm_collator(tokenizer: PreTrainedTokenizerBase, mlm_probability: float) -> DataCollatorForLanguageModeling:
    """BERT masking (15% of tokens; 80% [MASK], 10% random, 10% kept), from the global RNG,
    which the training loop seeds per step."""
    return DataCollatorForLanguageModeling(tokenizer, mlm=True, mlm_probability=mlm_probability, return_tensors="pt")
