"""The README's code runs (issue #28 item 1): every ``robustkit`` command of its bash blocks parses
as the command line parses it, its notebook block runs from top to bottom on a tiny store (bert-tiny
runs of the same recipe, through a recipe folder whose demo scale is bert-tiny), and
CONTRIBUTING.md's examples are valid Python and TOML, its recipe a recipe robustkit loads."""

from __future__ import annotations

import re
import shlex
import shutil
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def blocks(path: Path, language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(path.read_text()) if lang == language]


def commands(block: str) -> list[str]:
    """The block's command lines: continuations joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [
        line.split(" #")[0].strip()
        for line in joined.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def make_targets() -> set[str]:
    return set(re.search(r"^\.PHONY: (.*)$", (ROOT / "Makefile").read_text(), re.M).group(1).split())


def test_every_readme_command_parses():
    from robustkit.cli import parse_args

    lines = [line for block in blocks(ROOT / "README.md", "bash") for line in commands(block)]
    assert len(lines) > 30
    for line in lines:
        words = shlex.split(line)
        if words[0] == "make":
            assert words[1] in make_targets(), line
            continue
        assert words[0] == "robustkit", f"not a robustkit command: {line}"
        try:
            parse_args(words[1:])
        except SystemExit:
            pytest.fail(f"the README's command does not parse: {line}")


def test_readme_python_is_checked_python():
    (notebook,) = blocks(ROOT / "README.md", "python")
    compile(notebook, "README.md", "exec")
    assert "robustkit.draw_recipe(" in notebook and "preset_spec(" in notebook


@pytest.fixture(scope="module")
def demo_at_bert_tiny(tmp_path_factory):
    """A recipe folder whose demo scale is bert-tiny on rt (64 examples, 1 epoch) holding the real
    han2021/fig2 recipe, and a store with its seeds 0 and 1 trained at that scale."""
    from robustkit.sweeps.grid import run_sweep
    from robustkit.verdicts.recipes import load_defaults, load_recipe

    root = tmp_path_factory.mktemp("readme")
    recipes = root / "recipes"
    (recipes / "han2021").mkdir(parents=True)
    shutil.copy(ROOT / "recipes" / "han2021" / "fig2.toml", recipes / "han2021" / "fig2.toml")
    (recipes / "defaults.toml").write_text(
        '[demo.base]\nmodel = "bert-tiny"\ntask = "rt"\ntrain_size = 64\nepochs = 1\nbatch_size = 16\nmax_length = 32\n'
        "adapter_size = 16\n[demo.lr]\nhoulsby = 1e-3\nfull = 1e-4\n"
    )
    specs = [s for s in load_recipe("han2021/fig2", recipes).specs("demo", load_defaults(recipes)) if s.seed in (0, 1)]
    results = run_sweep(specs, root / "runs" / "demo", progress=False)
    assert set(results["status"]) == {"complete"}
    return root, recipes


@pytest.mark.slow
def test_readme_notebook_block_runs(demo_at_bert_tiny, monkeypatch):
    import robustkit.verdicts.recipes

    root, recipes = demo_at_bert_tiny
    monkeypatch.chdir(root)
    monkeypatch.setattr(robustkit.verdicts.recipes, "RECIPE_DIR", recipes)  # the demo scale, at bert-tiny
    # never minilm-l6 here: every default recipe folder must now be the bert-tiny one
    assert robustkit.verdicts.recipes.preset_spec("demo", method="houlsby").model == "bert-tiny"
    assert robustkit.verdicts.recipes.preset("demo")["base"]["model"] == "bert-tiny"
    (notebook,) = blocks(ROOT / "README.md", "python")
    names: dict = {}
    exec(compile(notebook, "README.md", "exec"), names)
    assert len(names["runs"]) == 4 and set(names["outcomes"]["method"]) == {"houlsby", "full"}
    assert {"rsa", "cka"} <= set(names["frame"]["measure"]) and len(names["slopes"]) == 4
    assert set(names["verdicts"]["recipe"]) == {"han2021/fig2"}
    assert (root / "runs" / "fig2.pdf").read_bytes().startswith(b"%PDF")
    assert (
        "bert-tiny" in names["run_dir"].name and names["run_dir"].parent.resolve() == (root / "runs" / "demo").resolve()
    )
    assert names["model"] is not None
    assert len(names["runs"]) == 4 and len(robustkit.load_runs(root / "runs" / "demo")) == 5  # seed 2: trained


def test_contributing_examples_are_valid(tmp_path):
    from robustkit.verdicts.recipes import load_recipe

    path = ROOT / "CONTRIBUTING.md"
    for block in blocks(path, "python"):
        compile(block, "CONTRIBUTING.md", "exec")
    tables = [tomllib.loads(block) for block in blocks(path, "toml")]
    assert tables and all(tables)
    recipe = next(block for block in blocks(path, "toml") if "[[claim]]" in block)
    (tmp_path / "beyond").mkdir()
    (tmp_path / "beyond" / "example.toml").write_text(recipe)
    loaded = load_recipe("beyond/example", tmp_path)
    assert loaded.figure == "curvature" and loaded.claims[0].id == "flatter-end-point"


# ---------------------------------------------------------------------------------------------
# The tour leaves the checkout clean (issue #38, item 4)

# The demo scale the tour runs at here: bert-tiny, 64 examples, one epoch (seconds per run),
# written over recipes/defaults.toml's [demo.base] in the copy, so that every command of the
# tour, `--preset demo` and `reproduce` included, reads it as it reads the real one.
TINY_DEMO = {"model": '"bert-tiny"', "train_size": "64", "epochs": "1", "max_length": "32"}
# Values the tour's commands take here instead of the README's, each changing how long a command
# computes, never what it writes or where: RSA's forward passes grow with the tokens sampled.
FASTER = {"--tokens": "50"}


def tour_commands() -> list[str]:
    """The commands of the bash block under the README's "## A tour", in order."""
    section = (ROOT / "README.md").read_text().split("\n## A tour\n", 1)[1].split("\n## ", 1)[0]
    (block,) = [body for lang, body in FENCE.findall(section) if lang == "bash"]
    return commands(block)


def tracked_copy(folder: Path) -> Path:
    """The checkout's tracked files (as they are in the working tree) in ``folder``, committed
    there as a git repository of their own, with the demo scale at :data:`TINY_DEMO`."""
    import subprocess

    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():  # a file deleted in the working tree is not copied
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, folder / name)
    defaults = folder / "recipes" / "defaults.toml"
    head, rest = defaults.read_text().split("[demo.base]\n", 1)
    base, tail = rest.split("\n\n", 1)
    for key, value in TINY_DEMO.items():
        base, found = re.subn(rf"^{key} = .*$", f"{key} = {value}", base, flags=re.M)
        assert found == 1, f"[demo.base] of recipes/defaults.toml has no {key}"
    defaults.write_text(f"{head}[demo.base]\n{base}\n\n{tail}")
    git = ["git", "-c", "user.name=tour", "-c", "user.email=tour@example.org"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the checkout, demo scale at bert-tiny"]):
        subprocess.run([*git, *command], cwd=folder, check=True, capture_output=True)
    return folder


@pytest.mark.slow
def test_the_tour_leaves_the_checkout_clean(tmp_path):
    """`make demo` (its `robustkit demo`) and every command of the README's tour, as a user runs
    them from the checkout, change no tracked file and leave no untracked one (what they write
    goes under the git-ignored runs/)."""
    import os
    import subprocess
    import sys

    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: nothing to copy by `git ls-files`")
    checkout = tracked_copy(tmp_path / "checkout")
    env = {**os.environ, "TQDM_DISABLE": "1"}
    make_demo = re.search(r"^demo:.*\n\t\$\(PY\) -m (robustkit .*)$", (checkout / "Makefile").read_text(), re.M).group(
        1
    )
    for line in [make_demo, *tour_commands()]:
        words = shlex.split(line)
        assert words[0] == "robustkit", line
        words = [FASTER.get(before, word) for before, word in zip(["", *words], words)]
        # python -m from the copy's root imports the copy's robustkit (its recipes/ included)
        done = subprocess.run(
            [sys.executable, "-m", *words], cwd=checkout, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"{line}: exit {done.returncode}\n{done.stderr[-3000:]}"
        if words[1] == "reproduce":  # said once where the figures went: beside the store
            assert done.stderr.count("runs/demo-figures") == 1, done.stderr
    assert (checkout / "runs" / "demo-figures" / "han2021_fig2_seeds.pdf").is_file()
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=checkout,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert status == "", f"the tour changed the checkout:\n{status}"
