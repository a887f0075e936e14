"""Tables for people: how a command prints a DataFrame (``--format table|csv|json``) and writes the
whole of it (``-o``).

A ``table`` shows what differs: of the run-identity columns (:data:`robustkit.store.tables.IDENTITY`)
only those that vary between the rows, the ones that are the same everywhere they are known said
once above the table (``all rows: model=bert-tiny, task=rte, epochs=3 where known, ...``: an
import's unknown settings do not make a column); columns empty in every row are left out;
numbers are rounded to four significant digits and long texts (an imported AdapterHub config)
shortened. It is cut to the terminal's width (``$COLUMNS``, else 120 characters when the output
is not a terminal): the columns that do not fit are named under it, with ``-o`` (the whole frame
to a file) and ``--format csv`` (every column, to stdout) as the ways to see them. ``csv`` and
``json`` print the frame as it is.

Each command declares its table's **key columns** (``keys``: what the table is for, e.g. a
claim's verdict and reason, a run's scores and outcome). A cut never drops a key: the settings
columns go first, then the other values; where the keys alone are wider than the terminal, their
longest texts are shortened (``…``) instead.
"""

from __future__ import annotations

import math
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas loads on first use: `robustkit --help` builds every parser through here
    import pandas as pd

FORMATS = ("table", "csv", "json")
FALLBACK_WIDTH = 120  # characters, where the output is no terminal and $COLUMNS is unset
CELL_WIDTH = 40  # the longest cell a table shows (characters); run ids are never cut
ID_COLUMNS = frozenset({"run_id", "run", "run_a", "run_b", "tsp_run", "import_id"})
# Identity columns whose empty cells are a value, not an unknown: an import_id tells an import
# from the runs trained here (empty), so one import among them is a difference, shown.
ALWAYS_DIFFERENT = ("import_id",)
# An analysis' result columns, kept before its other values when the terminal is narrow.
RESULTS = ("value", "mean", "std", "outcome")
# Columns that name a row (a run): kept before the values and settings when the terminal is narrow.
NAMES = ("run_id", "import_id")
# The settings a table's "all rows:" line names when every row shares them (the rest are counted).
HEADLINE = ("model", "task", "method", "seed", "tsp_step", "lr", "train_size", "epochs", "max_length", "batch_size")


def add_format_arguments(
    parser,
    output_help: str = "write the whole frame to this file (.csv, .json, else parquet)",
    format_help: str = "csv / json: every column",
) -> None:
    """``--format`` and ``-o/--output`` on a command that prints a frame (``format_help``: what
    csv and json print, where a command prints more than one frame)."""
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="table",
        help=f"table: what varies between rows, cut to the terminal's width; {format_help}",
    )
    from robustkit.cli.arguments import output_file

    parser.add_argument("-o", "--output", type=output_file, help=output_help)


def render(
    frame: pd.DataFrame,
    fmt: str = "table",
    keep: Sequence[str] = (),
    width: int | None = None,
    identity: Sequence[str] | None = None,
    cell_width: int = CELL_WIDTH,
    keys: Sequence[str] = (),
    settings: Sequence[str] = (),
    empty: str = "no rows",
) -> str:
    """``frame`` as text in ``fmt`` (:data:`FORMATS`).

    Parameters
    ----------
    keep : sequence of str
        Columns a table shows (when the frame has them), varying or not, after the keys and
        before the other values when the terminal is narrow.
    keys : sequence of str
        The table's key columns (when the frame has them): always shown, varying or not, never
        cut; where they alone are wider than ``width`` their longest texts are shortened.
    settings : sequence of str
        Columns cut first besides the ``identity`` ones (a cell of a run's method options).
    width : int, optional
        Characters per line of a table; default: the terminal's (:func:`terminal_width`).
    identity : sequence of str, optional
        The columns shown only where they vary; default: the store's identity columns.
    cell_width : int
        Characters of the longest cell (longer texts are shortened); a table of explanations
        (the claims' reasons) gives more than the default.
    empty : str
        What a table without rows prints, in parentheses: why it is empty (``no test: ...``).
    """
    if fmt == "csv":
        return frame.to_csv(index=False).rstrip("\n")
    if fmt == "json":
        return frame.to_json(orient="records", indent=1, default_handler=str)
    if fmt != "table":
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    import pandas as pd

    if identity is None:
        from robustkit.store.tables import IDENTITY as identity  # noqa: N811
    width = terminal_width() if width is None else width
    if frame.empty:
        return f"({empty})"
    cells = frame.apply(lambda column: column.map(lambda value: cell(column.name, value, cell_width)))
    present = [c for c in frame.columns if (cells[c] != "").any()]
    # one value wherever known (an import's unknown settings are empty): said once, not a column
    # (a key setting too: the line above the table says it)
    constant = [
        c
        for c in present
        if c in identity and c not in keep and c not in ALWAYS_DIFFERENT and cells[c][cells[c] != ""].nunique() == 1
    ]
    keys = [c for c in keys if c in present and c not in constant]  # an empty key column would show nothing
    pinned = [*keys, *(c for c in keep if c not in keys)]  # shown varying or not
    # a label column that is the same in every row (checkpoint=best, metric=accuracy): said once too
    constant += [
        c
        for c in present
        if c not in identity
        and c not in pinned
        and len(frame) > 1
        and (cells[c] != "").all()
        and cells[c].nunique() == 1
        and not pd.api.types.is_numeric_dtype(frame[c])
        and not pd.api.types.is_bool_dtype(frame[c])
    ]
    varying = [c for c in present if c not in pinned and c not in constant]
    # what a cut keeps: the keys always, then the kept columns, the rows' names (a run's id is
    # no setting), the values (results first), and last the settings, those that tell rows apart
    # most often before the others
    names = [c for c in varying if c in NAMES]
    setting = (set(identity) | set(settings)) - set(NAMES)
    values = sorted((c for c in varying if c not in setting and c not in names), key=lambda c: c not in RESULTS)
    first = [c for c in varying if c in setting and c in HEADLINE]
    ordered = [
        *[c for c in keep if c in present and c not in keys],
        *names,
        *values,
        *first,
        *[c for c in varying if c not in first and c not in values and c not in names],
    ]
    sizes = {c: max(len(str(c)), int(cells[c].str.len().max())) + 2 for c in [*keys, *ordered]}
    shortened = _fit_keys(cells, keys, sizes, width)
    shown, left_out, used = list(keys), [], sum(sizes[c] for c in keys)
    for column in ordered:
        if used + sizes[column] > width and shown:
            left_out.append(column)
            continue
        shown.append(column)
        used += sizes[column]
    shown = [c for c in frame.columns if c in shown]  # in the frame's own order
    lines = []
    if constant:
        said = [c for c in constant if c in HEADLINE or c not in identity]
        others = len(constant) - len(said)
        known = lambda c: cells[c][cells[c] != ""]  # noqa: E731
        text = ", ".join(f"{c}={known(c).iloc[0]}{'' if len(known(c)) == len(frame) else ' where known'}" for c in said)
        lines.append(
            _wrapped(
                "all rows: "
                + text
                + (f"{', ' if said else ''}{plural(others, 'other setting')} alike" if others else ""),
                width,
            )
        )
    lines.append(cells[shown].to_string(index=False))
    if left_out or shortened:
        parts = (
            [
                f"{plural(len(left_out), 'more column')} past the terminal's {width} characters: "
                f"{', '.join(map(str, left_out))}"
            ]
            if left_out
            else []
        )
        parts += [f"{', '.join(shortened)} shortened to fit {width} characters"] if shortened else []
        lines.append(_wrapped("; ".join(parts) + " (-o FILE writes them all, --format csv prints them)", width))
    return "\n".join(lines)


KEY_TEXT_FLOOR = 12  # characters a shortened key text keeps at least (its column name's, if longer)


def _fit_keys(cells: pd.DataFrame, keys: Sequence[str], sizes: dict, width: int) -> list[str]:
    """Shorten the widest text key columns of ``cells`` in place (``sizes`` too) until the keys
    fit ``width``, none below :data:`KEY_TEXT_FLOOR`; the names of those shortened. A key is never
    dropped: a table without its verdict or its outcome reads as if nothing were wrong."""
    shortened = []
    while sum(sizes[c] for c in keys) > width:
        excess = sum(sizes[c] for c in keys) - width
        texts = [
            c
            for c in keys
            if sizes[c] - 2 > max(KEY_TEXT_FLOOR, len(str(c))) and not cells[c].str.fullmatch(r"-?[\d.e+-]*").all()
        ]
        if not texts:
            break  # as narrow as the keys go: the lines are wider than the terminal
        widest = max(texts, key=lambda c: sizes[c])
        room = max(KEY_TEXT_FLOOR, len(str(widest)), sizes[widest] - 2 - excess)
        cells[widest] = cells[widest].map(lambda text: text if len(text) <= room else text[: room - 1] + "…")
        sizes[widest] = room + 2
        if widest not in shortened:
            shortened.append(widest)
    return shortened


def plural(n: int, thing: str, many: str | None = None) -> str:
    """``"1 more column"``, ``"3 more columns"``: a count with its noun in the right number."""
    return f"{n} {thing if n == 1 else many or thing + 's'}"


def cell(column: str, value, width: int = CELL_WIDTH) -> str:
    """One value as a table cell: missing as empty, numbers to 4 significant digits, long texts
    shortened (an AdapterHub config to its short label)."""
    import pandas as pd

    if isinstance(value, (list, tuple)):
        value = ",".join(map(str, value))
    try:
        if pd.isna(value):
            return ""
    except (TypeError, ValueError):
        pass
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) or hasattr(value, "dtype") and getattr(value.dtype, "kind", "") == "f":
        value = float(value)
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.4g}"
    text = str(value).replace("\n", " ")
    if str(column) in ID_COLUMNS:
        return text  # never cut: an id is copied into other commands (verify, --select run_id=...)
    if str(column).endswith(".config") or len(text) > width:
        from robustkit.methods.adapterhub import short_config

        text = short_config(text, width)
    return text


def note(text: str, fmt: str = "table") -> None:
    """Print a line for people beside a printed frame: on stdout under a table (wrapped to the
    terminal's width), on stderr when stdout carries csv or json (which must parse)."""
    if fmt != "table":
        print(text, file=sys.stderr)
        return
    import textwrap

    print(
        "\n".join(
            textwrap.fill(line, terminal_width(), subsequent_indent="  ", break_on_hyphens=False) if line else line
            for line in text.split("\n")
        )
    )


def terminal_width() -> int:
    """Characters per line: the terminal's, else ``$COLUMNS``, else :data:`FALLBACK_WIDTH`."""
    return shutil.get_terminal_size((FALLBACK_WIDTH, 24)).columns


def write(frame: pd.DataFrame, path: str | Path) -> Path:
    """The whole frame to ``path``: ``.csv``, ``.json`` (records), else parquet."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".csv":
        frame.to_csv(path, index=False)
    elif path.suffix == ".json":
        frame.to_json(path, orient="records", indent=1, default_handler=str)
    else:
        frame.to_parquet(path, index=False)
    return path


def _wrapped(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, max(40, width), subsequent_indent="  ", break_on_hyphens=False))
