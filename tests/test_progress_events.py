"""Long work is never silent (issue #38 item 5): where no bar is watched (a redirected log,
``robustkit demo > log`` or ``2> log``) every run writes one timestamped line when it starts, at
each evaluation and when it ends, and with ``--jobs N`` the worker processes' runs send those
lines to the parent, which writes them as they come (above its bar on a terminal)."""

from __future__ import annotations

import dataclasses
import io
import re

import pytest
from conftest import TINY_RTE, write_rte

from robustkit import progress

STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d "


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_event_lines_go_to_the_redirected_stream(monkeypatch):
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    terminal, log = _Terminal(), io.StringIO()
    monkeypatch.setattr("sys.stderr", terminal)
    monkeypatch.setattr("sys.stdout", log)  # `robustkit demo > log`: bars on the terminal, lines in the log
    progress.event("run-a: started")
    assert re.fullmatch(STAMP + "run-a: started\n", log.getvalue()) and terminal.getvalue() == ""
    monkeypatch.setattr("sys.stderr", log2 := io.StringIO())  # `2> log` (or `> log 2>&1`): once, in stderr
    progress.event("run-a: step 2/4")
    assert log2.getvalue().endswith("run-a: step 2/4\n") and log.getvalue().count("\n") == 1
    monkeypatch.setattr("sys.stdout", _Terminal())
    monkeypatch.setattr("sys.stderr", terminal)
    assert progress.event_stream() is None  # both watched: the bars say it
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.setattr("sys.stderr", io.StringIO())
    assert progress.event_stream() is None  # robustkit -q


def test_a_run_reports_its_start_each_evaluation_and_its_end(tmp_path, capsys, monkeypatch):
    from robustkit.train import train

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    spec = dataclasses.replace(TINY_RTE, data_dir=str(write_rte(tmp_path / "glue", train=16, dev=4)))
    train(spec, tmp_path / "runs", progress=True)
    lines = capsys.readouterr().err.splitlines()
    mine = [line for line in lines if spec.run_id in line]
    assert all(re.match(STAMP, line) for line in mine), mine
    assert "started, 4 steps" in mine[0] and "finished in" in mine[-1] and "CPU" in mine[-1]
    assert [line for line in mine if "validation accuracy" in line][0].count("step 2/4") == 1
    assert sum("validation accuracy" in line for line in mine) == 2  # eval_every 2 of 4 steps


@pytest.mark.slow
def test_jobs_2_relays_every_workers_lines(tmp_path, capsys, monkeypatch):
    from robustkit.sweeps.grid import run_sweep

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    glue = str(write_rte(tmp_path / "glue", train=16, dev=4))
    specs = [dataclasses.replace(TINY_RTE, data_dir=glue, epochs=1, seed=seed) for seed in (0, 1)]
    result = run_sweep(specs, tmp_path / "runs", jobs=2, progress=True)
    assert set(result.status) == {"complete"}, result.error.tolist()
    err = capsys.readouterr().err
    for spec in specs:
        mine = [line for line in err.splitlines() if spec.run_id in line]
        assert any("started" in line for line in mine) and any("finished in" in line for line in mine), err
        assert any("validation accuracy" in line for line in mine), err


def test_readme_states_the_measured_demo_time():
    """The README and ``demo --help`` give the demo's time measured in bench/README.md, CPU time
    included (the "about 7 minutes" they said was no measurement: its CPU time is 1,048 s)."""
    from pathlib import Path

    from robustkit.cli import build_parser

    root = Path(__file__).resolve().parents[1]
    bench = (root / "bench" / "README.md").read_text(encoding="utf-8")
    section = bench.split("## The demo's time", 1)[1].split("\n## ", 1)[0]
    runs = [int(m) for m in re.findall(r"^\| rt-\S+ \| \w+ \| \d \| \S+ \| (\d+) s \|$", section, re.M)]
    assert len(runs) == 4 and f"| {sum(runs)} s" in section
    assert "1,048 s of CPU time" in section
    readme = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    parser = build_parser()
    demo = parser._subparsers._group_actions[0].choices["demo"].description
    for text in (readme, demo):
        assert "about 9 minutes on 2 idle CPU cores" in text and "17 minutes of CPU time" in text
        assert "about 7 minutes" not in text


def test_stdout_that_is_data_never_gets_event_lines(monkeypatch):
    """``robustkit sweep ... --format csv > runs.csv``: the CSV stays CSV."""
    from robustkit.cli import main

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr("sys.stderr", _Terminal())
    monkeypatch.setattr("sys.stdout", io.StringIO())
    try:
        main(["runs", "nowhere", "--format", "csv"])
        assert progress.event_stream() is None
        main(["runs", "nowhere"])
        assert progress.event_stream() is not None
    finally:
        progress.stdout_is_data(False)
