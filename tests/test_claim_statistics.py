"""Per-run statistics that claims are tested on (robustkit.analysis.claim_statistics), on a real store:
each reduces its analysis to the number its docstring names."""

import numpy as np
import pytest

from robustkit.analysis import claim_statistics, curves, gradnorm
from robustkit.errors import RobustkitError
from robustkit.store.tables import IDENTITY, load_runs


@pytest.fixture(scope="module")
def ids(tiny_store) -> list[str]:
    return list(load_runs(tiny_store)["run_id"])


def test_score_and_collapsed(tiny_store, ids):
    frame = claim_statistics.compute("score", tiny_store, ids, {"split": "validation", "checkpoint": "last"})
    runs = load_runs(tiny_store).set_index("run_id")
    assert set(IDENTITY) <= set(frame.columns) and {"value", "outcome"} <= set(frame.columns)
    assert all(frame.set_index("run_id")["value"] == runs.loc[frame["run_id"], "last/validation/accuracy"].to_numpy())
    failed = claim_statistics.compute("collapsed", tiny_store, ids, {"split": "validation", "checkpoint": "last"})
    assert list(failed["value"]) == list(frame["failed"].astype(float)) and set(failed["outcome"]) == {"ok"}
    epochs = claim_statistics.compute("score", tiny_store, ids, {"epoch": "all"})
    assert sorted(epochs["epoch"].unique()) == [1, 2] and len(epochs) == 2 * len(ids)


def test_dev_curve_statistics(tiny_store, ids):
    history = curves.run(tiny_store, {"run_id": ids})
    dev = history[(history["split"] == "validation")]
    for run_id, group in dev.groupby("run_id"):
        loss = group[group["metric"] == "loss"].sort_values("step")["value"]
        acc = group[group["metric"] == "accuracy"]["value"]
        overfit = claim_statistics.compute("overfit", tiny_store, [run_id]).set_index("run_id")["value"][run_id]
        assert overfit == pytest.approx(loss.iloc[-1] - loss.min()) and overfit >= 0
        gap = claim_statistics.compute("best-minus-mean", tiny_store, [run_id])["value"].item()
        assert gap == pytest.approx(acc.max() - acc.mean())
        assert claim_statistics.compute("mean-dev", tiny_store, [run_id])["value"].item() == pytest.approx(acc.mean())


def test_gradnorm_slope_is_the_fitted_slope(tiny_store, ids):
    norms = gradnorm.run(tiny_store, {"run_id": ids})
    slopes = claim_statistics.compute("gradnorm-slope", tiny_store, ids, {"layer": "classifier"}).set_index("run_id")["value"]
    for run_id, group in norms[norms["layer"] == "classifier"].groupby("run_id"):
        expected = np.polyfit(group["step"] / 1000, np.log10(group["value"]), 1)[0]
        assert slopes[run_id] == pytest.approx(expected)
    top = claim_statistics.compute("gradnorm-slope", tiny_store, ids, {"layer": "top"})
    assert len(top) == len(ids) and top["value"].notna().all()  # bert-tiny: the top third is layer 1


def test_analysis_statistics_on_a_real_run(tiny_store, ids):
    houlsby = [i for i in ids if "houlsby" in i]
    curvature = claim_statistics.compute("landscape-curvature", tiny_store, houlsby, {"alphas": "-2:2:21"})
    assert len(curvature) == 1 and np.isfinite(curvature["value"].item())
    drop = claim_statistics.compute("ablation-max-single-drop", tiny_store, houlsby)
    gap = claim_statistics.compute("ablation-all-removed-gap", tiny_store, houlsby)
    low_high = claim_statistics.compute("ablation-low-minus-high", tiny_store, houlsby)
    assert all(len(f) == 1 and np.isfinite(f["value"].item()) for f in (drop, gap, low_high))
    layers = claim_statistics.compute("rsa", tiny_store, houlsby, {"tokens": 50})
    assert sorted(layers["layer"]) == [0, 1, 2]  # embeddings + 2 encoder layers
    top = claim_statistics.compute("rsa", tiny_store, houlsby, {"tokens": 50, "layer": "top"})
    assert top["value"].item() == pytest.approx(layers.loc[layers["layer"] == 2, "value"].item())


def test_unknown_statistic_or_parameter():
    with pytest.raises(RobustkitError, match="unknown statistic 'magic'"):
        claim_statistics.compute("magic", "nowhere", [])


def test_unknown_parameter_is_refused(tiny_store, ids):
    with pytest.raises(RobustkitError, match="unknown statistic parameter"):
        claim_statistics.compute("overfit", tiny_store, ids, {"colour": "red"})


@pytest.mark.parametrize("statistic, params", [
    ("rsa", {"tokens": 50}), ("rsa", {"tokens": 50, "layer": "top"}), ("landscape-curvature", {"alphas": "-2:2:21"}),
    ("score", {}), ("ablation-max-single-drop", {})])
def test_each_statistic_carries_the_claims_outcome(tiny_store, ids, statistic, params):
    """The outcome a claim leaves runs out by is the store's on the claim's split and checkpoint,
    in one ``outcome`` column, even where the analysis frame carries its own (similarity.run's
    once made it outcome_x / outcome_y, and no collapsed run was left out)."""
    from robustkit.analysis import scores

    houlsby = [i for i in ids if "houlsby" in i]
    frame = claim_statistics.compute(statistic, tiny_store, houlsby, params)
    assert "outcome" in frame and not {"outcome_x", "outcome_y"} & set(frame.columns)
    expected = scores.outcomes(tiny_store, {"run_id": houlsby}, checkpoint="best", split="test").set_index("run_id")["outcome"]
    assert (frame["outcome"].to_numpy() == expected.loc[frame["run_id"]].to_numpy()).all()
