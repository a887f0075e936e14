"""What reading user data notices in its rows: texts shared between splits, texts repeated in a split.

Two rows are the same text when their text fields match after whitespace runs become one space
and case is folded (:func:`text_keys`). A text of validation or test that train (or, for test,
validation) also has rewards memorising it, so held-out scores overstate what a model learned;
a text repeated inside a split weighs more than once. Neither is refused: a benchmark's own
splits may share a few texts, and a paper's numbers are on those splits. Each is said in one
line (:func:`row_notes`) as a :class:`UserDataWarning`, naming the source, the counts and the fix.
"""

from __future__ import annotations

import datasets
import numpy as np
import pandas as pd

SPLITS = ("train", "validation", "test")
# the earlier split a later one is checked against (train is trained on, validation chooses checkpoints)
_PAIRS = (("validation", "train"), ("test", "train"), ("test", "validation"))


class UserDataWarning(UserWarning):
    """Something in the user's data a researcher should know before trusting its scores: texts
    shared between splits, repeated texts, labels read as one class or as a regression target.
    The command line shows it as one ``warning:`` line."""


def text_keys(split: datasets.Dataset, fields: tuple[str, ...]) -> pd.Series:
    """Each row's text fields as one comparison key: whitespace runs as one space, stripped,
    case folded, the fields joined by ``\\x1f``.

    Returns
    -------
    pandas.Series of str (object dtype), shape (len(split),)
    """
    frame = split.select_columns(list(fields)).to_pandas()  # Arrow to pandas at once: a column iterates by row
    texts = zip(*(frame[field].tolist() for field in fields))
    return pd.Series(["\x1f".join(" ".join(str(t).split()).casefold() for t in row) for row in texts], dtype=object)


def _rows(split: datasets.Dataset, positions: np.ndarray) -> str:
    """The first of ``positions`` as the row the user finds in their file (the split's ``idx``)."""
    return f"first: row {int(split[int(positions[0])]['idx'])}"


def shared_rows(keys: dict[str, pd.Series]) -> dict[tuple[str, str], np.ndarray]:
    """Positions of the rows of each later split whose text (``keys``: split -> :func:`text_keys`)
    an earlier one has.

    Returns
    -------
    dict of (later split, earlier split) to numpy.ndarray of int
        Only the pairs that share a text; positions are rows of the later split.
    """
    found = {}
    for later, earlier in _PAIRS:
        if later in keys and earlier in keys:
            seen = set(keys[earlier])
            positions = np.flatnonzero([key in seen for key in keys[later]])
            if len(positions):
                found[(later, earlier)] = positions
    return found


def repeated_rows(keys: pd.Series, labels: pd.Series) -> tuple[np.ndarray, int]:
    """Positions of the rows that repeat an earlier row's text (``keys``, :func:`text_keys`) in
    the same split, and how many of them carry another label than that first row."""
    repeats = np.flatnonzero(keys.duplicated().to_numpy())
    if not len(repeats):
        return repeats, 0
    labels = labels.reset_index(drop=True)
    first_label = labels.groupby(keys.to_numpy()).transform("first")
    conflicting = int((labels.iloc[repeats] != first_label.iloc[repeats]).sum())
    return repeats, conflicting


def row_notes(splits: dict[str, datasets.Dataset], fields: tuple[str, ...], where: str) -> list[str]:
    """One line for the texts shared between splits, one for the texts repeated inside a split
    (none where there are none), naming ``where`` (the file or folder, or the task's name)."""
    lines = []
    present = [split for split in SPLITS if split in splits]
    keys = {split: text_keys(splits[split], fields) for split in present}
    shared = shared_rows(keys)
    if shared:
        parts = [
            f"{later} repeats a {earlier} text in {len(rows):,} of its {len(splits[later]):,} rows "
            f"({len(rows) / len(splits[later]):.1%}; {_rows(splits[later], rows)})"
            for (later, earlier), rows in shared.items()
        ]
        lines.append(
            f"{where}: texts in two splits (case and whitespace aside): {'; '.join(parts)}; held-out scores on them "
            "reward memorising, not generalising: drop those rows from the later split"
        )
    parts = []
    for split in present:
        repeats, conflicting = repeated_rows(keys[split], splits[split].select_columns(["label"]).to_pandas()["label"])
        if len(repeats):
            other = f", {conflicting:,} of them with another label" if conflicting else ""
            parts.append(f"{split} {len(repeats):,} of {len(splits[split]):,}{other} ({_rows(splits[split], repeats)})")
    if parts:
        lines.append(
            f"{where}: rows repeating a text of their own split (case and whitespace aside): {'; '.join(parts)}; "
            "each copy counts again in training and scoring: drop the repeats unless meant"
        )
    return lines
