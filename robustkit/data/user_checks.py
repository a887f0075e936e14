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
    pandas.Series of str, shape (len(split),)
    """
    columns = [
        pd.Series(split[field], dtype=object).map(lambda t: " ".join(str(t).split()).casefold()) for field in fields
    ]
    keys = columns[0]
    for column in columns[1:]:
        keys = keys + "\x1f" + column
    return keys.reset_index(drop=True)


def _rows(split: datasets.Dataset, positions: np.ndarray) -> str:
    """The first of ``positions`` as the row the user finds in their file (the split's ``idx``)."""
    return f"first: row {int(split['idx'][int(positions[0])])}"


def shared_rows(splits: dict[str, datasets.Dataset], fields: tuple[str, ...]) -> dict[tuple[str, str], np.ndarray]:
    """Positions of the rows of each later split whose text an earlier one has.

    Returns
    -------
    dict of (later split, earlier split) to numpy.ndarray of int
        Only the pairs that share a text; positions are rows of the later split.
    """
    keys = {split: text_keys(splits[split], fields) for split in SPLITS if split in splits}
    found = {}
    for later, earlier in _PAIRS:
        if later in keys and earlier in keys:
            positions = np.flatnonzero(keys[later].isin(set(keys[earlier])).to_numpy())
            if len(positions):
                found[(later, earlier)] = positions
    return found


def repeated_rows(split: datasets.Dataset, fields: tuple[str, ...]) -> tuple[np.ndarray, int]:
    """Positions of the rows that repeat an earlier row's text in the same split, and how many of
    them carry another label than that first row."""
    keys = text_keys(split, fields)
    repeats = np.flatnonzero(keys.duplicated().to_numpy())
    if not len(repeats):
        return repeats, 0
    labels = pd.Series(split["label"])
    first_label = labels.groupby(keys.to_numpy()).transform("first")
    conflicting = int((labels.iloc[repeats] != first_label.iloc[repeats]).sum())
    return repeats, conflicting


def row_notes(splits: dict[str, datasets.Dataset], fields: tuple[str, ...], where: str) -> list[str]:
    """One line for the texts shared between splits, one for the texts repeated inside a split
    (none where there are none), naming ``where`` (the file or folder, or the task's name)."""
    lines = []
    shared = shared_rows(splits, fields)
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
    for split in SPLITS:
        if split in splits:
            repeats, conflicting = repeated_rows(splits[split], fields)
            if len(repeats):
                other = f", {conflicting:,} of them with another label" if conflicting else ""
                parts.append(
                    f"{split} {len(repeats):,} of {len(splits[split]):,}{other} ({_rows(splits[split], repeats)})"
                )
    if parts:
        lines.append(
            f"{where}: rows repeating a text of their own split (case and whitespace aside): {'; '.join(parts)}; "
            "each copy counts again in training and scoring: drop the repeats unless meant"
        )
    return lines
