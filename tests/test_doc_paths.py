"""Every repository path a doc names exists (issue #58 item 6): the guide had named `sweep.py`
(it is `sweeps/`) and `cli/progress.py` (it is `robustkit/progress.py`) long after they moved.

A path is what a doc writes in backticks that looks like one of this checkout's: it starts with
a top-level entry of the repository (`robustkit/`, `tests/`, `recipes/`, ...), or it follows
such a path on the same line as a short form beside it: a file (`rules.py`) in that path's
folder, a folder (`measures/`) there or in its top-level package (a table cell lists
``robustkit/analysis/``, ``measures/``, ``attacks/``). Placeholders (``<name>``), globs and
``module:function`` references are not paths, nor is a file the doc tells the reader to make
("saved as `recipes/beyond/sharpness.toml`").
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    ROOT / "recipes" / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
]
TOP = {path.name for path in ROOT.iterdir() if not path.name.startswith(".")} - {"runs"}
LOOKS_LIKE_A_PATH = re.compile(r"`([\w.-]+(?:/[\w.-]*)*)`")
SHORT_FILE = re.compile(r"^[\w-]+\.(?:py|md|toml|csv|txt)$")
TO_MAKE = re.compile(r"(?:saved as|save it as|create|write) `([^`]+)`")


def named_paths(text: str) -> list[tuple[int, str, Path | None]]:
    """(line number, path as written, the path it is resolved to or None) of each path ``text`` names."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        base: Path | None = None  # the last full path on the line: its folder resolves short forms
        made = set(TO_MAKE.findall(line))
        for written in LOOKS_LIKE_A_PATH.findall(line):
            if written in made:
                continue
            parts = written.split("/")
            if parts[0] in TOP and (len(parts) > 1 or "." in written):
                found.append((number, written, ROOT / written))
                base = ROOT / written
                base = base if written.endswith("/") else base.parent
            elif base is not None and (SHORT_FILE.match(written) or ("/" in written and written.endswith("/"))):
                here = base / written
                if written.endswith("/") and not here.exists():  # a folder beside: in the top-level package
                    here = ROOT / base.relative_to(ROOT).parts[0] / written
                found.append((number, written, here))
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_path_a_doc_names_exists(doc):
    missing = [
        f"{doc.name}:{number}: `{written}` ({path.relative_to(ROOT)} does not exist)"
        for number, written, path in named_paths(doc.read_text(encoding="utf-8"))
        if not path.exists()
    ]
    assert not missing, "\n".join(missing)


def test_the_check_finds_a_moved_path():
    """The drift the issue found is caught: a short form beside a full path resolves in its folder."""
    text = "| `robustkit/specs/spec.py`, `train/`, `sweep.py` |\n| `robustkit/cli/terminal.py`, `progress.py` |\n"
    missing = [written for _, written, path in named_paths(text) if not path.exists()]
    assert missing == ["sweep.py", "progress.py"]
    assert named_paths("`runs/demo` and `<name>.py` and `robustkit.figures:draw`\n") == []
    assert named_paths("saved as `recipes/beyond/new.toml`\n") == []


def test_readme_and_guide_name_the_same_verdicts_files():
    """The two layout tables list one set of robustkit/verdicts/ files."""

    def listed(doc: Path) -> set[str]:
        (line,) = [line for line in doc.read_text(encoding="utf-8").splitlines() if "`robustkit/verdicts/" in line]
        return {path.name for _, _, path in named_paths(line) if path.parent.name == "verdicts"}

    assert listed(ROOT / "README.md") == listed(ROOT / "CONTRIBUTING.md")
