"""The before/after table of two ``claims.csv`` files: every claim whose verdict or reason changed.

    python tools/compare_verdicts.py OLD.csv NEW.csv            # markdown table on stdout
    python tools/compare_verdicts.py git:622b9f2:results/claims.csv runs/demo-figures/claims.csv

A recompute under new rules changes verdicts; a closing note and the index owe a reader every
change with the rule behind it. A side named ``git:REV:PATH`` is read from that commit. Claims only
one side has are listed as added or removed. Exit 0 always: a difference is the output, not an
error.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

import pandas as pd

KEY = ["recipe", "claim"]
SHOWN = ["verdict", "reason_class", "effect", "p_value"]


def read(source: str) -> pd.DataFrame:
    """A ``claims.csv`` from a path or from ``git:REV:PATH`` (one row per recipe and claim)."""
    if source.startswith("git:"):
        _, rev, path = source.split(":", 2)
        text = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True, check=True).stdout
        frame = pd.read_csv(io.StringIO(text))
    else:
        frame = pd.read_csv(Path(source))
    # several cells of one claim keep their first row's verdict: claims.csv gives the claim's
    # verdict on every row of it
    return frame.drop_duplicates(KEY).set_index(KEY)


def changes(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """One row per claim whose verdict or reason class differs, or that one side lacks.

    Returns columns ``recipe, claim, before, after, reason`` (``reason``: the new side's reason,
    the rule behind the new verdict)."""
    rows = []
    for key in sorted(set(old.index) | set(new.index)):
        before = old.loc[key] if key in old.index else None
        after = new.loc[key] if key in new.index else None
        if before is not None and after is not None:
            if (before["verdict"], before.get("reason_class")) == (after["verdict"], after.get("reason_class")):
                continue
        rows.append(
            {
                "recipe": key[0],
                "claim": key[1],
                "before": _word(before),
                "after": _word(after),
                "reason": "" if after is None else str(after.get("reason", "")),
            }
        )
    return pd.DataFrame(rows, columns=["recipe", "claim", "before", "after", "reason"])


def _word(row: pd.Series | None) -> str:
    if row is None:
        return "(absent)"
    reason = row.get("reason_class")
    return f"{row['verdict']} ({reason})" if isinstance(reason, str) and reason else str(row["verdict"])


def counts(frame: pd.DataFrame) -> pd.Series:
    """Claims per verdict (a claim counted once)."""
    return frame["verdict"].value_counts()


def _counted(frame: pd.DataFrame) -> str:
    return ", ".join(f"{count} {verdict}" for verdict, count in counts(frame).items())


def markdown(table: pd.DataFrame) -> str:
    """``table`` as a markdown table (pandas' ``to_markdown`` needs tabulate, not a dependency)."""
    cells = [list(table.columns)] + table.astype(str).values.tolist()
    lines = ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in cells]
    lines.insert(1, "|" + "---|" * len(table.columns))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old")
    parser.add_argument("new")
    args = parser.parse_args(argv)
    old, new = read(args.old), read(args.new)
    table = changes(old, new)
    print(f"before: {_counted(old)}; after: {_counted(new)}; {len(table)} claim(s) changed\n")
    if len(table):
        print(markdown(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
