import argparse

import pytest

from robustkit import store
from robustkit.cli import build_parser, main


def _subparsers(parser):
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_every_flag_has_help():
    for name, sub in _subparsers(build_parser()).items():
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, f"{name}: {action.dest} has no help"


def test_unknown_task_is_named_and_the_store_untouched(tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "keep.txt").write_text("x")
    assert main(["train", "--task", "nope", "--store", str(runs)]) == 2
    assert "'nope'" in capsys.readouterr().err
    assert [p.name for p in runs.iterdir()] == ["keep.txt"]


def test_unknown_model_is_named_before_any_run_folder_exists(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    runs = tmp_path / "runs"
    code = main(["train", "--model", "no-such-org/no-such-model", "--store", str(runs)])
    assert code == 1  # the run is reported failed, the sweep goes on
    err = capsys.readouterr().err
    assert "no-such-org/no-such-model" in err
    assert store.load_runs(runs).empty


def test_store_that_is_a_file_is_refused(tmp_path, capsys):
    path = tmp_path / "runs"
    path.write_text("")
    assert main(["runs", str(path)]) == 2
    assert "is a file" in capsys.readouterr().err


def test_bad_seed_list_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--store", "x", "--seed", "1,a"])
    assert "1,a" in capsys.readouterr().err


def test_train_then_runs_table(tmp_path, capsys):
    runs = str(tmp_path / "runs")
    args = ["train", "--model", "bert-tiny", "--task", "polarity", "--method", "full", "--seed", "0,1",
            "--train-size", "32", "--epochs", "1", "--batch-size", "16", "--max-length", "24", "--store", runs]
    assert main(args) == 0
    assert main(["runs", runs]) == 0
    out = capsys.readouterr().out
    assert out.count("polarity-full-bert-tiny") >= 2 and "complete" in out
    assert len(store.load_runs(runs)) == 2


def test_assets_list(capsys):
    assert main(["assets", "list"]) == 0
    out = capsys.readouterr().out
    assert "minilm-l6" in out and "polarity" in out
