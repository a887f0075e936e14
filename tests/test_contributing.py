"""CONTRIBUTING.md is tested (issue #40 item 6): each worked example is performed, as the guide
writes it, in a copy of the checkout (its tracked files, a git repository of their own).

Each example's files are the guide's own code blocks: a block whose first line is ``# <path>``
is that file (written whole where it is new, merged where it exists: a Python block's
``NAME = ...`` line replaces the file's, the lines above it go in above; a TOML block's lines go
under its ``[table]``). Then the example's bash commands run (``python tools/...``) or parse
(``robustkit ...``, with the copy's robustkit, which now holds the example), the new thing is
listed by the command line, the guide's own test of it runs where it is fast, and ``git status``
of the copy must name exactly the files of the example's **Files:** line, placeholders
substituted: a file the guide names but the example does not need, or one it needs and the
guide leaves out, fails the test. Then what a contributor runs before a pull request runs on the
result (issue #58 item 2): ``robustkit check`` on each new object, ``ruff check`` and ``ruff
format --check`` on its Python files, and the suite's contract tests (the registry sweep of
tests/test_check.py and the tests of the tables the example regenerates).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from test_readme import FENCE, commands

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "CONTRIBUTING.md"
# the first line of a block that is a file: "# robustkit/analysis/weight_change.py"
FILE_MARK = re.compile(r"^# ([\w./-]+\.(?:py|toml))\n")
FILES_LINE = re.compile(r"^\*\*Files:\*\* (.+)$", re.M)


@dataclass(frozen=True)
class Example:
    heading: str  # the guide's section
    names: dict[str, str]  # the Files line's placeholders -> the worked example's names
    listed: dict[tuple[str, ...], str] = field(default_factory=dict)  # `robustkit ... --help` -> a word it shows
    tests: tuple[str, ...] = ()  # pytest arguments run in the copy (fast ones only)
    checked: tuple[tuple[str, str], ...] = ()  # (kind, name) of each object `robustkit check` must pass
    contracts: tuple[str, ...] = ()  # the suite's contract tests on the result (pytest arguments)


EXAMPLES = {
    "method": Example(
        "## Add a method",
        {"<family>": "lora"},
        {("train", "--help"): "lora-all"},
        ("tests/test_method_objects.py", "-k", "label_colour or run_id"),
    ),
    "analysis": Example(
        "## Add an analysis, its statistic, view and figure",
        {"<name>": "weight_change", "<paper>": "beyond", "<figure>": "weight-change"},
        {("analyze", "--help"): "weight-change", ("plot", "--help"): "weight-change"},
        # its test (tests/test_weight_change.py) is not run here: conftest's lora_store trains 5
        # bert-tiny runs (~40 s more); tests/test_extend_analysis.py runs the same calls
        checked=(("analysis", "weight-change"), ("figure", "weight-change"), ("recipe", "beyond/weight-change")),
        contracts=(  # the declaration and table tests: none trains a run
            *("tests/test_check.py", "tests/test_recipes.py", "tests/test_docs_tables.py"),
            *("tests/test_param_defaults.py", "tests/test_plots_only_draw.py"),
            *("-k", "weight or not test_every_registered_object_meets_every_rule"),
        ),
    ),
    "attack": Example(
        "## Add an attack",
        {"<name>": "charswap"},
        {("analyze", "attack", "--help"): "charswap"},
        ("tests/test_charswap.py",),
        checked=(("attack", "charswap"),),
        contracts=("tests/test_check.py", "-k", "charswap"),
    ),
}


def section(heading: str) -> str:
    text = GUIDE.read_text(encoding="utf-8")
    assert f"\n{heading}\n" in text, f"CONTRIBUTING.md has no section {heading!r}"
    return text.split(f"\n{heading}\n", 1)[1].split("\n## ", 1)[0]


def named_files(example: Example) -> set[str]:
    """The example's Files line, its placeholders substituted."""
    (line,) = FILES_LINE.findall(section(example.heading))
    files = set()
    for item in line.split(","):
        path = item.strip().strip("`")
        for placeholder, name in example.names.items():
            path = path.replace(placeholder, name)
        assert "<" not in path, f"{example.heading}: placeholder left in {path!r}"
        files.add(path)
    return files


def file_blocks(text: str) -> list[tuple[str, str]]:
    """(path, text) of each code block of ``text`` that is a file."""
    found = []
    for _language, body in FENCE.findall(text):
        mark = FILE_MARK.match(body)
        if mark:
            found.append((mark.group(1), body[mark.end() :]))
    return found


def bash_commands(text: str) -> list[list[str]]:
    return [shlex.split(line) for _, body in FENCE.findall(text) if _ == "bash" for line in commands(body)]


def merge(existing: str, block: str, suffix: str) -> str:
    """``existing`` with ``block`` merged in (module docstring)."""
    lines = existing.splitlines(keepends=True)
    if suffix == ".toml":
        header, *rest = block.splitlines(keepends=True)
        at = lines.index(header) + 1
        return "".join(lines[:at] + rest + lines[at:])
    defined = {line.split(" = ")[0] for line in lines if re.match(r"\w+ = ", line)}
    replaced = [m for m in re.finditer(r"^(\w+) = .*\n", block, re.M) if m.group(1) in defined]
    assert len(replaced) == 1, f"a block editing an existing module replaces one of its NAME = lines:\n{block}"
    (assignment,) = replaced
    (at,) = [i for i, line in enumerate(lines) if line.startswith(f"{assignment.group(1)} = ")]
    above = block[: assignment.start()]
    return "".join(lines[:at]) + above + assignment.group(0) + "".join(lines[at + 1 :])


def perform(example: Example, checkout: Path) -> None:
    """Write the example's files into ``checkout`` and run its commands there."""
    text = section(example.heading)
    for path, body in file_blocks(text):
        target = checkout / path
        if target.exists():
            target.write_text(merge(target.read_text(encoding="utf-8"), body, target.suffix))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(body)
    parsed = []
    for words in bash_commands(text):
        if words[0] == "python":
            done = run([sys.executable, *words[1:]], checkout)
            assert done.returncode == 0, f"{shlex.join(words)}: {done.stderr[-3000:]}"
        else:
            assert words[0] == "robustkit", f"not a robustkit command: {shlex.join(words)}"
            parsed.append(words[1:])
    # every robustkit command of the example parses with the copy's robustkit (it names the example)
    code = "import json, sys\nfrom robustkit.cli import parse_args\n[parse_args(w) for w in json.loads(sys.argv[1])]"
    done = run([sys.executable, "-c", code, json.dumps(parsed)], checkout)
    assert done.returncode == 0, f"a command of {example.heading!r} does not parse: {done.stderr[-3000:]}"
    for arguments, shown in example.listed.items():
        done = run([sys.executable, "-m", "robustkit", *arguments], checkout)
        assert done.returncode == 0 and shown in done.stdout, f"robustkit {' '.join(arguments)} lists no {shown}"
    if example.tests:
        done = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *example.tests], checkout)
        assert done.returncode == 0, f"the example's tests fail:\n{done.stdout[-3000:]}"


def passes_the_rules(example: Example, checkout: Path) -> None:
    """What the guide asks a contributor to run, on the performed example in ``checkout``: the
    check of each new object, ruff's lint and format check of its Python, the contract tests."""
    for kind, name in example.checked:
        done = run([sys.executable, "-m", "robustkit", "check", kind, name], checkout)
        assert done.returncode == 0, f"robustkit check {kind} {name}:\n{done.stdout}{done.stderr[-2000:]}"
    python = sorted(path for path in touched(checkout) if path.endswith(".py"))
    ruff = str(Path(sys.executable).with_name("ruff"))
    for command in (["check"], ["format", "--check"]):
        done = run([ruff, *command, *python], checkout)
        assert done.returncode == 0, f"ruff {' '.join(command)}: {done.stdout[-3000:]}"
    if example.contracts:
        arguments = ["-q", "-p", "no:cacheprovider", "-n", "0", "-m", "not slow", *example.contracts]
        done = run([sys.executable, "-m", "pytest", *arguments], checkout)
        assert done.returncode == 0, f"the contract tests fail on the example:\n{done.stdout[-3000:]}"


def run(arguments: list[str], cwd: Path) -> subprocess.CompletedProcess:
    # from the copy's root: `python -m robustkit` and the tests import the copy's robustkit
    # (PYTHONPATH too: `python tools/plan_table.py` puts tools/, not the root, first on its path)
    env = {"TQDM_DISABLE": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(cwd)}
    return subprocess.run(arguments, cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=600)


def copy_of_checkout(folder: Path) -> Path:
    """The checkout's tracked files (as they are in the working tree) in ``folder``, committed
    there as a git repository of their own."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():  # a file deleted in the working tree is not copied
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, folder / name)
    git = ["git", "-c", "user.name=guide", "-c", "user.email=guide@example.org"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the checkout"]):
        subprocess.run([*git, *command], cwd=folder, check=True, capture_output=True)
    return folder


def touched(checkout: Path) -> set[str]:
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=checkout, capture_output=True, text=True
    ).stdout
    return {line[3:] for line in status.splitlines()}


def test_every_example_names_its_files_and_writes_only_those():
    """Without performing them: each example's file blocks are files of its Files line."""
    for example in EXAMPLES.values():
        named = named_files(example)
        written = {path for path, _ in file_blocks(section(example.heading))}
        assert written <= named, f"{example.heading}: writes {sorted(written - named)}, not on its Files line"


@pytest.mark.parametrize(
    "which",
    [
        pytest.param("method", marks=pytest.mark.slow),
        pytest.param("analysis", marks=pytest.mark.slow),  # tools/plan_table.py: ~20 CPU-seconds
        "attack",  # ~6 s: no model, no table
    ],
)
def test_a_worked_example_touches_its_files_and_passes_the_rules(which, tmp_path):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to copy by `git ls-files`")
    example = EXAMPLES[which]
    checkout = copy_of_checkout(tmp_path / "checkout")
    perform(example, checkout)
    assert touched(checkout) == named_files(example), f"{example.heading}: the Files line is not what changed"
    passes_the_rules(example, checkout)
