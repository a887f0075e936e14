"""A seeded sample of a run's split, in evaluation batches: the fixed data that curvature, loss
surfaces and mode connectivity evaluate a model on.

The examples are drawn by ``seed`` alone, not by the run's seed, so every run trained on the same
data (same task, ``train_size``, ``split_seed``, ``data_dir``) is measured on the same examples:
adapter and full runs are compared on one batch. They are tokenised and padded as the training
loop does it (:func:`robustkit.train.evaluate.encode_split`, the run's ``max_length``).
"""

from __future__ import annotations

import numpy as np
import torch

from robustkit.data import batches as data
from robustkit.data import tasks
from robustkit.errors import RobustkitError
from robustkit.models import pretrained as models
from robustkit.specs.spec import RunSpec
from robustkit.store.run_data import run_splits, run_task
from robustkit.train.evaluate import EVAL_BATCH_SIZE, encode_split, eval_batches


def sampled_batches(
    spec: RunSpec,
    split: str = "train",
    examples: int | None = None,
    seed: int = 0,
    batch_size: int = EVAL_BATCH_SIZE,
) -> list[dict[str, torch.Tensor]]:
    """``examples`` examples of the run's ``split`` drawn without replacement, in padded batches.

    Parameters
    ----------
    spec : RunSpec
        The run (its task, data settings, tokenizer and ``max_length``).
    split : str
        ``train``, ``validation`` or ``test`` (the run's own splits, low-resource ones included).
    examples : int, optional
        How many (default: every example of the split); at most the split's size.
    seed : int
        Seed of the draw.
    batch_size : int
        Examples per batch (``examples`` for a single batch).

    Returns
    -------
    list of dict of str to Tensor
        Batches of :func:`robustkit.train.evaluate.eval_batches` (with ``labels`` and ``order``, the
        row of each example in the sample).

    Raises
    ------
    RobustkitError
        Unknown split, or ``examples`` below 1 or above the split's size.
    """
    spec = spec.resolved()
    if split not in tasks.SPLITS:
        raise RobustkitError(f"unknown split {split!r}; known: {', '.join(tasks.SPLITS)}")
    task = run_task(spec)
    loaded = run_splits(spec)[split]  # checked against the run's recorded data
    n = len(loaded)
    if examples is not None and not 1 <= examples <= n:
        raise RobustkitError(f"cannot sample {examples} examples: the {split} split of {spec.task!r} has {n}")
    rows = (
        np.arange(n)
        if examples is None or examples == n
        else np.sort(np.random.default_rng(seed).choice(n, examples, replace=False))
    )
    tokenizer = models.load_tokenizer(spec.model)
    features = encode_split(loaded.select(rows.tolist()), task, tokenizer, spec.max_length, split)
    return eval_batches(features, batch_size, data.classification_collator(tokenizer))
