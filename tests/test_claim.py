"""Claims as checkable hypotheses (robustkit.claim): each verdict rule on synthetic runs gives
agrees, contradicts and inconclusive where it should; collapsed runs are left out; cells are
aggregated; bad claim tables are refused with the key named."""

import numpy as np
import pandas as pd
import pytest

from robustkit.analysis.pooling import PoolingError
from robustkit.claim import Claim, ClaimError, judge, summary_line


def _claim(**changes) -> Claim:
    table = {"id": "c", "says": "adapters vary less (§2)", "statistic": "scores.score", "compare": "spread",
             "a": "houlsby", "b": "full", "direction": "less", "test": "levene", **changes}
    return Claim.from_table(table, "test")


def _runs(values: dict[str, np.ndarray], **columns) -> pd.DataFrame:
    rows = [{"method": m, "seed": i, "value": float(v), "outcome": "ok", **columns} for m, vs in values.items() for i, v in enumerate(vs)]
    return pd.DataFrame(rows)


rng = np.random.default_rng(0)
NARROW, WIDE = 0.75 + 0.005 * rng.standard_normal(10), 0.75 + 0.08 * rng.standard_normal(10)
LOW, HIGH = 0.70 + 0.01 * rng.standard_normal(8), 0.80 + 0.01 * rng.standard_normal(8)


def _verdict(claim: Claim, frame: pd.DataFrame) -> str:
    return judge(claim, frame).iloc[-1]["verdict"]


@pytest.mark.parametrize("test", ["levene", "brown-forsythe"])
def test_spread(test):
    claim = _claim(test=test)
    assert _verdict(claim, _runs({"houlsby": NARROW, "full": WIDE})) == "agrees"
    assert _verdict(claim, _runs({"houlsby": WIDE, "full": NARROW})) == "contradicts"
    assert _verdict(claim, _runs({"houlsby": WIDE, "full": WIDE[::-1] + 0.01})) == "inconclusive"
    row = judge(claim, _runs({"houlsby": NARROW[:2], "full": WIDE})).iloc[0]
    assert row["verdict"] == "inconclusive" and "too few runs" in row["reason"] and row["n_a"] == 2
    agrees = judge(claim, _runs({"houlsby": NARROW, "full": WIDE})).iloc[0]
    assert agrees["effect"] == pytest.approx(NARROW.std(ddof=1) / WIDE.std(ddof=1)) and agrees["p_value"] < 0.05
    assert agrees["ci_low"] < agrees["effect"] < agrees["ci_high"]


@pytest.mark.parametrize("test", ["mann-whitney", "bootstrap-mean"])
def test_location(test):
    claim = _claim(compare="location", test=test, direction="greater")
    assert _verdict(claim, _runs({"houlsby": HIGH, "full": LOW})) == "agrees"
    assert _verdict(claim, _runs({"houlsby": LOW, "full": HIGH})) == "contradicts"
    assert _verdict(claim, _runs({"houlsby": LOW, "full": LOW[::-1]})) == "inconclusive"
    row = judge(claim, _runs({"houlsby": HIGH, "full": LOW})).iloc[0]
    assert row["effect"] == pytest.approx(HIGH.mean() - LOW.mean())


def test_rate_counts_failed_runs():
    claim = _claim(compare="rate", test="fisher", statistic="scores.failed", direction="less")
    many, few = np.array([1] * 9 + [0] * 3), np.array([0] * 11 + [1])
    assert _verdict(claim, _runs({"houlsby": few, "full": many})) == "agrees"
    assert _verdict(claim, _runs({"houlsby": many, "full": few})) == "contradicts"
    assert _verdict(claim, _runs({"houlsby": few[:3], "full": many[:3]})) == "inconclusive"
    # a rate is about failures: they are never left out
    frame = _runs({"houlsby": few, "full": many}).assign(outcome="collapsed")
    assert judge(claim, frame).iloc[0]["n_b"] == 12


def test_margin_and_threshold():
    margin = _claim(compare="margin", test="bootstrap-mean", direction="greater", value=0.02)
    assert _verdict(margin, _runs({"houlsby": HIGH - 0.005, "full": HIGH})) == "agrees"
    assert _verdict(margin, _runs({"houlsby": LOW, "full": HIGH})) == "contradicts"
    assert _verdict(margin, _runs({"houlsby": HIGH - 0.02, "full": HIGH})) == "inconclusive"
    threshold = _claim(compare="threshold", test="bootstrap-mean", direction="less", value=0.02, b=None)
    assert _verdict(threshold, _runs({"houlsby": 0.01 + 0.001 * rng.standard_normal(5)})) == "agrees"
    assert _verdict(threshold, _runs({"houlsby": 0.05 + 0.001 * rng.standard_normal(5)})) == "contradicts"
    assert _verdict(threshold, _runs({"houlsby": np.array([0.0, 0.04, 0.01, 0.03])})) == "inconclusive"
    assert _verdict(threshold, _runs({"houlsby": np.array([0.01])})) == "inconclusive"  # one run: no interval


def test_collapsed_runs_are_left_out():
    frame = _runs({"houlsby": NARROW, "full": WIDE})
    # two houlsby runs stuck at the majority class would make its spread the largest
    stuck = pd.DataFrame([{"method": "houlsby", "seed": 20 + i, "value": 0.5, "outcome": "collapsed"} for i in range(2)])
    rows = judge(_claim(), pd.concat([frame, stuck], ignore_index=True))
    assert rows.iloc[0]["verdict"] == "agrees" and rows.iloc[0]["n_a"] == 10 and rows.iloc[0]["n_failed"] == 2
    kept = judge(_claim(), pd.concat([frame, stuck], ignore_index=True), include_failed=True)
    assert kept.iloc[0]["n_a"] == 12 and kept.iloc[0]["verdict"] != "agrees"
    assert "2 collapsed or diverged left out" in summary_line(rows.assign(recipe="r"))


def test_cells_must_all_agree():
    claim = _claim(within=["tsp_step"])
    both = pd.concat([_runs({"houlsby": NARROW, "full": WIDE}, tsp_step=0), _runs({"houlsby": NARROW, "full": WIDE}, tsp_step=200)])
    rows = judge(claim, both)
    assert list(rows["cell"]) == ["tsp_step=0", "tsp_step=200", "all"] and rows.iloc[-1]["verdict"] == "agrees"
    mixed = pd.concat([_runs({"houlsby": NARROW, "full": WIDE}, tsp_step=0), _runs({"houlsby": WIDE, "full": WIDE}, tsp_step=200)])
    assert judge(claim, mixed).iloc[-1]["verdict"] == "inconclusive"
    against = pd.concat([_runs({"houlsby": NARROW, "full": WIDE}, tsp_step=0), _runs({"houlsby": WIDE, "full": NARROW}, tsp_step=200)])
    last = judge(claim, against).iloc[-1]
    assert last["verdict"] == "contradicts" and "1/2 cells agrees" in last["reason"]


def test_no_silent_pooling_in_a_claim():
    frame = pd.concat([_runs({"houlsby": NARROW, "full": WIDE}, epochs=3, tsp_step=0),
                       _runs({"houlsby": NARROW, "full": WIDE}, epochs=10, tsp_step=200)])
    with pytest.raises(PoolingError, match="epochs"):
        judge(_claim(), frame)
    with pytest.raises(PoolingError, match="epochs"):
        judge(_claim(pooled=["tsp_step"]), frame)
    assert judge(_claim(pooled=["tsp_step", "epochs"]), frame).iloc[0]["n_a"] == 20


@pytest.mark.parametrize("change, message", [
    ({"compare": "variance"}, "compare must be one of"),
    ({"test": "t-test"}, "spread takes test"),
    ({"direction": "smaller"}, "direction must be"),
    ({"statistic": "magic"}, "named <analysis>.<statistic>"),
    ({"statistic": "scores.magic"}, "analysis 'scores' has no statistic 'magic'"),
    ({"b": None}, "give a and b"),
    ({"colour": "red"}, "unknown key"),
    ({"compare": "threshold", "test": "bootstrap-mean"}, "needs a numeric value"),
])
def test_bad_claims_are_refused(change, message):
    with pytest.raises(ClaimError, match=message):
        _claim(**change)


def test_hypothesis_text():
    assert _claim().hypothesis == "spread of scores.score: houlsby < full (levene, one-sided)"


def test_groups_of_several_values_numbers_and_where():
    claim = _claim(compare="location", test="mann-whitney", direction="greater", by="adapter_size",
                   a=[64, 256], b=8, where={"task": ["rt"]})
    frame = pd.concat([_runs({"x": HIGH}, adapter_size=64.0, task="rt"), _runs({"x": HIGH}, adapter_size=256.0, task="rt"),
                       _runs({"x": LOW}, adapter_size=8.0, task="rt"), _runs({"x": HIGH * 0}, adapter_size=8.0, task="cola")])
    row = judge(claim.__class__(**{**claim.__dict__, "pooled": ("task",)}), frame).iloc[0]
    assert row["verdict"] == "agrees" and row["n_a"] == 16 and row["n_b"] == 8 and row["a"] == "64/256"
    # a = 0.0 is a group like any other (mixout off)
    assert _claim(by="mixout", a=0.0, b=0.9).a == (0.0,)


def test_only_the_compared_groups_must_be_alike():
    # a third group trained differently does not block a comparison it is not part of
    frame = pd.concat([_runs({"houlsby": NARROW, "full": WIDE}, epochs=3), _runs({"topk": WIDE}, epochs=10)])
    assert _verdict(_claim(), frame) == "agrees"


def test_too_few_runs_for_the_exact_test_say_so():
    rows = judge(_claim(compare="location", test="mann-whitney", direction="greater"), _runs({"houlsby": HIGH[:3], "full": LOW[:3]}))
    row = rows.iloc[0]
    assert row["verdict"] == "inconclusive" and row["p_value"] == pytest.approx(0.05)
    assert "smallest possible p is 0.05: cannot reach 0.05" in row["reason"]
