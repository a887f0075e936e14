"""Replace the text between a page's two marker lines: the generated tables of the README files
and docs (tools/simulate_verdicts.py, tools/simulate_real_null.py, tools/size_cpu_scale.py,
tools/plan_table.py, tools/docs_tables.py)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def between(page: str, begin: str, end: str, text: str, name: str = "the page") -> str:
    """``page`` with ``text`` in place of what lies between ``begin`` and ``end``; a page without
    ``begin`` is an error (a generated table is never appended somewhere unseen)."""
    head, marker, rest = page.partition(begin)
    if not marker:
        raise SystemExit(f"{name} has no {begin.strip()} marker")
    _, _, tail = rest.partition(end)
    return f"{head}{begin}{text}{end}{tail}"


def write_between(path: Path, begin: str, end: str, text: str) -> None:
    """Put ``text`` between ``begin`` (its own line) and ``end`` in ``path``."""
    path.write_text(between(path.read_text(), begin, end, "\n" + text, name=str(path)))


def write_table(text: str, frame: pd.DataFrame, out: Path | None, page: Path, begin: str, end: str) -> None:
    """``text`` (a markdown table) into ``out`` with ``frame`` as CSV beside it, or between the
    page's markers."""
    if out:
        out.write_text(text)
        frame.to_csv(out.with_suffix(".csv"), index=False)
        return
    write_between(page, begin, end, text)
