"""The tasks robustkit knows, and what every task loader returns.

:class:`Task` is the record of a task (text columns, labels, metrics, where its data comes from);
:data:`TASKS` holds the built-in ones (GLUE, hub or local TSV, and the embedded ``rt`` and
``polarity``). Every loader (:mod:`robustkit.data.tasks` for those, :mod:`robustkit.data.user_data` for the
user's own data) returns its splits as :class:`datasets.Dataset` of one schema
(:func:`dataset_of_frame`), fingerprinted by :func:`split_fingerprint`. Kept apart from the
loaders so that both can build on it without importing each other.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # imported where a split is built: a reader of stored runs needs only the task names
    import datasets

MOVIE_REVIEWS = "Pang & Lee movie-review polarity data"
HELD_OUT_FRACTION = 0.1  # of each label's distinct texts, for each held-out split


@dataclass(frozen=True)
class Task:
    """A labelled dataset with splits and metrics.

    Attributes
    ----------
    name : str
        Registry key, e.g. ``"rte"``, ``"mnli-mm"``, ``"rt"``.
    text_fields : tuple of str
        One column (single sentence) or two (sentence pair), named as in ``nyu-mll/glue``.
    num_labels : int
        Number of classes; 1 means regression (``stsb``).
    metrics : tuple of str
        Names understood by :func:`compute_metrics`.
    main_metric : str
        The metric used for model selection and reporting (as in He et al. 2021, table 2).
    source : str
        ``"glue"`` (hub or local TSV), ``"embedded"`` (an asset shipped with robustkit) or
        ``"user"`` (the user's own data, :mod:`robustkit.data.user_data`).
    glue_config : str or None
        Configuration name of ``nyu-mll/glue`` (GLUE tasks only).
    label_names : tuple of str
        Name of each label id; empty for regression.
    validation_split : str
        Hub split used as validation (``validation_matched`` / ``_mismatched`` for MNLI).
    asset : str or None
        Asset name of an embedded task's data file.
    corpus : str or None
        The text collection the task's sentences come from, where two tasks share one: such
        tasks are one corpus, not two independent tasks, in a figure that pools tasks.
    """

    name: str
    text_fields: tuple[str, ...]
    num_labels: int
    metrics: tuple[str, ...]
    main_metric: str
    source: str
    glue_config: str | None
    label_names: tuple[str, ...]
    validation_split: str = "validation"
    asset: str | None = None
    corpus: str | None = None

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1


def _glue(
    name: str,
    fields: tuple[str, ...],
    labels: tuple[str, ...],
    metrics: tuple[str, ...] = ("accuracy",),
    main: str = "accuracy",
    config: str | None = None,
    val: str = "validation",
) -> Task:
    """A GLUE task; no label names means regression (one output)."""
    return Task(name, fields, max(len(labels), 1), metrics, main, "glue", config or name, labels, val)


_PAIR = ("sentence1", "sentence2")
_NLI = ("entailment", "not_entailment")
_SENTIMENT = ("negative", "positive")
_MNLI = ("entailment", "neutral", "contradiction")

TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        _glue("cola", ("sentence",), ("unacceptable", "acceptable"), ("mcc",), "mcc"),
        _glue("sst2", ("sentence",), _SENTIMENT),
        _glue("mrpc", _PAIR, ("not_equivalent", "equivalent"), ("f1", "accuracy"), "f1"),
        _glue("qqp", ("question1", "question2"), ("not_duplicate", "duplicate"), ("f1", "accuracy"), "f1"),
        _glue("stsb", _PAIR, (), ("pearson", "spearman"), "spearman"),
        _glue("mnli", ("premise", "hypothesis"), _MNLI, val="validation_matched"),
        _glue("mnli-mm", ("premise", "hypothesis"), _MNLI, config="mnli", val="validation_mismatched"),
        _glue("qnli", ("question", "sentence"), _NLI),
        _glue("rte", _PAIR, _NLI),
        _glue("wnli", _PAIR, ("not_entailment", "entailment")),
        # both are Pang & Lee's movie-review polarity data (rotten-tomatoes snippets, review sentences)
        Task(
            "rt",
            ("sentence",),
            2,
            ("accuracy",),
            "accuracy",
            "embedded",
            None,
            _SENTIMENT,
            asset="rt",
            corpus=MOVIE_REVIEWS,
        ),
        Task(
            "polarity",
            ("sentence",),
            2,
            ("accuracy",),
            "accuracy",
            "embedded",
            None,
            _SENTIMENT,
            asset="polarity",
            corpus=MOVIE_REVIEWS,
        ),
    )
}


def _features(task: Task) -> datasets.Features:
    """The common schema of every split, whichever source it came from."""
    import datasets

    columns = {field: datasets.Value("string") for field in task.text_fields}
    columns["label"] = datasets.Value("float32" if task.is_regression else "int64")
    columns["idx"] = datasets.Value("int64")
    return datasets.Features(columns)


def dataset_of_frame(frame: pd.DataFrame, task: Task) -> datasets.Dataset:
    """``frame``'s text fields, ``label`` and ``idx`` as a split in the common schema."""
    import datasets

    columns = [*task.text_fields, "label", "idx"]
    return datasets.Dataset.from_pandas(frame[columns], features=_features(task), preserve_index=False)


def split_fingerprint(splits: Mapping[str, datasets.Dataset]) -> dict[str, str]:
    """sha256 per split over its (idx, text fields..., label) rows, in order.

    Text fields are all columns other than ``idx`` and ``label``, in column order. Each row is
    hashed as one JSON array per line, so the digest depends on content and order only.
    """
    return {name: _fingerprint(dataset) for name, dataset in splits.items()}


def _fingerprint(dataset: datasets.Dataset) -> str:
    fields = [c for c in dataset.column_names if c not in ("idx", "label")]
    digest = hashlib.sha256()
    for row in zip(dataset["idx"], *(dataset[f] for f in fields), dataset["label"]):
        digest.update(json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n")
    return digest.hexdigest()


def grouped_stratified_split(texts: pd.Series, labels: np.ndarray, seed: int, parts: int = 2) -> np.ndarray:
    """Split id of each row: 0 (train) or 1..``parts`` (held out: validation, test).

    Rows with equal text share a split; per label (of a text's first row), a shuffle seeded by
    ``(seed, label)`` of the distinct texts sends ``HELD_OUT_FRACTION`` of them to each held-out
    split in turn, the rest to train. The embedded tasks' fixed split (two held-out parts) and
    the user data's missing splits (:mod:`robustkit.data.user_splits`) are both this rule.

    Parameters
    ----------
    texts : pandas.Series of str, shape (n,)
    labels : numpy.ndarray of int, shape (n,)
    seed : int
    parts : int
        Held-out splits to draw.

    Returns
    -------
    numpy.ndarray of int, shape (n,)
    """
    group, _ = pd.factorize(texts)
    _, first_rows = np.unique(group, return_index=True)
    group_label = labels[first_rows]
    group_split = np.zeros(len(first_rows), dtype=np.int64)
    for label in np.unique(group_label):
        members = np.flatnonzero(group_label == label)
        members = np.random.default_rng([seed, int(label)]).permutation(members)
        held_out = round(len(members) * HELD_OUT_FRACTION)
        for part in range(1, parts + 1):
            group_split[members[(part - 1) * held_out : part * held_out]] = part
    return group_split[group]
