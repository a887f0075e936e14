"""A user's data set once read (:class:`UserData`): its identity, and the copy a store keeps.

:func:`fingerprint` (``user:sha256:<hex>``) hashes the splits' contents, the text column names
and the label names, not the path: what a run's id holds of its data. :func:`save_copy` writes a
data set read from a notebook's object (which lives in one process only) into a folder that a
later process reads back with the same fingerprint (:func:`read_copy`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets

from robustkit.data.catalogue import Task, split_fingerprint
from robustkit.data.user_columns import task_of
from robustkit.errors import TaskError


@dataclass(frozen=True)
class UserData:
    """A user's data set, read: its task, splits and identity.

    Attributes
    ----------
    task : robustkit.data.tasks.Task
        ``source="user"``, the user's name, text fields, label names, metrics.
    splits : dict of str to datasets.Dataset
        ``train``, ``validation``, ``test`` (the full data, before any ``train_size``).
    fingerprint : str
        ``user:sha256:<hex>`` (:func:`fingerprint`).
    source : str or None
        Where it was read (the source string, with any column choices); None for an object.
    rule : str
        How the splits were made, in words (which splits were given, which drawn).
    notes : tuple of str
        One line each, what reading noticed (texts shared between splits, repeated texts, how
        the labels were read): :func:`robustkit.data.user_data.register` warns them.
    """

    task: Any
    splits: dict
    fingerprint: str
    source: str | None
    rule: str
    notes: tuple[str, ...] = ()


SAVED_COPY = "robustkit-data.json"  # marks a folder written by save_copy (the task and its identity)


def fingerprint(task: Task, splits: dict[str, datasets.Dataset]) -> str:
    """``user:sha256:<hex>`` over the splits' rows (idx, text fields, label; in order), the
    text column names and the label names: what a run's id holds of its data."""
    content = {
        "splits": split_fingerprint({k: splits[k] for k in ("train", "validation", "test")}),
        "text_fields": list(task.text_fields),
        "label_names": list(task.label_names),
        "regression": task.is_regression,
    }
    return "user:sha256:" + hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def save_copy(loaded: UserData, folder: str | Path) -> Path:
    """Save ``loaded`` (its task and its splits as read, ``idx`` included) under ``folder``
    so that a later process reads the same task with the same fingerprint from there: how a
    store keeps the data of runs trained on a DataFrame or ``datasets`` object of a notebook,
    which live in one process only. Written once; a folder already there is kept.

    Returns
    -------
    Path
        The folder: a source :func:`read` takes (``data_dir`` of such runs).
    """
    folder = Path(folder)
    if (folder / SAVED_COPY).is_file():
        return folder
    partial = folder.with_name(f".{folder.name}.partial-{os.getpid()}")
    shown = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # a training log line per run, not a bar per split
    try:
        datasets.DatasetDict(loaded.splits).save_to_disk(str(partial))
    finally:
        if shown:
            datasets.enable_progress_bars()
    about = {
        "name": loaded.task.name,
        "text_fields": list(loaded.task.text_fields),
        "label_names": list(loaded.task.label_names),
        "fingerprint": loaded.fingerprint,
        "rule": loaded.rule,
    }
    (partial / SAVED_COPY).write_text(json.dumps(about, indent=1))
    try:
        partial.rename(folder)  # atomic: a reader sees the whole copy or none
    except OSError:  # another process saved it first: the same content, by its name
        shutil.rmtree(partial, ignore_errors=True)
    return folder


def read_copy(folder: Path, name: str | None, source: str) -> UserData:
    """The data :func:`save_copy` saved in ``folder``, checked against its recorded fingerprint."""
    about = json.loads((folder / SAVED_COPY).read_text())
    loaded = datasets.load_from_disk(str(folder))
    task = task_of(name or about["name"], tuple(about["text_fields"]), tuple(about["label_names"]))
    splits = {split: loaded[split] for split in ("train", "validation", "test")}
    digest = fingerprint(task, splits)
    if digest != about["fingerprint"]:
        raise TaskError(f"the saved data in {folder} gives {digest}, not the {about['fingerprint']} it was saved as")
    return UserData(task, splits, digest, source, about["rule"])
