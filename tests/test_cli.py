import argparse

import pytest

from robustkit.cli import build_parser, main
from robustkit.store.tables import load_runs


def _subparsers(parser):
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_every_flag_has_help():
    for name, sub in _subparsers(build_parser()).items():
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help, f"{name}: {action.dest} has no help"


def test_help_shows_no_escaped_percent():
    """argparse %-formats flag help but prints a description as written: "80%%" there would
    show as typed."""
    for name, sub in _subparsers(build_parser()).items():
        assert "%%" not in sub.format_help(), name


def test_unknown_task_is_named_and_the_store_untouched(tmp_path, capsys):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "keep.txt").write_text("x")
    assert main(["train", "--task", "nope", "--store", str(runs)]) == 2
    assert "'nope'" in capsys.readouterr().err
    assert [p.name for p in runs.iterdir()] == ["keep.txt"]


def test_unknown_model_is_named_before_any_run_folder_exists(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # read when the model is checked: no ~23 s of retries
    runs = tmp_path / "runs"
    code = main(["train", "--model", "no-such-org/no-such-model", "--store", str(runs)])
    assert code == 2  # a bad input stops the sweep before it trains anything
    err = capsys.readouterr().err
    assert "no-such-org/no-such-model" in err
    assert not runs.exists()  # not even an empty store


def test_store_that_is_a_file_is_refused(tmp_path, capsys):
    path = tmp_path / "runs"
    path.write_text("")
    assert main(["runs", str(path)]) == 2
    assert "is a file" in capsys.readouterr().err


def test_bad_seed_list_is_an_argparse_error(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--store", "x", "--seed", "1,a"])
    assert "1,a" in capsys.readouterr().err


@pytest.mark.slow
def test_train_then_runs_table(tmp_path, capsys):
    runs = str(tmp_path / "runs")
    args = [
        "train",
        "--model",
        "bert-tiny",
        "--task",
        "polarity",
        "--method",
        "full",
        "--train-size",
        "32",
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--max-length",
        "24",
        "--store",
        runs,
    ]
    assert main([*args, "--seed", "0,1"]) == 0
    assert main(["runs", runs]) == 0
    out = capsys.readouterr().out
    assert out.count("polarity-full-bert-tiny") >= 2 and "complete" in out
    assert len(load_runs(runs)) == 2
    # train prints its own runs, not the whole store
    ids = load_runs(runs).set_index("seed").run_id
    assert main([*args, "--seed", "1"]) == 0  # complete already: skipped, but it is this command's run
    out = capsys.readouterr().out
    assert ids[1] in out and ids[0] not in out, out
    assert "1 run: 0 trained, 1 already complete" in out


def test_assets_list(capsys):
    assert main(["assets", "list"]) == 0
    out = capsys.readouterr().out
    assert "minilm-l6" in out and "polarity" in out


def test_method_setting_flags_reach_the_run_specs():
    from robustkit.cli.train import specs_from_args

    args = build_parser().parse_args(
        [
            "train",
            "--store",
            "s",
            "--method",
            "houlsby",
            "--adapter-sharing",
            "3-layer",
            "--adapter-init-std",
            "1e-5",
            "--seed",
            "0,1",
        ]
    )
    specs = specs_from_args(args)
    assert [(s.seed, s.adapter_sharing, s.adapter_init_std) for s in specs] == [
        (0, "3-layer", 1e-5),
        (1, "3-layer", 1e-5),
    ]
    topk = specs_from_args(build_parser().parse_args(["train", "--store", "s", "--method", "topk", "--top-k", "3"]))
    assert topk[0].top_k == 3 and topk[0].adapter_sharing == "none"
    # --adapter-size was passed twice to the spec (a named field and a method field): TypeError
    sized = specs_from_args(build_parser().parse_args(["train", "--store", "s", "--adapter-size", "16"]))
    assert sized[0].adapter_size == 16
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--store", "s", "--adapter-sharing", "2-layer"])


def test_topk_beyond_the_models_layers_is_named_before_any_run_folder(tmp_path, capsys):
    code = main(["train", "--store", str(tmp_path), "--model", "bert-tiny", "--method", "topk", "--top-k", "5"])
    err = capsys.readouterr().err
    assert code == 2 and "top_k between 1 and 2" in err and "got 5" in err
    assert list(tmp_path.iterdir()) == []
