"""Which columns of user data are its text and its label, the label checks, and the canonical splits.

The label column is given or the first of :data:`LABEL_NAMES`; the text column(s) given, or the
first pair of :data:`PAIR_NAMES`, the first of :data:`TEXT_NAMES`, the only string column.
Labels are read as one type: words, or numbers (``1``, ``"1"`` and ``1.0`` one class, with a
note), a number that is not whole making a regression (a note); numbers beside words are refused.
They are checked: a label validation or test has that train lacks, or one of fewer than
:data:`RARE_LABEL_ROWS` rows (a likely typo, unless kept), is refused. :func:`task_of` makes the
task (its metrics by its labels), :func:`canonical_split` each split in the form every loader
returns (text fields, integer ``label``, ``idx``).
"""

from __future__ import annotations

import difflib
import re

import datasets
import numpy as np
import pandas as pd

from robustkit.data.catalogue import Task, dataset_of_frame
from robustkit.errors import TaskError

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
RARE_LABEL_ROWS = 3  # a label with fewer rows than this in all splits is taken for a typo


def find_labels(
    train: pd.DataFrame | datasets.Dataset,
    frames: dict,
    column: str | None,
    name: str,
    allow_rare: bool = False,
    regression: bool = False,
    notes: list[str] | None = None,
) -> tuple[str, tuple[str, ...], dict | None]:
    """(label column, label names (empty: regression), value -> id (None: regression or ids)).

    Labels are read as one type (:func:`_read_labels`): words are classes; numbers are classes
    when all are whole (``1``, ``"1"`` and ``1.0`` one class, with a note where they are written
    more than one way) and a regression target when one is not (or ``regression``), said in a
    note; numbers beside words are refused, naming the rows. Every label of validation and test
    must be one train has; a label of fewer than :data:`RARE_LABEL_ROWS` rows is refused (unless
    ``allow_rare``), naming its rows and the label it most resembles. ``frames`` (split ->
    DataFrame) get the labels as read, in place; ``train`` is the raw train split (a
    ``datasets`` ClassLabel keeps its names). ``notes`` gets the one-line notes, if given."""
    notes = [] if notes is None else notes
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
    if isinstance(feature, datasets.ClassLabel) and not regression:
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
    labels = _read_labels({split: frame[column] for split, frame in frames.items()}, column, name, regression, notes)
    for split, frame in list(frames.items()):  # the canonical splits map the values as read
        frames[split] = frame.copy()
        frames[split][column] = labels[split].to_numpy()
    if all(pd.api.types.is_float_dtype(series) for series in labels.values()):
        return column, (), None
    values = pd.concat(labels.values(), ignore_index=True)
    distinct = sorted(values.unique(), key=lambda v: (str(type(v)), v))
    if len(distinct) < 2:
        raise TaskError(f"task {name!r}: column {column!r} has a single label value {distinct[0]!r}; need two or more")
    _check_label_sets(labels, name, allow_rare)
    ids = {v: i for i, v in enumerate(distinct)}
    return column, tuple(str(v) for v in distinct), ids


_NUMBER = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$")
_SHOWN_ROWS = 5  # rows named in a message: the first few of each split


def _form(value) -> str:
    """How a label is written: ``word``, ``integer`` (1, or a boolean), ``decimal`` (1.0) or
    ``text`` (a number written as a string, ``"1"``)."""
    if isinstance(value, (bool, np.bool_, int, np.integer)):
        return "integer"
    if isinstance(value, (float, np.floating)):
        return "decimal"
    if isinstance(value, str) and _NUMBER.match(value):
        return "text"
    return "word"


def _where(masks: dict[str, np.ndarray]) -> str:
    """``train rows 3, 17; test row 4`` for the rows ``masks`` (split -> bool per row) mark."""
    parts = []
    for split, mask in masks.items():
        rows = np.flatnonzero(mask).tolist()
        if rows:
            shown = ", ".join(map(str, rows[:_SHOWN_ROWS])) + (", ..." if len(rows) > _SHOWN_ROWS else "")
            parts.append(f"{split} row{'s' if len(rows) > 1 else ''} {shown}")
    return "; ".join(parts)


def _read_labels(
    raw: dict[str, pd.Series], column: str, name: str, regression: bool, notes: list[str]
) -> dict[str, pd.Series]:
    """Labels as one type, per split: float (a regression target), int or str (classes).

    Words stay words (str). Numbers, however written (``1``, ``"1"``, ``1.0``), are numbers:
    whole ones are classes (int; a note where they are written more than one way), and a column
    with one that is not whole (or ``regression``) is a regression target (float; a note says
    so). A column mixing numbers and words is refused, naming the rows of the rarer kind."""
    forms = {split: series.map(_form) for split, series in raw.items()}
    every = pd.concat(forms.values(), ignore_index=True)
    words = every == "word"
    if words.all():
        if regression:
            raise TaskError(f"task {name!r}: label column {column!r} holds words, not numbers: no regression target")
        return {split: series.map(str) for split, series in raw.items()}
    if words.any():
        rare = "word" if int(words.sum()) <= int((~words).sum()) else "number"
        marked = {s: ((f == "word") if rare == "word" else (f != "word")).to_numpy() for s, f in forms.items()}
        shown = pd.concat([raw[s][m] for s, m in marked.items()]).map(str).unique()[:3]
        count = int(sum(m.sum() for m in marked.values()))
        raise TaskError(
            f"task {name!r}: label column {column!r} mixes words and numbers: {count} row{'s' if count > 1 else ''} "
            f"hold a {rare} ({', '.join(map(repr, shown))}; {_where(marked)}) among labels that are "
            f"{'numbers' if rare == 'word' else 'words'}; write every label the same way (a number among words is "
            "most likely a slip of another label)"
        )
    numbers = {split: pd.to_numeric(series.map(_as_number)) for split, series in raw.items()}
    values = pd.concat(numbers.values(), ignore_index=True).astype(float).to_numpy()
    broken = np.flatnonzero(np.mod(values, 1) != 0)
    if regression or len(broken):
        why = "kind=regression" if regression else f"numbers that are not whole, e.g. {values[broken[0]]:g}"
        notes.append(
            f"task {name!r}: label column {column!r} is trained as a regression ({why}): one output, Spearman and "
            "Pearson correlations; if they are classes, write each as a word or a whole number"
        )
        return {split: series.astype(float) for split, series in numbers.items()}
    counts = every.value_counts()
    if len(counts) > 1 or "decimal" in counts:
        written = {"integer": "as integers (1)", "decimal": "as decimals (1.0)", "text": 'as text ("1")'}
        how = ", ".join(f"{written[form]} in {int(n):,} rows" for form, n in counts.items())
        how = "holds whole numbers read as decimals (1.0)" if len(counts) == 1 else f"writes its numbers {how}"
        classes = ", ".join(str(v) for v in sorted({int(v) for v in values}))
        notes.append(
            f"task {name!r}: label column {column!r} {how}: read as one class per whole number ({classes}); "
            "for a regression on them add #kind=regression to the data's path"
        )
    return {split: series.map(lambda v: int(round(float(v)))) for split, series in numbers.items()}


def _as_number(value):
    """A label that :func:`_form` finds a number, as one (a boolean as 0 or 1)."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    return float(value) if isinstance(value, str) else value


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


def find_text_columns(
    frame: pd.DataFrame, given: tuple[str, ...] | list[str] | None, label: str, name: str
) -> tuple[str, ...]:
    """The text column(s) of task ``name``: ``given`` (one or two of ``frame``'s columns), else the
    first pair of :data:`PAIR_NAMES`, the first of :data:`TEXT_NAMES`, the only string column."""
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


def task_of(name: str, fields: tuple[str, ...], label_names: tuple[str, ...]) -> Task:
    """The task of user data: regression without label names (Spearman, Pearson), else accuracy
    and F1 (two labels) or macro-F1 and MCC."""
    if not label_names:
        return Task(name, fields, 1, ("spearman", "pearson"), "spearman", "user", None, ())
    metrics = ("accuracy", "f1") if len(label_names) == 2 else ("accuracy", "macro_f1", "mcc")
    return Task(name, fields, len(label_names), metrics, "accuracy", "user", None, label_names)


def canonical_split(
    frame: pd.DataFrame, fields: tuple[str, ...], label_info: tuple, task: Task, split: str
) -> datasets.Dataset:
    """One split in the form every loader returns: the text ``fields``, an integer ``label`` (ids
    of :func:`find_labels`'s ``label_info``; as it is for regression) and ``idx``, its row."""
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
