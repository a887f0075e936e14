"""The README stays a user's guide (issue #40): at most 230 lines, its reference material in
docs/, every docs/ link of README.md and CONTRIBUTING.md (and every relative link of a docs page)
naming a file that exists, every docs page linked from the README, and every ``robustkit``
command of the docs pages and of CONTRIBUTING.md parsing as the command line parses it (those of
CONTRIBUTING's worked examples name what the example adds: tests/test_contributing.py parses
them in a copy of the checkout where the example is done)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from test_readme import blocks, commands

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README_MAX_LINES = 230
# a markdown link's target, without its #anchor: [text](target) or [text](target#anchor)
LINK = re.compile(r"\]\(([^)#\s]*)(?:#[^)\s]*)?\)")
# a docs page named in text, linked or not: docs/install.md, `docs/cli.md`
DOCS_PATH = re.compile(r"(?<![\w./])docs/[\w./-]+\.md")


def pages() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def test_the_readme_has_at_most_230_lines():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move reference material to docs/"


@pytest.mark.parametrize("name", ["README.md", "CONTRIBUTING.md"])
def test_every_docs_link_points_to_a_file(name):
    text = (ROOT / name).read_text(encoding="utf-8")
    named = {target for target in LINK.findall(text) if target.startswith("docs/")} | set(DOCS_PATH.findall(text))
    if name == "README.md":
        assert named, "the README links no docs/ page"
    missing = sorted(path for path in named if not (ROOT / path).is_file())
    assert not missing, f"{name} links docs pages that do not exist: {missing}"


def test_every_relative_link_of_a_docs_page_points_to_a_file():
    assert pages(), "docs/ holds no page"
    for page in pages():
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if not target or re.match(r"\w+:", target):  # an anchor of the page itself, or a URL
                continue
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links {target}, which does not exist"


def test_the_readme_links_every_docs_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {target for target in LINK.findall(readme) if target.startswith("docs/")}
    assert {f"docs/{page.name}" for page in pages()} <= linked


@pytest.mark.parametrize("name", ["docs", "CONTRIBUTING.md"])
def test_every_documented_command_parses(name):
    from robustkit.cli import parse_args

    paths = pages() if name == "docs" else [ROOT / name]
    lines = [line for path in paths for block in blocks(path, "bash") for line in commands(block)]
    assert lines
    if name == "CONTRIBUTING.md":  # a worked example's commands name what it adds: parsed where it exists
        from test_contributing import EXAMPLES, bash_commands, section

        performed = {shlex.join(words) for e in EXAMPLES.values() for words in bash_commands(section(e.heading))}
        lines = [line for line in lines if shlex.join(shlex.split(line)) not in performed]
    for line in lines:
        words = shlex.split(line)
        if words[0] in ("mkdir", "cp"):  # CONTRIBUTING's scratch folder for a recipe on bert-tiny
            continue
        if words[0] == "python":  # a tool of the checkout
            assert (ROOT / words[1]).is_file() and words[1].startswith("tools/"), line
            continue
        assert words[0] == "robustkit", f"not a robustkit command: {line}"
        try:
            parse_args(words[1:])
        except SystemExit:
            pytest.fail(f"a command of {name} does not parse: {line}")
