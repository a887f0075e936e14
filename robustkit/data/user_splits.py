"""The split rule of user data: missing validation and test splits drawn from train; train_size.

A source's own splits are kept as they are. A missing validation and/or test split is 10 % of
train each, drawn per label over distinct texts (case and whitespace aside: such rows share a
split) with a generator seeded by
:data:`USER_SPLIT_SEED` (:func:`robustkit.data.catalogue.grouped_stratified_split`, the embedded
tasks' rule); ``train_size=N`` keeps the first N of a seeded permutation of train
(:func:`low_resource`).
"""

from __future__ import annotations

import datasets
import numpy as np

from robustkit.data.catalogue import Task, grouped_stratified_split
from robustkit.data.user_checks import text_keys
from robustkit.errors import TaskError

USER_SPLIT_SEED = 20210601  # the embedded tasks' split seed (robustkit.data.tasks.EMBEDDED_SPLIT_SEED)


def complete_splits(splits: dict[str, datasets.Dataset], task: Task) -> tuple[dict[str, datasets.Dataset], str]:
    """Draw the missing validation / test splits from train (the module docstring's rule)."""
    missing = [s for s in ("validation", "test") if s not in splits]
    given = [s for s in ("train", "validation", "test") if s in splits]
    if not missing:
        return splits, "train, validation and test as given"
    train = splits["train"]
    texts = text_keys(train, task.text_fields)  # rows differing only in case or spacing share a split
    labels = np.zeros(len(train), np.int64) if task.is_regression else np.asarray(train["label"], np.int64)
    assignment = grouped_stratified_split(texts, labels, USER_SPLIT_SEED, parts=len(missing))
    out = dict(splits)
    out["train"] = train.select(np.flatnonzero(assignment == 0))
    for i, split in enumerate(missing, start=1):
        out[split] = train.select(np.flatnonzero(assignment == i))
        if len(out[split]) == 0:
            raise TaskError(
                f"task {task.name!r}: too little data to draw a {split} split from {len(train)} training "
                f"rows (10 % per label); give a {split} file"
            )
    rule = (
        f"{', '.join(given)} as given; {' and '.join(missing)} drawn from train (10 % each, "
        f"stratified by label, seed {USER_SPLIT_SEED})"
    )
    return out, rule


def low_resource(splits: dict[str, datasets.Dataset], n: int, seed: int, task: Task) -> dict[str, datasets.Dataset]:
    """``train_size=n``: the first n of a ``seed``-ed permutation of train (kept in source
    order); validation and test unchanged."""
    train = splits["train"]
    if n > len(train):
        raise TaskError(
            f"train_size={n} is more than the {len(train)} training examples of task {task.name!r}; "
            "pass --train-size all (or a smaller N)"
        )
    order = np.random.default_rng(seed).permutation(len(train))
    return {"train": train.select(np.sort(order[:n])), "validation": splits["validation"], "test": splits["test"]}
