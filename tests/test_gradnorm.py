"""Gradient norms (Han et al. 2021 figure 3): rows, layer kinds, the adapters' missing pooler, figure."""

import numpy as np
import pandas as pd
import pytest

from robustkit.analysis import gradnorm
from robustkit.figures.gradnorm import gradnorm_curves
from robustkit.figures.method_style import method_label
from robustkit.figures.style import save_pdf
from robustkit.store.tables import load_gradnorms


def test_rows_match_load_gradnorms(tiny_store):
    frame = gradnorm.run(tiny_store)
    raw = load_gradnorms(tiny_store)
    keys = ["run_id", "step", "layer"]
    pd.testing.assert_frame_equal(
        frame[raw.columns].sort_values(keys).reset_index(drop=True), raw.sort_values(keys).reset_index(drop=True)
    )
    kinds = frame.drop_duplicates("layer").set_index("layer")["layer_kind"].to_dict()
    assert kinds == {
        "embeddings": "embeddings",
        "layer.0": "intermediate",
        "layer.1": "top",
        "pooler": "pooler",
        "classifier": "classifier",
    }
    assert (
        frame.loc[frame["layer"] == "layer.1", "layer_index"].eq(1).all()
        and frame.loc[frame["layer"] == "pooler", "layer_index"].isna().all()
    )
    assert (frame["value"] > 0).all()


def test_adapter_runs_have_no_pooler_rows(tiny_store):
    frame = gradnorm.run(tiny_store)
    steps = frame.groupby("method")["step"].nunique()
    pooler = frame[frame["layer"] == "pooler"].groupby("method")["step"].nunique()
    assert "houlsby" not in pooler and pooler["full"] == steps["full"]  # full: every step
    assert set(gradnorm.run(tiny_store, ["method=houlsby"])["method"]) == {"houlsby"}


def test_summary_window_means_by_hand():
    frame = pd.DataFrame(
        {
            "run_id": "r",
            "model": "m",
            "task": "rte",
            "method": "full",
            "seed": 0,
            "tsp_step": 0,
            "lr": 2e-5,
            "train_size": None,
            "adapter_size": np.nan,
            "step": [1, 2, 3, 4, 5, 1, 2, 3, 4, 5],
            "layer": ["pooler"] * 5 + ["layer.0"] * 5,
            "value": [1.0, 3.0, 5.0, 7.0, 100.0, 2.0, 2.0, 4.0, 4.0, 8.0],
        }
    )
    out = gradnorm.summary(gradnorm.with_layer_kind(frame), every=2).set_index(["layer", "step"])
    assert out.loc[("pooler", 1.5), "value"] == 2.0 and out.loc[("pooler", 3.5), "value"] == 6.0
    assert out.loc[("pooler", 5.0), "value"] == 100.0 and out.loc[("pooler", 5.0), "n_steps"] == 1
    assert out.loc[("layer.0", 3.5), "value"] == 4.0 and set(out["layer_kind"]) == {"pooler", "top"}
    assert out["adapter_size"].isna().all() and len(out) == 6  # NaN identity columns survive
    with pytest.raises(ValueError, match="every"):
        gradnorm.summary(frame, every=0)


@pytest.mark.slow
def test_figure_shows_the_missing_pooler_as_a_note_not_a_line(tiny_store, tmp_path):
    frame = gradnorm.run(tiny_store)
    seeds = pd.concat([frame, frame.assign(run_id=frame["run_id"] + "-copy", value=frame["value"] * 2)])
    fig = gradnorm_curves(gradnorm.summary(seeds, every=2))
    intermediate, top, pooler, _ = fig.axes
    assert [len(ax.lines) for ax in fig.axes] == [2, 2, 1, 2]
    assert pooler.get_yscale() == "log" and method_label("houlsby") in " ".join(t.get_text() for t in pooler.texts)
    assert "layer.0" in intermediate.get_title() and "layer.1" in top.get_title()
    assert all("n=2 runs" in t.get_text() for t in fig.legends[0].get_texts())
    path = save_pdf(fig, tmp_path / "gradnorm.pdf")
    assert path.read_bytes()[:5] == b"%PDF-"
