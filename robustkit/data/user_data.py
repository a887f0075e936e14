"""The user's own labelled text data as a task: files, folders, hub datasets, DataFrames.

Any labelled text data becomes a :class:`robustkit.data.tasks.Task` of the user's name, with the
``{"train", "validation", "test"}`` -> :class:`datasets.Dataset` splits every loader returns
(text columns under their own names, an integer ``label`` (float for regression) and ``idx``,
the example's row in its source file or split)::

    task = robustkit.data.user_data.register("reviews.csv")            # task "reviews"
    task = robustkit.data.user_data.register(frame, name="reviews")    # a pandas DataFrame
    robustkit.train(RunSpec(task="reviews", data_dir="reviews.csv", model="bert-tiny"), "runs")

- sources: a ``.csv``, ``.tsv``, ``.jsonl`` or ``.parquet`` file, a folder of one such file per
  split, a ``save_to_disk`` folder, ``hub:NAME[:CONFIG]``, or in a notebook a DataFrame or a
  ``datasets`` object; column choices ride in the source string
  (``reviews.csv#text=review,label=stars``, :func:`source_string`);
- columns: the label is ``label_column`` or the first of :data:`LABEL_NAMES`; the text is
  ``text_columns``, the first pair of :data:`PAIR_NAMES`, the first of :data:`TEXT_NAMES` or the
  only string column; word labels and whole numbers are classes (``1``, ``"1"`` and ``1.0`` one
  class, with a note), numbers beside words are refused naming the rows, a number that is not
  whole (or ``#kind=regression``) makes a regression, said in a note; a label of fewer than
  :data:`RARE_LABEL_ROWS` rows is refused unless kept;
- splits: a source's own splits are kept; a missing validation and/or test split is 10 % of
  train each, drawn per label over distinct texts (seeded by :data:`USER_SPLIT_SEED`);
- checks: texts shared between splits and texts repeated in a split (case and whitespace
  aside) are warned with counts (:mod:`robustkit.data.user_checks`), as are the label notes;
  ``train`` and ``reproduce`` refuse a task name their store gives other data
  (:func:`robustkit.store.task_names.check_name_free`);
- identity: :func:`fingerprint` (``user:sha256:<hex>``) hashes the contents, not the path.

This module reads the data (:func:`read`, the steps in order) and registers it in this process
(:func:`register`, :func:`ensure`); the steps live in :mod:`robustkit.data.user_sources`,
:mod:`~robustkit.data.user_columns`, :mod:`~robustkit.data.user_splits` and
:mod:`~robustkit.data.user_dataset`. The full rules: ``docs/reference.md``, "robustkit/data/user_data.py".
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import datasets
import pandas as pd

from robustkit.data.catalogue import TASKS
from robustkit.data.stat_keys import stat_key
from robustkit.data.user_checks import UserDataWarning, row_notes
from robustkit.data.user_columns import (
    LABEL_NAMES,
    PAIR_NAMES,
    RARE_LABEL_ROWS,
    TEXT_NAMES,
    canonical_split,
    find_labels,
    find_text_columns,
    task_of,
)
from robustkit.data.user_dataset import SAVED_COPY, UserData, fingerprint, read_copy
from robustkit.data.user_sources import (
    HUB_NAME,
    HUB_PREFIX,
    as_frame,
    named_splits,
    parse_source,
    read_location,
    source_string,
)
from robustkit.data.user_splits import USER_SPLIT_SEED, complete_splits
from robustkit.errors import TaskError

__all__ = [
    # read and registered in this process: this module
    "UserData",
    "ensure",
    "read",
    "register",
    "registered",
    "run_fields",
    # documented here (docs/reference.md), defined beside their step
    "LABEL_NAMES",
    "PAIR_NAMES",
    "RARE_LABEL_ROWS",
    "TEXT_NAMES",
    "USER_SPLIT_SEED",
    "UserDataWarning",
    "fingerprint",
    "source_string",
]

# task name -> its data, read in this process (register, or ensure from a run's data_dir)
_REGISTRY: dict[str, UserData] = {}


def registered(name: str) -> UserData | None:
    """The data registered in this process under task ``name``, or None."""
    return _REGISTRY.get(name)


def ensure(name: str, data_dir: str | Path | None) -> UserData | None:
    """The data of task ``name``: read from ``data_dir`` (and registered) unless this process
    registered it from there already and its files did not change since; None if ``name`` was
    never registered and ``data_dir`` is None."""
    loaded = _REGISTRY.get(name)
    if data_dir is None:
        return loaded
    location, choices = parse_source(str(data_dir))
    columns = tuple(c for c in (choices.get("text"), choices.get("pair")) if c) or None
    source = source_string(  # one spelling
        location, columns, choices.get("label"), choices.get("rare") == "keep", choices.get("kind") == "regression"
    )
    signature = _signature(location)
    if loaded is not None and loaded.source == source and signature is not None and _SIGNATURES.get(name) == signature:
        return loaded
    _register(source, name)  # quietly: register (or train's --data) said its notes when first read
    return _REGISTRY[name]


# task name -> the stat signature of its source's files when they were read (None: not cacheable)
_SIGNATURES: dict[str, tuple | None] = {}


def _signature(location: str) -> tuple | None:
    """(path, inode, size, mtime) of every file of a local source; the name of a hub dataset (read
    once per process: the datasets library caches its files); None where a file is too recent to
    trust its mtime, or missing."""
    path = Path(location)
    if location.startswith(HUB_PREFIX):
        return (location,)
    if not path.exists():
        return None
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    keys = tuple(stat_key(p) for p in files)  # None: a file too recent to trust its mtime
    return None if None in keys else keys


def register(
    data,
    name: str | None = None,
    text_columns: tuple[str, ...] | list[str] | None = None,
    label_column: str | None = None,
    allow_rare_labels: bool = False,
) -> Any:
    """Read ``data`` (:func:`read`) and register it as task ``name``: from then on this process's
    :func:`robustkit.data.tasks.get_task` and :func:`~robustkit.data.tasks.load_splits` know the task.

    Returns
    -------
    robustkit.data.tasks.Task

    Warns
    -----
    UserDataWarning
        One line each: texts shared between splits, texts repeated within a split, labels read
        as one class although written apart (``1``, ``"1"``, ``1.0``), a regression target.

    Raises
    ------
    TaskError
        See :func:`read`.
    """
    loaded = _register(data, name, text_columns, label_column, allow_rare_labels)
    for note in loaded.notes:
        warnings.warn(note, UserDataWarning, stacklevel=2)
    return loaded.task


def _register(data, name=None, text_columns=None, label_column=None, allow_rare_labels=False) -> UserData:
    """:func:`register` without its warnings (a later read of data registered before)."""
    signature = _signature(parse_source(str(data))[0]) if isinstance(data, (str, Path)) else None
    loaded = read(data, name, text_columns, label_column, allow_rare_labels)  # a name registered again: new data
    _REGISTRY[loaded.task.name] = loaded
    _SIGNATURES[loaded.task.name] = signature  # stat before the read: a file changed since is read again
    return loaded


def run_fields(
    data: str | Path | None = None,
    dataset: str | None = None,
    name: str | None = None,
    text_column: str | None = None,
    text_pair_column: str | None = None,
    label_column: str | None = None,
    allow_rare_labels: bool = False,
) -> dict[str, str]:
    """The ``task`` and ``data_dir`` of runs on user data given by a path (``data``, possibly with
    reading choices, ``reviews.csv#kind=regression``) or a hub dataset (``dataset``, ``NAME`` or
    ``NAME:CONFIG``), read and registered now (its notes warned): what ``robustkit train
    --data`` / ``--dataset`` put into the run spec. Before runs of it join a store,
    :func:`robustkit.store.task_names.check_name_free` refuses a name the store gives other data.

    Raises
    ------
    TaskError
        Both or neither of ``data`` and ``dataset`` (a name or column given without data), a
        malformed hub name, a pair column without a text column; see :func:`read`.
    """
    if data is None and dataset is None:
        given = [
            flag
            for flag, value in (
                ("--task-name", name),
                ("--text-column", text_column),
                ("--text-pair-column", text_pair_column),
                ("--label-column", label_column),
            )
            if value is not None
        ]
        raise TaskError(
            f"{', '.join(given) or 'a task name or column'} names your own data: give one of --data "
            "FILE_OR_DIR and --dataset NAME[:CONFIG]"
        )
    if data is not None and dataset is not None:
        raise TaskError("give one of --data FILE_OR_DIR and --dataset NAME[:CONFIG], not both")
    if dataset is not None and not HUB_NAME.match(dataset):
        raise TaskError(f"--dataset {dataset!r} is no hub dataset name: NAME or OWNER/NAME, then :CONFIG if any")
    if text_pair_column and not text_column:
        raise TaskError("--text-pair-column needs --text-column (the first text of the pair)")
    location, choices = parse_source(str(data)) if data is not None else (HUB_PREFIX + dataset, {})
    columns = tuple(c for c in (text_column, text_pair_column) if c) or None
    columns = columns or tuple(c for c in (choices.get("text"), choices.get("pair")) if c) or None
    source = source_string(
        location,
        columns,
        label_column or choices.get("label"),
        allow_rare_labels or choices.get("rare") == "keep",
        choices.get("kind") == "regression",
    )
    task = register(source, name)
    return {"task": task.name, "data_dir": source}


def read(
    data,
    name: str | None = None,
    text_columns: tuple[str, ...] | list[str] | None = None,
    label_column: str | None = None,
    allow_rare_labels: bool = False,
) -> UserData:
    """Read user data into a task and its splits (module docstring: sources, columns, split rule).

    Parameters
    ----------
    data : str, Path, pandas.DataFrame, datasets.Dataset or datasets.DatasetDict
        A source string (a path, ``hub:NAME[:CONFIG]``, possibly with ``#text=...`` column
        choices) or an object.
    name : str, optional
        The task's name; default the file's stem, the folder's or hub dataset's name. Objects
        need one.
    text_columns : sequence of str, optional
        One column (single text) or two (text pair); default: found.
    label_column : str, optional
        Default: found (:data:`LABEL_NAMES`).
    allow_rare_labels : bool
        Keep a label of fewer than :data:`RARE_LABEL_ROWS` rows (refused by default: a typo such
        as ``postive`` would otherwise train a class of its own).

    Raises
    ------
    TaskError
        Unreadable data, unknown split names, columns not found, missing labels, an empty split,
        a header without rows, a label that is not one value (a list), a rare label, a label in
        validation or test that train lacks, or a name that is a built-in task's. A file's
        message names the file.
    """
    source, regression = None, False
    if isinstance(data, (str, Path)):
        location, choices = parse_source(str(data))
        text_columns = text_columns or tuple(c for c in (choices.get("text"), choices.get("pair")) if c) or None
        label_column = label_column or choices.get("label")
        allow_rare_labels = allow_rare_labels or choices.get("rare") == "keep"
        regression = choices.get("kind") == "regression"
        source = source_string(location, text_columns, label_column, allow_rare_labels, regression)
        if (Path(location) / SAVED_COPY).is_file():
            return read_copy(Path(location), name, source)
        raw, default_name = read_location(location)
    elif isinstance(data, pd.DataFrame):
        raw, default_name = {"train": data.reset_index(drop=True)}, None
    elif isinstance(data, datasets.DatasetDict):
        raw, default_name = dict(data), None
    elif isinstance(data, datasets.Dataset):
        raw, default_name = {"train": data}, None
    else:
        raise TaskError(
            f"cannot read {type(data).__name__} as labelled text data; give a file, a folder, "
            "'hub:NAME[:CONFIG]', a pandas DataFrame or a datasets Dataset/DatasetDict"
        )
    name = name or default_name
    if not name or not isinstance(name, str):
        raise TaskError("user data needs a task name (name=... or --task-name)")
    if name in TASKS:
        raise TaskError(f"task name {name!r} is a built-in task's; name your data otherwise (--task-name)")
    try:
        splits = named_splits(raw, name)
        frames = {split: as_frame(table) for split, table in splits.items()}
        for split, frame in frames.items():
            if frame.empty:
                raise TaskError(f"task {name!r}: the {split} split has no rows (a header only?)")
        notes: list[str] = []
        label_info = find_labels(splits["train"], frames, label_column, name, allow_rare_labels, regression, notes)
        fields = find_text_columns(frames["train"], text_columns, label_info[0], name)
        task = task_of(name, fields, label_info[1])
        canonical = {split: canonical_split(frame, fields, label_info, task, split) for split, frame in frames.items()}
        canonical, rule = complete_splits(canonical, task)
        notes += row_notes(canonical, fields, f"task {name!r}")
    except TaskError as error:
        if source is None or location in str(error):
            raise
        raise TaskError(f"{location}: {error}") from None  # the message names the file
    if source is not None:  # each line names the file, as errors do
        notes = [f"{location}: {note}" for note in notes]
    return UserData(task, canonical, fingerprint(task, canonical), source, rule, tuple(notes))
