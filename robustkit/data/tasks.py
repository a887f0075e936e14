"""Task registry: GLUE tasks (hub or local GLUE-format TSV) and embedded tasks; splits.

Metrics (each task names its own) are computed by :mod:`robustkit.data.metrics`.

Every loader returns ``{"train", "validation", "test"}`` -> :class:`datasets.Dataset` with the
task's text columns (named as in the hub's ``nyu-mll/glue``), an integer ``label`` (float for
``stsb``) and ``idx``, the example's row index in its source split (GLUE) or source file
(embedded tasks), so every example can be traced back.

Splits without ``train_size`` (the full-data setting): GLUE tests on its validation split (its
test labels are hidden) unless a local folder's ``test.tsv`` has labels; the embedded tasks
(``rt``: 10248 / 1281 / 1279 rows, ``polarity``: 3200 / 400 / 400) have a fixed 80 / 10 / 10
split, stratified by label and seeded by :data:`EMBEDDED_SPLIT_SEED`, rows with the same text in
one split (:data:`EXPECTED_FINGERPRINTS` records their :func:`split_fingerprint`).

Low-resource splits (He et al. 2021, §3.2 and appendix A.1), ``train_size=N``: a permutation of
the train split seeded by ``split_seed`` gives the train split (its first N) and the validation
split (its last ``val_size``); the task's validation split becomes the test split.

The full rules, the embedded tasks' table and sources: ``docs/reference.md``,
"robustkit/data/tasks.py".
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from robustkit.data.catalogue import (  # noqa: F401  (re-exported: robustkit.data.tasks.Task, ...)
    HELD_OUT_FRACTION,
    MOVIE_REVIEWS,
    TASKS,
    Task,
    _features,
    dataset_of_frame,
    grouped_stratified_split,
    split_fingerprint,
)
from robustkit.data.stat_keys import stat_key
from robustkit.errors import TaskError

if TYPE_CHECKING:  # imported where data is loaded: resolving a run spec of a built-in task reads no data
    import datasets

GLUE_HUB = "nyu-mll/glue"
# The hub revision (commit, tag or branch) of GLUE_HUB to load; None: its default branch. Part
# of the data fingerprint of hub runs (data_fingerprint), so pinning one gives runs of their own.
GLUE_REVISION: str | None = None
EMBEDDED_SPLIT_SEED = 20210601
SPLITS = ("train", "validation", "test")

# sha256 of the default splits (see split_fingerprint); a change means the split changed.
EXPECTED_FINGERPRINTS: dict[str, dict[str, str]] = {
    "rt": {
        "train": "310401eab3cec8a49627f9e37e1efa8752341d438d5813b1692f7ec9998c8f85",
        "validation": "6911d9a319c0da3be90ccd2d09a1843d18888466784e784a1aa9c104d67db58e",
        "test": "8c233331a052ccf70783fcc8ed766e0f1e589d674fba0824f9a41fc5d3b0c2d6",
    },
    "polarity": {
        "train": "bfcdcbaf03bada66332caa41b775c070fe6830b7ce8dedec29cf6bb2eac8c4d1",
        "validation": "00041bc7c1f10505e14982343c06a185ba098dd36fede4ced8b28348ee693690",
        "test": "553b426d2965a948353eb8d18dbd2bc837ee50cea3365d0cc0a2bbfe1a9fe6ef",
    },
}


def get_task(name: str | Task, data_dir: str | Path | None = None) -> Task:
    """The registered task called ``name`` (a :class:`Task` is returned as is).

    Besides the built-in tasks, a task of the user's own data (:mod:`robustkit.data.user_data`) is
    known once registered in this process, or when ``data_dir`` names its data (a data file, a
    folder of split files or of a saved dataset, ``hub:NAME[:CONFIG]``): it is read then.

    Raises
    ------
    TaskError
        If no task has that name; the message lists the known tasks and says how to name data.
    """
    if isinstance(name, Task):
        return name
    if isinstance(name, str) and name in TASKS:
        return TASKS[name]
    from robustkit.data import user_data, user_sources

    if isinstance(name, str) and (data_dir is None or user_sources.is_source(data_dir)):
        loaded = user_data.ensure(name, data_dir)
        if loaded is not None:
            return loaded.task
    raise TaskError(
        f"unknown task {name!r}; known tasks: {', '.join(TASKS)}; for your own data pass "
        "--data FILE_OR_DIR or --dataset NAME (robustkit.data.user_data.register in Python)"
    ) from None


# ---------------------------------------------------------------------------------------------
# Loading


def load_splits(
    task: str | Task,
    data_dir: str | Path | None = None,
    train_size: int | None = None,
    split_seed: int = 0,
    val_size: int = 1000,
) -> dict[str, datasets.Dataset]:
    """The train / validation / test splits of a task (see the module docstring for the rules).

    Parameters
    ----------
    task : str or Task
    data_dir : str or Path, optional
        GLUE tasks only: a folder of GLUE-format TSV files, either the GLUE root (holding
        ``CoLA/``, ``SST-2/``, ...) or the task's own folder. ``None`` loads ``nyu-mll/glue``
        from the Hugging Face hub. Ignored by embedded tasks.
    train_size : int, optional
        Low-resource setting: number N of training examples to sample.
    split_seed : int
        Seed of the low-resource sample.
    val_size : int
        Size of the low-resource validation split (drawn from the remaining training data).

    Returns
    -------
    dict of str to datasets.Dataset
        Keys ``"train"``, ``"validation"``, ``"test"``; columns ``*task.text_fields, "label",
        "idx"``.

    Raises
    ------
    TaskError
        Unknown task, missing files, empty or label-less splits, N + val_size larger than the
        training data.
    """
    task = get_task(task, data_dir)
    if task.source == "user":
        return _user_splits(task, data_dir, train_size, split_seed)
    if task.source == "embedded":
        base = dict(_embedded_splits(task.name, str(_asset_path(task.asset))))  # copy: the cache's
    elif data_dir is not None:
        base = _load_glue_local(task, Path(data_dir))
    else:
        base = _load_glue_hub(task)
    for split, dataset in base.items():
        _check_labels(dataset, task, split)
    if train_size is None:
        return base
    return _low_resource(task, base, train_size, split_seed, val_size)


def _user_splits(task: Task, data_dir, train_size: int | None, split_seed: int) -> dict[str, datasets.Dataset]:
    """A user task's splits (:mod:`robustkit.data.user_splits`: its test split is never validation)."""
    from robustkit.data import user_data, user_splits

    loaded = user_data.ensure(task.name, data_dir)
    for split, dataset in loaded.splits.items():
        _check_labels(dataset, loaded.task, split)
    if train_size is None:
        return dict(loaded.splits)
    if not isinstance(train_size, (int, np.integer)) or isinstance(train_size, bool) or train_size < 1:
        raise TaskError(f"train_size must be a positive integer, got {train_size!r}")
    return user_splits.low_resource(loaded.splits, int(train_size), split_seed, loaded.task)


def _low_resource(task: Task, base: dict, n: int, seed: int, val_size: int) -> dict[str, datasets.Dataset]:
    """He et al. 2021 §3.2: N train + val_size validation from train; validation becomes test."""
    for name, value in (("train_size", n), ("val_size", val_size)):
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise TaskError(f"{name} must be a positive integer, got {value!r}")
    train = base["train"]
    available = len(train) - val_size
    if n > available:
        raise TaskError(
            f"train_size={n} is more than the {max(available, 0)} training examples available for "
            f"task {task.name!r} ({len(train)} in its train split minus val_size={val_size}); pass a smaller "
            "--train-size, or --train-size all for the full data"
        )
    # One permutation per (task size, seed): train takes its head, validation its tail, so the
    # validation set is the same for every N and smaller training sets nest in larger ones.
    order = np.random.default_rng(seed).permutation(len(train))
    return {
        "train": train.select(np.sort(order[:n])),
        "validation": train.select(np.sort(order[len(order) - val_size :])),
        # GLUE's test is its validation split unless a local folder has a labelled test.tsv:
        # that one is the test split here too. Embedded tasks keep testing on validation.
        "test": base["test"] if task.source == "glue" else base["validation"],
    }


def _check_labels(dataset: datasets.Dataset, task: Task, split: str) -> None:
    """Raise TaskError if a split is empty or has examples without a valid label."""
    if len(dataset) == 0:
        raise TaskError(f"task {task.name!r}: the {split} split is empty")
    if "label" not in dataset.column_names:
        raise TaskError(f"task {task.name!r}: the {split} split has no label column")
    labels = np.asarray(dataset["label"], dtype=np.float64)
    valid = np.isfinite(labels)
    if not task.is_regression:
        valid &= (labels >= 0) & (labels < task.num_labels) & (labels == np.round(labels))
    if not valid.any():
        raise TaskError(
            f"task {task.name!r}: the {split} split has no labels (all {len(labels)} are missing "
            f"or invalid, e.g. {labels[0]:g}; GLUE test labels are hidden)"
        )
    if not valid.all():
        bad = int(np.flatnonzero(~valid)[0])
        raise TaskError(
            f"task {task.name!r}: the {split} split has {int((~valid).sum())} examples without a "
            f"valid label (first: idx {dataset[bad]['idx']}, label {labels[bad]:g})"
        )


# --- GLUE from the hub ------------------------------------------------------------------------


def _load_glue_hub(task: Task) -> dict[str, datasets.Dataset]:
    """Train and validation of ``nyu-mll/glue`` (its test split has no labels, so it is unused)."""
    import datasets

    revision = {"revision": GLUE_REVISION} if GLUE_REVISION else {}
    raw = datasets.load_dataset(GLUE_HUB, task.glue_config, **revision)
    train = _canonical(raw["train"], task)
    validation = _canonical(raw[task.validation_split], task)
    return {"train": train, "validation": validation, "test": validation}


def _canonical(dataset: datasets.Dataset, task: Task) -> datasets.Dataset:
    missing = [c for c in (*task.text_fields, "label") if c not in dataset.column_names]
    if missing:
        raise TaskError(f"task {task.name!r}: hub data lacks columns {missing}")
    if "idx" not in dataset.column_names:
        dataset = dataset.add_column("idx", list(range(len(dataset))))
    dataset = dataset.select_columns([*task.text_fields, "label", "idx"])
    return dataset.cast(_features(task))


# --- GLUE from local TSV files ----------------------------------------------------------------


@dataclass(frozen=True)
class _TsvFormat:
    """How one GLUE task is laid out in the TSV files of the GLUE download."""

    folder: str  # directory name in the GLUE download
    columns: Mapping[str, str]  # TSV column -> nyu-mll/glue column (text fields and "label")
    labels: Mapping[str, int] | None  # label string -> id; None: a float score (STS-B)
    names: tuple[str, ...] | None = None  # column names of header-less files (CoLA)


_BINARY = {"0": 0, "1": 1}
_NLI_IDS = {"entailment": 0, "not_entailment": 1}
_GLUE_TSV: dict[str, _TsvFormat] = {
    "cola": _TsvFormat(
        "CoLA", {"sentence": "sentence", "label": "label"}, _BINARY, ("source", "label", "orig_label", "sentence")
    ),
    "sst2": _TsvFormat("SST-2", {"sentence": "sentence", "label": "label"}, _BINARY),
    "mrpc": _TsvFormat("MRPC", {"#1 String": "sentence1", "#2 String": "sentence2", "Quality": "label"}, _BINARY),
    "qqp": _TsvFormat("QQP", {"question1": "question1", "question2": "question2", "is_duplicate": "label"}, _BINARY),
    "stsb": _TsvFormat("STS-B", {"sentence1": "sentence1", "sentence2": "sentence2", "score": "label"}, None),
    "mnli": _TsvFormat(
        "MNLI",
        {"sentence1": "premise", "sentence2": "hypothesis", "gold_label": "label"},
        {"entailment": 0, "neutral": 1, "contradiction": 2},
    ),
    "qnli": _TsvFormat("QNLI", {"question": "question", "sentence": "sentence", "label": "label"}, _NLI_IDS),
    "rte": _TsvFormat("RTE", {"sentence1": "sentence1", "sentence2": "sentence2", "label": "label"}, _NLI_IDS),
    "wnli": _TsvFormat("WNLI", {"sentence1": "sentence1", "sentence2": "sentence2", "label": "label"}, _BINARY),
}
_DEV_FILE = {
    "validation": "dev.tsv",
    "validation_matched": "dev_matched.tsv",
    "validation_mismatched": "dev_mismatched.tsv",
}


def _load_glue_local(task: Task, data_dir: Path) -> dict[str, datasets.Dataset]:
    """Train and dev TSV files of the GLUE download; test = a labelled ``test.tsv`` where the
    folder has one (:func:`_labelled_test`), else dev, as for the hub."""
    fmt = _GLUE_TSV[task.glue_config]
    folder = _glue_folder(data_dir, fmt, task)
    train = _read_glue_tsv(folder / "train.tsv", fmt, task, "train")
    validation = _read_glue_tsv(folder / _DEV_FILE[task.validation_split], fmt, task, "validation")
    test_file = _labelled_test(folder, fmt)
    test = validation if test_file is None else _read_glue_tsv(test_file, fmt, task, "test")
    return {"train": train, "validation": validation, "test": test}


def _labelled_test(folder: Path, fmt: _TsvFormat) -> Path | None:
    """``folder/test.tsv`` if it has every column of the task's format, the label included; None
    otherwise. The GLUE download's test files hold no labels (they are ignored, as before); a
    user's labelled one is the test split, never dev (and part of the data's fingerprint)."""
    path = folder / "test.tsv"
    if fmt.names or not path.is_file():  # header-less formats (CoLA): no header to tell by
        return None
    with open(path, encoding="utf-8-sig") as handle:
        header = handle.readline().rstrip("\r\n").split("\t")
    return path if all(column in header for column in fmt.columns) else None


def _glue_folder(data_dir: Path, fmt: _TsvFormat, task: Task) -> Path:
    """``data_dir/<Task>`` if it exists (GLUE root given), else ``data_dir`` (task folder given)."""
    if not data_dir.is_dir():
        raise TaskError(f"task {task.name!r}: GLUE data_dir {data_dir} is not a directory")
    nested = data_dir / fmt.folder
    return nested if nested.is_dir() else data_dir


def _read_glue_tsv(path: Path, fmt: _TsvFormat, task: Task, split: str) -> datasets.Dataset:
    if not path.is_file():
        raise TaskError(f"task {task.name!r}: missing GLUE {split} file {path}")
    try:
        # GLUE sentences contain unbalanced quotes (QUOTE_NONE), and words such as "null" or
        # "NA" that pandas would otherwise turn into NaN (keep_default_na=False).
        frame = pd.read_csv(
            path,
            sep="\t",
            quoting=csv.QUOTE_NONE,
            header=None if fmt.names else 0,
            names=fmt.names,
            dtype=str,
            keep_default_na=False,
            encoding="utf-8-sig",  # the MRPC files of the GLUE download start with a BOM
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as err:
        raise TaskError(f"task {task.name!r}: cannot read {path} as a GLUE {fmt.folder} TSV: {err}") from err
    missing = [c for c in fmt.columns if c not in frame.columns]
    if missing:
        raise TaskError(f"task {task.name!r}: {path} lacks the GLUE {fmt.folder} columns {missing}")
    if frame.empty:
        raise TaskError(f"task {task.name!r}: the {split} split is empty ({path} has no rows)")
    frame = frame.rename(columns=dict(fmt.columns))
    frame["label"] = _parse_labels(frame["label"], fmt, task, path)
    frame["idx"] = np.arange(len(frame))
    return dataset_of_frame(frame, task)


def _parse_labels(raw: pd.Series, fmt: _TsvFormat, task: Task, path: Path) -> pd.Series:
    if fmt.labels is None:
        labels = pd.to_numeric(raw.str.strip(), errors="coerce")
    else:
        labels = raw.str.strip().map(fmt.labels)
    bad = labels.isna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise TaskError(
            f"task {task.name!r}: {path} has {int(bad.sum())} rows with an unknown label "
            f"(first: data row {row}, {raw.iloc[row]!r}; expected {sorted(fmt.labels or ['a number'])})"
        )
    return labels


# --- embedded tasks ---------------------------------------------------------------------------


def _asset_path(name: str) -> Path:
    """Local file of a data asset; an indirection so that tests can point it elsewhere."""
    from robustkit.assets import asset_path

    return asset_path(name)


def _read_rt(path: Path) -> pd.DataFrame:
    """Rotten Tomatoes reviews: fresh -> 1, rotten -> 0, plot summaries dropped."""
    frame = pd.read_csv(path, compression="bz2", dtype=str, keep_default_na=False)
    frame["idx"] = np.arange(len(frame))  # row in the file, plot rows included
    frame = frame[frame["category"] != "plot"]
    labels = frame["category"].map({"fresh": 1, "rotten": 0})
    return pd.DataFrame({"sentence": frame["text"].str.strip(), "label": labels, "idx": frame["idx"]})


def _read_polarity(path: Path) -> pd.DataFrame:
    """Pang & Lee sentence polarity: 1 -> 1, -1 -> 0; sentences end with " \\n" (stripped)."""
    frame = pd.read_csv(
        path, header=None, names=["label", "sentence"], dtype=str, keep_default_na=False, encoding="utf-8-sig"
    )
    labels = frame["label"].str.strip().map({"1": 1, "-1": 0})
    return pd.DataFrame({"sentence": frame["sentence"].str.strip(), "label": labels, "idx": np.arange(len(frame))})


_EMBEDDED_READERS = {"rt": _read_rt, "polarity": _read_polarity}


@functools.lru_cache(maxsize=4)
def _embedded_splits(name: str, path: str) -> dict[str, datasets.Dataset]:
    """The fixed 80/10/10 split of an embedded task (cached: datasets are immutable)."""
    task = TASKS[name]
    try:
        frame = _EMBEDDED_READERS[name](Path(path))
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, KeyError) as err:
        raise TaskError(f"task {name!r}: cannot read {path}: {err}") from err
    if frame.empty or frame["label"].isna().any() or (frame["sentence"] == "").any():
        raise TaskError(f"task {name!r}: {path} is empty or has rows without a label or text")
    frame["label"] = frame["label"].astype(np.int64)
    assignment = grouped_stratified_split(frame["sentence"], frame["label"].to_numpy(), EMBEDDED_SPLIT_SEED)
    splits = {split: dataset_of_frame(frame[assignment == i], task) for i, split in enumerate(SPLITS)}
    return splits


def task_texts(dataset: datasets.Dataset, task: str | Task) -> list[str]:
    """The unlabeled text of a split, one sentence per item.

    For sentence-pair tasks each field becomes its own sentence (``[a0, b0, a1, b1, ...]``): a
    plain corpus, with no pair separator to invent. Training code that wants pairs kept as
    ``[CLS] a [SEP] b [SEP]`` inputs reads the text fields directly.

    Returns
    -------
    list of str, length ``len(dataset) * len(task.text_fields)``
    """
    task = get_task(task)
    columns = [dataset[field] for field in task.text_fields]
    return [text for row in zip(*columns) for text in row]


# --- data fingerprints ------------------------------------------------------------------------


def data_fingerprint(task: str | Task, data_dir: str | Path | None = None) -> str:
    """What identifies the data a run of ``task`` reads, without loading it.

    - embedded task: ``asset:<asset>:sha256:<hex>``, its data file's sha256 as pinned in
      ``assets.toml`` (the asset layer re-fetches a cached file that does not match its pin,
      so the pin is what is read);
    - local GLUE TSV folder (``data_dir``): ``tsv:sha256:<hex>``, a hash of the name and sha256
      of each file the task reads (train, dev and a labelled test), not of their path: moving the folder keeps
      it, editing a label changes it. Files are hashed once per process (while unchanged);
    - the hub: ``hub:nyu-mll/glue/<config>``, with ``@<revision>`` when :data:`GLUE_REVISION`
      pins one. What the hub holds is only known once loaded: :func:`data_record` adds the
      ``datasets`` library's fingerprints of the loaded splits;
    - the user's own data: ``user:sha256:<hex>``, a hash of its splits' contents
      (:func:`robustkit.data.user_dataset.fingerprint`; the data is read for it).

    Raises
    ------
    TaskError
        Unknown task, or a ``data_dir`` without the task's files.
    """
    task = get_task(task, data_dir)
    if task.source == "user":
        from robustkit.data import user_data

        return user_data.ensure(task.name, data_dir).fingerprint
    if task.source == "embedded":
        from robustkit.assets import ASSETS

        (digest,) = ASSETS[task.asset].files.values()
        return f"asset:{task.asset}:sha256:{digest}"
    if data_dir is not None:
        files = {path.name: _file_sha256(path) for path in _tsv_files(task, Path(data_dir))}
        return "tsv:sha256:" + hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    return f"hub:{GLUE_HUB}/{task.glue_config}" + (f"@{GLUE_REVISION}" if GLUE_REVISION else "")


def data_record(
    task: str | Task, data_dir: str | Path | None = None, splits: Mapping[str, datasets.Dataset] | None = None
) -> dict:
    """What a run's manifest records about its data (``data``): ``fingerprint``
    (:func:`data_fingerprint`) and ``source`` (``embedded``, ``tsv`` or ``hub``); for TSV
    folders the ``files`` read (name -> sha256) and the ``data_dir``; for the hub, the
    ``datasets`` library's fingerprint of each loaded split (``datasets``, from ``splits``).
    """
    task = get_task(task, data_dir)
    record = {"fingerprint": data_fingerprint(task, data_dir)}
    if task.source == "user":
        from robustkit.data import user_data

        loaded = user_data.ensure(task.name, data_dir)
        record.update(
            source="user",
            data_dir=None if data_dir is None else str(data_dir),
            split_rule=loaded.rule,
            text_fields=list(task.text_fields),
            label_names=list(task.label_names),
            sizes={name: len(split) for name, split in loaded.splits.items()},
        )
    elif task.source == "embedded":
        record.update(source="embedded", asset=task.asset)
    elif data_dir is not None:
        paths = _tsv_files(task, Path(data_dir))
        record.update(source="tsv", data_dir=str(data_dir), files={p.name: _file_sha256(p) for p in paths})
    else:
        record.update(source="hub", name=GLUE_HUB, config=task.glue_config, revision=GLUE_REVISION)
        if splits is not None:
            record["datasets"] = {name: getattr(split, "_fingerprint", None) for name, split in splits.items()}
    return record


def _tsv_files(task: Task, data_dir: Path) -> list[Path]:
    """The TSV files :func:`load_splits` reads for a GLUE task from ``data_dir``."""
    fmt = _GLUE_TSV[task.glue_config]
    folder = _glue_folder(data_dir, fmt, task)
    paths = [folder / "train.tsv", folder / _DEV_FILE[task.validation_split]]
    for split, path in zip(("train", "validation"), paths):
        if not path.is_file():
            raise TaskError(f"task {task.name!r}: missing GLUE {split} file {path}")
    test = _labelled_test(folder, fmt)
    return paths + ([test] if test is not None else [])


# (path, inode, size, mtime) -> sha256 of the files hashed by this process
_HASHES: dict[tuple, str] = {}


def _file_sha256(path: Path) -> str:
    key = stat_key(path)  # None: modified too recently to remember its hash
    if key in _HASHES:
        return _HASHES[key]
    with open(path, "rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    if key is not None:
        _HASHES[key] = digest
    return digest
