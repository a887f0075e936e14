"""Stability figures: collapsed runs marked and left out, no silent pooling, figure texts."""

import itertools

import numpy as np
import pandas as pd
import pytest

from robustkit.analysis import boxes
from robustkit.figures import stability as plots
from robustkit.figures.marks import COLLAPSED_LABEL
from robustkit.figures.style import decorate, figure_texts, save_pdf

BASELINE = 0.53


def _runs(values: dict[str, list[float]], **cells) -> pd.DataFrame:
    """One row per run: the given scores per method, repeated in every cell of ``cells``."""
    rows = []
    for combo in itertools.product(*cells.values()) if cells else [()]:
        for method, scores in values.items():
            for seed, value in enumerate(scores):
                row = {
                    "run_id": f"{method}-{seed}-{combo}",
                    "model": "minilm-l6",
                    "task": "rt",
                    "method": method,
                    "seed": seed,
                    "tsp_step": 0,
                    "lr": 1e-4 if method == "houlsby" else 2e-5,
                    "train_size": 1000,
                    "adapter_size": 64.0 if method == "houlsby" else np.nan,
                    "checkpoint": "last",
                    "split": "validation",
                    "metric": "accuracy",
                    "value": value,
                    "baseline": BASELINE,
                }
                rows.append({**row, **dict(zip(cells, combo))})
    return pd.DataFrame(rows)


FULL = [0.70, 0.74, 0.78, 0.53]  # the last one sits on the majority baseline: collapsed
HOULSBY = [0.75, 0.76, 0.77, 0.755]


def _strip_values(ax) -> np.ndarray:
    """y of every dot seaborn's stripplot drew (the runs inside the statistics)."""
    return np.concatenate([c.get_offsets()[:, 1] for c in ax.collections if len(c.get_offsets())])


def test_a_collapsed_run_is_left_out_of_its_box_and_marked():
    fig = plots.box_seeds(**boxes.box_seeds(_runs({"full": FULL, "houlsby": HOULSBY})))
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert "collapsed 1/4" in texts and "n=3" in texts and "n=4" in texts
    crosses = [line for line in ax.lines if line.get_gid() == "collapsed"]
    assert len(crosses) == 1 and np.allclose(crosses[0].get_ydata(), [53.0]) and crosses[0].get_marker() == "x"
    dots = _strip_values(ax)
    assert len(dots) == 7 and not np.any(np.isclose(dots, 53.0))  # 3 full + 4 houlsby; the collapsed one is a cross
    kept_median = 100 * np.median(FULL[:3])
    all_median = 100 * np.median(FULL)
    medians = [line.get_ydata() for line in ax.lines if len(line.get_ydata()) == 2]
    assert any(np.allclose(y, kept_median) for y in medians) and not any(np.allclose(y, all_median) for y in medians)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert COLLAPSED_LABEL in labels and "majority-class baseline" in labels
    caption = " ".join(" ".join(t.get_text() for t in fig.texts).split())  # lines wrapped
    assert "n = 3-4 runs per box" in caption and "collapsed 1 of 8 runs" in caption


def test_include_failed_keeps_the_collapsed_run_in_the_box():
    fig = plots.box_seeds(
        **boxes.box_seeds(_runs({"full": FULL, "houlsby": HOULSBY}), include_failed=True), include_failed=True
    )
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts].count("n=4") == 2 and "collapsed 1/4" in [t.get_text() for t in ax.texts]
    medians = [line.get_ydata() for line in ax.lines if len(line.get_ydata()) == 2]
    assert any(np.allclose(y, 100 * np.median(FULL)) for y in medians)
    assert "kept in the boxes" in " ".join(" ".join(t.get_text() for t in fig.texts).split())


def test_outcome_column_wins_over_the_baseline_rule():
    frame = _runs({"full": FULL, "houlsby": HOULSBY}).assign(outcome="ok")
    frame.loc[0, "outcome"] = "diverged"  # as an analysis recorded it
    texts = [t.get_text() for t in plots.box_seeds(**boxes.box_seeds(frame)).axes[0].texts]
    assert "diverged 1/4" in texts and "collapsed 1/4" not in texts


def test_runs_of_different_training_sizes_get_a_panel_each():
    frame = _runs({"full": [0.7, 0.72, 0.74], "houlsby": [0.75, 0.76, 0.77]}, lr=[1e-5, 1e-4], train_size=[1000, 5000])
    fig = plots.box_lr(**boxes.box_lr(frame))
    titles = sorted(ax.get_title() for ax in fig.axes if ax.get_visible())
    assert titles == ["rt: training examples 1000", "rt: training examples 5000"]
    assert all(t == "n=3" for ax in fig.axes for t in (x.get_text() for x in ax.texts))  # never 6: not pooled
    ylims = {ax.get_ylim() for ax in fig.axes}
    assert len(ylims) == 1  # one metric: one y scale for every panel


def test_pool_epochs_gives_one_box_per_tsp_step_and_method_over_every_epoch():
    frame = _runs({"full": [0.7, 0.72, 0.74], "houlsby": [0.75, 0.76, 0.77]}, tsp_step=[0, 200], epoch=[1, 2, 3, 4])
    fig = plots.box_tsp_epochs(**boxes.box_tsp_epochs(frame, pool_epochs=True), pool_epochs=True)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["n=12"] * 4  # 3 seeds x 4 epoch ends per box
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "200"]
    assert "epoch ends 1-4" in ax.get_xlabel()
    per_epoch = plots.box_tsp_epochs(**boxes.box_tsp_epochs(frame))
    assert len([a for a in per_epoch.axes if a.get_visible()]) == 2  # a panel per method, a box per epoch


def test_title_subtitle_and_footer(tmp_path):
    fig = plots.box_seeds(**boxes.box_seeds(_runs({"full": FULL, "houlsby": HOULSBY})))
    footer = (
        "Claim: std over seeds houlsby < full (Levene, one-sided).\nVerdict: inconclusive (n = 4 per method, p = 0.41)."
    )
    decorate(fig, subtitle="minilm-l6 on rt, stand-in for BERT-base on SST-2", footer=footer)
    texts = figure_texts(fig)
    # what was run is said once: by the subtitle, which names it, not again in the title
    assert "Han et al. 2021, figure 2" in texts and not any(" — minilm-l6 on rt" in t for t in texts)
    assert "minilm-l6 on rt, stand-in for BERT-base on SST-2" in texts
    assert any("Verdict: inconclusive" in t for t in texts) and any(t.startswith("Claim:") for t in texts)
    # no note ends on a lone word
    assert all(len(t.split("\n")[-1].split()) > 1 for t in fig.texts[1:] if " " in t.get_text() for t in [t.get_text()])
    assert save_pdf(fig, tmp_path / "seeds.pdf").read_bytes().startswith(b"%PDF")


def test_mean_kind_error_bars_are_the_std_of_the_kept_runs():
    fig = plots.train_size(
        **boxes.train_size(_runs({"full": FULL, "houlsby": HOULSBY}, train_size=[250, 1000])), kind="mean"
    )
    ax = fig.axes[0]
    full = next(c for c in ax.containers if len(c) == 3)
    (segments,) = full[2]
    low, high = segments.get_segments()[0][:, 1]
    assert (high - low) / 2 == pytest.approx(100 * np.std(FULL[:3], ddof=1))
    assert "mean ± 1 std over seeds (ddof 1)" in [t.get_text() for t in ax.get_legend().get_texts()]
