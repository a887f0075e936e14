"""Output a person can read (issue #28 items 3-4): tables that show what varies, cut to the
terminal's width, every column with ``-o`` or ``--format csv|json``; ``runs`` with model, method,
seed, status and outcome; ``analyze gradnorm``'s per-run summary, with imported runs (which have
no gradient norms) left out by name; a missing store is an error for every verb."""

from __future__ import annotations

import io
import json
import logging
import shutil

import pandas as pd
import pytest

from robustkit.cli import main
from robustkit.report import runs_table
from robustkit.store.tables import load_runs
from robustkit.terminal import render


@pytest.fixture(scope="module")
def store_with_import(tiny_store, tmp_path_factory):
    """The shared tiny store (houlsby and full, trained here) plus an imported full model."""
    from robustkit.importing import import_run
    from robustkit.models import load_classifier

    root = tmp_path_factory.mktemp("cli-output")
    store = root / "runs"
    shutil.copytree(tiny_store, store)
    load_classifier("bert-tiny", 2, seed=4).save_pretrained(root / "my-model")
    glue = next(iter(load_runs(store)["data_dir"]))
    import_run(root / "my-model", "bert-tiny", "rte", store, data_dir=glue)
    return store


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line]


def test_runs_shows_the_columns_people_ask_for_within_the_terminal(store_with_import, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["runs", str(store_with_import)]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 100 for line in out.splitlines()), out
    header = next(line for line in out.splitlines() if line.lstrip().startswith("run_id"))
    for column in ("model", "method", "seed", "status", "outcome"):
        assert f" {column}" in header, header
    assert "all rows: task=rte" in out  # said once, not a column
    assert " task " not in header and "more column(s)" in out
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["runs", str(store_with_import)]) == 0
    out = capsys.readouterr().out
    assert " best_test" in out and "more column(s)" not in out
    table = runs_table(store_with_import)
    assert set(table["outcome"]) <= {"ok", "collapsed"} and table["outcome"].notna().all()
    # the whole table on request: every column, parseable
    assert main(["runs", str(store_with_import), "--format", "csv"]) == 0
    assert list(pd.read_csv(io.StringIO(capsys.readouterr().out)).columns) == list(table.columns)
    assert main(["runs", str(store_with_import), "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 3
    out_file = store_with_import.parent / "runs.parquet"
    assert main(["runs", str(store_with_import), "-o", str(out_file)]) == 0
    assert list(pd.read_parquet(out_file).columns) == list(load_runs(store_with_import, include_damaged=True).columns)


def test_render_cuts_to_the_width_and_names_what_it_left_out():
    frame = pd.DataFrame({"run_id": ["a", "b"], "task": ["rt", "rt"], "method": ["full", "houlsby"],
                          "lora.r": [None, None], "value": [0.123456, 2.0],
                          **{f"long_column_{i}": ["x" * 12, "y" * 12] for i in range(10)}})
    text = render(frame, width=80)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "all rows: task=rt" in text and "lora.r" not in text and "0.1235" in text
    assert "more column(s) past the terminal's 80 characters: long_column_" in text and "-o FILE" in text
    assert render(frame, "csv").splitlines()[0].split(",") == list(frame.columns)


def test_analyze_prints_what_varies(store_with_import, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["analyze", "rsa", str(store_with_import), "--tokens", "40"]) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 120 for line in out.splitlines()), out
    assert ".config" not in out and "lora.r" not in out and "warmup_ratio" not in out  # constant or empty settings
    header = next(line for line in out.splitlines() if line.lstrip().startswith("method"))
    # the import's unknown epochs make no column; its import_id does
    assert "epochs=2 where known" in out and "epochs" not in header and "import_id" in header and "mean" in header
    assert main(["analyze", "rsa", str(store_with_import), "--tokens", "40", "--format", "json"]) == 0
    assert {"method", "layer"} <= set(json.loads(capsys.readouterr().out)[0])


def test_analyze_gradnorm_summary_leaves_imports_out_by_name(store_with_import, capsys, caplog):
    runs = load_runs(store_with_import)
    imported = runs.loc[runs["import_id"].notna(), "run_id"].item()
    with caplog.at_level(logging.WARNING, logger="robustkit"):
        assert main(["analyze", "gradnorm", str(store_with_import), "--format", "csv"]) == 0
    summary = pd.read_csv(io.StringIO(capsys.readouterr().out))
    trained = set(runs.loc[runs["import_id"].isna(), "run_id"])
    assert set(summary["run_id"]) == trained  # one block per run, not every step
    assert len(summary) == summary.groupby(["run_id", "layer_kind"]).ngroups <= 6 * len(trained)
    assert {"start", "end", "end_over_start", "slope_per_1k"} <= set(summary.columns)
    assert (summary["start"] > 0).all() and summary["steps"].max() == 6
    assert any(imported in r.getMessage() for r in caplog.records), caplog.records
    # only the import: an error naming it, not a traceback
    assert main(["analyze", "gradnorm", str(store_with_import), "--select", f"run_id={imported}"]) == 2
    assert imported in capsys.readouterr().err
    assert main(["plot", "gradnorm", str(store_with_import), "--select", f"run_id={imported}", "-o",
                 str(store_with_import.parent / "g.pdf")]) == 2


@pytest.mark.parametrize("argv", [["runs", "{store}"], ["analyze", "scores", "{store}"], ["stats", "{store}"],
                                  ["claims", "--store", "{store}"], ["plot", "box-seeds", "{store}", "-o", "{store}.pdf"]])
def test_a_missing_store_is_an_error(tmp_path, capsys, argv):
    store = str(tmp_path / "no-such-store")
    assert main([a.format(store=store) for a in argv]) == 2
    assert "no-such-store" in capsys.readouterr().err
