"""Learning curves and overfitting (He et al. 2021 figures 5, 9 and table 6; Han et al. 2021
figures 1 and 13): dev rows of the history, mean/best by hand, figures."""

import numpy as np
import pandas as pd
import pytest

from robustkit.analysis import curves
from robustkit.figures import curves as curves_plots
from robustkit.figures.curves import mean_best_table
from robustkit.figures.style import figure_texts, save_pdf
from robustkit.store.tables import IDENTITY, load_history

# accuracy at eval steps 10, 20, 30 per (method, seed); loss rows (5.0) and a train row must not count
ACCURACY = {
    ("houlsby", 0): [0.6, 0.8, 0.7],  # mean 0.7, best 0.8
    ("houlsby", 1): [0.5, 0.7, 0.9],  # mean 0.7, best 0.9
    ("full", 0): [0.9, 0.6, 0.3],  # mean 0.6, best 0.9
    ("full", 1): [0.7, 0.5, 0.3],  # mean 0.5, best 0.7
}


def _synthetic(tsp_steps=(0,)) -> pd.DataFrame:
    rows = []
    for tsp in tsp_steps:
        for (method, seed), values in ACCURACY.items():
            identity = {
                "run_id": f"{method}-s{seed}-tsp{tsp}",
                "model": "bert-tiny",
                "task": "rte",
                "method": method,
                "seed": seed,
                "tsp_step": tsp,
                "lr": 1e-4 if method == "houlsby" else 2e-5,
                "train_size": np.nan,
                "adapter_size": 64.0 if method == "houlsby" else np.nan,
                "main_metric": "accuracy",
            }
            for step, value in zip((10, 20, 30), values):
                rows.append(
                    {
                        **identity,
                        "step": step,
                        "epoch": step / 10,
                        "split": "validation",
                        "metric": "accuracy",
                        "value": value + tsp / 1000,
                    }
                )
                rows.append(
                    {
                        **identity,
                        "step": step,
                        "epoch": step / 10,
                        "split": "validation",
                        "metric": "loss",
                        "value": 5.0,
                    }
                )
            rows.append({**identity, "step": 40, "epoch": 4.0, "split": "train", "metric": "accuracy", "value": 1.0})
    return pd.DataFrame(rows)


def dev_curves(frame: pd.DataFrame, **params):
    """The curves figure of ``frame``, through its view (the mean lines)."""
    return curves_plots.dev_curves(**curves.dev_curves(frame, **params))


def curves_by_tsp(frame: pd.DataFrame, **params):
    """The curves-by-tsp figure of ``frame``, through its view."""
    return curves_plots.curves_by_tsp(**curves.curves_by_tsp(frame, **params))


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
    assert (
        per_run.loc["houlsby-s1-tsp0", "mean"] == pytest.approx(0.7) and per_run.loc["houlsby-s1-tsp0", "best"] == 0.9
    )
    assert per_run.loc["full-s0-tsp0", "n_evals"] == 3 and set(per_run["metric"]) == {"accuracy"}
    table = curves.mean_best(_synthetic()).set_index(["method", "statistic"])
    expected = {
        ("houlsby", "mean"): (0.7, 0.0),
        ("houlsby", "best"): (0.85, np.std([0.8, 0.9], ddof=1)),
        ("full", "mean"): (0.55, np.std([0.6, 0.5], ddof=1)),
        ("full", "best"): (0.8, np.std([0.9, 0.7], ddof=1)),
    }
    for key, (value, std) in expected.items():
        assert table.loc[key, "value"] == pytest.approx(value) and table.loc[key, "std"] == pytest.approx(
            std, abs=1e-12
        )
    assert (table["n_runs"] == 2).all() and len(table) == 4
    assert table.loc[("full", "mean"), "adapter_size"] != table.loc[("full", "mean"), "adapter_size"]  # NaN kept


def test_mean_best_keeps_tsp_steps_apart():
    table = curves.mean_best(_synthetic(tsp_steps=(0, 100)))
    assert len(table) == 8 and (table["n_runs"] == 2).all()
    best = table.query("method == 'houlsby' and statistic == 'best'").set_index("tsp_step")["value"]
    assert best[100] - best[0] == pytest.approx(0.1)


@pytest.mark.slow
def test_figures_render_as_pdf(tiny_store, tmp_path):
    real = dev_curves(curves.run(tiny_store))
    assert [ax.get_ylabel() for ax in real.axes] == ["dev loss (mean cross-entropy, nats)", "dev accuracy (%)"]
    synthetic = _synthetic(tsp_steps=(0, 100, 200))
    by_tsp = curves_by_tsp(synthetic)
    assert len(by_tsp.axes) == 2 and len(by_tsp.axes[0].lines) == 3
    assert "TSP 100 steps (n=2 runs per line)" in [t.get_text() for t in by_tsp.axes[0].get_legend().get_texts()]
    assert by_tsp.axes[0].get_ylim() == by_tsp.axes[1].get_ylim()  # one metric: one y scale
    table = mean_best_table(curves.mean_best(synthetic))
    for name, fig in (("dev", real), ("by-tsp", by_tsp), ("table", table), ("dev-synthetic", dev_curves(synthetic))):
        assert save_pdf(fig, tmp_path / f"{name}.pdf").read_bytes()[:5] == b"%PDF-"


def _outcomes(collapsed: str = "full-s1-tsp0") -> pd.DataFrame:
    """One score per run of :func:`_synthetic` (as scores.outcomes gives), one collapsed."""
    runs = _synthetic()["run_id"].unique()
    return pd.DataFrame(
        {
            "run_id": runs,
            "value": 0.7,
            "baseline": 0.5,
            "outcome": ["collapsed" if r == collapsed else "ok" for r in runs],
        }
    )


def test_mean_best_leaves_a_collapsed_run_out_and_counts_it():
    frame = curves.with_outcomes(_synthetic(), _outcomes())
    assert set(frame.loc[frame.run_id == "full-s1-tsp0", "outcome"]) == {"collapsed"}
    table = curves.mean_best(frame).set_index(["method", "statistic"])
    full = table.loc[("full", "mean")]
    assert full["value"] == pytest.approx(0.6) and full["n"] == 1 and full["n_runs"] == 2 and full["n_collapsed"] == 1
    assert np.isnan(full["std"]) and full["baseline"] == 0.5
    assert table.loc[("houlsby", "best"), "n"] == 2
    kept_all = curves.mean_best(frame, include_failed=True).set_index(["method", "statistic"])
    assert kept_all.loc[("full", "mean"), "value"] == pytest.approx(0.55)


def test_mean_best_is_a_table_with_plus_minus_and_collapsed_cells(tmp_path):
    summary = curves.mean_best(curves.with_outcomes(_synthetic(), _outcomes()))
    fig = mean_best_table(summary)
    assert not fig.axes[0].patches and len(fig.axes[0].tables) == 1  # a table, no bars
    cells = {(r, c): cell.get_text().get_text() for (r, c), cell in fig.axes[0].tables[0].get_celld().items()}
    header = [cells[(0, c)] for c in range(len({c for _, c in cells}))]
    assert header[:4] == ["task", "method", "mean over eval steps (%)", "best over eval steps (%)"]
    rows = {cells[(r, 1)]: [cells[(r, c)] for c in range(len(header))] for r in range(1, 3)}
    full = rows["without adapters (full fine-tuning)"]
    assert full[2] == "60.0 (1 run)" and full[3] == "90.0 (1 run)" and full[4] == "1" and full[5] == "collapsed 1/2"
    houlsby = rows["with adapters (Houlsby)"]
    assert houlsby[2] == "70.0 ± 0.0" and houlsby[3] == f"85.0 ± {100 * np.std([0.8, 0.9], ddof=1):.1f}"
    assert houlsby[5] == "0/2" and houlsby[6] == "50.0"
    assert "He et al. 2021, table 6 — bert-tiny on rte" in figure_texts(fig)
    assert save_pdf(fig, tmp_path / "t6.pdf").read_bytes()[:5] == b"%PDF-"


def test_curves_draw_collapsed_runs_grey_and_leave_them_out_of_the_mean():
    frame = curves.with_outcomes(_synthetic(), _outcomes())
    fig = dev_curves(frame)
    metric_ax = fig.axes[1]
    grey = [line for line in metric_ax.lines if line.get_gid() == "collapsed"]
    assert len(grey) == 1 and list(grey[0].get_ydata()) == pytest.approx([70.0, 50.0, 30.0])
    full_mean = [line for line in metric_ax.lines if line.get_gid() != "collapsed" and line.get_color() == "#d95f02"]
    assert list(full_mean[0].get_ydata()) == pytest.approx([90.0, 60.0, 30.0])  # seed 0 only
    assert any(np.allclose(line.get_ydata(), 50.0) and line.get_linestyle() == "--" for line in metric_ax.lines)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "without adapters (full fine-tuning) (n=2 runs; collapsed 1/2)" in labels
