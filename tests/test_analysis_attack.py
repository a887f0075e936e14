"""Orchestration of the PWWS analysis over a store: sampling, resume, conventions, figure."""

import dataclasses

import pandas as pd
import pytest

import robustkit.attack as engine
from robustkit.analysis import attack
from robustkit.plots.attack import attack_vs_tsp
from robustkit.plots.style import save_pdf
from robustkit.train import train

N = 6


@pytest.fixture(autouse=True)
def _nltk_data(monkeypatch, shared_nltk_data):
    monkeypatch.setenv("NLTK_DATA", shared_nltk_data)


@pytest.fixture(scope="module")
def attack_store(tmp_path_factory):
    from robustkit.spec import RunSpec

    root = tmp_path_factory.mktemp("attack-store")
    base = RunSpec(model="bert-tiny", task="rt", train_size=64, epochs=1, batch_size=16, max_length=32, adapter_size=16)
    for method in ("houlsby", "full"):
        train(dataclasses.replace(base, method=method), root, progress=False)
    return root


def test_examples_are_the_same_sample_for_every_run(attack_store):
    examples = attack.run(attack_store, n=N, seed=3, progress=False)
    assert len(examples) == 2 * N and set(examples.method) == {"houlsby", "full"}
    by_run = examples.groupby("run_id")["example"].apply(tuple)
    assert by_run.nunique() == 1
    assert set(attack.EXAMPLE_COLUMNS) <= set(examples.columns)
    flipped = examples[examples.success]
    assert (flipped.adversarial != flipped.original.str.lower()).all()


def test_interrupted_attack_resumes_without_repeating(attack_store, monkeypatch):
    reference = attack.run(attack_store, n=N, seed=5, select=["method=full"], progress=False)
    calls = {"n": 0}
    real = engine.attack_fast

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "attack_fast", flaky)
    with pytest.raises(KeyboardInterrupt):
        attack.run(attack_store, n=N, seed=6, select=["method=full"], progress=False)
    monkeypatch.setattr(engine, "attack_fast", real)
    resumed = attack.run(attack_store, n=N, seed=6, select=["method=full"], progress=False)
    assert len(resumed) == N and resumed.example.is_unique
    again = attack.run(attack_store, n=N, seed=5, select=["method=full"], progress=False)
    pd.testing.assert_frame_equal(reference.drop(columns="seconds"), again.drop(columns="seconds"))


def test_summary_conventions_by_hand():
    rows = pd.DataFrame({
        "run_id": "r", "model": "m", "task": "rt", "method": "full", "seed": 0, "tsp_step": 0, "lr": 1e-4,
        "train_size": 1000, "adapter_size": None,
        "label":      [1, 1, 0, 0],
        "prediction": [1, 1, 0, 1],   # the last one is misclassified
        "success":    [True, False, True, True],
        "queries": [10, 20, 30, 40], "modified_words": [1, 0, 2, 1], "words": [10, 10, 10, 10], "seconds": 1.0,
    })
    summary = attack.summarize(rows).set_index("convention")
    assert summary.loc["openattack", "success_rate"] == 0.75 and summary.loc["openattack", "attacked"] == 4
    assert summary.loc["gold", "success_rate"] == pytest.approx(2 / 3) and summary.loc["gold", "attacked"] == 3
    assert summary.loc["gold", "accuracy_before"] == 0.75
    assert summary.loc["gold", "accuracy_under_attack"] == 0.25
    assert summary.loc["openattack", "mean_modification_rate"] == pytest.approx((0.1 + 0.2 + 0.1) / 3)


def test_pair_tasks_and_bad_engine_are_refused(attack_store):
    with pytest.raises(Exception, match="unknown attack engine 'nope'"):
        attack.attack_run(attack.select_runs(attack_store).path[0], engine="nope")


def test_figure_renders(tmp_path):
    summary = pd.DataFrame({
        "method": ["houlsby"] * 4 + ["full"] * 4, "tsp_step": [0, 0, 200, 200] * 2, "convention": "openattack",
        "success_rate": [0.3, 0.35, 0.32, 0.3, 0.6, 0.5, 0.7, 0.65], "attacked": 200,
    })
    path = save_pdf(attack_vs_tsp(summary), tmp_path / "fig5.pdf")
    assert path.read_bytes()[:4] == b"%PDF"
    with pytest.raises(ValueError, match="gold"):
        attack_vs_tsp(summary, convention="gold")


def test_a_collapsed_victim_is_no_robustness(tmp_path):
    """A victim stuck at the majority class cannot be flipped: it is drawn as a cross and kept out
    of the mean line (the demo's Han fig 5 once read such a run as robustness)."""
    summary = pd.DataFrame({
        "method": ["houlsby"] * 4, "tsp_step": [0, 0, 200, 200], "convention": "openattack",
        "success_rate": [0.6, 0.7, 0.65, 0.05], "attacked": 50, "outcome": ["ok", "ok", "ok", "collapsed"],
    })
    fig = attack_vs_tsp(summary)
    line = fig.axes[0].get_lines()[0]
    assert list(line.get_ydata()) == pytest.approx([65.0, 65.0])  # TSP 200: the one ok run
    crosses = [l for l in fig.axes[0].get_lines() if l.get_marker() == "x"]
    assert len(crosses) == 1 and list(crosses[0].get_ydata()) == pytest.approx([5.0])
    assert any("collapsed 1/4" in t.get_text() for t in fig.texts)
    kept = attack_vs_tsp(summary, include_failed=True).axes[0].get_lines()[0]
    assert list(kept.get_ydata()) == pytest.approx([65.0, 35.0])
