"""Parameter/performance trade-off table (from manifests), best-lr selection, the cross-task
aggregate (Houlsby et al. 2019 figure 3) and the figures."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from robustkit.analysis import tradeoff
from robustkit.analysis.registry import get as analysis
from robustkit.figures.init_std import init_std_figure
from robustkit.figures.marks import COLLAPSED_LABEL
from robustkit.figures.style import figure_texts, save_pdf
from robustkit.figures.tradeoff import tradeoff_aggregate_figure, tradeoff_figure
from robustkit.specs.spec import RunSpec
from robustkit.store import collapse
from robustkit.store.manifest import write_manifest

BASE = 4_000_000  # parameters of the fake model without adapters


def _fake_run(root, spec: RunSpec, count: int, adapters: int, accuracy: float, complete: bool = True) -> None:
    """A run folder holding only the manifest fields the trade-off table reads."""
    spec = spec.resolved()
    manifest = {
        "run_id": spec.run_id,
        "kind": "finetune",
        "spec": spec.to_dict(),
        "status": "complete" if complete else "running",
        "main_metric": "accuracy",
        "trainable": {"count": count, "total": BASE + adapters, "adapter_modules": {"a": adapters} if adapters else {}},
        "splits": {"train": 1000, "validation": 1000, "test": 1066},
        "final": {
            "best": {"validation": {"accuracy": accuracy, "loss": 0.5}, "test": {"accuracy": accuracy - 0.1}},
            "last": {"validation": {"accuracy": 0.1}, "test": {"accuracy": 0.1}},
        },
    }
    write_manifest(root / spec.run_id, manifest)


@pytest.fixture
def fake_store(tmp_path):
    base = RunSpec(model="bert-tiny", task="rt", train_size=1000)  # embedded: the baseline is read offline
    for seed in (0, 1):
        _fake_run(tmp_path, dataclasses.replace(base, seed=seed, adapter_size=8), 20_000, 18_000, 0.7 + seed / 10)
        _fake_run(tmp_path, dataclasses.replace(base, seed=seed, method="topk", top_k=1), 900_000, 0, 0.5)
    _fake_run(tmp_path, dataclasses.replace(base, method="full"), BASE, 0, 0.8)
    _fake_run(tmp_path, dataclasses.replace(base, adapter_init_std=1e-4), 20_000, 18_000, 0.3)
    _fake_run(tmp_path, dataclasses.replace(base, method="layernorm", seed=5), 1_000, 0, 0.2, complete=False)
    return tmp_path


def test_table_reads_counts_and_best_metrics_from_manifests(fake_store):
    frame = analysis("tradeoff").run(fake_store)
    assert list(frame.columns) == tradeoff.COLUMNS
    assert len(frame) == 6 * 2  # complete runs x (validation, test); the running one is left out
    houlsby = frame[(frame.method == "houlsby") & (frame.seed == 1) & frame.adapter_init_std.isna()]
    val = houlsby[houlsby.split == "validation"].iloc[0]
    assert val["value"] == pytest.approx(0.8) and val["metric"] == "accuracy" and val["checkpoint"] == "best"
    assert houlsby[houlsby.split == "test"].iloc[0]["value"] == pytest.approx(0.7)
    assert (val["trainable_params"], val["base_params"]) == (20_000, BASE)
    assert val["trainable_fraction"] == pytest.approx(20_000 / BASE)
    assert val["init_std"] == 1e-2  # AdapterHub's houlsby init: std 1e-2
    assert frame[frame.adapter_init_std == 1e-4]["init_std"].unique().tolist() == [1e-4]
    topk = frame[frame.method == "topk"]
    assert topk["top_k"].unique().tolist() == [1] and topk["init_std"].isna().all()
    assert (frame[frame.method == "full"]["adapter_sharing"] == "none").all()
    # every row carries the majority baseline of its split and the run's outcome
    assert (
        frame["baseline"].between(0.4, 0.6).all() and (frame.loc[frame.split == "validation", "n_eval"] == 1000).all()
    )
    assert set(frame.loc[frame.value <= 0.5, "outcome"]) == {"collapsed"}  # 0.5 and below: the majority class
    assert val["outcome"] == "ok" and (frame["failed"] == (frame["outcome"] != "ok")).all()
    assert frame["epochs"].notna().all()  # every run setting is a column


def test_table_selects_runs_and_checkpoints(fake_store):
    frame = analysis("tradeoff").run(fake_store, ["method=topk"], checkpoint="last")
    assert set(frame.method) == {"topk"} and set(frame.value) == {0.1}


def test_summarize_gives_mean_std_sem_and_count_per_setting(fake_store):
    frame = analysis("tradeoff").run(fake_store)
    summary = tradeoff.summarize(frame[frame.split == "validation"], ["method", "adapter_size", "init_std"])
    row = summary[(summary.method == "houlsby") & (summary.init_std == 1e-2)].iloc[0]
    assert (row["n"], row["value"]) == (2, pytest.approx(0.75))
    assert row["std"] == pytest.approx(np.std([0.7, 0.8], ddof=1)) and row["sem"] == pytest.approx(
        row["std"] / np.sqrt(2)
    )
    assert summary[summary.method == "full"].iloc[0]["std"] == 0.0  # one run
    topk = summary[summary.method == "topk"].iloc[0]  # both runs at 0.5: collapsed, counted, not averaged
    assert topk["n"] == 0 and np.isnan(topk["value"]) and topk["n_runs"] == 2 and topk["n_collapsed"] == 2
    kept = tradeoff.summarize(frame[frame.split == "validation"], ["method"], include_failed=True).set_index("method")
    assert kept.loc["topk", "value"] == pytest.approx(0.5) and kept.loc["topk", "n"] == 2


def _synthetic(seeds: int = 3) -> pd.DataFrame:
    """A trade-off table of two tasks: houlsby m in 2..256, top-k k in 1..6, LayerNorm, full."""
    rng = np.random.default_rng(0)
    rows = []
    settings = [("houlsby", dict(adapter_size=m), 2 * 6 * (2 * m * 384 + 384 + m)) for m in (2, 8, 64, 256)]
    settings += [("topk", dict(top_k=k), k * 1_800_000) for k in (1, 3, 6)]
    settings += [("layernorm", {}, 10_000), ("full", {}, 22_000_000)]
    settings += [("houlsby", dict(adapter_size=64, adapter_sharing="layer"), 6 * (2 * 64 * 384 + 384 + 64))]
    settings += [
        ("houlsby", dict(adapter_size=64, adapter_init_std=s), 2 * 6 * (2 * 64 * 384 + 384 + 64))
        for s in (1e-6, 1e-1, 1.0)
    ]
    for task in ("rte", "sst2"):
        for method, extra, count in settings:
            for seed in range(seeds):
                std = extra.get("adapter_init_std")
                for split in ("validation", "test"):
                    rows.append(
                        {
                            "run_id": f"{task}-{method}-{seed}-{extra}",
                            "model": "minilm-l6",
                            "task": task,
                            "method": method,
                            "seed": seed,
                            "tsp_step": 0,
                            "lr": 1e-4,
                            "train_size": None,
                            "adapter_size": extra.get("adapter_size"),
                            "top_k": extra.get("top_k"),
                            "adapter_init_std": std,
                            "adapter_sharing": extra.get("adapter_sharing", "none"),
                            "init_std": tradeoff.effective_init_std(method, std),
                            "trainable_params": count,
                            "base_params": 22_000_000,
                            "trainable_fraction": count / 22e6,
                            "checkpoint": "best",
                            "split": split,
                            "metric": "accuracy",
                            "value": 0.7 + 0.05 * np.log10(count) / 8 + rng.normal(0, 0.01),
                            "baseline": np.nan,
                            "outcome": "ok",
                            "failed": False,
                        }
                    )
    return pd.DataFrame(rows, columns=tradeoff.COLUMNS)


def test_tradeoff_figure_has_a_log_panel_per_task_with_counted_series(tmp_path):
    fig = tradeoff_figure(**tradeoff.tradeoff_points(_synthetic()))
    axes = [ax for ax in fig.axes if ax.get_xlabel().startswith("trained parameters (count")]
    assert len(axes) == 2 and all(ax.get_xscale() == "log" for ax in axes)
    assert axes[0].get_ylim() == axes[1].get_ylim()  # one metric: one y scale
    labels = [text.get_text() for text in axes[0].get_legend().get_texts()]
    assert len(labels) == 5  # houlsby, houlsby shared per layer, topk, layernorm, full
    assert all("n=3 runs per point" in label for label in labels)
    assert any(label.startswith("fine-tuning the top k layers") for label in labels)
    notes = {text.get_text() for text in axes[0].texts}
    assert {"m=2", "m=256", "k=1", "k=6"} <= notes
    assert axes[0].get_ylabel() == "validation accuracy (%) at the best checkpoint"
    texts = " ".join(" ".join(figure_texts(fig)).split())
    assert (
        "18 runs with another adapter init std are left out" in texts
    )  # 2 tasks x 3 stds x 3 seeds: the init-std figure's
    assert "Error bars: ±1 s.e.m. over seeds" in texts and "One learning rate per point" in texts
    assert "Houlsby et al. 2019, figure 4 — minilm-l6 on rte, sst2" in figure_texts(fig)
    path = save_pdf(fig, tmp_path / "tradeoff.pdf")
    assert path.read_bytes()[:5] == b"%PDF-" and path.stat().st_size > 5_000


def test_tradeoff_figure_error_bars_are_the_sem_over_seeds():
    frame = _synthetic()
    fig = tradeoff_figure(**tradeoff.tradeoff_points(frame[frame.task == "rte"], split="test"), split="test")
    ax = fig.axes[0]
    layernorm = frame[(frame.task == "rte") & (frame.method == "layernorm") & (frame.split == "test")]["value"]
    container = next(c for c in ax.containers if c.get_label().startswith("LayerNorm"))
    (segments,) = container[2]
    (low, high) = segments.get_segments()[0][:, 1]
    assert (high - low) / 2 == pytest.approx(100 * layernorm.std(ddof=1) / np.sqrt(3))
    assert (low + high) / 2 == pytest.approx(100 * layernorm.mean())


def _lr_sweep() -> pd.DataFrame:
    """rte, houlsby m=8 at two learning rates: 1e-3 wins on validation, 1e-4 would win on test."""
    frame = _synthetic(seeds=3)
    frame = frame[(frame.task == "rte") & frame.adapter_init_std.isna() & frame.method.isin(["houlsby", "full"])]
    other = frame[(frame.method == "houlsby") & (frame.adapter_size == 8)].assign(lr=1e-3)
    other["value"] = np.where(other["split"] == "validation", 0.95, 0.5)
    other["run_id"] = other["run_id"] + "-lr3"
    return pd.concat([frame, other], ignore_index=True)


def test_each_point_is_the_best_learning_rate_on_validation():
    selected = tradeoff.select_best(_lr_sweep())
    m8 = selected[(selected.method == "houlsby") & (selected.adapter_size == 8)]
    assert set(m8["lr"]) == {1e-3} and (m8["n_configs"] == 2).all() and len(m8) == 6  # 3 seeds x 2 splits
    assert set(selected.loc[selected.adapter_size == 64, "lr"]) == {1e-4}
    fig = tradeoff_figure(**tradeoff.tradeoff_points(_lr_sweep(), split="test"), split="test")
    m8_test = [c for c in fig.axes[0].containers if c.get_label().startswith("with adapters (Houlsby) (")][0]
    x, y = m8_test[0].get_data()
    assert 50.0 in list(
        np.round(np.asarray(y, float), 6)
    )  # the test score of the validation-selected lr, not the test-best one
    assert "best of up to 2 learning rates / epoch budgets by the mean validation score" in " ".join(
        " ".join(figure_texts(fig)).split()
    )


def test_runs_of_one_point_that_differ_in_another_setting_are_not_pooled():
    from robustkit.analysis.pooling import PoolingError

    frame = _lr_sweep().assign(max_length=128)
    frame.loc[frame.seed == 0, "max_length"] = 256
    with pytest.raises(PoolingError, match="max_length = 128, 256"):
        tradeoff.select_best(frame)


def test_collapsed_points_are_marked_and_left_out(tmp_path):
    frame = _synthetic(seeds=3).assign(baseline=0.55).drop(columns=["outcome", "failed"])
    frame.loc[(frame.method == "topk") & (frame.top_k == 1) & (frame.seed == 0), "value"] = 0.55  # stuck
    frame = collapse.mark(frame)
    fig = tradeoff_figure(**tradeoff.tradeoff_points(frame[frame.task == "rte"]))
    ax = fig.axes[0]
    assert "collapsed 1/3" in [t.get_text() for t in ax.texts]
    crosses = [line for line in ax.lines if line.get_gid() == "collapsed"]
    assert len(crosses) == 1 and list(crosses[0].get_ydata()) == [pytest.approx(55.0)]
    topk = next(c for c in ax.containers if c.get_label().startswith("fine-tuning the top k"))
    kept = frame[
        (frame.task == "rte")
        & (frame.method == "topk")
        & (frame.top_k == 1)
        & (frame.seed > 0)
        & (frame.split == "validation")
    ]["value"]
    assert topk[0].get_ydata()[0] == pytest.approx(100 * kept.mean())
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert COLLAPSED_LABEL in labels and "majority-class baseline" in labels
    assert any(np.allclose(line.get_ydata(), 55.0) and line.get_linestyle() == "--" for line in ax.lines)
    assert save_pdf(fig, tmp_path / "collapsed.pdf").read_bytes()[:5] == b"%PDF-"


def _three_tasks() -> pd.DataFrame:
    """houlsby m in (2, 64) and topk k = 1 on three tasks (3 seeds) + full; known per-task means."""
    means = {
        "a": {"full": 0.80, ("houlsby", 2): 0.70, ("houlsby", 64): 0.79, ("topk", 1): 0.60},
        "b": {"full": 0.90, ("houlsby", 2): 0.88, ("houlsby", 64): 0.91, ("topk", 1): 0.75},
        "c": {"full": 0.70, ("houlsby", 2): 0.69, ("houlsby", 64): 0.66, ("topk", 1): 0.69},
    }
    rows = []
    for task, settings in means.items():
        for key, mean in settings.items():
            method, point = (key, None) if key == "full" else key
            for seed, delta in enumerate((-0.01, 0.0, 0.01)):
                for split in ("validation", "test"):
                    rows.append(
                        {
                            "run_id": f"{task}-{key}-{seed}",
                            "model": "minilm-l6",
                            "task": task,
                            "method": method,
                            "seed": seed,
                            "lr": 1e-4,
                            "epochs": 3,
                            "adapter_size": point if method == "houlsby" else None,
                            "top_k": point if method == "topk" else None,
                            "adapter_init_std": None,
                            "adapter_sharing": "none",
                            "trainable_params": {None: 1e7, 2: 1e4, 64: 3e5, 1: 2e6}[point],
                            "base_params": 1e7,
                            "split": split,
                            "metric": "accuracy",
                            "value": mean + delta,
                            "baseline": 0.5,
                        }
                    )
    return pd.DataFrame(rows), means


def test_aggregate_percentiles_across_tasks_equal_numpys():
    frame, means = _three_tasks()
    agg = tradeoff.aggregate(frame)
    for method, point in [("houlsby", 2), ("houlsby", 64), ("topk", 1)]:
        normalised = [means[t][(method, point)] - means[t]["full"] for t in "abc"]
        rows = agg[(agg.method == method) & (agg.point == point)].set_index("percentile")
        assert list(rows.index) == [20.0, 50.0, 80.0] and (rows["n_tasks"] == 3).all()
        assert rows["value"].to_numpy() == pytest.approx(np.percentile(normalised, [20, 50, 80]))
    baseline = agg["baseline"].iloc[0]
    assert baseline == pytest.approx(np.median([0.5 - means[t]["full"] for t in "abc"]))


def test_aggregate_figure_and_the_one_task_case(tmp_path):
    frame, _ = _three_tasks()
    fig = tradeoff_aggregate_figure(tradeoff.aggregate(frame), frame)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and "percentage points" in ax.get_ylabel()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(label.startswith("band: 20th-80th percentile across tasks; line: 50th") for label in labels)
    assert "Houlsby et al. 2019, figure 3 — minilm-l6 on a, b, c" in figure_texts(fig)
    assert save_pdf(fig, tmp_path / "aggregate.pdf").read_bytes()[:5] == b"%PDF-"
    single = frame[frame.task == "a"]
    agg = tradeoff.aggregate(single)
    assert (agg.groupby(["series", "point"])["value"].nunique() == 1).all()  # the band collapses
    texts = " ".join(figure_texts(tradeoff_aggregate_figure(agg, single)))
    assert "1 task: percentiles are that task's value." in texts


def test_init_std_figure_is_log_in_std_with_one_line_per_size(tmp_path):
    frame = _synthetic(seeds=2)
    fig = init_std_figure(**tradeoff.init_std_points(frame))
    assert len(fig.axes) == 2 and fig.axes[0].get_xscale() == "log"
    lines = [c for c in fig.axes[0].containers]
    assert len(lines) == 5  # m = 2, 8, 256 (default init), m = 64, m = 64 shared per layer
    m64 = next(c for c in lines if c.get_label().startswith("adapter size m=64 ("))
    assert list(m64[0].get_xdata()) == [1e-6, 1e-2, 1e-1, 1.0]
    assert "n=2 runs per point" in m64.get_label()
    path = save_pdf(fig, tmp_path / "init_std.pdf")
    assert path.read_bytes()[:5] == b"%PDF-"


def test_figures_name_a_missing_split():
    with pytest.raises(ValueError, match="'train'"):
        tradeoff.tradeoff_points(_synthetic(seeds=1), split="train")


def test_plot_commands_write_pdfs(fake_store, tmp_path, capsys):
    from robustkit.cli import main

    for figure in ("tradeoff", "init-std", "tradeoff-aggregate"):
        out = tmp_path / f"{figure}.pdf"
        assert (
            main(
                [
                    "plot",
                    figure,
                    str(fake_store),
                    "-o",
                    str(out),
                    "--split",
                    "test",
                    "--metric",
                    "accuracy",
                    "--subtitle",
                    "bert-tiny on rt",
                    "--footer",
                    "Claim: c.\\nVerdict: v.",
                ]
            )
            == 0
        )
        assert out.read_bytes()[:5] == b"%PDF-"
    assert main(["analyze", "tradeoff", str(fake_store), "--select", "method=houlsby"]) == 0
    assert "houlsby" in capsys.readouterr().out


def test_tradeoff_legend_counts_the_runs_in_each_mean_and_the_failed_ones_apart():
    """A point whose runs mostly collapsed says n of the runs averaged, not of the runs trained."""
    frame = _synthetic()
    houlsby = frame.index[(frame.method == "houlsby") & (frame.adapter_sharing == "none") & (frame.seed > 0)]
    frame.loc[houlsby, ["value", "outcome", "failed"]] = [0.5, "collapsed", True]
    fig = tradeoff_figure(**tradeoff.tradeoff_points(frame))
    axis = next(ax for ax in fig.axes if ax.get_xlabel().startswith("trained parameters (count"))
    labels = [text.get_text() for text in axis.get_legend().get_texts()]
    assert any(
        label.startswith("with adapters (Houlsby) (n=1 run per point;") and "failed, left out" in label
        for label in labels
    ), labels


def test_analyze_tradeoff_never_pools_what_its_figure_refuses_to(fake_store, capsys):
    """Runs of one method setting that differ in lr or max_grad_norm: the figure refuses to pool
    them (select_best); the printed summary splits them, one row each, by the same check."""
    from robustkit.analysis.pooling import PoolingError
    from robustkit.cli import main

    base = RunSpec(model="bert-tiny", task="rt", train_size=1000, adapter_size=8)
    _fake_run(fake_store, dataclasses.replace(base, lr=1e-3), 20_000, 18_000, 0.9)
    _fake_run(fake_store, dataclasses.replace(base, max_grad_norm=0.5), 20_000, 18_000, 0.85)
    frame = analysis("tradeoff").run(fake_store)
    with pytest.raises(PoolingError, match="max_grad_norm"):
        tradeoff.tradeoff_points(frame)
    summary = tradeoff.settings_summary(frame)
    houlsby = summary[(summary.method == "houlsby") & (summary.init_std == 1e-2) & (summary.split == "validation")]
    assert {"lr", "max_grad_norm"} <= set(summary.columns)
    assert sorted(houlsby["n_runs"]) == [1, 1, 2]  # lr 1e-3; max_grad_norm 0.5; the two seeds of the defaults
    assert houlsby.set_index(["lr", "max_grad_norm"])["value"].to_dict() == {
        (1e-3, 1.0): pytest.approx(0.9),
        (1e-4, 0.5): pytest.approx(0.85),
        (1e-4, 1.0): pytest.approx(0.75),
    }
    assert main(["analyze", "tradeoff", str(fake_store)]) == 0
    assert "max_grad_norm" in capsys.readouterr().out


def test_aggregate_with_every_full_run_failed_says_so_in_one_line():
    """All full fine-tuning runs failed (no score): the normalisation has no reference. pandas 3
    made the empty task column a string column and the subtraction raised a TypeError."""
    from robustkit.errors import RobustkitError

    frame, _ = _three_tasks()
    frame = frame.assign(outcome=np.where(frame["method"] == "full", "not-learned", "ok"))
    with pytest.raises(RobustkitError, match="no task has both full fine-tuning"):
        tradeoff.aggregate(frame)
    assert not tradeoff.aggregate(frame, include_failed=True).empty  # counted as data, they have one
