"""Errors by the rule (issue #38, item 6): every verb of the command line, given a bad value of
any one option that takes a value, exits 2 with exactly one line on stderr, before any work.

The verbs and their options come from the parser itself (:func:`robustkit.cli.build_parser`), so
a new verb or flag is swept without editing this file; an option whose kind of bad value is not
known here fails the sweep until it gets one (or a reason it cannot get one cheaply)."""

from __future__ import annotations

import argparse
import shutil

import pytest
from cli_outcome import run_cli

from robustkit.cli import build_parser

# Options that take any text, so no value of theirs is bad here: the reason, per flag.
FREE_TEXT = {
    "--subtitle": "a figure's second title line: any text",
    "--footer": "text under a figure: any text",
    "--title": "a table figure's title: any text",
    "--paper-figure": "the paper figure an ablation plot names in its caption: any text",
    "--partition": "a Slurm partition name, known only to the cluster's sbatch (never called on the local executor)",
}

# The bad value of each option that is neither a choice nor a number (those get an unknown choice
# and -1, the negative count every number here refuses), by flag or positional name. A callable
# takes the sweep's paths (see `places`).
BAD = {
    "--device": lambda p: p["no_gpu"],
    "--select": "nosuchcolumn=1",
    "--by": "nosuchcolumn",
    "--within": "nosuchcolumn",
    "--metric": "nosuchmetric",
    "--task": "nosuchtask",
    "--method": "nosuchmethod",
    "--method-option": "nosuchoption=1",
    "--slurm-arg": "no-equals-sign",
    "--model": lambda p: str(p["missing"]),
    "--base": lambda p: str(p["missing"]),
    "--data-dir": lambda p: str(p["missing"]),
    "--train-size": "-1",
    "--data": lambda p: str(p["missing"]),
    "--dataset": "no such dataset!",
    "--task-name": "mine",  # without --data: names no data
    "--text-column": "review",
    "--text-pair-column": "answer",
    "--label-column": "stars",
    "--recipe-dir": lambda p: str(p["missing"]),
    "--store": lambda p: str(p["under_file"]),  # created where missing: a folder under a file cannot be
    "-o": lambda p: str(p["under_file"] / "out.csv"),
    "--figures": lambda p: str(p["under_file"]),
    "--alphas": "0:x:3",
    "--grid": "0:x:3",
    "--ts": "0:x:3",
    "--splits": "nosuchsplit",
    "--checkpoints": "nosuchcheckpoint",
    "--attackers": "nosuchattacker",
    "--attack-options": "nosuchoption=1",
    "--matrices": "zz",
    "store": lambda p: str(p["missing"]),
    "grid": lambda p: str(p["missing"]),
    "folder": lambda p: str(p["missing"]),
    "recipes": "nosuch/recipe",
    "runs": "nosuch-run",  # verify's run ids
    "names": "nosuchasset",
    "name": "nosuch/recipe",  # check's registered name
}


def verbs(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command words, parser) of every leaf verb, from the parser's own subcommands."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for name, sub in subs[0].choices.items():
        yield from verbs(sub, (*path, name))


def valued(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The options and positionals of ``parser`` that take a value."""
    return [a for a in parser._actions if a.nargs != 0 and not isinstance(a, argparse._HelpAction)]


def name_of(action: argparse.Action) -> str:
    return action.option_strings[0] if action.option_strings else action.dest


def bad_value(action: argparse.Action, places: dict) -> str | None:
    """The bad value of ``action``; None for free text (FREE_TEXT says why)."""
    name = name_of(action)
    if name in FREE_TEXT:
        return None
    if action.choices and name not in BAD:
        return "no-such-choice"
    if name in BAD:
        value = BAD[name]
        return value(places) if callable(value) else value
    if getattr(action.type, "__name__", "") in ("int", "float", "count", "_ints"):
        return "-1"
    raise AssertionError(f"no bad value known for {name} ({action.help}): add one to BAD, or a reason to FREE_TEXT")


GRID = (
    '[base]\nmodel = "bert-tiny"\ntask = "rte"\nepochs = 1\nbatch_size = 8\nmax_length = 32\n[grid]\nmethod = '
    '["full"]\n'
)


@pytest.fixture(scope="module")
def places(tiny_store, tiny_model, tmp_path_factory) -> dict:
    """Good values for what each verb requires, and the paths the bad values are made of."""
    import torch

    from robustkit.store.folders import run_dirs
    from robustkit.store.manifest import read_spec

    root = tmp_path_factory.mktemp("cli-errors")
    store = root / "runs"
    shutil.copytree(tiny_store, store)
    (root / "a-file").write_text("not a folder\n")
    (root / "grid.toml").write_text(GRID)
    recipes = root / "recipes" / "toy"
    recipes.mkdir(parents=True)
    data_dir = next(read_spec(p).data_dir for p in run_dirs(store))
    (root / "recipes" / "defaults.toml").write_text(
        '[demo.base]\nmodel = "bert-tiny"\ntask = "rte"\nepochs = 2\nbatch_size = 8\nmax_length = 32\nadapter_size = '
        "16\n"
        f'eval_every = 2\ndata_dir = "{data_dir}"\n'
    )
    (recipes / "seeds.toml").write_text(
        'title = "t"\nfigure = "box-seeds"\noutput = "seeds.pdf"\n'
        '[demo.grid]\nmethod = ["houlsby", "full"]\nseed = [0]\n'
    )
    no_gpu = f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"
    return {
        "root": root,
        "store": store,
        "grid": root / "grid.toml",
        "recipes": root / "recipes",
        "data_dir": data_dir,
        "model": tiny_model,
        "missing": root / "no" / "such" / "path",
        "under_file": root / "a-file" / "sub",
        "no_gpu": no_gpu,
    }


def base_argv(words: tuple[str, ...], p: dict) -> list[str]:
    """A command line of verb ``words`` that is good apart from the option under test (which,
    given after it, replaces its value)."""
    out = str(p["root"] / "out")
    store, new_store = str(p["store"]), str(p["root"] / "new-store")
    verb = words[0]
    if verb in ("analyze", "runs", "verify", "stats"):
        return [*words, store]
    if verb == "plot":
        return [*words, store, "-o", out + ".pdf"]
    if verb == "train":
        return [
            *words,
            "--model",
            "bert-tiny",
            "--task",
            "rte",
            "--data-dir",
            p["data_dir"],
            "--epochs",
            "1",
            "--store",
            new_store,
        ]
    if verb == "sweep":
        return [*words, str(p["grid"]), "--data-dir", p["data_dir"], "--store", new_store]
    if verb == "import":
        return [
            *words,
            p["model"],
            "--base",
            "bert-tiny",
            "--task",
            "rte",
            "--data-dir",
            p["data_dir"],
            "--store",
            new_store,
        ]
    if verb == "assets":
        return [*words, "fetch", "bert-tiny"]
    if verb == "demo":
        return [*words, "--store", new_store]
    if verb == "reproduce":
        return [*words, "toy/seeds", "--recipe-dir", str(p["recipes"]), "--store", store, "--figures", out]
    if verb == "claims":
        return [*words, "toy/seeds", "--recipe-dir", str(p["recipes"]), "--store", store]
    if verb == "check":
        return [*words, "recipe", "toy/seeds", "--recipe-dir", str(p["recipes"])]
    raise AssertionError(f"no good command line known for verb {verb!r}: add one to base_argv")


def with_bad(
    argv: list[str], words: tuple[str, ...], parser: argparse.ArgumentParser, action: argparse.Action, value: str
) -> list[str]:
    """``argv`` with ``action`` given ``value``: a flag is appended (argparse keeps the last one),
    a positional replaces the good one in its place (they follow the verb's words, in order)."""
    if action.option_strings:
        return [*argv, f"{action.option_strings[0]}={value}"]
    index = len(words) + [a for a in valued(parser) if not a.option_strings].index(action)
    return [*argv[:index], value, *argv[index + 1 :]]


VERBS = dict(verbs(build_parser()))  # built once: every case reads its verb's parser


def cases():
    for words, parser in VERBS.items():
        for action in valued(parser):
            if name_of(action) in FREE_TEXT:
                continue  # no bad value exists; FREE_TEXT says why, and no case is skipped silently
            yield pytest.param(words, name_of(action), id=f"{' '.join(words)} {name_of(action)}")


@pytest.mark.parametrize("words, option", list(cases()))
def test_a_bad_value_exits_2_with_one_line(words, option, places, capsys, monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.chdir(places["root"])
    parser = VERBS[words]
    action = next(a for a in valued(parser) if name_of(a) == option)
    value = bad_value(action, places)
    argv = with_bad(base_argv(words, places), words, parser, action, value)
    code, err = run_cli(argv, capsys)
    lines = err.strip("\n").splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (
        f"robustkit {' '.join(argv)}\nexit {code}, stderr:\n{err}"
    )
    # the line names what was wrong: the value, or the option it was given to
    named = {value, value.split("=")[0], option, option.lstrip("-"), option.lstrip("-").replace("-", "_")}
    assert any(text in lines[0] for text in named), f"robustkit {' '.join(argv)}: {lines[0]}"
