"""From task splits to model batches: tokenisation, a seeded step -> batch order, collation.

The batch of step ``s`` is a pure function of (seed, s): a run resumed from a checkpoint at step
``s`` sees exactly the batches an uninterrupted run would have seen.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from transformers import DataCollatorForLanguageModeling, DataCollatorWithPadding, PreTrainedTokenizerBase

from robustkit.errors import TaskError

Features = list[dict[str, list[int] | int | float]]


def split_texts(split, text_fields: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The text of each example of a split: a 1-tuple (sentence) or 2-tuple (sentence pair)."""
    return list(zip(*(split[field] for field in text_fields)))


class TruncatedTextsWarning(UserWarning):
    """Texts longer than a run's ``max_length`` tokens, cut to it: the model never reads the rest.
    Said once per process for each split (the line holds its counts), as one ``warning:`` line."""


def encode(
    texts: list[tuple[str, ...]], tokenizer: PreTrainedTokenizerBase, max_length: int, where: str = "a split"
) -> Features:
    """Tokenise single sentences or sentence pairs (truncated to ``max_length`` tokens); warn
    (:class:`TruncatedTextsWarning`) with the share of texts cut (:func:`cut_rows`), naming the
    texts as ``where`` (e.g. ``"the train split of 'mine'"``)."""
    if not texts:
        raise TaskError("cannot train or evaluate on an empty split")
    columns = list(zip(*texts))
    encoded = tokenizer(*columns, truncation=True, max_length=max_length)
    cut = cut_rows(encoded, columns, tokenizer, max_length)
    if len(cut):
        warnings.warn(
            f"{len(cut):,} of {len(texts):,} texts of {where} ({_share(len(cut), len(texts))}) are longer than "
            f"max_length {max_length} tokens and are cut to it, the rest unread; "
            "--max-length N reads more of each (at more memory and time)",
            TruncatedTextsWarning,
            stacklevel=2,
        )
    keys = list(encoded.keys())
    return [{k: encoded[k][i] for k in keys} for i in range(len(texts))]


def _share(part: int, whole: int) -> str:
    """``part / whole`` as a percentage that never reads 0.0 % for a few rows."""
    share = part / whole
    return "under 0.1%" if share < 0.001 else f"{share:.1%}"


def cut_rows(
    encoded, columns: list[tuple[str, ...]], tokenizer: PreTrainedTokenizerBase, max_length: int
) -> np.ndarray:
    """Positions of the texts that truncation at ``max_length`` cut, shape (n_cut,).

    A fast tokenizer records what it cut (each ``encoding.overflowing``), at no cost; otherwise
    the texts at exactly ``max_length`` tokens, the only ones that can have been cut, are
    tokenised again without truncation (the tokenizer's own long-input warning silenced).
    """
    encodings = getattr(encoded, "encodings", None)
    if encodings is not None:
        return np.flatnonzero([bool(encoding.overflowing) for encoding in encodings])
    full = [i for i, ids in enumerate(encoded["input_ids"]) if len(ids) >= max_length]
    if not full:
        return np.zeros(0, np.int64)
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "Token indices sequence length is longer than ...": said here in our words
    try:
        again = tokenizer(*([column[i] for i in full] for column in columns), truncation=False)
    finally:
        hf_logging.set_verbosity(level)
    return np.asarray([i for i, ids in zip(full, again["input_ids"]) if len(ids) > max_length], np.int64)


def encode_labelled(
    texts: list[tuple[str, ...]], labels, tokenizer, max_length: int, where: str = "a split"
) -> Features:
    """Like :func:`encode`, with a ``labels`` entry per example."""
    features = encode(texts, tokenizer, max_length, where)
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
