"""Bad input stops the CLI before any run folder exists (issue #13, item 5): exit status 2, one
line naming the value, no traceback, nothing trained. Nothing here trains: each case is refused
by the spec, the grid reader or the preflight checks (robustkit.specs.preflight)."""

from __future__ import annotations

import math
import time

import pytest

from robustkit.cli import main
from robustkit.errors import RobustkitError
from robustkit.specs.spec import SPEC_FIELDS, RunSpec

GOOD_GRID = '[base]\nmodel = "bert-tiny"\ntask = "rt"\ntrain_size = 32\nepochs = 1\n[grid]\nseed = [0, 1]\n'
TINY = ["--model", "bert-tiny", "--train-size", "32", "--epochs", "1"]


def _grid(tmp_path, text: str | bytes) -> str:
    path = tmp_path / "grid.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return str(path)


def _tsv_folder(tmp_path, rte_folder, break_it) -> str:
    glue = rte_folder(tmp_path / "glue")
    break_it(glue / "RTE")
    return str(glue)


def _model_folder(tmp_path, config: str | None) -> str:
    folder = tmp_path / "my-model"
    folder.mkdir()
    if config is not None:
        (folder / "config.json").write_text(config)
    return str(folder)


# (name, argv after the command: a function of tmp_path and the rte_folder fixture, what the message names)
CASES = [
    ("lr inf", lambda t, r: ["train", *TINY, "--lr", "inf"], "lr must be a finite number, got inf"),
    ("lr nan", lambda t, r: ["train", *TINY, "--lr", "nan"], "lr must be a finite number, got nan"),
    ("lr 0", lambda t, r: ["train", *TINY, "--lr", "0"], "lr must be > 0, got 0"),
    (
        "tsp lr negative",
        lambda t, r: ["train", *TINY, "--tsp-steps", "2", "--tsp-lr", "-0.001"],
        "tsp_lr must be > 0, got -0.001",
    ),
    (
        "warmup 50",
        lambda t, r: ["train", *TINY, "--warmup-ratio", "50"],
        "warmup_ratio must be between 0 and 1, got 50",
    ),
    ("jobs -3", lambda t, r: ["sweep", _grid(t, GOOD_GRID), "--jobs", "-3"], "got -3"),
    ("train jobs 0", lambda t, r: ["train", *TINY, "--jobs", "0"], "got 0"),
    (
        "data dir with an embedded task",
        lambda t, r: ["train", *TINY, "--task", "rt", "--data-dir", str(r(t / "glue"))],
        "task 'rt' is embedded",
    ),
    (
        "sweep data dir, embedded grid",
        lambda t, r: ["sweep", _grid(t, GOOD_GRID), "--data-dir", str(r(t / "glue"))],
        "every run of the grid is of an embedded task (rt)",
    ),
    ("empty grid", lambda t, r: ["sweep", _grid(t, "")], "grid.toml' defines no runs"),
    ("empty tables", lambda t, r: ["sweep", _grid(t, "[base]\n[grid]\n")], "defines no runs"),
    ("model = 5", lambda t, r: ["sweep", _grid(t, "[base]\nmodel = 5\n")], "model must be a non-empty string, got 5"),
    ("grid = 5", lambda t, r: ["sweep", _grid(t, "grid = 5\n")], "'grid' in grid file"),
    ("base = [1,2]", lambda t, r: ["sweep", _grid(t, "base = [1,2]\n")], "got [1, 2]"),
    (
        "axis of tables",
        lambda t, r: ["sweep", _grid(t, '[base]\nmodel = "bert-tiny"\n[grid]\nlr = [{a = 1}]\n')],
        "lr must be a number, got {'a': 1}",
    ),
    ("non-UTF-8 grid", lambda t, r: ["sweep", _grid(t, b'[base]\ntask = "\xff\xfe"\n')], "not UTF-8 text"),
    ("grid path is a folder", lambda t, r: ["sweep", str(t)], "is a folder"),
    (
        "train size beyond the data",
        lambda t, r: ["train", "--model", "bert-tiny", "--train-size", "100000"],
        "train_size=100000 is more than the 9248 training examples",
    ),
    (
        "train size beyond hub GLUE data",
        lambda t, r: ["train", "--model", "bert-tiny", "--task", "rte", "--train-size", "2000"],
        "train_size=2000 is more than the 1490 training examples",
    ),
    (
        "TSV file missing",
        lambda t, r: [
            "train",
            *TINY,
            "--task",
            "rte",
            "--train-size",
            "4",
            "--data-dir",
            _tsv_folder(t, r, lambda rte: (rte / "dev.tsv").unlink()),
        ],
        "missing GLUE validation file",
    ),
    (
        "TSV wrong columns",
        lambda t, r: [
            "train",
            *TINY,
            "--task",
            "rte",
            "--train-size",
            "4",
            "--data-dir",
            _tsv_folder(t, r, lambda rte: (rte / "train.tsv").write_text("index\tfoo\n0\tx\n")),
        ],
        "lacks the GLUE RTE columns",
    ),
    (
        "model folder without config.json",
        lambda t, r: ["train", *TINY, "--model", _model_folder(t, None)],
        "has no config.json",
    ),
    ("config.json {}", lambda t, r: ["train", *TINY, "--model", _model_folder(t, "{}")], "has no model_type"),
    (
        "config.json not JSON",
        lambda t, r: ["train", *TINY, "--model", _model_folder(t, "{bert")],
        "cannot read its config.json",
    ),
    (
        "model folder without weights",
        lambda t, r: ["train", *TINY, "--model", _model_folder(t, '{"model_type": "bert"}')],
        "has no weights",
    ),
    (
        "model path that does not exist",
        lambda t, r: ["train", *TINY, "--model", str(t / "no" / "such" / "folder")],
        "not a Hugging Face hub name",
    ),
    ("device bogus", lambda t, r: ["train", *TINY, "--device", "bogus"], "unknown device 'bogus'"),
    ("device without a GPU", lambda t, r: ["train", *TINY, "--device", "cuda:99"], "'cuda:99'"),
]


@pytest.mark.parametrize("argv, named", [pytest.param(argv, named, id=name) for name, argv, named in CASES])
def test_bad_input_exits_2_naming_it_before_any_run_folder(tmp_path, capsys, rte_folder, argv, named):
    store = tmp_path / "runs"
    code, output = _run([*argv(tmp_path, rte_folder), "--store", str(store)], capsys)
    assert code == 2, output
    assert "Traceback" not in output
    assert named in output, output
    assert output.strip().startswith("robustkit: error:") and len(output.strip().splitlines()) == 1, output
    assert not store.exists(), list(store.iterdir())  # not even an empty store


def test_unknown_hub_model_is_named_at_once(tmp_path, capsys, monkeypatch):
    """One request to the hub (or none: the cache, HF_HUB_OFFLINE), not ~23 s of retries."""
    for flag in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(flag, raising=False)
    store = tmp_path / "runs"
    started = time.monotonic()
    code, output = _run(["train", "--model", "no-such-org/no-such-model-robustkit", "--store", str(store)], capsys)
    assert time.monotonic() - started < 15
    assert code == 2 and "'no-such-org/no-such-model-robustkit'" in output and "Traceback" not in output, output
    assert not store.exists()


def test_an_argparse_error_is_one_line_and_status_2(tmp_path, capsys):
    code, output = _run(["train", "--lr", "fast", "--store", str(tmp_path)], capsys)
    assert code == 2 and "'fast'" in output and "Traceback" not in output


ODD_VALUES = [5, -1, 0, 1.5, math.inf, math.nan, True, None, "x", "", [1], {"a": 1}]


@pytest.mark.parametrize("field", [f for f in SPEC_FIELDS if f != "data_fingerprint"])
def test_any_value_of_any_field_is_accepted_or_refused_by_name(field):
    """No value of a run field gets past the spec to fail later, or fails with a raw error."""
    for value in ODD_VALUES:
        try:
            RunSpec(**{field: value}).resolved()
        except RobustkitError as error:
            # method_options names the option it does not know ({"a": 1}: option 'a')
            named = [field, repr(value), *(repr(k) for k in value)] if isinstance(value, dict) else [field, repr(value)]
            assert any(name in str(error) for name in named), (field, value, str(error))


def _run(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse: its usage line and one error line, status 2
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out + err
