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
             "a": "houlsby", "b": "full", "direction": "less", **changes}
    return Claim.from_table(table, "test")


def _runs(values: dict[str, np.ndarray], **columns) -> pd.DataFrame:
    rows = [{"run_id": f"{m}-{i}-{sorted(columns.items())}", "method": m, "seed": i, "value": float(v), "outcome": "ok", **columns}
            for m, vs in values.items() for i, v in enumerate(vs)]
    return pd.DataFrame(rows)


rng = np.random.default_rng(0)
NARROW, WIDE = 0.75 + 0.005 * rng.standard_normal(10), 0.75 + 0.08 * rng.standard_normal(10)
LOW, HIGH = 0.70 + 0.01 * rng.standard_normal(8), 0.80 + 0.01 * rng.standard_normal(8)


def _verdict(claim: Claim, frame: pd.DataFrame) -> str:
    return judge(claim, frame).iloc[-1]["verdict"]


def test_spread():
    claim = _claim()
    assert claim.test == "brown-forsythe"
    assert _verdict(claim, _runs({"houlsby": NARROW, "full": WIDE})) == "agrees"
    assert _verdict(claim, _runs({"houlsby": WIDE, "full": NARROW})) == "contradicts"
    assert _verdict(claim, _runs({"houlsby": WIDE, "full": WIDE[::-1] + 0.01})) == "inconclusive"
    row = judge(claim, _runs({"houlsby": NARROW[:1], "full": WIDE})).iloc[0]  # 1 vs 10: 1/11 at best
    assert row["verdict"] == "inconclusive" and "too few runs" in row["reason"] and row["n_a"] == 1
    agrees = judge(claim, _runs({"houlsby": NARROW, "full": WIDE})).iloc[0]
    assert agrees["effect"] == pytest.approx(NARROW.std(ddof=1) / WIDE.std(ddof=1)) and agrees["p_value"] < 0.05
    assert agrees["ci_low"] < agrees["effect"] < agrees["ci_high"]  # 10 per group: a bootstrap interval
    few = judge(claim, _runs({"houlsby": NARROW[:5], "full": WIDE[:5]})).iloc[0]
    assert np.isnan(few["ci_low"]) and "no interval below 10 runs" in few["reason"]  # none at this n


def test_location():
    claim = _claim(compare="location", direction="greater")
    assert _verdict(claim, _runs({"houlsby": HIGH, "full": LOW})) == "agrees"
    assert _verdict(claim, _runs({"houlsby": LOW, "full": HIGH})) == "contradicts"
    assert _verdict(claim, _runs({"houlsby": LOW, "full": LOW[::-1]})) == "inconclusive"
    row = judge(claim, _runs({"houlsby": HIGH, "full": LOW})).iloc[0]
    shifts = (HIGH[:, None] - LOW[None, :]).ravel()
    assert row["effect"] == pytest.approx(np.median(shifts)) and row["ci_low"] <= row["effect"] <= row["ci_high"]
    assert row["smallest_p"] == pytest.approx(1 / 12870)


def test_rate_counts_failed_runs():
    claim = _claim(compare="rate", statistic="scores.failed", direction="less")
    assert claim.failures == "data"
    many, few = np.array([1] * 9 + [0] * 3), np.array([0] * 11 + [1])
    assert _verdict(claim, _runs({"houlsby": few, "full": many})) == "agrees"
    assert _verdict(claim, _runs({"houlsby": many, "full": few})) == "contradicts"
    assert _verdict(claim, _runs({"houlsby": few[:3], "full": many[:3]})) == "inconclusive"
    # a rate is about failures: they are never left out
    frame = _runs({"houlsby": few, "full": many}).assign(outcome="collapsed")
    assert judge(claim, frame).iloc[0]["n_b"] == 12


def test_equivalence_and_threshold():
    near = _claim(compare="equivalence", direction=None, value=0.02)
    assert _verdict(near, _runs({"houlsby": HIGH - 0.005, "full": HIGH})) == "agrees"  # both sides inside
    assert _verdict(near, _runs({"houlsby": LOW, "full": HIGH})) == "contradicts"  # 10 points below
    assert _verdict(near, _runs({"houlsby": HIGH + 0.1, "full": HIGH})) == "contradicts"  # 10 points above
    assert _verdict(near, _runs({"houlsby": HIGH - 0.02, "full": HIGH})) == "inconclusive"  # on the margin
    threshold = _claim(compare="threshold", direction="less", value=0.02, b=None)
    assert _verdict(threshold, _runs({"houlsby": 0.01 + 0.001 * rng.standard_normal(5)})) == "agrees"
    assert _verdict(threshold, _runs({"houlsby": 0.05 + 0.001 * rng.standard_normal(5)})) == "contradicts"
    assert _verdict(threshold, _runs({"houlsby": np.array([0.0, 0.04, 0.01, 0.03, 0.02])})) == "inconclusive"
    few = judge(threshold, _runs({"houlsby": np.array([0.01, 0.0, 0.005, 0.001])})).iloc[0]  # 4 runs: 1/16 at best
    assert few["verdict"] == "inconclusive" and few["reason_class"] == "too few runs" and np.isnan(few["ci_low"])


def test_collapsed_runs_are_left_out():
    frame = _runs({"houlsby": NARROW, "full": WIDE})
    # two houlsby runs stuck at the majority class would make its spread the largest
    stuck = pd.DataFrame([{"run_id": f"stuck-{i}", "method": "houlsby", "seed": 20 + i, "value": 0.5, "outcome": "collapsed"}
                          for i in range(2)])
    rows = judge(_claim(), pd.concat([frame, stuck], ignore_index=True))
    assert rows.iloc[0]["verdict"] == "agrees" and rows.iloc[0]["n_a"] == 10 and rows.iloc[0]["n_failed"] == 2
    kept = judge(_claim(), pd.concat([frame, stuck], ignore_index=True), include_failed=True)
    assert kept.iloc[0]["n_a"] == 12 and kept.iloc[0]["verdict"] != "agrees"
    assert "2 failed runs left out" in summary_line(rows.assign(recipe="r"))
    # leaving them out changed the verdict: the reason says what it is with them
    assert "with the failed runs as data: " + kept.iloc[0]["verdict"] in rows.iloc[0]["reason"]
    # a claim about failing keeps them as data
    data = judge(_claim(failures="data"), pd.concat([frame, stuck], ignore_index=True)).iloc[0]
    assert data["n_a"] == 12 and data["verdict"] == kept.iloc[0]["verdict"]


def test_cells_holm_corrected_and_aggregated_by_the_stated_rule():
    claim = _claim(within=["tsp_step"])
    both = pd.concat([_runs({"houlsby": NARROW, "full": WIDE}, tsp_step=0), _runs({"houlsby": NARROW, "full": WIDE}, tsp_step=200)])
    rows = judge(claim, both)
    assert list(rows["cell"]) == ["tsp_step=0", "tsp_step=200", "all"] and rows.iloc[-1]["verdict"] == "agrees"
    assert "Holm over 2 cells" in rows.iloc[0]["reason"]
    # half of the cells agree and none contradicts: agrees
    mixed = pd.concat([_runs({"houlsby": NARROW, "full": WIDE}, tsp_step=0), _runs({"houlsby": WIDE, "full": WIDE}, tsp_step=200)])
    assert judge(claim, mixed).iloc[-1]["verdict"] == "agrees"
    # one cell each way: the cells disagree
    against = pd.concat([_runs({"houlsby": NARROW, "full": WIDE}, tsp_step=0), _runs({"houlsby": WIDE, "full": NARROW}, tsp_step=200)])
    last = judge(claim, against).iloc[-1]
    assert last["verdict"] == "inconclusive" and last["reason_class"] == "cells disagree" and "1/2 cells agrees" in last["reason"]
    # a contradicting cell below the floor counts as undecided ((IA)3's 0.002 RSA gap)
    location = _claim(compare="location", direction="greater", within=["layer"], floor=0.01)
    cells = pd.concat([_runs({"houlsby": HIGH, "full": LOW}, layer=1), _runs({"houlsby": HIGH, "full": LOW}, layer=2),
                       _runs({"houlsby": HIGH, "full": HIGH + 0.002 + 0.0001 * np.arange(8)}, layer=3)])
    rows = judge(location, cells)
    assert rows.iloc[2]["verdict"] == "inconclusive" and "floor" in rows.iloc[2]["reason"] and rows.iloc[-1]["verdict"] == "agrees"


def test_the_claimed_sign_is_checked():
    """Han fig 3: "vanishing" is a falling norm: full's slope below the adapters' is not enough."""
    vanishes = _claim(compare="location", direction="less", a="full", b="houlsby", sign="less")
    rising = _runs({"full": 2.45 + 0.1 * np.arange(5), "houlsby": 5.16 + 0.1 * np.arange(5)})
    row = judge(vanishes, rising).iloc[-1]
    assert row["verdict"] == "contradicts" and "full itself < 0" in row["reason"]
    falling = _runs({"full": -1.0 - 0.1 * np.arange(5), "houlsby": 0.1 * np.arange(5)})
    assert judge(vanishes, falling).iloc[-1]["verdict"] == "agrees"


def test_the_run_is_the_unit_and_pairs_are_not_tested():
    claim = _claim(compare="location", direction="greater")
    per_epoch = pd.concat([_runs({"houlsby": HIGH[:3] + 0.001 * e, "full": LOW[:3]}) for e in range(1, 20)])
    row = judge(claim, per_epoch).iloc[-1]  # 19 evaluations of each of 3 runs per group
    assert row["n_a"] == 3 and row["reason_class"] == "too few runs" and "averaged to one" in row["reason"]
    pairs = _runs({"houlsby": HIGH, "full": LOW}).assign(run_id_b="other")
    row = judge(claim, pairs).iloc[-1]
    assert row["verdict"] == "inconclusive" and row["reason_class"] == "untestable"


def test_runs_still_improving_make_a_final_claim_inconclusive():
    claim = _claim(compare="location", direction="greater", final=True)
    frame = _runs({"houlsby": HIGH, "full": LOW})
    assert judge(claim, frame, improving=pd.Series(False, index=frame["run_id"])).iloc[-1]["verdict"] == "agrees"
    late = pd.Series(frame["method"].eq("houlsby").to_numpy(), index=frame["run_id"])
    row = judge(claim, frame, improving=late).iloc[-1]
    assert row["verdict"] == "inconclusive" and row["reason_class"] == "not converged" and "8 of 8" in row["reason"]
    assert _claim().final and not _claim(compare="rate", statistic="scores.failed").final  # final scores, not rates


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
    ({"test": "levene"}, "spread is tested by brown-forsythe"),
    ({"compare": "equivalence", "value": 0.01}, "equivalence has no direction"),
    ({"sign": "down"}, "sign must be one of"),
    ({"failures": "drop"}, "failures must be one of"),
    ({"direction": "smaller"}, "direction must be"),
    ({"statistic": "magic"}, "named <analysis>.<statistic>"),
    ({"statistic": "scores.magic"}, "analysis 'scores' has no statistic 'magic'"),
    ({"b": None}, "give a and b"),
    ({"colour": "red"}, "unknown key"),
    ({"compare": "threshold"}, "needs a numeric value"),
    ({"paper_effect": 0.5}, "needs a paper_effect_source that quotes"),
    ({"paper_effect": 0.5, "paper_effect_source": "not reported: figure only"}, "needs a paper_effect_source that quotes"),
    ({"paper_effect_source": "table 2: 1.0 vs 2.0"}, "without a paper_effect must begin 'not reported'"),
    ({"paper_effect_source": ""}, "must be a non-empty text"),
    ({"paper_effect": -0.5, "paper_effect_source": "t 1"}, "spread claim must be a number in its unit .a positive SD ratio"),
    ({"paper_effect": "big", "paper_effect_source": "t 1"}, "must be a number in its unit"),
    ({"compare": "rate", "paper_effect": 1.5, "paper_effect_source": "t 1"}, "a rate in"),
    ({"paper_effect": {"task=rt": 0.5}, "paper_effect_source": "t 1"}, "the claim has none: give one value"),
    ({"within": ["task"], "paper_effect": {"tsk=rt": 0.5}, "paper_effect_source": "t 1"}, "must name the claim's cells .task="),
    ({"compare": "equivalence", "direction": None, "value": 0.01, "paper_effect": 1.0, "paper_effect_source": "t 1"},
     r"\[margin, difference\] in SD"),
    ({"compare": "equivalence", "direction": None, "value": 0.01, "paper_effect": [-1.0, 0.2], "paper_effect_source": "t 1"},
     "margin > 0"),
])
def test_bad_claims_are_refused(change, message):
    with pytest.raises(ClaimError, match=message):
        _claim(**change)


def test_the_papers_effect_per_cell_or_for_every_cell():
    """A claim's paper_effect (robustkit.decidability prints the power at it): one value for every
    cell, or one per named cell (None where the paper reports none); equivalence as a pair."""
    every = _claim(paper_effect=0.4, paper_effect_source="table 2: 1.0 +- 0.1 vs 2.0 +- 0.2")
    assert every.paper_effect_in("task=rt") == every.paper_effect_in("all") == 0.4
    cells = _claim(compare="location", within=["task", "train_size"], paper_effect_source="table 2: ...",
                   paper_effect={"task=cola, train_size=1000": 0.25})
    assert cells.paper_effect_in("task=cola, train_size=1000") == 0.25 and cells.paper_effect_in("task=rt, train_size=1000") is None
    pair = _claim(compare="equivalence", direction=None, value=0.01, paper_effect=[1.75, -0.35], paper_effect_source="t 1")
    assert pair.paper_effect_in("all") == (1.75, -0.35)
    assert _claim(paper_effect_source="not reported: box plots").paper_effect_in("all") is None


def test_hypothesis_text():
    assert _claim().hypothesis == "spread of scores.score: houlsby < full (brown-forsythe, one-sided)"


def test_groups_of_several_values_numbers_and_where():
    claim = _claim(compare="location", direction="greater", by="adapter_size",
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
    rows = judge(_claim(compare="location", direction="greater"), _runs({"houlsby": HIGH[:3], "full": LOW[:3]}))
    row = rows.iloc[0]
    assert row["verdict"] == "inconclusive" and row["reason_class"] == "too few runs" and row["smallest_p"] == pytest.approx(0.05)
    assert "3 vs 3 can give p >= 0.05 at best" in row["reason"]


def test_where_unset_keeps_the_runs_without_the_option():
    """beyond/intruders: rank-8 LoRA and full fine-tuning (no rank), never rank-64 LoRA."""
    frame = pd.concat([_runs({"lora": HIGH}, **{"lora.r": 8.0}), _runs({"lora": LOW}, **{"lora.r": 64.0}),
                       _runs({"full": LOW}, **{"lora.r": np.nan})])
    claim = _claim(compare="location", direction="greater", a="lora", b="full", where={"lora.r": [8, "unset"]})
    row = judge(claim, frame).iloc[0]
    assert row["verdict"] == "agrees" and row["n_a"] == 8 and row["n_b"] == 8
    # without "unset" the full runs (no rank) are not selected; without where the ranks are pooled
    assert judge(_claim(compare="location", direction="greater", a="lora", b="full", where={"lora.r": [8]}),
                 frame).iloc[0]["n_b"] == 0
    with pytest.raises(PoolingError, match="lora.r"):
        judge(_claim(compare="location", direction="greater", a="lora", b="full"), frame)


def test_cells_that_cannot_pass_holm_are_too_few_runs():
    """beyond/similarity at 4 vs 4 over 7 layers: every cell's best p, 1/70, is 0.1 after Holm.
    The verdict says so (too few runs) instead of "not significant"; 5 vs 5 can decide."""
    claim = _claim(compare="location", direction="greater", within=["layer"])
    separated = lambda n: pd.concat([_runs({"houlsby": HIGH[:n], "full": LOW[:n]}, layer=layer) for layer in range(7)])
    rows = judge(claim, separated(4))
    assert (rows.iloc[:7]["reason_class"] == "too few runs").all() and rows.iloc[-1]["reason_class"] == "too few runs"
    assert "4 vs 4 can give p >= 0.0143 at best; over 7 cells a cell needs p < 0.0125" in rows.iloc[0]["reason"]
    rows = judge(claim, separated(5))
    assert (rows.iloc[:7]["verdict"] == "agrees").all() and "Holm over 7 cells" in rows.iloc[0]["reason"]


def test_a_cell_that_can_never_pass_leaves_the_family():
    """Tarone's rule: a 2 vs 2 cell (best p 1/6) is left out before any p is seen, so the 8 vs 8
    cells are corrected over 2, not 3."""
    claim = _claim(compare="location", direction="greater", within=["task"])
    frame = pd.concat([_runs({"houlsby": HIGH, "full": LOW}, task="a"), _runs({"houlsby": HIGH, "full": LOW}, task="b"),
                       _runs({"houlsby": HIGH[:2], "full": LOW[:2]}, task="c")])
    rows = judge(claim, frame).set_index("cell")
    assert "Holm over 2 cells" in rows.loc["task=a", "reason"] and rows.loc["task=c", "reason_class"] == "too few runs"
