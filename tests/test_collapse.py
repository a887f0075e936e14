"""The collapse rule (robustkit.store.collapse): each way a run fails, each way it does not, the
failed-run rates, and that training records and the CLI reports a run that ends collapsed."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest
from conftest import TINY_RTE

from robustkit.cli import main
from robustkit.store import collapse
from robustkit.store.manifest import read_manifest
from robustkit.store.tables import load_runs


def test_noise_band_per_metric():
    assert collapse.noise_band("accuracy", 0.57, 1000) == pytest.approx(2 * math.sqrt(0.57 * 0.43 / 1000))
    assert collapse.noise_band("f1", 0.0, 400) == pytest.approx(2 * 0.5 / 20)
    assert collapse.noise_band("mcc", 0.0, 100) == pytest.approx(2 * 1.28 / 10)  # conservative (issue #55)
    assert collapse.noise_band("pearson", 0.0, 100) == pytest.approx(0.2)
    assert collapse.noise_band("loss", 0.5, 100) == 0.0  # no constant baseline for a loss
    assert collapse.noise_band("accuracy", 0.57, None) == collapse.noise_band("accuracy", 0.57, float("nan")) == 0.0
    assert collapse.noise_band("accuracy", 0.57, 1000, collapse.CollapseRule(noise_z=1.0)) == pytest.approx(
        collapse.noise_band("accuracy", 0.57, 1000) / 2
    )


@pytest.mark.parametrize(
    "value, share, n, expected",
    [
        (0.80, 0.60, 1000, "ok"),  # learned
        (0.53, 0.70, 1000, "collapsed"),  # below the 57% majority baseline (the houlsby run)
        (0.59, 0.80, 1000, "collapsed"),  # above it, but within 2 s.e. (0.031) of it
        (0.61, 0.80, 1000, "ok"),  # beyond the noise band
        (0.61, 0.96, 1000, "collapsed"),  # nearly every prediction one class
        (0.59, None, None, "ok"),  # n unknown: only value <= baseline counts
        (0.57, None, None, "collapsed"),  # at the baseline
        (float("nan"), 0.5, 1000, "diverged"),
    ],
)
def test_outcome_rules(value, share, n, expected):
    assert collapse.outcome(value, 0.57, "accuracy", n, share) == expected


def test_diverged_loss_and_unknown_baseline():
    assert collapse.outcome(0.8, 0.57, "accuracy", 1000, 0.5, loss=float("nan")) == "diverged"
    assert collapse.outcome(0.8, 0.57, "accuracy", 1000, 0.5, loss=float("inf")) == "diverged"
    assert collapse.outcome(0.8, 0.57, "accuracy", 1000, 0.5, loss=0.4) == "ok"
    assert collapse.outcome(0.2, float("nan"), "accuracy", 1000) == "ok"  # no baseline: nothing to compare with
    assert collapse.outcome(0.2, None, "accuracy", 1000, top_class_share=0.99) == "collapsed"


def test_mark_and_failure_rates():
    frame = pd.DataFrame(
        {
            "method": ["a", "a", "a", "b", "b"],
            "value": [0.8, 0.5, np.nan, 0.9, 0.85],
            "baseline": 0.57,
            "metric": "accuracy",
            "n_eval": 1000,
            "top_class_share": [0.6, 0.9, 0.5, 0.55, 0.99],
        }
    )
    marked = collapse.mark(frame)
    assert list(marked["outcome"]) == ["ok", "collapsed", "diverged", "ok", "collapsed"]
    assert list(marked["failed"]) == [False, True, True, False, True]
    assert list(collapse.kept(marked)["value"]) == [0.8, 0.9]
    assert len(collapse.kept(marked, include_failed=True)) == 5
    rates = collapse.failure_rates(marked, ["method"]).set_index("method")
    assert rates.loc["a"].to_dict() == {
        "n_runs": 3,
        "n_ok": 1,
        "n_not_learned": 0,
        "n_collapsed": 1,
        "n_undecided": 0,
        "n_diverged": 1,
        "failed_rate": pytest.approx(2 / 3),
    }
    assert rates.loc["b", "failed_rate"] == 0.5
    assert collapse.label(1, 3, 1) == "collapsed 1/3, diverged 1/3" and collapse.label(0, 3) == ""
    assert collapse.top_class_share(np.array([1, 1, 0, 1])) == 0.75


@pytest.mark.slow
def test_training_records_the_outcome_and_the_cli_reports_a_collapsed_run(tmp_path, rte_folder, capsys):
    # lr 1e-12 (the spec refuses 0): the classifier never leaves its initialisation, so it
    # cannot beat the majority class; 400 distinct dev pairs: enough for the rule to decide
    # (the 12 pairs of the tiny RTE are not, and repeat 4 pairs)
    glue = rte_folder(tmp_path / "glue")
    labels = ("entailment", "not_entailment")
    rows = [f"{i}\tA man number {i} plays.\tA person {i % 7} rests.\t{labels[i % 2]}" for i in range(400)]
    (glue / "RTE" / "dev.tsv").write_text("\n".join(["index\tsentence1\tsentence2\tlabel", *rows]) + "\n")
    args = [
        "train",
        "--task",
        "rte",
        "--model",
        "bert-tiny",
        "--method",
        "full",
        "--lr",
        "1e-12",
        "--epochs",
        "1",
        "--batch-size",
        "8",
        "--max-length",
        "32",
        "--data-dir",
        str(glue),
        "--store",
        str(tmp_path / "runs"),
    ]
    assert main(args) == 0
    err = capsys.readouterr().err
    runs = load_runs(tmp_path / "runs")
    manifest = read_manifest(runs["path"].iloc[0])
    assert manifest["outcome"]["last"]["test"] == "collapsed"  # as training judged it, before its history
    # the store's table speaks the CLI's words: never learned (recorded by training) -> not-learned
    assert manifest["ever_learned"] is False and runs["outcome/last/test"].iloc[0] == "not-learned"
    assert runs["outcome"].iloc[0] == "not-learned" and runs["baseline/test/accuracy"].iloc[0] == 0.5
    assert 0 < manifest["final"]["last"]["test"]["top_class_share"] <= 1
    # in the words runs and stats use: collapsed, or not-learned when it never left the majority class
    from robustkit.cli.report import runs_table

    word = runs_table(tmp_path / "runs")["outcome"].iloc[0]
    assert word == runs["outcome"].iloc[0] and f"{word} {runs['run_id'].iloc[0]}" in err and f"last/test {word}" in err
    assert runs["n_test"].iloc[0] == 400


@pytest.mark.slow
def test_a_learned_run_is_not_reported(tmp_path, rte_folder, capsys):
    glue = rte_folder(tmp_path / "glue")
    spec = dataclasses.replace(TINY_RTE, method="full", lr=1e-3, epochs=8, data_dir=str(glue))
    from robustkit.train import train

    run_dir = train(spec, tmp_path / "runs", progress=False)
    outcome = read_manifest(run_dir)["outcome"]
    assert set(outcome) == {"best", "last"} and set(outcome["last"]) == {"validation", "test"}
    from robustkit.cli.report import failed_outcomes

    lines = failed_outcomes(tmp_path / "runs", [run_dir.name])
    assert (lines == []) == all(v == "ok" for splits in outcome.values() for v in splits.values())


def test_marked_keeps_an_outcome_marks_from_a_baseline_or_says_ok():
    given = pd.DataFrame({"value": [0.5], "baseline": [0.57], "outcome": ["ok"]})
    assert collapse.marked(given) is given
    assert list(collapse.marked(given.drop(columns="outcome"))["outcome"]) == ["collapsed"]
    assert list(collapse.marked(pd.DataFrame({"value": [0.5]}))["outcome"]) == ["ok"]  # nothing to judge it by


def test_a_run_stopped_as_diverged_is_diverged_whatever_its_kept_checkpoints_score():
    # training keeps a diverged run's last finite checkpoints: their (finite, even good) scores
    # do not make it a result; runs of other statuses are judged by their scores as before
    frame = pd.DataFrame(
        {
            "value": [0.9, 0.9, 0.5],
            "baseline": [0.5, 0.5, 0.5],
            "eval_loss": [0.3, 0.3, 0.7],
            "status": ["diverged", "complete", "complete"],
            "method": ["a", "a", "a"],
        }
    )
    marked = collapse.mark(frame)
    assert marked["outcome"].tolist() == ["diverged", "ok", "collapsed"]
    assert marked["failed"].tolist() == [True, False, True]
    assert collapse.mark(frame.drop(columns="status"))["outcome"].tolist() == ["ok", "ok", "collapsed"]


def test_a_run_that_never_learned_is_not_learned_and_one_that_fell_back_collapsed():
    """Issue #26: under-trained runs (never above the noise band at any evaluation) are told apart
    from runs that learned and fell back; both are failures, counted apart."""
    frame = pd.DataFrame(
        {
            "value": [0.5, 0.5, 0.5, 0.8],
            "baseline": 0.5,
            "metric": "accuracy",
            "n_eval": 1000,
            "ever_learned": pd.array([False, True, pd.NA, False], dtype="boolean"),
        }
    )
    marked = collapse.mark(frame)
    assert list(marked["outcome"]) == ["not-learned", "collapsed", "collapsed", "ok"]  # unknown history: collapsed
    assert marked["failed"].tolist() == [True, True, True, False]
    rates = collapse.failure_rates(marked.assign(group="g"), ["group"]).iloc[0]
    assert (rates["n_not_learned"], rates["n_collapsed"], rates["failed_rate"]) == (1, 2, 0.75)
    assert collapse.label(2, 4, 0, 1) == "not-learned 1/4, collapsed 2/4"


@pytest.mark.parametrize("q", [0.5, 0.55, 0.7, 0.85])
def test_the_failure_rule_errs_at_most_at_its_level_at_every_evaluation_size(q):
    """Issue #46 item 3, exactly (no simulation noise): over every count k of n scored examples,
    an honest run at the learned margin is called collapsed, and a run at the baseline learned,
    with probability at most alpha (0.0228) whatever n."""
    from scipy.stats import binom

    rule = collapse.DEFAULT_RULE
    alpha = 0.5 * math.erfc(rule.noise_z / math.sqrt(2))
    for n in [5, 8, 12, 20, 32, 50, 64, 100, 150, 250, 400, 700]:
        baseline = round(q * n) / n
        k = np.arange(n + 1)
        collapsed = np.array([collapse.below_learned(i / n, baseline, "accuracy", n) for i in k])
        learned = np.array([collapse.above_baseline(i / n, baseline, "accuracy", n) for i in k])
        margin = min(baseline + rule.learned_margin, 1.0)
        assert binom.pmf(k, n, margin)[collapsed].sum() <= alpha, (n, q)
        assert binom.pmf(k, n, baseline)[learned].sum() <= alpha, (n, q)


def test_a_small_test_set_keeps_honest_runs_and_says_it_cannot_tell():
    """The issue's case: 64 test rows, a 54.9% majority class. Runs at 67-70% were collapsed
    (issue #46); they are undecided, never ok (issue #55), and a clearly learned run is ok."""
    assert collapse.outcome(0.67, 0.5488, "accuracy", 64, 0.6) == "undecided"
    for value in (0.6875, 0.70, 0.75):
        assert collapse.outcome(value, 0.5488, "accuracy", 64, 0.6) == "ok"
    assert collapse.undecided(0.67, 0.5488, "accuracy", 64, 0.6)
    assert not collapse.undecided(0.75, 0.5488, "accuracy", 64, 0.6)
    assert collapse.outcome(0.45, 0.5488, "accuracy", 64, 0.6) == "collapsed"
    assert collapse.outcome(0.70, 0.5488, "accuracy", 64, 0.97) == "collapsed"  # one class: observed


def test_the_evaluation_floor_is_where_every_run_is_decided():
    floor = collapse.evaluation_floor(0.5)
    for n, decided in ((floor, True), (floor - 1, False)):
        every = all(
            collapse.above_baseline(k / n, 0.5, "accuracy", n) or collapse.below_learned(k / n, 0.5, "accuracy", n)
            for k in range(n + 1)
        )
        assert every == decided, n


def test_a_run_at_the_baseline_is_ok_at_most_at_the_level_on_small_test_sets():
    """Issue #55: a truly collapsed run (true accuracy at the baseline) on a small test set is
    shown ok only where it is significantly above the baseline (at most alpha, exactly); the rest
    are collapsed or undecided, never ok."""
    from scipy.stats import binom

    alpha = 0.5 * math.erfc(collapse.DEFAULT_RULE.noise_z / math.sqrt(2))
    for n in (16, 30, 32, 64):
        for q in (0.5, 0.55, 0.7):
            baseline = round(q * n) / n
            words = np.array([collapse.outcome(k / n, baseline, "accuracy", n, 0.6) for k in range(n + 1)])
            assert set(words) <= {"ok", "collapsed", "undecided"}
            assert binom.pmf(np.arange(n + 1), n, baseline)[words == "ok"].sum() <= alpha, (n, q)
    # the train line: 0.700 on 30 examples with a 0.633 majority baseline
    assert collapse.outcome(0.7, 19 / 30, "accuracy", 30, 0.7) == "undecided"


def _mcc_error_rates(n, q, r, rule):
    """The MCC branch's exact error rates on a binary split of n examples with round(q n) of the
    majority label, for a run predicting that label with share r: (a run of MCC = the learned
    margin called collapsed, a run of MCC 0 called learned). Every table enumerated (an independent
    reimplementation of tools/simulate_collapse_rule.py --mcc, with sklearn's MCC per table)."""
    from scipy.stats import binom

    n_major = round(q * n)
    n_minor, share = n - n_major, n_major / n
    rates = []
    for phi, wrong in ((rule.learned_margin, collapse.below_learned), (0.0, collapse.above_baseline)):
        joint = share * r + phi * math.sqrt(share * (1 - share) * r * (1 - r))
        a, b = joint / share, (r - joint) / (1 - share)
        total = 0.0
        for tp in range(n_major + 1):
            for fp in range(n_minor + 1):
                fn, tn = n_major - tp, n_minor - fp
                spread = math.sqrt((tp + fp) * (fn + tn) * n_major * n_minor)
                value = (tp * tn - fp * fn) / spread if spread else 0.0
                if wrong(value, 0.0, "mcc", n, rule):
                    total += binom.pmf(tp, n_major, a) * binom.pmf(fp, n_minor, b)
        rates.append(total)
    return rates


@pytest.mark.parametrize(
    "n, q, r",
    [
        (100, 0.5, 0.5),  # errors even on both classes: the old rule called 2.8% collapsed
        (90, 0.85, 0.9),  # predictions leaning to the majority class: the sample MCC spreads more
        (35, 0.8, 0.9),  # the learned side, small n: the old rule called 6.5% of MCC-0 runs learned
        (64, 0.7, 0.55),
    ],
)
def test_the_mcc_branch_errs_at_most_at_its_level(n, q, r):
    """Issue #55 item 6: the MCC branch at its stated level, exactly, at settings where the rule
    before (se = 1 / sqrt(n)) erred above it."""
    rule = collapse.DEFAULT_RULE
    alpha = 0.5 * math.erfc(rule.noise_z / math.sqrt(2))
    false_collapsed, false_learned = _mcc_error_rates(n, q, r, rule)
    assert false_collapsed <= alpha and false_learned <= alpha, (false_collapsed, false_learned)
    old = dataclasses.replace(rule, mcc_se_factor=1.0)
    if (n, q, r) != (64, 0.7, 0.55):
        assert max(_mcc_error_rates(n, q, r, old)) > alpha  # the old rule fails here


def test_mcc_decides_nothing_on_too_few_examples():
    n = collapse.MCC_MIN_N - 1
    assert collapse.outcome(0.9, 0.0, "mcc", n, 0.5) == "undecided"
    assert collapse.outcome(-0.9, 0.0, "mcc", n, 0.5) == "undecided"
    assert collapse.outcome(-0.9, 0.0, "mcc", n, 0.97) == "collapsed"  # one class: observed
    assert collapse.outcome(0.9, 0.0, "mcc", collapse.MCC_MIN_N, 0.5) == "ok"
    assert collapse.evaluation_floor(0.0, "mcc") == math.ceil((2 * 2 * 1.28 / 0.1) ** 2)


def test_undecided_runs_are_no_result_in_marks_rates_and_labels():
    frame = pd.DataFrame(
        {
            "method": "a",
            "value": [0.8, 0.67, 0.45],
            "baseline": 0.5488,
            "metric": "accuracy",
            "n_eval": 64,
            "top_class_share": 0.6,
        }
    )
    marked = collapse.mark(frame)
    assert marked["outcome"].tolist() == ["ok", "undecided", "collapsed"]
    assert marked["failed"].tolist() == [False, True, True] and marked["undecided"].tolist() == [False, True, False]
    assert collapse.kept(marked)["value"].tolist() == [0.8]
    rates = collapse.failure_rates(marked, ["method"]).iloc[0]
    assert (rates["n_ok"], rates["n_undecided"], rates["n_collapsed"]) == (1, 1, 1)
    assert rates["failed_rate"] == pytest.approx(2 / 3)
    assert collapse.label(1, 3, n_undecided=1) == "collapsed 1/3, undecided 1/3"
    assert "undecided" in collapse.FAILED_WORDS and "undecided" in collapse.OUTCOMES


def test_a_store_written_before_undecided_reads_undecided_everywhere(tmp_path, capsys):
    """A manifest recorded before issue #55 says ok for a run its small test set cannot decide:
    load_runs, runs and train's lines call it undecided; a decided run stays as recorded."""
    from conftest import new_run

    from robustkit.cli.report import failed_outcomes

    store = tmp_path / "runs"
    store.mkdir()
    for name, value in (("rt-full-undecided", 0.7), ("rt-full-learned", 0.9)):
        new_run(
            store,
            name,
            status="complete",
            main_metric="accuracy",
            splits={"test": 30},
            final={"last": {"test": {"accuracy": value, "top_class_share": 0.7}}},
            outcome={"last": {"test": "ok"}},
            baselines={"test": {"n": 30, "accuracy": 19 / 30}},
        )
    runs = load_runs(store).set_index("run_id")
    assert runs.loc["rt-full-undecided", "outcome/last/test"] == runs.loc["rt-full-undecided", "outcome"] == "undecided"
    assert runs.loc["rt-full-learned", "outcome"] == "ok"
    [line] = failed_outcomes(store, ["rt-full-undecided", "rt-full-learned"])
    assert line.startswith("undecided rt-full-undecided: last test accuracy 0.700 on 30 examples"), line
    assert "not a result" in line
    assert main(["runs", str(store)]) == 0
    out = capsys.readouterr().out
    assert any("rt-full-undecided" in row and "undecided" in row for row in out.splitlines()), out


def test_every_failure_word_reaches_a_figure_label():
    """Figures read a failure-count row through one function, so an undecided run (issue #57's
    one outcome word) is counted wherever collapsed ones are."""
    row = {"n_runs": 5, "n_collapsed": 1, "n_undecided": 2, "n_diverged": np.nan}
    assert collapse.counts_label(row) == "collapsed 1/5, undecided 2/5"
    assert collapse.counts_label({"n_runs": 3}) == ""
    words = pd.Series(["ok", "undecided", "not-learned", "ok"])
    assert collapse.outcomes_label(words) == "not-learned 1/4, undecided 1/4"
