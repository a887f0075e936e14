"""Parameter/performance trade-off table (from manifests) and its figures."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from robustkit import store
from robustkit.analysis import tradeoff
from robustkit.plots.init_std import init_std_figure
from robustkit.plots.style import save_pdf
from robustkit.plots.tradeoff import tradeoff_figure
from robustkit.spec import RunSpec

BASE = 4_000_000  # parameters of the fake model without adapters


def _fake_run(root, spec: RunSpec, count: int, adapters: int, accuracy: float, complete: bool = True) -> None:
    """A run folder holding only the manifest fields the trade-off table reads."""
    spec = spec.resolved()
    manifest = {
        "run_id": spec.run_id, "kind": "finetune", "spec": spec.to_dict(),
        "status": "complete" if complete else "running", "main_metric": "accuracy",
        "trainable": {"count": count, "total": BASE + adapters, "adapter_modules": {"a": adapters} if adapters else {}},
        "final": {"best": {"validation": {"accuracy": accuracy, "loss": 0.5}, "test": {"accuracy": accuracy - 0.1}},
                  "last": {"validation": {"accuracy": 0.1}, "test": {"accuracy": 0.1}}},
    }
    store.write_manifest(root / spec.run_id, manifest)


@pytest.fixture
def fake_store(tmp_path):
    base = RunSpec(model="bert-tiny", task="rte")
    for seed in (0, 1):
        _fake_run(tmp_path, dataclasses.replace(base, seed=seed, adapter_size=8), 20_000, 18_000, 0.6 + seed / 10)
        _fake_run(tmp_path, dataclasses.replace(base, seed=seed, method="topk", top_k=1), 900_000, 0, 0.5)
    _fake_run(tmp_path, dataclasses.replace(base, method="full"), BASE, 0, 0.8)
    _fake_run(tmp_path, dataclasses.replace(base, adapter_init_std=1e-4), 20_000, 18_000, 0.3)
    _fake_run(tmp_path, dataclasses.replace(base, method="layernorm", seed=5), 1_000, 0, 0.2, complete=False)
    return tmp_path


def test_table_reads_counts_and_best_metrics_from_manifests(fake_store):
    frame = tradeoff.table(fake_store)
    assert list(frame.columns) == tradeoff.COLUMNS
    assert len(frame) == 6 * 2  # complete runs x (validation, test); the running one is left out
    houlsby = frame[(frame.method == "houlsby") & (frame.seed == 1) & frame.adapter_init_std.isna()]
    val = houlsby[houlsby.split == "validation"].iloc[0]
    assert val["value"] == pytest.approx(0.7) and val["metric"] == "accuracy" and val["checkpoint"] == "best"
    assert houlsby[houlsby.split == "test"].iloc[0]["value"] == pytest.approx(0.6)
    assert (val["trainable_params"], val["base_params"]) == (20_000, BASE)
    assert val["trainable_fraction"] == pytest.approx(20_000 / BASE)
    assert val["init_std"] == 1e-2  # AdapterHub's houlsby init: std 1e-2
    assert frame[frame.adapter_init_std == 1e-4]["init_std"].unique().tolist() == [1e-4]
    topk = frame[frame.method == "topk"]
    assert topk["top_k"].unique().tolist() == [1] and topk["init_std"].isna().all()
    assert (frame[frame.method == "full"]["adapter_sharing"] == "none").all()


def test_table_selects_runs_and_checkpoints(fake_store):
    frame = tradeoff.table(fake_store, ["method=topk"], checkpoint="last")
    assert set(frame.method) == {"topk"} and set(frame.value) == {0.1}


def test_summarize_gives_mean_std_and_count_per_setting(fake_store):
    frame = tradeoff.table(fake_store)
    summary = tradeoff.summarize(frame[frame.split == "validation"], ["method", "adapter_size", "init_std"])
    row = summary[(summary.method == "houlsby") & (summary.init_std == 1e-2)].iloc[0]
    assert (row["n"], row["value"]) == (2, pytest.approx(0.65))
    assert row["std"] == pytest.approx(np.std([0.6, 0.7], ddof=1))
    assert summary[summary.method == "full"].iloc[0]["std"] == 0.0  # one run


def _synthetic(seeds: int = 3) -> pd.DataFrame:
    """A trade-off table of two tasks: houlsby m in 2..256, top-k k in 1..6, LayerNorm, full."""
    rng = np.random.default_rng(0)
    rows = []
    settings = [("houlsby", dict(adapter_size=m), 2 * 6 * (2 * m * 384 + 384 + m)) for m in (2, 8, 64, 256)]
    settings += [("topk", dict(top_k=k), k * 1_800_000) for k in (1, 3, 6)]
    settings += [("layernorm", {}, 10_000), ("full", {}, 22_000_000)]
    settings += [("houlsby", dict(adapter_size=64, adapter_sharing="layer"), 6 * (2 * 64 * 384 + 384 + 64))]
    settings += [("houlsby", dict(adapter_size=64, adapter_init_std=s), 2 * 6 * (2 * 64 * 384 + 384 + 64)) for s in (1e-6, 1e-1, 1.0)]
    for task in ("rte", "sst2"):
        for method, extra, count in settings:
            for seed in range(seeds):
                std = extra.get("adapter_init_std")
                for split in ("validation", "test"):
                    rows.append({
                        "run_id": f"{task}-{method}-{seed}-{extra}", "model": "minilm-l6", "task": task, "method": method,
                        "seed": seed, "tsp_step": 0, "lr": 1e-4, "train_size": None, "adapter_size": extra.get("adapter_size"),
                        "top_k": extra.get("top_k"), "adapter_init_std": std,
                        "adapter_sharing": extra.get("adapter_sharing", "none"),
                        "init_std": tradeoff.effective_init_std(method, std), "trainable_params": count,
                        "base_params": 22_000_000, "trainable_fraction": count / 22e6, "checkpoint": "best",
                        "split": split, "metric": "accuracy", "value": 0.7 + 0.05 * np.log10(count) / 8 + rng.normal(0, 0.01),
                    })
    return pd.DataFrame(rows, columns=tradeoff.COLUMNS)


def test_tradeoff_figure_has_a_log_panel_per_task_with_counted_series(tmp_path):
    fig = tradeoff_figure(_synthetic())
    axes = [ax for ax in fig.axes if ax.get_xlabel().startswith("trained parameters (count")]
    assert len(axes) == 2 and all(ax.get_xscale() == "log" for ax in axes)
    labels = [text.get_text() for text in axes[0].get_legend().get_texts()]
    assert len(labels) == 5  # houlsby, houlsby shared per layer, topk, layernorm, full
    assert all("n=3 runs per point" in label for label in labels)
    assert any(label.startswith("fine-tuning the top k layers") for label in labels)
    notes = {text.get_text() for text in axes[0].texts}
    assert {"m=2", "m=256", "k=1", "k=6"} <= notes
    assert axes[0].get_ylabel() == "validation accuracy at the best checkpoint"
    assert "9 runs with another init std left out" in axes[0].get_title()  # 3 stds x 3 seeds: the init-std figure's
    path = save_pdf(fig, tmp_path / "tradeoff.pdf")
    assert path.read_bytes()[:5] == b"%PDF-" and path.stat().st_size > 5_000


def test_tradeoff_figure_error_bars_are_the_std_over_seeds():
    frame = _synthetic()
    fig = tradeoff_figure(frame[frame.task == "rte"], split="test")
    ax = fig.axes[0]
    layernorm = frame[(frame.task == "rte") & (frame.method == "layernorm") & (frame.split == "test")]["value"]
    container = next(c for c in ax.containers if c.get_label().startswith("LayerNorm"))
    (segments,) = container[2]
    (low, high) = segments.get_segments()[0][:, 1]
    assert (high - low) / 2 == pytest.approx(layernorm.std(ddof=1))
    assert (low + high) / 2 == pytest.approx(layernorm.mean())


def test_init_std_figure_is_log_in_std_with_one_line_per_size(tmp_path):
    frame = _synthetic(seeds=2)
    fig = init_std_figure(frame)
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
        tradeoff_figure(_synthetic(seeds=1), split="train")


def test_plot_commands_write_pdfs(fake_store, tmp_path, capsys):
    from robustkit.cli import main

    for figure in ("tradeoff", "init-std"):
        out = tmp_path / f"{figure}.pdf"
        assert main(["plot", figure, str(fake_store), "-o", str(out), "--split", "test"]) == 0
        assert out.read_bytes()[:5] == b"%PDF-"
    assert main(["analyze", "tradeoff", str(fake_store), "--select", "method=houlsby"]) == 0
    assert "houlsby" in capsys.readouterr().out
