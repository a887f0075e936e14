"""Stability statistics (Han et al. 2021 figures 2, 4, 9, 10; He et al. 2021 figures 3, 4):
per-run outcomes from a real store, summaries checked against numpy, tests that find a variance
difference and do not invent one, box plots, and `robustkit stats`."""

import itertools

import numpy as np
import pandas as pd
import pytest

from robustkit.analysis import boxes, scores, stability
from robustkit.analysis.pooling import PoolingError
from robustkit.cli import main
from robustkit.errors import RobustkitError
from robustkit.figures import stability as plots
from robustkit.figures.style import save_pdf
from robustkit.measures import multiplicity
from robustkit.store import collapse
from robustkit.store.tables import IDENTITY, load_runs


def _runs(spread: dict[str, float], n: int = 20, seed: int = 0, baseline: float = 0.53, **cells) -> pd.DataFrame:
    """Synthetic outcomes: n runs per method with scores ~ N(0.7, spread[method]), per cell."""
    rng = np.random.default_rng(seed)
    keys = list(cells)
    rows = []
    for combo in itertools.product(*cells.values()):
        for method, sd in spread.items():
            for s in range(n):
                row = {
                    "run_id": f"{method}-{s}-{'-'.join(map(str, combo))}",
                    "model": "m",
                    "task": "rte",
                    "method": method,
                    "seed": s,
                    "tsp_step": 0,
                    "lr": 1e-4 if method == "houlsby" else 2e-5,
                    "train_size": None,
                    "adapter_size": 64.0 if method == "houlsby" else np.nan,
                    "checkpoint": "best",
                    "split": "test",
                    "metric": "accuracy",
                    "value": 0.7 + sd * rng.standard_normal(),
                    "baseline": baseline,
                }
                rows.append({**row, **dict(zip(keys, combo))})
    frame = pd.DataFrame(rows)
    return frame.assign(failed=pd.array(frame["value"] <= frame["baseline"], dtype="boolean"))


# ---------------------------------------------------------------------------------------------
# summarize


def test_summary_matches_numpy():
    values = {"houlsby": [0.70, 0.72, 0.71, 0.69, 0.73], "full": [0.50, 0.80, 0.65, 0.52, 0.90, 0.74]}
    frame = pd.DataFrame(
        [{"task": "rte", "method": m, "value": v, "baseline": 0.53} for m, vs in values.items() for v in vs]
    )
    frame["failed"] = frame["value"] <= frame["baseline"]
    summary = stability.summarize(frame, ["task", "method"], n_resamples=999, include_failed=True).set_index("method")
    assert list(summary.columns) == ["task", *stability.SUMMARY_STATS]
    for method, v in values.items():
        x, row = np.array(v), summary.loc[method]
        assert (
            row["n"] == row["n_runs"] == len(x)
            and row["mean"] == pytest.approx(x.mean())
            and row["std"] == pytest.approx(x.std(ddof=1))
        )
        assert row["iqr"] == pytest.approx(np.percentile(x, 75) - np.percentile(x, 25))
        assert (row["min"], row["max"], row["median"]) == pytest.approx((x.min(), x.max(), np.median(x)))
        assert row["ci_low"] < x.mean() < row["ci_high"] and x.min() <= row["ci_low"] and row["ci_high"] <= x.max()
    assert summary.loc["full", "n_failed"] == 2 and summary.loc["houlsby", "n_failed"] == 0


def test_summary_leaves_collapsed_runs_out_and_counts_them():
    values = {"houlsby": [0.70, 0.72, 0.71, 0.69, 0.73], "full": [0.50, 0.80, 0.65, 0.52, 0.90, 0.74]}
    frame = pd.DataFrame(
        [{"task": "rte", "method": m, "value": v, "baseline": 0.53} for m, vs in values.items() for v in vs]
    )
    summary = stability.summarize(frame, ["task", "method"], n_resamples=999).set_index("method")
    kept = np.array([0.80, 0.65, 0.90, 0.74])  # 0.50 and 0.52 are at or below the 53% majority baseline
    row = summary.loc["full"]
    assert (
        row["n"] == 4 and row["n_runs"] == 6 and row["n_collapsed"] == 2 and row["failed_rate"] == pytest.approx(2 / 6)
    )
    assert (
        row["mean"] == pytest.approx(kept.mean())
        and row["std"] == pytest.approx(kept.std(ddof=1))
        and row["min"] == 0.65
    )
    tests = stability.compare(frame, within=["task"]).set_index("test")
    assert tests.loc["levene", "n_a"] == 4 and tests.loc["mean-difference", "statistic"] == pytest.approx(
        kept.mean() - 0.71
    )
    text = stability.caption(summary.reset_index(), tests.reset_index())
    assert "Left out of the statistics and tests: collapsed 2 of 11 runs (counted per box in the figure)" in text


def test_summary_refuses_to_pool_runs_of_different_settings():
    frame = _runs({"houlsby": 0.01, "full": 0.1}, n=4, baseline=0.0).assign(epochs=3)
    frame.loc[frame["seed"] == 0, "epochs"] = 10
    with pytest.raises(PoolingError, match="differ in epochs = 10, 3"):
        stability.summarize(frame, ["task", "method"])
    with pytest.raises(PoolingError, match="epochs"):
        stability.compare(frame, within=["task"])
    assert set(stability.summarize(frame, ["task", "method", "epochs"])["n"]) == {1, 3}  # split: fine
    assert "epochs" in stability.default_within(frame, "method")  # the default cells split it
    assert len(stability.summarize(frame, ["task", "method"], pooled=["epochs"])) == 2  # pooled on purpose


def test_summary_ci_is_seeded_and_handles_small_groups():
    frame = _runs({"houlsby": 0.01, "full": 0.1}, n=8)
    first, again = (stability.summarize(frame, "method", n_resamples=999, seed=3) for _ in range(2))
    pd.testing.assert_frame_equal(first, again)
    tiny = pd.DataFrame({"method": ["a", "b", "b"], "value": [0.5, 0.6, 0.6]})
    summary = stability.summarize(tiny, "method").set_index("method")
    assert np.isnan(summary.loc["a", "std"]) and np.isnan(summary.loc["a", "ci_low"])  # one run: no spread
    assert summary.loc["b", "ci_low"] == summary.loc["b", "ci_high"] == 0.6  # constant: the value itself
    assert summary.loc["a", "n_failed"] == 0  # no baseline: no run can be shown to be stuck at it


def test_failed_runs_are_those_at_or_below_the_baseline():
    frame = pd.DataFrame({"method": ["full"] * 4, "value": [0.53, 0.52, 0.54, 0.9], "baseline": 0.53})
    frame["failed"] = pd.array(frame["value"] <= frame["baseline"], dtype="boolean")
    assert stability.summarize(frame, "method")["n_failed"].item() == 2  # equal to the baseline counts


# ---------------------------------------------------------------------------------------------
# compare


def test_compare_detects_a_variance_difference():
    tests = stability.compare(
        _runs({"houlsby": 0.01, "full": 0.1}, n=20, seed=1, baseline=0.0), within=["task"]
    ).set_index("test")
    assert (tests["group_a"] == "full").all() and (tests["n_a"] == 20).all() and (tests["n_b"] == 20).all()
    assert tests.loc["levene", "p_value"] < 0.01 and tests.loc["brown-forsythe", "p_value"] < 0.01
    assert tests.loc["std-ratio", "statistic"] > 3  # full / houlsby
    assert 0 <= tests.loc["mann-whitney-u", "p_value"] <= 1
    diff = tests.loc["mean-difference"]
    assert diff["ci_low"] < diff["statistic"] < diff["ci_high"]


def test_compare_does_not_invent_a_difference():
    tests = stability.compare(_runs({"houlsby": 0.05, "full": 0.05}, n=20, seed=2), within=["task"]).set_index("test")
    assert tests.loc["levene", "p_value"] > 0.05 and tests.loc["brown-forsythe", "p_value"] > 0.05
    assert tests.loc["mann-whitney-u", "p_value"] > 0.05
    diff = tests.loc["mean-difference"]
    assert diff["ci_low"] < 0 < diff["ci_high"]


def test_compare_within_cells_and_default_within():
    frame = _runs({"houlsby": 0.01, "full": 0.1}, n=6, tsp_step=[0, 100])
    assert stability.default_within(frame, "method") == ["task", "tsp_step"]  # lr differs by method only
    tests = stability.compare(frame, n_resamples=199)
    assert set(tests["tsp_step"]) == {0, 100} and len(tests) == 2 * 5
    assert list(tests.columns) == ["task", "tsp_step", *stability.COMPARE_COLUMNS]


def test_compare_degenerate_groups_give_nan_with_a_note():
    frame = pd.DataFrame({"method": ["a"] * 4 + ["b"] * 4 + ["c"], "value": [0.5] * 4 + [0.5] * 4 + [0.7]})
    tests = stability.compare(frame, within=[], n_resamples=199)
    ab = tests[(tests["group_a"] == "a") & (tests["group_b"] == "b")].set_index("test")
    assert np.isnan(ab.loc["levene", "p_value"]) and "constant" in ab.loc["levene", "note"]
    assert np.isnan(ab.loc["mann-whitney-u", "p_value"]) and ab.loc["mann-whitney-u", "note"] == "all values equal"
    assert np.isnan(ab.loc["std-ratio", "statistic"]) and "zero variance" in ab.loc["std-ratio", "note"]
    ac = tests[tests["group_b"] == "c"].set_index(["group_a", "test"])
    assert ac["p_value"].isna().all() and ac["note"].str.contains("fewer than").all()  # c has one run
    text = stability.caption(stability.summarize(frame, "method", n_resamples=199), tests)
    assert text.startswith("n = 1-4 runs per box.") and "a vs b (two-sided): Levene p n/a" in text


def test_empty_frames_raise_clear_errors():
    with pytest.raises(RobustkitError, match="selection is empty"):
        stability.summarize(pd.DataFrame(columns=["method", "value"]), "method")
    with pytest.raises(RobustkitError, match="no column 'lr_missing'"):
        stability.compare(_runs({"a": 0.1, "b": 0.1}, n=3), by="lr_missing", within=["task"])


def test_caption_reports_n_and_p_values():
    frame = _runs({"houlsby": 0.01, "full": 0.1}, n=20, seed=1, baseline=0.0)
    summary, tests = stability.tables(frame, within=["task"])
    text = stability.caption(summary, tests)
    assert text.startswith(
        "n = 20 runs per box. Descriptive tests, not the claims' (Holm-adjusted over these 3 p-values): "
        "full vs houlsby (two-sided): Levene Holm p "
    )
    assert "Brown-Forsythe Holm p" in text and "Mann-Whitney U Holm p" in text
    many = stability.tables(
        _runs({"houlsby": 0.01, "full": 0.1}, n=10, tsp_step=[0, 1, 2]), within=["task", "tsp_step"]
    )
    assert "Levene Holm p < 0.05 in 3/3 cells" in stability.caption(*many)


def test_caption_p_values_are_holm_adjusted_over_the_figure():
    """Issue #55: about 15 uncorrected pairwise p-values (e.g. p = 0.008) sat beside
    'inconclusive' verdicts. Each caption p is Holm's over all of the caption's p-values."""
    p = pd.Series([0.01, 0.04, np.nan, 0.03, 0.5])
    adjusted = multiplicity.holm_adjusted(p)
    # by hand: sorted 0.01, 0.03, 0.04, 0.5 -> 4 x 0.01, 3 x 0.03, max(0.09, 2 x 0.04), max(.., 0.5)
    assert np.allclose(adjusted.dropna(), [0.04, 0.09, 0.09, 0.5]) and np.isnan(adjusted[2])
    summary, tests = stability.tables(
        _runs({"houlsby": 0.01, "full": 0.1}, n=20, seed=1, baseline=0.0), within=["task"]
    )
    raw = tests.set_index("test").loc["levene", "p_value"]
    text = stability.caption(summary, tests)
    shown = float(text.split("Levene Holm p = ")[1].split(",")[0].replace("< ", ""))
    assert shown >= min(raw, 0.001) and " p = " not in text.replace("Holm p = ", "")


# ---------------------------------------------------------------------------------------------
# outcomes on a real store


def test_outcomes_on_a_store(tiny_store):
    frame = scores.outcomes(tiny_store, checkpoint="best", split="test", metric=None)
    runs = load_runs(tiny_store).set_index("run_id")
    assert list(frame.columns) == scores.OUTCOME_COLUMNS and len(frame) == len(runs) == 2
    for _, row in frame.iterrows():
        assert row["value"] == runs.loc[row["run_id"], "best/test/accuracy"] and row["metric"] == "accuracy"
    # the tiny RTE's dev set alternates labels: always predicting one is right half of the time
    expected = [
        collapse.outcome(v, 0.5, "accuracy", n, share)
        for v, n, share in zip(frame["value"], frame["n_eval"], frame["top_class_share"])
    ]
    # a collapsed run that never left the majority class at any evaluation is not-learned
    expected = [
        collapse.NOT_LEARNED if o == collapse.COLLAPSED and learned is False else o
        for o, learned in zip(expected, frame["ever_learned"].astype(object))
    ]
    assert (frame["baseline"] == 0.5).all() and list(frame["outcome"]) == expected
    assert (frame["failed"] == (frame["outcome"] != "ok")).all() and (frame["n_eval"] == runs["n_test"].iloc[0]).all()
    last = scores.outcomes(tiny_store, ["method=full"], checkpoint="last", split="validation", metric="loss")
    assert len(last) == 1 and last["value"].item() == runs.loc[last["run_id"].item(), "last/validation/loss"]
    assert last["baseline"].isna().all() and (last["outcome"] == "ok").all()  # no constant baseline for a loss


def test_baseline_override_and_unreadable_data(tiny_store, tmp_path):
    frame = scores.outcomes(tiny_store, baseline={"rte": 1.0}, checkpoint="best", split="test", metric=None)
    assert (frame["baseline"] == 1.0).all() and frame["failed"].all()  # nothing beats a perfect score
    with pytest.warns(UserWarning, match="no majority baseline"):
        value = scores.majority_baseline("rte", "accuracy", "test", str(tmp_path / "moved"), None, 0)
    assert np.isnan(value)


def test_epoch_outcomes_on_a_store(tiny_store):
    frame = scores.epoch_outcomes(tiny_store, metric=None)
    assert list(frame.columns) == scores.EPOCH_COLUMNS
    assert set(frame["epoch"]) == {1, 2} and len(frame) == 2 * 2 and (frame["split"] == "validation").all()
    one = scores.outcomes(tiny_store, epoch=2, checkpoint="best", split=None, metric=None)
    assert set(one["epoch"]) == {2} and len(one) == 2
    with pytest.raises(RobustkitError, match="only the validation split"):
        scores.epoch_outcomes(tiny_store, split="test", metric=None)


def test_epoch_outcomes_mark_every_epoch_of_a_diverged_run(tiny_store, tmp_path):
    """A run that diverged later is no result at any epoch, as in :func:`scores.outcomes`."""
    import shutil

    from robustkit.store.folders import run_dirs
    from robustkit.store.manifest import update_manifest

    store = tmp_path / "runs"
    shutil.copytree(tiny_store, store)
    diverged = run_dirs(store)[0]
    update_manifest(diverged, status="diverged")
    frame = scores.epoch_outcomes(store, metric=None)
    mine = frame["run_id"] == diverged.name
    assert (frame.loc[mine, "outcome"] == "diverged").all() and frame.loc[mine, "failed"].all()
    assert (frame.loc[~mine, "outcome"] != "diverged").all()


def test_outcomes_empty_selection_names_it(tiny_store):
    with pytest.raises(RobustkitError, match="task.*cola"):
        scores.outcomes(tiny_store, ["task=cola"], checkpoint="best", split="test", metric=None)
    with pytest.raises(RobustkitError, match="best/test/nonsense"):
        scores.outcomes(tiny_store, metric="nonsense", checkpoint="best", split="test")


def test_stats_cli(tiny_store, tmp_path, capsys):
    out = tmp_path / "stats.csv"
    # the tiny store's runs may sit at the majority class: keep them to test the printing
    assert (
        main(
            [
                "stats",
                str(tiny_store),
                "--by",
                "method",
                "--metric",
                "accuracy",
                "--within",
                "task",
                "-o",
                str(out),
                "--include-failed",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "levene" in printed and "fewer than 3 runs in a group" in printed and "n = 1 run per box" in printed
    summary, tests, runs = (pd.read_csv(tmp_path / f) for f in ("stats.csv", "stats-tests.csv", "stats-runs.csv"))
    assert set(summary["method"]) == {"houlsby", "full"} and (summary["n"] == 1).all()
    assert set(tests["test"]) == {"levene", "brown-forsythe", "mann-whitney-u", "std-ratio", "mean-difference"}
    assert len(runs) == 2 and set(IDENTITY) <= set(runs.columns)
    assert main(["stats", str(tiny_store), "--select", "task=cola"]) == 2
    assert "cola" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# figures


@pytest.mark.parametrize("name", ["seeds", "tsp", "tsp-pooled", "tsp-epochs", "lr", "train-size", "train-size-mean"])
def test_figures_write_pdfs(name, tmp_path):
    spread = {"houlsby": 0.01, "full": 0.1}
    figures = {
        "seeds": lambda: plots.box_seeds(**boxes.box_seeds(_runs(spread, n=6))),
        "tsp": lambda: plots.box_tsp(**boxes.box_tsp(_runs(spread, n=4, tsp_step=[0, 100, 200]))),
        "tsp-pooled": lambda: plots.box_tsp(
            **boxes.box_tsp(_runs(spread, n=1, tsp_step=[0, 100, 200, 300]), pooled=True), pooled=True
        ),
        "tsp-epochs": lambda: plots.box_tsp_epochs(
            **boxes.box_tsp_epochs(_runs(spread, n=3, tsp_step=[0, 100], epoch=[1, 2, 3]).assign(split="validation"))
        ),
        "lr": lambda: plots.box_lr(**boxes.box_lr(_runs(spread, n=4, lr=[2e-5, 1e-4]))),
        "train-size": lambda: plots.train_size(**boxes.train_size(_runs(spread, n=4, train_size=[1000, 5000, None]))),
        "train-size-mean": lambda: plots.train_size(
            **boxes.train_size(_runs(spread, n=4, train_size=[1000, None])), kind="mean"
        ),
    }
    fig = figures[name]()
    texts = [t.get_text() for t in fig.texts]
    assert any(t.startswith("n = ") for t in texts)  # the caption
    ax = fig.axes[0]
    assert any(t.get_text().startswith("n=") for t in ax.texts) and ax.get_legend() is not None
    assert "(%)" in ax.get_ylabel() and ax.get_xlabel()
    assert "majority-class baseline" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(line.get_linestyle() == "--" and np.allclose(line.get_ydata(), 53) for line in ax.lines)  # 0.53 in %
    path = save_pdf(fig, tmp_path / f"{name}.pdf")
    assert path.stat().st_size > 1000 and path.read_bytes().startswith(b"%PDF")


def test_figures_refuse_an_empty_frame():
    with pytest.raises(ValueError, match="empty"):
        boxes.box_seeds(_runs({"a": 0.1}, n=1).iloc[:0])


def test_a_store_of_mixed_settings_is_never_pooled(tmp_path, rte_folder):
    """Two adapter runs that differ in their epochs, not only their seed: no box, mean or test
    may put them together; the default cells split them and an explicit grouping stops."""
    import dataclasses

    from conftest import TINY_RTE

    from robustkit.figures import stability as stability_plots
    from robustkit.train import train

    glue = rte_folder(tmp_path / "glue")
    for seed, epochs in ((0, 1), (1, 2)):
        train(
            dataclasses.replace(TINY_RTE, method="houlsby", seed=seed, epochs=epochs, data_dir=str(glue)),
            tmp_path / "runs",
            progress=False,
        )
    frame = scores.outcomes(tmp_path / "runs", split="validation", checkpoint="last", metric=None)
    assert sorted(frame["epochs"]) == [1, 2] and {"warmup_ratio", "mixout", "max_length"} <= set(frame.columns)
    with pytest.raises(PoolingError, match="differ in epochs = 1, 2"):
        stability.summarize(frame, ["task", "method"], include_failed=True)
    assert "epochs" in stability.default_within(frame, "method")
    summary = stability.summarize(frame, ["task", "method", "epochs"], include_failed=True)
    assert list(summary["n"]) == [1, 1]
    fig = stability_plots.box_seeds(
        **boxes.box_seeds(frame, include_failed=True), include_failed=True
    )  # a panel per epochs value
    assert len([ax for ax in fig.axes if ax.has_data()]) == 2


def test_pooling_tsp_lengths_pools_the_tsp_runs_own_settings():
    # at tsp_step 0 the TSP settings are normalised (no TSP run): they vary with the TSP length
    frame = _runs({"houlsby": 0.01, "full": 0.1}, n=2, baseline=0.0, tsp_step=[0, 100]).assign(
        tsp_lr=np.nan, tsp_batch_size=32
    )
    frame.loc[frame["tsp_step"] == 100, ["tsp_lr", "tsp_batch_size"]] = [1e-4, 16]
    assert len(stability.summarize(frame, ["task", "method"], pooled=["tsp_step"])) == 2
    with pytest.raises(PoolingError, match="tsp_step"):
        stability.summarize(frame, ["task", "method"])
