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
from robustkit.cli.report import runs_table
from robustkit.cli.terminal import render
from robustkit.store.tables import load_runs


@pytest.fixture(scope="module")
def store_with_import(tiny_store, tmp_path_factory):
    """The shared tiny store (houlsby and full, trained here) plus an imported full model."""
    from robustkit.models.pretrained import load_classifier
    from robustkit.train.importing import import_run

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
    # the keys (which run, how it ended, what it scored) first, then what tells the runs apart
    for column in ("model", "method", "seed", "outcome", "best_val", "best_test"):
        assert f" {column}" in header, header
    assert "all rows: task=rte" in out  # said once, not a column
    assert " task " not in header and "more column" in out and "status" in out
    monkeypatch.setenv("COLUMNS", "160")
    assert main(["runs", str(store_with_import)]) == 0
    out = capsys.readouterr().out
    assert " best_test" in out and "more column" not in out
    table = runs_table(store_with_import)
    # the words of robustkit.store.collapse (a run never above the majority class is not-learned)
    assert set("/".join(table["outcome"]).split("/")) <= {"ok", "not-learned", "collapsed", "undecided"}, table[
        "outcome"
    ]
    assert table["outcome"].notna().all()
    # the whole table on request: every column, parseable
    assert main(["runs", str(store_with_import), "--format", "csv"]) == 0
    assert list(pd.read_csv(io.StringIO(capsys.readouterr().out)).columns) == list(table.columns)
    assert main(["runs", str(store_with_import), "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 3
    out_file = store_with_import.parent / "runs.parquet"
    assert main(["runs", str(store_with_import), "-o", str(out_file)]) == 0
    assert list(pd.read_parquet(out_file).columns) == list(load_runs(store_with_import, include_damaged=True).columns)


def test_render_cuts_to_the_width_and_names_what_it_left_out():
    frame = pd.DataFrame(
        {
            "run_id": ["a", "b"],
            "task": ["rt", "rt"],
            "method": ["full", "houlsby"],
            "lora.r": [None, None],
            "value": [0.123456, 2.0],
            **{f"long_column_{i}": ["x" * 12, "y" * 12] for i in range(10)},
        }
    )
    text = render(frame, width=80)
    assert all(len(line) <= 80 for line in text.splitlines())
    assert "all rows: task=rt" in text and "lora.r" not in text and "0.1235" in text
    assert "more columns past the terminal's 80 characters: long_column_" in text and "-o FILE" in text
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
    assert (
        main(
            [
                "plot",
                "gradnorm",
                str(store_with_import),
                "--select",
                f"run_id={imported}",
                "-o",
                str(store_with_import.parent / "g.pdf"),
            ]
        )
        == 2
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["runs", "{store}"],
        ["analyze", "scores", "{store}"],
        ["stats", "{store}"],
        ["claims", "--store", "{store}"],
        ["plot", "box-seeds", "{store}", "-o", "{store}.pdf"],
    ],
)
def test_a_missing_store_is_an_error(tmp_path, capsys, argv):
    store = str(tmp_path / "no-such-store")
    assert main([a.format(store=store) for a in argv]) == 2
    assert "no-such-store" in capsys.readouterr().err


def _verdicts(recipes: list[str]) -> pd.DataFrame:
    """A claims table as robustkit.verdicts.reproduce.claims returns it: a row per cell, the last per claim
    its overall verdict, with reasons as long as real ones."""
    rows = []
    for recipe in recipes:
        for claim in ("spread", "failures"):
            for cell in ("task=rte", "all"):
                rows.append(
                    {
                        "recipe": recipe,
                        "claim": claim,
                        "cell": cell,
                        "verdict": "inconclusive",
                        "n_a": 5,
                        "n_b": 5,
                        "n_failed": 1,
                        "effect_name": "std ratio a/b",
                        "effect": 0.4123456,
                        "ci_low": 0.2,
                        "ci_high": 0.9,
                        "p_value": 0.0712345,
                        "compare": "spread",
                        "failures": "excluded",
                        "reason": f"{claim} of {recipe}: p = 0.0712 is above alpha = 0.05 at n = 5 vs 5 after "
                        "dropping one failed run",
                    }
                )
    return pd.DataFrame(rows)


def test_claims_prints_a_table_for_people_and_every_row_on_request(tmp_path, capsys, monkeypatch):
    import robustkit.verdicts.tally

    recipes = ["han2021/fig1", "han2021/fig2"]
    table = _verdicts(recipes)
    # the verdicts the claims verb judges (robustkit.verdicts.tally.verdicts), stood in for
    monkeypatch.setattr(robustkit.verdicts.tally, "verdicts", lambda *args, **kwargs: table)
    monkeypatch.setenv("COLUMNS", "100")
    argv = ["claims", *recipes, "--store", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 100 for line in out.splitlines()), out
    header = next(line for line in out.splitlines() if line.lstrip().startswith("recipe"))
    assert "verdict" in header and "all rows: verdict" not in out  # kept though every verdict is the same
    said_once = next(line for line in out.splitlines() if line.startswith("all rows: "))
    # the reason is a key: shown (shortened to fit), the effect's columns cut for it
    assert "effect_name=std ratio a/b" in said_once and "reason" in header and "more column" in out
    assert "spread of han2021/fig1: p = 0.0712" in out and "reason shortened" in out
    assert "n=5 vs 5" in said_once  # n as runs (robustkit.verdicts.evidence.n_text)
    assert "4 claims (" in out and "evidence unit" in out  # the tally under the table, by evidence unit
    # csv / json print the table's rows, parseable; the tally goes to stderr
    assert main([*argv, "--format", "json"]) == 0
    printed = capsys.readouterr()
    rows = json.loads(printed.out)
    assert len(rows) == 4 and rows[0]["reason"] == table["reason"].iloc[1] and "4 claims (" in printed.err
    assert main([*argv, "--format", "csv"]) == 0
    assert list(pd.read_csv(io.StringIO(capsys.readouterr().out))["claim"]) == ["spread", "failures"] * 2
    # -o: every row and column, the cells' too, in the format its suffix names
    assert main([*argv, "--format", "json", "-o", str(tmp_path / "claims.json")]) == 0
    json.loads(capsys.readouterr().out)  # the note of what was written does not break the json
    written = pd.read_json(tmp_path / "claims.json")
    assert len(written) == len(table) and set(table.columns) <= set(written.columns)
    # the claim's own columns the printed table shows are on every row of it too
    assert {"n", "unit", "would_settle", "replication"} <= set(written.columns)
    assert written["n"].notna().all()


def test_sweep_status_prints_a_table_for_people(tmp_path, capsys, monkeypatch):
    from robustkit.sweeps import slurm
    from robustkit.sweeps.grid import expand_grid

    grid = tmp_path / "grid.toml"
    grid.write_text(
        '[base]\nmodel = "bert-tiny"\ntask = "rte"\nepochs = 1\n[grid]\nmethod = ["houlsby", "full"]\nseed = [0, 1, '
        "2]\n"
    )
    store = tmp_path / "runs"
    first = expand_grid(str(grid))[0].run_id
    (store / slurm.SLURM_DIR).mkdir(parents=True)
    (store / slurm.SLURM_DIR / slurm.JOBS_FILE).write_text(json.dumps({first: "77_0"}))
    monkeypatch.setattr(slurm, "queue_states", lambda: {"77_0": "PENDING"})
    monkeypatch.setenv("COLUMNS", "40")
    argv = ["sweep", str(grid), "--store", str(store), "--status"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 40 for line in out.splitlines()), out
    assert "1 pending" in out and "5 not submitted" in out and "None" not in out  # no job id is an empty cell
    assert main([*argv, "--format", "json"]) == 0
    states = json.loads(capsys.readouterr().out)
    assert [s["state"] for s in states].count("not submitted") == 5 and states[0]["job_id"] == "77_0"
    assert main([*argv, "-o", str(tmp_path / "states.csv")]) == 0
    assert list(pd.read_csv(tmp_path / "states.csv").columns) == ["run_id", "job_id", "state"]
    assert (
        main(["sweep", str(grid), "--store", str(store), "--format", "csv"]) == 2
    )  # without --status: said, not ignored
    assert "--status" in capsys.readouterr().err


def test_stats_prints_csv_json_and_writes_every_table(tiny_store, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    argv = ["stats", str(tiny_store), "--metric", "accuracy", "--within", "task", "--include-failed", "--no-aso"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert all(len(line) <= 80 for line in out.splitlines() if not line.startswith("n = ")), out
    assert main([*argv, "--format", "json"]) == 0
    tables = json.loads(capsys.readouterr().out)
    assert set(tables) == {"summary", "tests", "failures", "iqm", "improvement"} and {
        r["method"] for r in tables["summary"]
    } == {"houlsby", "full"}
    assert "levene" in {r["test"] for r in tables["tests"]}
    assert main([*argv, "--format", "csv"]) == 0
    summary = pd.read_csv(io.StringIO(capsys.readouterr().out))
    assert set(summary["method"]) == {"houlsby", "full"}
    assert main([*argv, "--format", "csv", "-o", str(tmp_path / "s.json")]) == 0
    assert pd.read_csv(io.StringIO(capsys.readouterr().out)).shape == summary.shape  # the notes went to stderr
    assert list(pd.read_json(tmp_path / "s.json").columns) == list(summary.columns)
    assert set(pd.read_json(tmp_path / "s-tests.json")["test"]) == {r["test"] for r in tables["tests"]}
