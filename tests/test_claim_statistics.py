"""Per-run statistics that claims are tested on (each declared in its analysis's module, named by
the analysis registry), on a real store:
each reduces its analysis to the number its docstring names."""

import numpy as np
import pytest

from robustkit.analysis import curves, gradnorm, registry
from robustkit.errors import RobustkitError
from robustkit.store.tables import IDENTITY, load_runs


@pytest.fixture(scope="module")
def ids(tiny_store) -> list[str]:
    return list(load_runs(tiny_store)["run_id"])


def test_score_and_collapsed(tiny_store, ids):
    frame = registry.per_run(
        "scores.score", tiny_store, {"run_id": ids}, **{"split": "validation", "checkpoint": "last"}
    )
    runs = load_runs(tiny_store).set_index("run_id")
    assert set(IDENTITY) <= set(frame.columns) and {"value", "outcome"} <= set(frame.columns)
    assert all(frame.set_index("run_id")["value"] == runs.loc[frame["run_id"], "last/validation/accuracy"].to_numpy())
    failed = registry.per_run(
        "scores.failed", tiny_store, {"run_id": ids}, **{"split": "validation", "checkpoint": "last"}
    )
    assert list(failed["value"]) == list(frame["failed"].astype(float)) and set(failed["outcome"]) == {"ok"}
    epochs = registry.per_run("epoch-scores.score", tiny_store, {"run_id": ids}, **{"epoch": "all"})
    assert sorted(epochs["epoch"].unique()) == [1, 2] and len(epochs) == 2 * len(ids)


def test_dev_curve_statistics(tiny_store, ids):
    history = curves.run(tiny_store, {"run_id": ids})
    dev = history[(history["split"] == "validation")]
    for run_id, group in dev.groupby("run_id"):
        loss = group[group["metric"] == "loss"].sort_values("step")["value"]
        acc = group[group["metric"] == "accuracy"]["value"]
        overfit = registry.per_run("curves.overfit", tiny_store, {"run_id": [run_id]}).set_index("run_id")["value"][
            run_id
        ]
        assert overfit == pytest.approx(loss.iloc[-1] - loss.min()) and overfit >= 0
        gap = registry.per_run("curves.best-minus-mean", tiny_store, {"run_id": [run_id]})["value"].item()
        assert gap == pytest.approx(acc.max() - acc.mean())
        assert registry.per_run("curves.mean-dev", tiny_store, {"run_id": [run_id]})["value"].item() == pytest.approx(
            acc.mean()
        )


def test_gradnorm_slope_is_the_fitted_slope(tiny_store, ids):
    norms = gradnorm.run(tiny_store, {"run_id": ids})
    slopes = registry.per_run("gradnorm.slope", tiny_store, {"run_id": ids}, **{"layer": "classifier"}).set_index(
        "run_id"
    )["value"]
    for run_id, group in norms[norms["layer"] == "classifier"].groupby("run_id"):
        expected = np.polyfit(group["step"] / 1000, np.log10(group["value"]), 1)[0]
        assert slopes[run_id] == pytest.approx(expected)
    top = registry.per_run("gradnorm.slope", tiny_store, {"run_id": ids}, **{"layer": "top"})
    assert len(top) == len(ids) and top["value"].notna().all()  # bert-tiny: the top third is layer 1


def test_analysis_statistics_on_a_real_run(tiny_store, ids):
    houlsby = [i for i in ids if "houlsby" in i]
    curvature = registry.per_run("landscape.curvature", tiny_store, {"run_id": houlsby}, **{"alphas": "-2:2:21"})
    assert len(curvature) == 1 and np.isfinite(curvature["value"].item())
    drop = registry.per_run("ablation.single-drop", tiny_store, {"run_id": houlsby})
    gap = registry.per_run("ablation.all-removed-gap", tiny_store, {"run_id": houlsby})
    low_high = registry.per_run("ablation.low-minus-high", tiny_store, {"run_id": houlsby})
    assert sorted(drop["layer"]) == [1, 2] and np.isfinite(drop["value"]).all()  # per encoder layer
    assert all(len(f) == 1 and np.isfinite(f["value"].item()) for f in (gap, low_high))
    layers = registry.per_run("rsa.similarity", tiny_store, {"run_id": houlsby}, **{"tokens": 50})
    assert sorted(layers["layer"]) == [0, 1, 2]  # embeddings + 2 encoder layers
    top = registry.per_run("rsa.similarity", tiny_store, {"run_id": houlsby}, **{"tokens": 50, "layer": "top"})
    assert top["value"].item() == pytest.approx(layers.loc[layers["layer"] == 2, "value"].item())


def test_unknown_statistic_or_parameter():
    with pytest.raises(RobustkitError, match="a statistic is named <analysis>.<statistic>, got 'magic'"):
        registry.per_run("magic", "nowhere", {"run_id": []})
    with pytest.raises(RobustkitError, match="analysis 'curves' has no statistic 'magic'; it has: overfit"):
        registry.per_run("curves.magic", "nowhere", {"run_id": []})


def test_unknown_parameter_is_refused(tiny_store, ids):
    with pytest.raises(RobustkitError, match=r"statistic curves.overfit has no parameter\(s\) \['colour'\]"):
        registry.per_run("curves.overfit", tiny_store, {"run_id": ids}, **{"colour": "red"})


@pytest.mark.parametrize(
    "statistic, params",
    [
        ("rsa.similarity", {"tokens": 50}),
        ("rsa.similarity", {"tokens": 50, "layer": "top"}),
        ("landscape.curvature", {"alphas": "-2:2:21"}),
        ("scores.score", {}),
        ("ablation.single-drop", {}),
    ],
)
def test_each_statistic_carries_the_claims_outcome(tiny_store, ids, statistic, params):
    """The outcome a claim leaves runs out by is the store's on the claim's split and checkpoint,
    in one ``outcome`` column, even where the analysis frame carries its own (similarity.run's
    once made it outcome_x / outcome_y, and no collapsed run was left out)."""
    from robustkit.analysis import scores

    houlsby = [i for i in ids if "houlsby" in i]
    frame = registry.per_run(statistic, tiny_store, {"run_id": houlsby}, **params)
    assert "outcome" in frame and not {"outcome_x", "outcome_y"} & set(frame.columns)
    expected = scores.outcomes(tiny_store, {"run_id": houlsby}, checkpoint="best", split="test", metric=None).set_index(
        "run_id"
    )["outcome"]
    assert (frame["outcome"].to_numpy() == expected.loc[frame["run_id"]].to_numpy()).all()
