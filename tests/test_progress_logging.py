"""Quiet and verbose (issue #28 item 6): progress bars respect ``TQDM_DISABLE`` and never write
into a file; the library logs through ``logging``; the CLI's ``-q`` / ``-v`` set what is shown."""

from __future__ import annotations

import dataclasses
import io
import logging
import os
import subprocess
import sys

import pytest
from conftest import TINY_RTE, write_rte

from robustkit import progress
from robustkit.cli import main, parse_args


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bars_only_where_someone_watches(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    assert progress.wanted(True, _Terminal())
    assert not progress.wanted(False, _Terminal())
    assert not progress.wanted(True, io.StringIO())  # a redirected stream: no bar lines in the file
    for value in ("1", "true", "True", "yes"):
        monkeypatch.setenv("TQDM_DISABLE", value)
        assert not progress.wanted(True, _Terminal())
        assert progress.bar(range(3), file=_Terminal()).disable  # tqdm's own switch is not overridden
    monkeypatch.setenv("TQDM_DISABLE", "0")
    assert progress.wanted(True, _Terminal()) and not progress.bar(range(3), file=_Terminal()).disable


def test_verbosity_flags_before_or_after_the_command(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    assert parse_args(["-q", "runs", "s"]).quiet and parse_args(["runs", "s", "-q"]).quiet
    assert parse_args(["analyze", "rsa", "s", "-vv"]).verbose == 2 and parse_args(["-v", "runs", "s"]).verbose == 1
    assert not parse_args(["runs", "s"]).quiet and parse_args(["runs", "s"]).verbose == 0
    with pytest.raises(SystemExit):
        parse_args(["runs", "s", "-q", "-v"])
    logger = logging.getLogger("robustkit")
    level = logger.level
    try:
        assert main(["assets", "list", "-v"]) == 0 and logger.level == logging.DEBUG
        assert main(["assets", "list"]) == 0 and logger.level == logging.INFO
        assert main(["-q", "assets", "list"]) == 0 and logger.level == logging.WARNING
        assert os.environ["TQDM_DISABLE"] == "1"  # inherited by worker processes
    finally:
        logger.setLevel(level)


def test_quiet_train_says_only_what_matters(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    glue = write_rte(tmp_path / "glue", train=8, dev=4)
    spec = dataclasses.replace(TINY_RTE, epochs=1)
    argv = [
        "train",
        "--model",
        spec.model,
        "--task",
        "rte",
        "--data-dir",
        str(glue),
        "--epochs",
        "1",
        "--batch-size",
        "8",
        "--max-length",
        "32",
        "--adapter-size",
        "16",
        "--store",
        str(tmp_path / "runs"),
    ]
    logger = logging.getLogger("robustkit")
    level = logger.level
    try:
        assert main(argv) in (0, 1)  # 1: a run this small may end collapsed, which is reported
        err = capsys.readouterr().err
        assert "1 run(s) to train, 0 complete already" in err  # the library's INFO log, shown by default
        assert main([*argv, "-q"]) in (0, 1)
        err = capsys.readouterr().err
        assert "run(s) to train" not in err
    finally:
        logger.setLevel(level)


def test_a_redirected_log_holds_no_bar_lines(tmp_path):
    """``robustkit train ... 2> file``: the step bar is not drawn into the file."""
    glue = write_rte(tmp_path / "glue", train=16, dev=4)
    env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "robustkit",
            "train",
            "--model",
            "bert-tiny",
            "--task",
            "rte",
            "--data-dir",
            str(glue),
            "--epochs",
            "2",
            "--batch-size",
            "8",
            "--max-length",
            "32",
            "--adapter-size",
            "16",
            "--store",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr
    assert "\r" not in done.stderr and "step/s" not in done.stderr and "it/s" not in done.stderr, done.stderr
    assert "run(s) to train" in done.stderr
