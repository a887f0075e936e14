"""Replace the text between a page's two marker lines: the generated tables of the README files
(tools/simulate_verdicts.py, tools/simulate_real_null.py, tools/size_cpu_scale.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def write_between(path: Path, begin: str, end: str, text: str) -> None:
    """Put ``text`` between ``begin`` (its own line) and ``end`` in ``path``; a page without
    ``begin`` is an error (a generated table is never appended somewhere unseen)."""
    page = path.read_text()
    head, marker, rest = page.partition(begin)
    if not marker:
        raise SystemExit(f"{path} has no {begin} marker")
    _, _, tail = rest.partition(end)
    path.write_text(f"{head}{begin}\n{text}{end}{tail}")


def write_table(text: str, frame: pd.DataFrame, out: Path | None, page: Path, begin: str, end: str) -> None:
    """``text`` (a markdown table) into ``out`` with ``frame`` as CSV beside it, or between the
    page's markers."""
    if out:
        out.write_text(text)
        frame.to_csv(out.with_suffix(".csv"), index=False)
        return
    write_between(page, begin, end, text)
