"""Where user data is read from: its source string, and the raw tables of each kind of source.

A source is a ``.csv``, ``.tsv``, ``.jsonl`` or ``.parquet`` file (:data:`READERS`), a folder of
one such file per split (named as :data:`SPLIT_NAMES`), a folder written by ``datasets``'
``save_to_disk``, or ``hub:NAME[:CONFIG]``. Column choices ride in the source string
(``reviews.csv#text=review,label=stars``: :func:`source_string`, :func:`parse_source`), so that a
run's ``data_dir`` alone says how to read its data. :func:`read_location` gives a source's raw
tables by their own split names, :func:`named_splits` them as train / validation / test.
"""

from __future__ import annotations

import re
from pathlib import Path

import datasets
import pandas as pd

from robustkit.errors import TaskError

READERS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet"}
SPLIT_NAMES = {
    "train": ("train", "training"),
    "validation": ("validation", "valid", "val", "dev"),
    "test": ("test", "testing"),
}
HUB_PREFIX = "hub:"
HUB_NAME = re.compile(r"^[\w.-]+(/[\w.-]+)?(:[\w.-]+)?$")
# column choices ride in the source string (a run's data_dir), so that a spawned sweep worker
# reading the spec reads the same columns: "reviews.csv#text=review,label=stars"
_CHOICES = re.compile(r"^(.*)#((?:text|pair|label|rare)=[^#]*)$")


def is_source(data_dir: str | Path | None) -> bool:
    """Whether ``data_dir`` names user data (a data file, a folder of split files or a saved
    ``datasets`` folder, or ``hub:...``) rather than a GLUE TSV folder."""
    if data_dir is None:
        return False
    location, _ = parse_source(str(data_dir))
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
    keeps labels of fewer than :data:`~robustkit.data.user_columns.RARE_LABEL_ROWS` rows)."""
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


def parse_source(source: str) -> tuple[str, dict[str, str]]:
    """A source string's location and its reading choices (``{"text": ..., "pair": ..., "label":
    ..., "rare": "keep"}``, those given), the inverse of :func:`source_string`."""
    match = _CHOICES.match(source)
    if not match:
        return source, {}
    choices = dict(item.split("=", 1) for item in match.group(2).split(",") if "=" in item)
    return match.group(1), choices


def read_location(location: str) -> tuple[dict, str]:
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
    """Whether ``path`` is a folder written by ``datasets``' ``save_to_disk``."""
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
    """One data file as a DataFrame, by its suffix (:data:`READERS`)."""
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


def named_splits(raw: dict, name: str) -> dict:
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


def as_frame(table: pd.DataFrame | datasets.Dataset) -> pd.DataFrame:
    """A raw split as a DataFrame."""
    return table.to_pandas() if isinstance(table, datasets.Dataset) else table
