"""Learning curves and overfitting (He et al. 2021 figures 5, 9 and table 6; Han et al. 2021
figures 1 and 13): dev rows of the history, mean/best by hand, figures."""


import numpy as np
import pandas as pd
import pytest

from robustkit.analysis import curves
from robustkit.plots.curves import curves_by_tsp, dev_curves, mean_best_table
from robustkit.plots.style import save_pdf
from robustkit.store import IDENTITY, load_history




# accuracy at eval steps 10, 20, 30 per (method, seed); loss rows (5.0) and a train row must not count
ACCURACY = {
    ("houlsby", 0): [0.6, 0.8, 0.7],  # mean 0.7, best 0.8
    ("houlsby", 1): [0.5, 0.7, 0.9],  # mean 0.7, best 0.9
    ("full", 0): [0.9, 0.6, 0.3],     # mean 0.6, best 0.9
    ("full", 1): [0.7, 0.5, 0.3],     # mean 0.5, best 0.7
}


def _synthetic(tsp_steps=(0,)) -> pd.DataFrame:
    rows = []
    for tsp in tsp_steps:
        for (method, seed), values in ACCURACY.items():
            identity = {
                "run_id": f"{method}-s{seed}-tsp{tsp}", "model": "bert-tiny", "task": "rte", "method": method, "seed": seed,
                "tsp_step": tsp, "lr": 1e-4 if method == "houlsby" else 2e-5, "train_size": np.nan,
                "adapter_size": 64.0 if method == "houlsby" else np.nan, "main_metric": "accuracy",
            }
            for step, value in zip((10, 20, 30), values):
                rows.append({**identity, "step": step, "epoch": step / 10, "split": "validation", "metric": "accuracy", "value": value + tsp / 1000})
                rows.append({**identity, "step": step, "epoch": step / 10, "split": "validation", "metric": "loss", "value": 5.0})
            rows.append({**identity, "step": 40, "epoch": 4.0, "split": "train", "metric": "accuracy", "value": 1.0})
    return pd.DataFrame(rows)


def test_run_is_the_validation_history_of_the_selected_runs(tiny_store):
    frame = curves.run(tiny_store)
    history = load_history(tiny_store)
    dev = history[history["split"] == "validation"]
    assert len(frame) == len(dev) and set(frame["split"]) == {"validation"}
    assert list(frame.columns) == [*IDENTITY, "main_metric", "step", "epoch", "split", "metric", "value"]
    assert set(frame["main_metric"]) == {"accuracy"} and set(frame["metric"]) == {"loss", "accuracy"}
    merged = frame.merge(dev, on=["run_id", "step", "metric"], suffixes=("", "_history"))
    assert len(merged) == len(frame) and (merged["value"] == merged["value_history"]).all()
    assert set(curves.run(tiny_store, ["method=full"])["method"]) == {"full"}


def test_mean_best_by_hand():
    per_run = curves.mean_best_runs(_synthetic()).set_index("run_id")
    assert per_run.loc["houlsby-s1-tsp0", "mean"] == pytest.approx(0.7) and per_run.loc["houlsby-s1-tsp0", "best"] == 0.9
    assert per_run.loc["full-s0-tsp0", "n_evals"] == 3 and set(per_run["metric"]) == {"accuracy"}
    table = curves.mean_best(_synthetic()).set_index(["method", "statistic"])
    expected = {
        ("houlsby", "mean"): (0.7, 0.0), ("houlsby", "best"): (0.85, np.std([0.8, 0.9], ddof=1)),
        ("full", "mean"): (0.55, np.std([0.6, 0.5], ddof=1)), ("full", "best"): (0.8, np.std([0.9, 0.7], ddof=1)),
    }
    for key, (value, std) in expected.items():
        assert table.loc[key, "value"] == pytest.approx(value) and table.loc[key, "std"] == pytest.approx(std, abs=1e-12)
    assert (table["n_runs"] == 2).all() and len(table) == 4
    assert table.loc[("full", "mean"), "adapter_size"] != table.loc[("full", "mean"), "adapter_size"]  # NaN kept


def test_mean_best_keeps_tsp_steps_apart():
    table = curves.mean_best(_synthetic(tsp_steps=(0, 100)))
    assert len(table) == 8 and (table["n_runs"] == 2).all()
    best = table.query("method == 'houlsby' and statistic == 'best'").set_index("tsp_step")["value"]
    assert best[100] - best[0] == pytest.approx(0.1)


def test_figures_render_as_pdf(tiny_store, tmp_path):
    real = dev_curves(curves.run(tiny_store))
    assert [ax.get_ylabel() for ax in real.axes] == ["dev loss (mean cross-entropy, nats)", "dev accuracy (fraction)"]
    synthetic = _synthetic(tsp_steps=(0, 100, 200))
    by_tsp = curves_by_tsp(synthetic)
    assert len(by_tsp.axes) == 2 and len(by_tsp.axes[0].lines) == 3
    assert "TSP 100 steps (n=2 runs)" in [t.get_text() for t in by_tsp.axes[0].get_legend().get_texts()]
    table = mean_best_table(curves.mean_best(synthetic))
    assert "n=2 runs" in table.legends[0].get_texts()[0].get_text()
    for name, fig in (("dev", real), ("by-tsp", by_tsp), ("table", table), ("dev-synthetic", dev_curves(synthetic))):
        assert save_pdf(fig, tmp_path / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"
