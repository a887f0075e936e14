"""One vocabulary for outcomes (issue #38 item 9): a run is called the same by ``train``'s
summary, ``runs``, ``stats`` and the figures (the words of :data:`robustkit.store.collapse.OUTCOMES`);
counts take the right plural; an empty table says why."""

from __future__ import annotations

import pandas as pd

from robustkit.analysis import stability
from robustkit.cli import main
from robustkit.store import collapse


def test_labels_use_the_outcome_words():
    assert collapse.label(2, 4, 1, 1) == "not-learned 1/4, collapsed 2/4, diverged 1/4"
    assert all(word in collapse.FAILED_WORDS for word in collapse.OUTCOMES[1:])
    assert collapse.with_history(collapse.COLLAPSED, False) == collapse.NOT_LEARNED
    assert collapse.with_history(collapse.COLLAPSED, pd.NA) == collapse.COLLAPSED  # history unknown
    assert collapse.with_history(collapse.DIVERGED, False) == collapse.DIVERGED


def _store_with_a_run_that_never_learned(monkeypatch, tmp_path):
    """A store of one run whose manifest records it collapsed (training judges the scored split
    alone) and whose history never left the majority class: stats calls it not-learned."""
    import robustkit.analysis.scores
    import robustkit.cli.report

    run_id = "rt-full-minilm-l6-s0-tsp0-f7473ba4"
    manifest = {
        "main_metric": "accuracy",
        "outcome": {"best": {"test": "collapsed"}, "last": {"test": "collapsed"}},
        "final": {"last": {"test": {"accuracy": 0.578, "top_class_share": 1.0}}},
    }
    runs = pd.DataFrame(
        {
            "run_id": [run_id],
            "main_metric": ["accuracy"],
            "outcome/best/test": ["collapsed"],
            "outcome/last/test": ["collapsed"],
        }
    )
    monkeypatch.setattr(robustkit.cli.report, "read_manifest", lambda path: manifest)
    monkeypatch.setattr(robustkit.cli.report, "load_runs", lambda *args, **kwargs: runs)
    monkeypatch.setattr(
        robustkit.analysis.scores,
        "ever_learned",
        lambda store, frame: pd.Series(False, index=frame["run_id"], dtype="boolean"),
    )
    return run_id, runs


def test_train_and_runs_call_a_run_what_stats_calls_it(monkeypatch, tmp_path):
    from robustkit.cli.report import failed_outcomes

    run_id, runs = _store_with_a_run_that_never_learned(monkeypatch, tmp_path)
    # what stats says of it (robustkit.store.collapse.mark, from the same history)
    said = collapse.mark(pd.DataFrame({"value": [0.578], "baseline": [0.578], "ever_learned": [False]}))[
        "outcome"
    ].item()
    [line] = failed_outcomes(tmp_path, [run_id])
    assert line.startswith(f"{said} {run_id}:") and "COLLAPSED" not in line and "collapsed" not in line, line
    import robustkit.cli.report

    assert robustkit.cli.report._with_history(tmp_path, runs, {run_id: "collapsed"}) == {run_id: said}


def test_stats_caption_counts_in_the_outcome_words_and_the_right_plural():
    summary = pd.DataFrame(
        {
            "method": ["prefix"],
            "n": [1],
            "n_runs": [5],
            "n_failed": [4],
            "n_not_learned": [4],
            "n_collapsed": [0],
            "n_diverged": [0],
        }
    )
    tests = pd.DataFrame(columns=stability.COMPARE_COLUMNS)
    text = stability.caption(summary, tests)
    assert text.startswith("n = 1 run per box.") and "not-learned 4 of 5 runs" in text, text
    assert "not learned" not in text
    assert stability.caption(summary.assign(n=[5]), tests).startswith("n = 5 runs per box.")


def test_stats_says_why_a_table_is_empty(tiny_store, capsys, monkeypatch):
    # one method: no pair of groups to test, which the tables say instead of "(no rows)"
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["stats", str(tiny_store), "--select", "method=full", "--no-aso"]) == 0
    out = capsys.readouterr().out
    assert "(no rows)" not in out and "(no test: no cell holds two groups of --by method to compare)" in out, out
    assert f"failed ({collapse.FAILED_WORDS}) runs" in out


def test_figures_mark_failed_runs_in_the_outcome_words():
    # the grey x marks every run that is no result: not-learned ones too, not as "collapsed"
    from robustkit.figures import marks

    label = marks.collapsed_handle().get_label()
    assert all(word in label for word in (collapse.NOT_LEARNED, collapse.COLLAPSED, collapse.DIVERGED)), label


def test_train_summary_counts_one_run_as_a_run(tmp_path, capsys, monkeypatch):
    import robustkit.cli.report
    from robustkit.cli.common import report

    results = pd.DataFrame({"run_id": ["rt-full-minilm-l6-s0-tsp0-f7473ba4"], "status": ["complete"], "error": [None]})
    monkeypatch.setattr(
        robustkit.cli.report, "runs_table", lambda *args, **kwargs: results[["run_id"]].assign(outcome="ok")
    )
    monkeypatch.setattr(robustkit.cli.report, "failed_outcomes", lambda *args, **kwargs: [])
    assert report(results, tmp_path) == 0
    out = capsys.readouterr().out
    assert "\n1 run: 1 trained, 0 already complete" in out, out


def test_runs_of_an_empty_store_says_why(tmp_path, capsys):
    from robustkit.store.folders import open_store

    store = open_store(tmp_path / "store")
    assert main(["runs", str(store)]) == 0
    out = capsys.readouterr().out
    assert out.strip() == f"(no runs in {store} yet)", out
