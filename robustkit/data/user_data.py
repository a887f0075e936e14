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
  only string column; a float label means regression; a label of fewer than
  :data:`RARE_LABEL_ROWS` rows is refused unless kept;
- splits: a source's own splits are kept; a missing validation and/or test split is 10 % of
  train each, drawn per label over distinct texts (seeded by :data:`USER_SPLIT_SEED`);
- identity: :func:`fingerprint` (``user:sha256:<hex>``) hashes the contents, not the path.

The full rules (sources, columns and metrics, the split rule, ``train_size``, identity):
``docs/reference.md``, "robustkit/data/user_data.py".
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pandas as pd

from robustkit.data.catalogue import TASKS, Task, dataset_of_frame, grouped_stratified_split, split_fingerprint
from robustkit.data.stat_keys import stat_key
from robustkit.errors import TaskError

__all__ = [
    "USER_SPLIT_SEED",
    "UserData",
    "ensure",
    "register",
    "registered",
    "read",
    "run_fields",
    "fingerprint",
    "is_source",
    "source_string",
    "save_copy",
    "SAVED_COPY",
    "TEXT_NAMES",
    "PAIR_NAMES",
    "LABEL_NAMES",
]

USER_SPLIT_SEED = 20210601  # the embedded tasks' split seed (robustkit.data.tasks.EMBEDDED_SPLIT_SEED)
READERS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet"}
SPLIT_NAMES = {
    "train": ("train", "training"),
    "validation": ("validation", "valid", "val", "dev"),
    "test": ("test", "testing"),
}
TEXT_NAMES = ("text", "sentence", "review", "content", "document", "comment", "tweet")
PAIR_NAMES = (
    ("sentence1", "sentence2"),
    ("premise", "hypothesis"),
    ("question1", "question2"),
    ("question", "sentence"),
    ("text_a", "text_b"),
    ("text1", "text2"),
)
LABEL_NAMES = ("label", "labels", "target", "class", "score", "y")
HUB_PREFIX = "hub:"
_HUB_NAME = re.compile(r"^[\w.-]+(/[\w.-]+)?(:[\w.-]+)?$")
# column choices ride in the source string (a run's data_dir), so that a spawned sweep worker
# reading the spec reads the same columns: "reviews.csv#text=review,label=stars"
_CHOICES = re.compile(r"^(.*)#((?:text|pair|label|rare)=[^#]*)$")
RARE_LABEL_ROWS = 3  # a label with fewer rows than this in all splits is taken for a typo


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
    """

    task: Any
    splits: dict
    fingerprint: str
    source: str | None
    rule: str


SAVED_COPY = "robustkit-data.json"  # marks a folder written by save_copy (the task and its identity)

# task name -> its data, read in this process (register, or ensure from a run's data_dir)
_REGISTRY: dict[str, UserData] = {}


def is_source(data_dir: str | Path | None) -> bool:
    """Whether ``data_dir`` names user data (a data file, a folder of split files or a saved
    ``datasets`` folder, or ``hub:...``) rather than a GLUE TSV folder."""
    if data_dir is None:
        return False
    location, _ = _parse(str(data_dir))
    if location.startswith(HUB_PREFIX):
        return True
    path = Path(location)
    return path.is_file() or (path.is_dir() and (_saved(path) or bool(_split_files(path))))


def source_string(
    location: str | Path,
    text_columns: tuple[str, ...] | list[str] | None = None,
    label_column: str | None = None,
    allow_rare_labels: bool = False,
) -> str:
    """The source string of a run's ``data_dir``: ``location`` with the reading choices, if any
    (``reviews.csv#text=review,label=stars``; ``pair`` marks the second text column; ``rare=keep``
    keeps labels of fewer than :data:`RARE_LABEL_ROWS` rows)."""
    parts = []
    if text_columns:
        parts.append("text=" + text_columns[0])
        if len(text_columns) > 1:
            parts.append("pair=" + text_columns[1])
    if label_column:
        parts.append("label=" + label_column)
    if allow_rare_labels:
        parts.append("rare=keep")
    return str(location) + ("#" + ",".join(parts) if parts else "")


def _parse(source: str) -> tuple[str, dict[str, str]]:
    match = _CHOICES.match(source)
    if not match:
        return source, {}
    choices = dict(item.split("=", 1) for item in match.group(2).split(",") if "=" in item)
    return match.group(1), choices


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
    location, choices = _parse(str(data_dir))
    columns = tuple(c for c in (choices.get("text"), choices.get("pair")) if c) or None
    source = source_string(location, columns, choices.get("label"), choices.get("rare") == "keep")  # one spelling
    signature = _signature(location)
    if loaded is not None and loaded.source == source and signature is not None and _SIGNATURES.get(name) == signature:
        return loaded
    register(source, name)
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

    Raises
    ------
    TaskError
        See :func:`read`.
    """
    signature = _signature(_parse(str(data))[0]) if isinstance(data, (str, Path)) else None
    loaded = read(data, name, text_columns, label_column, allow_rare_labels)  # a name registered again: new data
    _REGISTRY[loaded.task.name] = loaded
    _SIGNATURES[loaded.task.name] = signature  # stat before the read: a file changed since is read again
    return loaded.task


def run_fields(
    data: str | Path | None = None,
    dataset: str | None = None,
    name: str | None = None,
    text_column: str | None = None,
    text_pair_column: str | None = None,
    label_column: str | None = None,
    allow_rare_labels: bool = False,
) -> dict[str, str]:
    """The ``task`` and ``data_dir`` of runs on user data given by a path (``data``) or a hub
    dataset (``dataset``, ``NAME`` or ``NAME:CONFIG``), read and registered now: what
    ``robustkit train --data`` / ``--dataset`` put into the run spec.

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
    if dataset is not None and not _HUB_NAME.match(dataset):
        raise TaskError(f"--dataset {dataset!r} is no hub dataset name: NAME or OWNER/NAME, then :CONFIG if any")
    if text_pair_column and not text_column:
        raise TaskError("--text-pair-column needs --text-column (the first text of the pair)")
    columns = tuple(c for c in (text_column, text_pair_column) if c) or None
    location = str(data) if data is not None else HUB_PREFIX + dataset
    source = source_string(location, columns, label_column, allow_rare_labels)
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
    source = None
    if isinstance(data, (str, Path)):
        location, choices = _parse(str(data))
        text_columns = text_columns or tuple(c for c in (choices.get("text"), choices.get("pair")) if c) or None
        label_column = label_column or choices.get("label")
        allow_rare_labels = allow_rare_labels or choices.get("rare") == "keep"
        source = source_string(location, text_columns, label_column, allow_rare_labels)
        if (Path(location) / SAVED_COPY).is_file():
            return _read_copy(Path(location), name, source)
        raw, default_name = _read_location(location)
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
        splits = _named_splits(raw, name)
        frames = {split: _frame(table) for split, table in splits.items()}
        for split, frame in frames.items():
            if frame.empty:
                raise TaskError(f"task {name!r}: the {split} split has no rows (a header only?)")
        label_info = _label_info(splits["train"], frames, label_column, name, allow_rare_labels)
        fields = _text_columns(frames["train"], text_columns, label_info[0], name)
        task = _task(name, fields, label_info[1])
        canonical = {split: _canonical(frame, fields, label_info, task, split) for split, frame in frames.items()}
        canonical, rule = _complete(canonical, task)
    except TaskError as error:
        if source is None or location in str(error):
            raise
        raise TaskError(f"{location}: {error}") from None  # the message names the file
    return UserData(task, canonical, fingerprint(task, canonical), source, rule)


def fingerprint(task, splits: dict[str, datasets.Dataset]) -> str:
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


def _read_copy(folder: Path, name: str | None, source: str) -> UserData:
    """The data :func:`save_copy` saved in ``folder``, checked against its recorded fingerprint."""
    about = json.loads((folder / SAVED_COPY).read_text())
    loaded = datasets.load_from_disk(str(folder))
    task = _task(name or about["name"], tuple(about["text_fields"]), tuple(about["label_names"]))
    splits = {split: loaded[split] for split in ("train", "validation", "test")}
    digest = fingerprint(task, splits)
    if digest != about["fingerprint"]:
        raise TaskError(f"the saved data in {folder} gives {digest}, not the {about['fingerprint']} it was saved as")
    return UserData(task, splits, digest, source, about["rule"])


# --- reading ------------------------------------------------------------------------------------


def _read_location(location: str) -> tuple[dict, str]:
    """Raw splits (name -> DataFrame or Dataset) and the default task name of a source."""
    if location.startswith(HUB_PREFIX):
        name, _, config = location[len(HUB_PREFIX) :].partition(":")
        try:  # the real hub route: any dataset the datasets library can load
            loaded = datasets.load_dataset(name, config or None)
        except Exception as error:  # noqa: BLE001 - network, unknown name, bad config: one line
            raise TaskError(
                f"cannot load hub dataset {name!r}{f' config {config!r}' if config else ''}: "
                f"{str(error).splitlines()[0] if str(error) else type(error).__name__}"
            ) from None
        return dict(loaded), name.rstrip("/").split("/")[-1]
    path = Path(location)
    if path.is_file():
        return {"train": _read_file(path)}, path.stem
    if path.is_dir():
        if _saved(path):
            try:
                loaded = datasets.load_from_disk(str(path))
            except Exception as error:  # noqa: BLE001
                raise TaskError(f"cannot read the saved dataset {path}: {error}") from None
            raw = dict(loaded) if isinstance(loaded, datasets.DatasetDict) else {"train": loaded}
            return raw, path.name
        files = _split_files(path)
        if not files:
            raise TaskError(
                f"{path} holds no data: expected train/validation/test files "
                f"({', '.join(READERS)}) or a folder written by datasets' save_to_disk"
            )
        return {split: _read_file(file) for split, file in files.items()}, path.name
    raise TaskError(f"no data at {location}: not a file, a folder or 'hub:NAME[:CONFIG]'")


def _saved(path: Path) -> bool:
    return (path / "dataset_dict.json").is_file() or (path / "dataset_info.json").is_file()


def _split_files(folder: Path) -> dict[str, Path]:
    """Files of ``folder`` whose stem is a split name and suffix a known format, by stem."""
    found: dict[str, Path] = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix.lower() in READERS:
            if path.stem in found:
                raise TaskError(f"{folder} has two {path.stem!r} files ({found[path.stem].name}, {path.name})")
            found[path.stem] = path
    return found


def _read_file(path: Path) -> pd.DataFrame:
    kind = READERS.get(path.suffix.lower())
    if kind is None:
        raise TaskError(f"cannot read {path}: unknown format {path.suffix!r}; known: {', '.join(READERS)}")
    try:
        if kind == "parquet":
            return pd.read_parquet(path)
        if kind == "jsonl":
            return pd.read_json(path, lines=True, dtype=False)
        # keep_default_na=False: texts such as "NA" or "null" stay texts
        return pd.read_csv(path, sep="\t" if kind == "tsv" else ",", keep_default_na=False, na_values=[""])
    except (ValueError, OSError, pd.errors.ParserError, pd.errors.EmptyDataError, ImportError) as error:
        raise TaskError(f"cannot read {path} as {kind}: {str(error).splitlines()[0]}") from None


def _named_splits(raw: dict, name: str) -> dict:
    """``raw`` keyed by train / validation / test (aliases mapped); one unknown split is train."""
    if len(raw) == 1:
        return {"train": next(iter(raw.values()))}
    named, unknown = {}, []
    for key, table in raw.items():
        split = next((s for s, aliases in SPLIT_NAMES.items() if str(key).lower() in aliases), None)
        if split is None:
            unknown.append(key)
        elif split in named:
            raise TaskError(f"task {name!r}: two {split} splits in the data ({', '.join(map(str, raw))})")
        else:
            named[split] = table
    if unknown or "train" not in named:
        raise TaskError(
            f"task {name!r}: splits {', '.join(map(repr, raw))}: expected train and optionally "
            f"validation and test (also called {', '.join(a for s in SPLIT_NAMES.values() for a in s[1:])})"
        )
    return named


def _frame(table) -> pd.DataFrame:
    return table.to_pandas() if isinstance(table, datasets.Dataset) else table


# --- columns and labels ---------------------------------------------------------------------------


def _label_info(
    train, frames: dict, column: str | None, name: str, allow_rare: bool = False
) -> tuple[str, tuple[str, ...], dict | None]:
    """(label column, label names (empty: regression), value -> id (None: regression or ids)).

    Labels are read as one type: integers written as strings (``"1"`` beside ``1``, as JSONL
    gives) are integers. Every label of validation and test must be one train has; a label of
    fewer than :data:`RARE_LABEL_ROWS` rows is refused (unless ``allow_rare``), naming its rows
    and the label it most resembles."""
    columns = list(frames["train"].columns)
    if column is None:
        column = next((c for c in LABEL_NAMES if c in columns), None)
        if column is None:
            raise TaskError(f"task {name!r}: no label column found among {columns}; name it (--label-column)")
    for split, frame in frames.items():
        if column not in frame.columns:
            raise TaskError(
                f"task {name!r}: the {split} split has no label column {column!r}; it has {list(frame.columns)}"
            )
    for split, frame in frames.items():
        nested = frame[column].map(lambda v: isinstance(v, (list, tuple, dict, np.ndarray)))
        if nested.any():
            row = int(np.flatnonzero(nested.to_numpy())[0])
            raise TaskError(
                f"task {name!r}: the {split} split's label column {column!r} holds "
                f"{type(frame[column].iloc[row]).__name__}s (first: row {row}); give one label per row"
            )
    feature = train.features.get(column) if isinstance(train, datasets.Dataset) else None
    if isinstance(feature, datasets.ClassLabel):
        names = tuple(feature.names)
        labels = {
            split: frame[column].map(lambda i: names[i] if 0 <= i < len(names) else i)
            for split, frame in frames.items()
        }
        _check_label_sets(labels, name, allow_rare)
        return column, names, None
    values = pd.concat([f[column] for f in frames.values()], ignore_index=True)
    if values.isna().any():
        raise TaskError(f"task {name!r}: {int(values.isna().sum())} rows have no label in column {column!r}")
    if pd.api.types.is_float_dtype(values):
        return column, (), None
    labels = {split: _one_type(frame[column]) for split, frame in frames.items()}
    values = pd.concat(labels.values(), ignore_index=True)
    distinct = sorted(values.unique(), key=lambda v: (str(type(v)), v))
    if len(distinct) < 2:
        raise TaskError(f"task {name!r}: column {column!r} has a single label value {distinct[0]!r}; need two or more")
    _check_label_sets(labels, name, allow_rare)
    ids = {v: i for i, v in enumerate(distinct)}
    for split, frame in list(frames.items()):  # the canonical splits map the normalised values
        frames[split] = frame.copy()
        frames[split][column] = labels[split].to_numpy()
    return column, tuple(str(v) for v in distinct), ids


def _one_type(labels: pd.Series) -> pd.Series:
    """Labels as one type: booleans as 0/1; integers and integer strings (``"1"``) as int."""
    if pd.api.types.is_bool_dtype(labels):
        return labels.astype(int)
    integer = labels.map(lambda v: isinstance(v, (int, np.integer)) or bool(isinstance(v, str) and _INTEGER.match(v)))
    if integer.all():
        return labels.map(int)
    return labels.map(lambda v: str(int(v)) if isinstance(v, (bool, np.bool_)) else str(v))


_INTEGER = re.compile(r"^\s*[-+]?\d+\s*$")


def _check_label_sets(labels: dict[str, pd.Series], name: str, allow_rare: bool) -> None:
    """Refuse labels validation or test have that train lacks, and (unless ``allow_rare``) rare labels."""
    known = set(labels["train"])
    for split in ("validation", "test"):
        if split in labels:
            extra = sorted(set(labels[split]) - known, key=str)
            if extra:
                rows = np.flatnonzero(labels[split].isin(extra).to_numpy())
                raise TaskError(
                    f"task {name!r}: the {split} split has labels the train split lacks: "
                    f"{', '.join(map(repr, extra))} ({len(rows)} rows, first: row {int(rows[0])})"
                )
    if allow_rare:
        return
    counts = pd.concat(labels.values(), ignore_index=True).value_counts()
    for label, count in counts.items():
        if count < RARE_LABEL_ROWS:
            where = [
                f"{split} row{'s' if len(rows) > 1 else ''} {', '.join(map(str, rows))}"
                for split, series in labels.items()
                if len(rows := np.flatnonzero((series == label).to_numpy()).tolist())
            ]
            others = [str(v) for v in counts.index if v != label]
            guess = difflib.get_close_matches(str(label), others, n=1, cutoff=0.5)
            raise TaskError(
                f"task {name!r}: label {label!r} has only {count} row{'s' if count > 1 else ''} ({'; '.join(where)})"
                f"{f', perhaps a typo of {guess[0]!r}' if guess else ''}; fix the data, or keep it as a class of "
                "its own with --allow-rare-labels"
            )


def _text_columns(frame: pd.DataFrame, given, label: str, name: str) -> tuple[str, ...]:
    columns = [c for c in frame.columns if c != label]
    if given:
        given = tuple(given)
        missing = [c for c in given if c not in frame.columns]
        if missing or not 1 <= len(given) <= 2:
            raise TaskError(f"task {name!r}: text columns {list(given)}: need one or two of {columns}")
        return given
    for pair in PAIR_NAMES:
        if all(c in columns for c in pair):
            return pair
    single = next((c for c in TEXT_NAMES if c in columns), None)
    if single is not None:
        return (single,)
    strings = [c for c in columns if frame[c].map(lambda v: isinstance(v, str)).all()]
    if len(strings) == 1:
        return (strings[0],)
    raise TaskError(
        f"task {name!r}: cannot tell the text column among {columns}; name it (--text-column, --text-pair-column)"
    )


def _task(name: str, fields: tuple[str, ...], label_names: tuple[str, ...]):
    if not label_names:
        return Task(name, fields, 1, ("spearman", "pearson"), "spearman", "user", None, ())
    metrics = ("accuracy", "f1") if len(label_names) == 2 else ("accuracy", "mcc")
    return Task(name, fields, len(label_names), metrics, "accuracy", "user", None, label_names)


def _canonical(frame: pd.DataFrame, fields: tuple[str, ...], label_info, task, split: str) -> datasets.Dataset:
    column, _, ids = label_info
    missing = [c for c in fields if c not in frame.columns]
    if missing:
        raise TaskError(f"task {task.name!r}: the {split} split has no text column(s) {missing}")
    if frame.empty:
        raise TaskError(f"task {task.name!r}: the {split} split is empty")
    out = pd.DataFrame({f: frame[f] for f in fields})
    for field in fields:
        bad = out[field].isna() | ~out[field].map(lambda v: isinstance(v, str))
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise TaskError(
                f"task {task.name!r}: the {split} split has {int(bad.sum())} rows without a text in "
                f"{field!r} (first: row {row})"
            )
    labels = frame[column]
    if pd.api.types.is_bool_dtype(labels):
        labels = labels.astype(int)
    out["label"] = labels.map(ids).to_numpy() if ids is not None else labels.to_numpy()
    if ids is not None and out["label"].isna().any():
        raise TaskError(f"task {task.name!r}: the {split} split has labels the other splits lack")
    out["idx"] = np.arange(len(frame))
    return dataset_of_frame(out, task)


def _complete(splits: dict[str, datasets.Dataset], task) -> tuple[dict[str, datasets.Dataset], str]:
    """Draw the missing validation / test splits from train (the module docstring's rule)."""
    missing = [s for s in ("validation", "test") if s not in splits]
    given = [s for s in ("train", "validation", "test") if s in splits]
    if not missing:
        return splits, "train, validation and test as given"
    train = splits["train"]
    texts = pd.Series(["\x1f".join(row) for row in zip(*(train[f] for f in task.text_fields))])
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


def low_resource(splits: dict[str, datasets.Dataset], n: int, seed: int, task) -> dict[str, datasets.Dataset]:
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
