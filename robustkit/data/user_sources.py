"""Where user data is read from: its source string, and the raw tables of each kind of source.

A source is a ``.csv``, ``.tsv``, ``.jsonl`` or ``.parquet`` file (:data:`READERS`), a folder of
one such file per split (named as :data:`SPLIT_NAMES`), a folder written by ``datasets``'
``save_to_disk``, or ``hub:NAME[:CONFIG]``. Column choices ride in the source string
(``reviews.csv#text=review,label=stars``: :func:`source_string`, :func:`parse_source`), so that a
run's ``data_dir`` alone says how to read its data. :func:`read_location` gives a source's raw
tables by their own split names, :func:`named_splits` them as train / validation / test.
"""

from __future__ import annotations

import json
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
_CHOICES = re.compile(r"^(.*)#((?:text|pair|label|rare|kind)=[^#]*)$")


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
    regression: bool = False,
) -> str:
    """The source string of a run's ``data_dir``: ``location`` with the reading choices, if any
    (``reviews.csv#text=review,label=stars``; ``pair`` marks the second text column; ``rare=keep``
    keeps labels of fewer than :data:`~robustkit.data.user_columns.RARE_LABEL_ROWS` rows;
    ``kind=regression`` reads whole-number labels as a regression target, not classes)."""
    parts = []
    if text_columns:
        parts.append("text=" + text_columns[0])
        if len(text_columns) > 1:
            parts.append("pair=" + text_columns[1])
    if label_column:
        parts.append("label=" + label_column)
    if allow_rare_labels:
        parts.append("rare=keep")
    if regression:
        parts.append("kind=regression")
    return str(location) + ("#" + ",".join(parts) if parts else "")


def parse_source(source: str) -> tuple[str, dict[str, str]]:
    """A source string's location and its reading choices (``{"text": ..., "pair": ..., "label":
    ..., "rare": "keep", "kind": "regression"}``, those given), the inverse of :func:`source_string`."""
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
    """One data file as a DataFrame, by its suffix (:data:`READERS`); a file that does not read
    is one line naming the file, the line and what to do (:func:`_unreadable`)."""
    kind = READERS.get(path.suffix.lower())
    if kind is None:
        raise TaskError(f"cannot read {path}: unknown format {path.suffix!r}; known: {', '.join(READERS)}")
    try:
        if kind == "parquet":
            return pd.read_parquet(path)
        if kind == "jsonl":
            return pd.read_json(path, lines=True, dtype=False)
        # keep_default_na=False: texts such as "NA" or "null" stay texts
        frame = pd.read_csv(path, sep="\t" if kind == "tsv" else ",", keep_default_na=False, na_values=[""])
    except (ValueError, OSError, pd.errors.ParserError, pd.errors.EmptyDataError, ImportError) as error:
        raise TaskError(_unreadable(path, kind, error)) from None
    if kind == "csv" and len(frame.columns) == 1 and "\t" in str(frame.columns[0]):
        raise TaskError(
            f"cannot read {path} as csv: its header {str(frame.columns[0])!r} is one column holding tabs; the file "
            f"looks tab-separated: name it {path.with_suffix('.tsv').name}"
        )
    return frame


# pandas' C parser: "Error tokenizing data. C error: Expected 1 fields in line 25, saw 2"
_FIELDS = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def _unreadable(path: Path, kind: str, error: Exception) -> str:
    """Why ``path`` does not read as ``kind``, in one line with its line number and a fix, where
    the reader's error allows: a byte that is not UTF-8, a row with more fields than the header
    (a TSV named ``.csv``, an unquoted separator), a line of a JSONL file that is not JSON."""
    if isinstance(error, UnicodeDecodeError):
        data = path.read_bytes()
        try:  # the reader's offset is into its buffer, not the file: find the byte in the file
            data.decode("utf-8")
        except UnicodeDecodeError as found:
            line = data.count(b"\n", 0, found.start) + 1
            return (
                f"cannot read {path}: byte 0x{data[found.start]:02x} at line {line} (byte offset {found.start:,}) is "
                f"not UTF-8; re-save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8 {path.name} > utf8-{path.name})"
            )
    fields = _FIELDS.search(str(error))
    if fields is not None:
        header, line, saw = fields.groups()
        first = path.open(encoding="utf-8", errors="replace").readline()
        if kind == "csv" and "\t" in first:
            hint = f"the file looks tab-separated (tabs in its header line): name it {path.with_suffix('.tsv').name}"
        elif kind == "tsv" and "\t" not in first and "," in first:
            hint = f"the file looks comma-separated: name it {path.with_suffix('.csv').name}"
        else:
            separator = "comma" if kind == "csv" else "tab"
            hint = f'a text holding a {separator} must be quoted ("...")'
        return f"cannot read {path} as {kind}: line {line} has {saw} fields where the header has {header}; {hint}"
    if kind == "jsonl" and isinstance(error, ValueError):
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as bad:
                    return (
                        f"cannot read {path} as jsonl: line {number} is not JSON ({bad.msg}, column {bad.colno}); "
                        'each line holds one object, such as {"text": "...", "label": "pos"}'
                    )
                if not isinstance(row, dict):
                    return (
                        f"cannot read {path} as jsonl: line {number} holds a {type(row).__name__}, not an object; "
                        'each line holds one object, such as {"text": "...", "label": "pos"}'
                    )
    return f"cannot read {path} as {kind}: {str(error).splitlines()[0] if str(error) else type(error).__name__}"


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
