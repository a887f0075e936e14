"""Claims as checkable hypotheses (robustkit.verdicts.spec, rules, tally): each verdict rule on synthetic runs gives
agrees, contradicts and inconclusive where it should; collapsed runs are left out; cells are
aggregated; bad claim tables are refused with the key named."""

import numpy as np
import pandas as pd
import pytest
from observation_frames import runs_frame

from robustkit.analysis.pooling import PoolingError
from robustkit.verdicts.cells import cells
from robustkit.verdicts.rules import judge
from robustkit.verdicts.spec import Claim, ClaimError
from robustkit.verdicts.tally import summary_line


def _claim(**changes) -> Claim:
    table = {
        "id": "c",
        "says": "adapters vary less (§2)",
        "statistic": "scores.score",
        "compare": "spread",
        "a": "houlsby",
        "b": "full",
        "direction": "less",
        **changes,
    }
    return Claim.from_table(table, "test")


_runs = runs_frame  # the shared observation frame


rng = np.random.default_rng(0)
NARROW, WIDE = 0.75 + 0.005 * rng.standard_normal(10), 0.75 + 0.08 * rng.standard_normal(10)
LOW, HIGH = 0.70 + 0.01 * rng.standard_normal(8), 0.80 + 0.01 * rng.standard_normal(8)


def _verdict(claim: Claim, frame: pd.DataFrame) -> str:
    return judge(claim, frame).iloc[-1]["verdict"]


def test_spread_is_tested_on_seed_pairs():
    """Issue #37: Brown-Forsythe deviations are exchangeable only approximately; seed-pair
    differences exactly (Moses), so the spread test ranks pairs: 10 runs are 5 pairs."""
    claim = _claim()
    assert claim.test == "seed-pair-rank-sum"
    assert _verdict(claim, _runs({"houlsby": NARROW, "full": WIDE})) == "agrees"
    assert _verdict(claim, _runs({"houlsby": WIDE, "full": NARROW})) == "contradicts"
    assert _verdict(claim, _runs({"houlsby": WIDE, "full": WIDE[::-1] + 0.01})) == "inconclusive"
    row = judge(claim, _runs({"houlsby": NARROW[:5], "full": WIDE[:5]})).iloc[0]  # 2 vs 2 pairs: 1/6 at best
    assert (
        row["verdict"] == "inconclusive"
        and row["reason_class"] == "too few runs"
        and "ranks seed pairs" in row["reason"]
    )
    agrees = judge(claim, _runs({"houlsby": NARROW, "full": WIDE})).iloc[0]
    assert agrees["smallest_p"] == pytest.approx(1 / 252) and agrees["p_value"] < 0.05
    assert agrees["ci_low"] <= agrees["effect"] <= agrees["ci_high"] < 1  # the interval inverts the test: below 1


def test_location():
    claim = _claim(compare="location", direction="greater")
    assert _verdict(claim, _runs({"houlsby": HIGH, "full": LOW})) == "agrees"
    assert _verdict(claim, _runs({"houlsby": LOW, "full": HIGH})) == "contradicts"
    assert _verdict(claim, _runs({"houlsby": LOW, "full": LOW[::-1]})) == "inconclusive"
    row = judge(claim, _runs({"houlsby": HIGH, "full": LOW})).iloc[0]
    shifts = (HIGH[:, None] - LOW[None, :]).ravel()
    assert row["effect"] == pytest.approx(np.median(shifts)) and row["ci_low"] <= row["effect"] <= row["ci_high"]
    # Brunner-Munzel decides from 2^-min(n_a, n_b): a wide group all on one side of a tight one
    assert row["smallest_p"] == pytest.approx(max(1 / 12870, 2.0**-8))


def test_rate_counts_failed_runs_and_its_interval_inverts_fishers_test():
    claim = _claim(compare="rate", statistic="scores.failed", direction="less")
    assert claim.failures == "data"
    many, few = np.array([1] * 9 + [0] * 3), np.array([0] * 11 + [1])
    assert _verdict(claim, _runs({"houlsby": few, "full": many})) == "agrees"
    assert _verdict(claim, _runs({"houlsby": many, "full": few})) == "contradicts"
    assert _verdict(claim, _runs({"houlsby": few[:3], "full": many[:3]})) == "inconclusive"
    frame = _runs({"houlsby": few, "full": many}).assign(outcome="collapsed")
    assert judge(claim, frame).iloc[0]["n_b"] == 12
    # 0/8 vs 3/8: Fisher p = 0.10, and the interval of the odds ratio holds 1 (Newcombe's did not)
    row = judge(claim, _runs({"houlsby": np.zeros(8), "full": np.r_[np.ones(3), np.zeros(5)]})).iloc[0]
    assert row["verdict"] == "inconclusive" and row["ci_low"] <= 1 <= row["ci_high"]


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


def test_a_trend_compares_the_shift_at_both_ends():
    """He et al. fig 3, "fine-tuning will gradually catch up": the adapters' advantage at the
    largest training size is below the one at the smallest (issue #37: a trend, not equivalence)."""
    claim = _claim(compare="trend", along="train_size", direction="less", within=["train_size"], quantifier="each")
    start = lambda shift: _runs({"houlsby": LOW + shift, "full": LOW}, train_size=300)
    end = lambda shift: _runs({"houlsby": HIGH + shift, "full": HIGH[::-1]}, train_size=1000)
    rows = judge(claim, pd.concat([start(0.2), end(0.0)]))
    assert len(rows) == 1 and rows.iloc[0]["verdict"] == "agrees" and rows.iloc[0]["cell"] == "train_size=300 vs 1000"
    assert rows.iloc[0]["ci_high"] < 0 and rows.iloc[0]["effect"] == pytest.approx(-0.2, abs=0.02)
    assert judge(claim, pd.concat([start(0.0), end(0.2)])).iloc[0]["verdict"] == "contradicts"
    assert judge(claim, pd.concat([start(0.05), end(0.05)])).iloc[0]["verdict"] == "inconclusive"
    with pytest.raises(ClaimError, match="names the within column it runs along"):
        _claim(compare="trend", direction="less", within=["train_size"], quantifier="each")


def test_margins_compare_on_the_datas_grid():
    """0.60 + 0.02 > 0.62 in floats: a run exactly on the margin is on it, not past it."""
    near = _claim(compare="equivalence", direction=None, value=0.02)
    grid = np.array([0.600, 0.610, 0.620, 0.630, 0.640, 0.650])
    row = judge(near, _runs({"houlsby": grid, "full": grid + 0.02})).iloc[0]
    assert row["effect"] == pytest.approx(-0.02) and row["verdict"] == "inconclusive"


def test_failed_runs_ranked_worst_keep_the_headline_valid():
    """Issue #37: leaving collapsed runs out truncates the scores. a ~ N(.60, .05) truly below
    b ~ N(.63, .005): a's low runs fail, the kept ones look better than b. With the failures
    ranked worst the verdict differs, so the claim depends on its failed runs."""
    claim = _claim(compare="location", direction="greater")
    a = np.array([0.69, 0.68, 0.67, 0.66, 0.65, 0.655, 0.52, 0.51, 0.50, 0.53])
    b = 0.63 + 0.001 * np.arange(8)
    frame = _runs({"houlsby": a, "full": b})
    frame.loc[frame["value"] < 0.6, "outcome"] = "collapsed"
    row = judge(claim, frame).iloc[-1]
    assert row["verdict"] == "inconclusive" and row["reason_class"] == "depends on failed runs"
    assert "with the 4 failed runs left out: agrees; with them ranked worst: inconclusive" in row["reason"]
    # where the statistic is undefined on a failed run, the reason says so instead
    attack = _claim(compare="location", direction="less", statistic="attack.success")
    row = judge(attack, frame).iloc[-1]
    assert "4 failed runs left out: a run stuck at the majority class cannot be attacked" in row["reason"]
    assert "placed" in row["reason"]  # without a value to rank: at either extreme
    # a claim about failing keeps them as data
    data = judge(_claim(compare="location", direction="greater", failures="data"), frame).iloc[0]
    assert data["n_a"] == 10


def test_undefined_failed_runs_at_either_extreme():
    """Issue #45: a statistic undefined on a failed run (attack success) dropped its failed runs.
    With the weakest seeds of one group failing, the kept ones looked better than the group. Now
    the verdict must hold with the failed runs placed at either extreme, else it depends on them."""
    claim = _claim(compare="location", direction="less", statistic="attack.success")
    a = np.array([0.30, 0.31, 0.32, 0.33, 0.34, 0.35, 0.90, 0.91, 0.92, 0.93])  # its weak seeds fail
    b = 0.50 + 0.001 * np.arange(8)
    frame = _runs({"houlsby": a, "full": b})
    frame.loc[frame["value"] > 0.8, ["outcome", "value"]] = ["collapsed", np.nan]
    row = judge(claim, frame).iloc[-1]
    assert row["verdict"] == "inconclusive" and row["reason_class"] == "depends on failed runs", row["reason"]
    assert "with them placed highest: inconclusive" in row["reason"]


def test_each_cell_must_agree():
    """Issue #37: with 7 cells, true in 4 and false by 1 SD in 3, "half the cells" said agrees
    77% of the time. A claim on *each* cell agrees only when every cell does."""
    claim = _claim(compare="location", direction="greater", within=["layer"], quantifier="each")
    good = [_runs({"houlsby": HIGH, "full": LOW}, layer=layer) for layer in range(4)]
    bad = [_runs({"houlsby": LOW[::-1] + 0.001 * layer, "full": LOW}, layer=layer) for layer in range(4, 7)]
    rows = judge(claim, pd.concat(good + bad))
    assert (rows.iloc[:4]["verdict"] == "agrees").all() and rows.iloc[-1]["verdict"] == "inconclusive"
    assert "all 7 must agree" in rows.iloc[-1]["reason"] and rows.iloc[-1]["cells"] == 7
    assert rows.iloc[-1]["n_a"] == 8 * 7 and rows.iloc[-1]["n_b"] == 8 * 7  # distinct run ids (per layer here)
    # one cell contradicting contradicts the claim
    against = good + [_runs({"houlsby": LOW, "full": HIGH}, layer=9)]
    assert judge(claim, pd.concat(against)).iloc[-1]["verdict"] == "contradicts"
    assert judge(claim, pd.concat(good)).iloc[-1]["verdict"] == "agrees"


def test_any_cell_is_holm_corrected_and_overall_averages_runs():
    claim = _claim(compare="location", direction="greater", within=["task"], quantifier="any")
    some = pd.concat(
        [_runs({"houlsby": HIGH, "full": LOW}, task="a"), _runs({"houlsby": LOW, "full": LOW[::-1]}, task="b")]
    )
    rows = judge(claim, some)
    assert rows.iloc[-1]["verdict"] == "agrees" and "Holm over 2 of 2 cells" in rows.iloc[0]["reason"]
    # overall: one test on each run's mean over its cells (layers of the same runs)
    overall = _claim(compare="location", direction="greater", within=["layer"], quantifier="overall")
    layers = pd.concat([_runs({"houlsby": HIGH, "full": LOW}, layer=layer) for layer in range(3)])
    layers["run_id"] = layers["method"] + layers["seed"].astype(str)
    rows = judge(overall, layers)
    assert len(rows) == 1 and rows.iloc[0]["n_a"] == 8 and rows.iloc[0]["verdict"] == "agrees"


def test_cells_a_method_cannot_change_are_left_out_by_the_stated_rule():
    claim = _claim(
        compare="location",
        direction="greater",
        within=["layer"],
        quantifier="each",
        exclude={"layer": [0]},
        exclude_why="the embedding output, frozen",
    )
    frame = pd.concat(
        [
            _runs({"houlsby": np.ones(8), "full": 1 - 2e-4 * np.arange(1, 9)}, layer=0),
            _runs({"houlsby": LOW, "full": LOW[::-1]}, layer=1),
        ]
    )
    rows = judge(claim, frame)
    assert (
        list(rows["cell"]) == ["layer=1"]
        and "layer=0 left out (the embedding output, frozen)" in rows.iloc[-1]["reason"]
    )
    with pytest.raises(ClaimError, match="exclude needs exclude_why"):
        _claim(within=["layer"], quantifier="each", exclude={"layer": [0]})


def test_cell_intervals_are_at_the_level_their_test_was_judged():
    """he2021/fig2 layer 3 showed a 90% interval excluding 0 beside a Holm p = 0.063. Each end
    is now the one-sided bound at its side's level, so it excludes the null exactly where the
    cell's verdict does."""
    claim = _claim(compare="location", direction="greater", within=["layer"], quantifier="any")
    draws = np.random.default_rng(3)
    for _ in range(20):
        frame = pd.concat(
            [
                _runs({"houlsby": draws.normal(0.3, 1, 6), "full": draws.normal(0, 1, 6)}, layer=layer)
                for layer in range(4)
            ]
        )
        rows = judge(claim, frame).iloc[:-1]
        for _, row in rows.iterrows():
            assert (row["ci_low"] > 0) == (row["verdict"] == "agrees"), row["reason"]


def test_the_cell_guard_counts_the_runs_each_cell_tests():
    """he2021/table2: the 1,000-example cell has 4 of 5 adapter runs still improving; pooled with
    the 300-example cell it was 4 of 9 and passed. Per cell, that cell is not converged."""
    claim = _claim(compare="location", direction="greater", within=["train_size"], quantifier="each")
    small = _runs({"houlsby": HIGH[:5], "full": LOW[:5]}, train_size=300)
    large = _runs({"houlsby": HIGH[:5], "full": LOW[:5]}, train_size=1000)
    frame = pd.concat([small, large])
    late = pd.Series(False, index=frame["run_id"])
    late[large.loc[large["method"] == "houlsby", "run_id"].iloc[:4]] = True
    rows = judge(claim, frame, improving=late).set_index("cell")
    assert rows.loc["train_size=1000", "reason_class"] == "not converged"
    assert "houlsby: 4 of 5 tested runs still improving" in rows.loc["train_size=1000", "reason"]
    assert rows.loc["train_size=300", "verdict"] == "agrees"
    assert rows.loc["all", "verdict"] == "inconclusive" and rows.loc["all", "reason_class"] == "not converged"
    # failed runs left out are not counted by the guard, and its reason keeps the failures' disclosure
    one = _runs({"houlsby": HIGH, "full": LOW})
    one.loc[one.index[:3], "outcome"] = "collapsed"
    late = pd.Series(one["method"].eq("houlsby").to_numpy(), index=one["run_id"])
    row = judge(_claim(compare="location", direction="greater"), one, improving=late).iloc[-1]
    assert "5 of 5 tested runs" in row["reason"] and "failed runs" in row["reason"]
    assert _claim().final and not _claim(statistic="gradnorm.slope", compare="location").final


def test_spread_pairs_stay_within_one_pooled_rate():
    """Issue #45: a spread claim pooled over learning rates paired runs of different rates (by
    seed, then by run id). Pairs are now formed within each rate, its odd last run left out:
    runs alike within a rate and far apart across rates make narrow pairs."""
    claim = _claim(pooled=["lr"])
    close = lambda centre, n: centre + 0.0001 * np.arange(n)  # noqa: E731 - alike within a rate
    a = pd.concat(
        [
            _runs({"houlsby": close(0.5, 5)}, lr=1e-4),
            _runs({"houlsby": close(0.9, 5)}, lr=1e-3),  # same seeds 0-4 as the other rate
        ]
    )
    b = pd.concat([_runs({"full": WIDE[:5]}, lr=1e-4), _runs({"full": WIDE[5:]}, lr=1e-3)])
    row = judge(claim, pd.concat([a, b], ignore_index=True)).iloc[-1]
    assert row["verdict"] == "agrees", row["reason"]  # 4 pairs of 0.0001 against 4 wide ones
    assert "4 vs 4 seed pairs" in row["reason"]


def test_collapsed_runs_are_left_out_of_a_spread_and_kept_as_data_for_its_check():
    frame = _runs({"houlsby": NARROW, "full": WIDE})
    stuck = pd.DataFrame(
        [
            {"run_id": f"stuck-{i}", "method": "houlsby", "seed": 20 + i, "value": 0.5, "outcome": "collapsed"}
            for i in range(2)
        ]
    )
    rows = judge(_claim(), pd.concat([frame, stuck], ignore_index=True))
    assert rows.iloc[0]["n_a"] == 10 and rows.iloc[0]["n_failed"] == 2
    assert "2 failed runs" in rows.iloc[0]["reason"] and "as data" in rows.iloc[0]["reason"]
    kept = judge(_claim(), pd.concat([frame, stuck], ignore_index=True), include_failed=True)
    assert kept.iloc[0]["n_a"] == 12
    assert "2 failed runs left out" in summary_line(rows.assign(recipe="r"))
    one = judge(_claim(), pd.concat([frame, stuck.iloc[:1]], ignore_index=True))
    assert "; 1 failed run left out;" in summary_line(one.assign(recipe="r"))  # not "1 failed runs"


def test_the_run_is_the_unit_and_pairs_are_not_tested():
    claim = _claim(compare="location", direction="greater")
    per_epoch = pd.concat([_runs({"houlsby": HIGH[:3] + 0.001 * e, "full": LOW[:3]}) for e in range(1, 20)])
    row = judge(claim, per_epoch).iloc[-1]  # 19 evaluations of each of 3 runs per group
    assert row["n_a"] == 3 and row["reason_class"] == "too few runs" and "averaged to one" in row["reason"]
    pairs = _runs({"houlsby": HIGH, "full": LOW}).assign(run_id_b="other")
    row = judge(claim, pairs).iloc[-1]
    assert row["verdict"] == "inconclusive" and row["reason_class"] == "untestable"
    assert (row["n_a"], row["n_b"]) == (len(HIGH), len(LOW))  # both groups' pairs are counted


def test_no_observations_make_no_cells():
    """An empty frame (every run filtered out) has no cells, as with runs, seeds and ids absent."""
    empty = runs_frame({"houlsby": [0.5], "full": [0.5]}).iloc[:0]
    assert cells(_claim(), empty, pd.Series(False, index=empty.index)) == []


def test_the_claimed_sign_is_checked_and_the_union_holds_alpha():
    """Han fig 3: "vanishing" is a falling norm: full's slope below the adapters' is not enough.
    Contradicting is a union of two tests (the comparison, the sign): each at alpha / 2."""
    vanishes = _claim(compare="location", direction="less", a="full", b="houlsby", sign="less")
    rising = _runs({"full": 2.45 + 0.1 * np.arange(6), "houlsby": 5.16 + 0.1 * np.arange(6)})
    row = judge(vanishes, rising).iloc[-1]
    assert row["verdict"] == "contradicts" and "full itself rises, against the claimed direction" in row["reason"]
    assert "the comparison itself goes the claimed way" in row["reason"] and row["effect"] < 0
    falling = _runs({"full": -1.0 - 0.1 * np.arange(5), "houlsby": 0.1 * np.arange(5)})
    assert judge(vanishes, falling).iloc[-1]["verdict"] == "agrees"
    # 5 runs all rising: sign p = 1/32 = 0.031, doubled 0.0625: not enough to contradict
    mild = _runs({"full": 0.1 * np.arange(1, 6), "houlsby": 5 + 0.1 * np.arange(5)})
    assert judge(vanishes, mild).iloc[-1]["verdict"] == "inconclusive"


def test_runs_still_improving_make_a_final_claim_inconclusive():
    claim = _claim(compare="location", direction="greater", final=True)
    frame = _runs({"houlsby": HIGH, "full": LOW})
    assert judge(claim, frame, improving=pd.Series(False, index=frame["run_id"])).iloc[-1]["verdict"] == "agrees"
    late = pd.Series(frame["method"].eq("houlsby").to_numpy(), index=frame["run_id"])
    row = judge(claim, frame, improving=late).iloc[-1]
    assert row["verdict"] == "inconclusive" and row["reason_class"] == "not converged" and "8 of 8" in row["reason"]


def test_no_silent_pooling_in_a_claim():
    frame = pd.concat(
        [
            _runs({"houlsby": NARROW, "full": WIDE}, epochs=3, tsp_step=0),
            _runs({"houlsby": NARROW, "full": WIDE}, epochs=10, tsp_step=200),
        ]
    )
    with pytest.raises(PoolingError, match="epochs"):
        judge(_claim(), frame)
    with pytest.raises(PoolingError, match="epochs"):
        judge(_claim(pooled=["tsp_step"]), frame)
    assert judge(_claim(pooled=["tsp_step", "epochs"]), frame).iloc[0]["n_a"] == 20


@pytest.mark.parametrize(
    "change, message",
    [
        ({"compare": "variance"}, "compare must be one of"),
        ({"test": "levene"}, "spread is tested by seed-pair-rank-sum"),
        ({"within": ["task"]}, "its quantifier must say"),
        ({"quantifier": "each"}, "a quantifier needs cells"),
        ({"within": ["task"], "quantifier": "most"}, "its quantifier must say"),
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
        (
            {"paper_effect": 0.5, "paper_effect_source": "not reported: figure only"},
            "needs a paper_effect_source that quotes",
        ),
        ({"paper_effect_source": "table 2: 1.0 vs 2.0"}, "without a paper_effect must begin 'not reported'"),
        ({"paper_effect_source": ""}, "must be a non-empty text"),
        (
            {"paper_effect": -0.5, "paper_effect_source": "t 1"},
            "spread claim must be a number in its unit .a positive SD ratio",
        ),
        ({"paper_effect": "big", "paper_effect_source": "t 1"}, "must be a number in its unit"),
        ({"compare": "rate", "paper_effect": 1.5, "paper_effect_source": "t 1"}, "a rate in"),
        ({"paper_effect": {"task=rt": 0.5}, "paper_effect_source": "t 1"}, "the claim has none: give one value"),
        (
            {"within": ["task"], "quantifier": "each", "paper_effect": {"tsk=rt": 0.5}, "paper_effect_source": "t 1"},
            "must name the claim's cells .task=",
        ),
        (
            {
                "compare": "equivalence",
                "direction": None,
                "value": 0.01,
                "paper_effect": 1.0,
                "paper_effect_source": "t 1",
            },
            r"\[margin, difference\] in SD",
        ),
        (
            {
                "compare": "equivalence",
                "direction": None,
                "value": 0.01,
                "paper_effect": [-1.0, 0.2],
                "paper_effect_source": "t 1",
            },
            "margin > 0",
        ),
    ],
)
def test_bad_claims_are_refused(change, message):
    with pytest.raises(ClaimError, match=message):
        _claim(**change)


def test_the_papers_effect_per_cell_or_for_every_cell():
    """A claim's paper_effect (robustkit.verdicts.decidability prints the power at it): one value for every
    cell, or one per named cell (None where the paper reports none); equivalence as a pair."""
    every = _claim(paper_effect=0.4, paper_effect_source="table 2: 1.0 +- 0.1 vs 2.0 +- 0.2")
    assert every.paper_effect_in("task=rt") == every.paper_effect_in("all") == 0.4
    cells = _claim(
        compare="location",
        within=["task", "train_size"],
        quantifier="each",
        paper_effect_source="table 2: ...",
        paper_effect={"task=cola, train_size=1000": 0.25},
    )
    assert (
        cells.paper_effect_in("task=cola, train_size=1000") == 0.25
        and cells.paper_effect_in("task=rt, train_size=1000") is None
    )
    pair = _claim(
        compare="equivalence", direction=None, value=0.01, paper_effect=[1.75, -0.35], paper_effect_source="t 1"
    )
    assert pair.paper_effect_in("all") == (1.75, -0.35)
    assert _claim(paper_effect_source="not reported: box plots").paper_effect_in("all") is None


def test_hypothesis_text():
    assert _claim().hypothesis == "spread of scores.score: houlsby < full (seed-pair-rank-sum, one-sided)"


def test_groups_of_several_values_numbers_and_where():
    claim = _claim(compare="location", direction="greater", by="adapter_size", a=[64, 256], b=8, where={"task": ["rt"]})
    frame = pd.concat(
        [
            _runs({"x": HIGH}, adapter_size=64.0, task="rt"),
            _runs({"x": HIGH}, adapter_size=256.0, task="rt"),
            _runs({"x": LOW}, adapter_size=8.0, task="rt"),
            _runs({"x": HIGH * 0}, adapter_size=8.0, task="cola"),
        ]
    )
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
    assert (
        row["verdict"] == "inconclusive"
        and row["reason_class"] == "too few runs"
        and row["smallest_p"] == pytest.approx(1 / 8)
    )
    assert "3 vs 3 can give p >= 0.125 at best" in row["reason"]


def test_where_unset_keeps_the_runs_without_the_option():
    """beyond/intruders: rank-8 LoRA and full fine-tuning (no rank), never rank-64 LoRA."""
    frame = pd.concat(
        [
            _runs({"lora": HIGH}, **{"lora.r": 8.0}),
            _runs({"lora": LOW}, **{"lora.r": 64.0}),
            _runs({"full": LOW}, **{"lora.r": np.nan}),
        ]
    )
    claim = _claim(compare="location", direction="greater", a="lora", b="full", where={"lora.r": [8, "unset"]})
    row = judge(claim, frame).iloc[0]
    assert row["verdict"] == "agrees" and row["n_a"] == 8 and row["n_b"] == 8
    # without "unset" the full runs (no rank) are not selected; without where the ranks are pooled
    assert (
        judge(_claim(compare="location", direction="greater", a="lora", b="full", where={"lora.r": [8]}), frame).iloc[
            0
        ]["n_b"]
        == 0
    )
    with pytest.raises(PoolingError, match="lora.r"):
        judge(_claim(compare="location", direction="greater", a="lora", b="full"), frame)


def test_cells_that_cannot_pass_holm_are_too_few_runs():
    """Over 7 layers on any cell, Holm needs a cell's p below 0.05 / 7. At 7 vs 7 a cell's best
    p under unequal spread, 2^-7, cannot get there: the verdict says so (too few runs) instead of
    "not significant"; 8 vs 8 (2^-8) can decide."""
    claim = _claim(compare="location", direction="greater", within=["layer"], quantifier="any")
    separated = lambda n: pd.concat([_runs({"houlsby": HIGH[:n], "full": LOW[:n]}, layer=layer) for layer in range(7)])
    rows = judge(claim, separated(7))
    assert (rows.iloc[:7]["reason_class"] == "too few runs").all() and rows.iloc[-1]["reason_class"] == "too few runs"
    assert "which this one cannot reach" in rows.iloc[0]["reason"]
    rows = judge(claim, separated(8))
    assert (rows.iloc[:7]["verdict"] == "agrees").all() and "Holm over 7 of 7 cells" in rows.iloc[0]["reason"]


def test_a_cell_that_can_never_pass_leaves_the_family():
    """Tarone's rule: a 2 vs 2 cell (best p 1/6) is left out before any p is seen, so the 8 vs 8
    cells are corrected over 2, not 3."""
    claim = _claim(compare="location", direction="greater", within=["task"], quantifier="any")
    frame = pd.concat(
        [
            _runs({"houlsby": HIGH, "full": LOW}, task="a"),
            _runs({"houlsby": HIGH, "full": LOW}, task="b"),
            _runs({"houlsby": HIGH[:2], "full": LOW[:2]}, task="c"),
        ]
    )
    rows = judge(claim, frame).set_index("cell")
    assert (
        "Holm over 2 of 3 cells" in rows.loc["task=a", "reason"]
        and rows.loc["task=c", "reason_class"] == "too few runs"
    )


def test_a_floor_is_the_tested_difference():
    """A floor is a minimum-effect test: runs that separate perfectly by 0.002 agree without a
    floor; with a floor of 0.01 the median difference is tested against 0.01, so they contradict
    (significantly below the floor), and a claim on each cell with it does not agree."""
    base = 0.75 + 0.0001 * np.arange(5)
    tiny = _runs({"houlsby": base + 0.002, "full": base})
    claim = _claim(compare="location", direction="greater")
    assert _verdict(claim, tiny) == "agrees"
    row = judge(_claim(compare="location", direction="greater", floor=0.01), tiny).iloc[-1]
    assert row["verdict"] == "contradicts" and "below the claim's floor 0.01" in row["reason"]
    assert (
        _verdict(
            _claim(compare="location", direction="greater", floor=0.01), _runs({"houlsby": base + 0.05, "full": base})
        )
        == "agrees"
    )
    big = _runs({"houlsby": base + 0.05, "full": base}, layer=2)
    cells = pd.concat([tiny.assign(layer=1), big])
    each = _claim(compare="location", direction="greater", within=["layer"], quantifier="each")
    assert _verdict(each, cells) == "agrees"
    assert (
        _verdict(
            _claim(compare="location", direction="greater", within=["layer"], quantifier="each", floor=0.01), cells
        )
        == "inconclusive"
    )


def test_intervals_and_verdicts_agree_under_ties():
    """Issue #45: under ties a verdict's p (0.049) sat beside an interval ending exactly at 0.
    The interval now inverts the verdict's own test, its ends among the candidate shifts that
    test does not reject, so it excludes 0 exactly where the cell agrees or contradicts."""
    claim = _claim(compare="location", direction="greater")
    draws = np.random.default_rng(8)
    for _ in range(60):
        a = np.round(draws.normal(0.52, 0.04, 6) * 50) / 50  # a 1/50 grid: many ties
        b = np.round(draws.normal(0.50, 0.02, 6) * 50) / 50
        row = judge(claim, _runs({"houlsby": a, "full": b})).iloc[-1]
        assert (row["ci_low"] > 0) == (row["verdict"] == "agrees"), row["reason"]
        assert (row["ci_high"] < 0) == (row["verdict"] == "contradicts"), row["reason"]


def test_an_artefact_makes_a_claim_untestable_on_the_small_model_only():
    """A claim whose statistic the small model fixes by construction (its ``artefact``) is judged
    on no run at the scales a small model stands in for the paper's, and at the paper scale as
    any claim; the verdict row says why."""
    from robustkit.verdicts.recipes import load_recipe
    from robustkit.verdicts.tally import _not_judged_at

    claim = _claim(artefact="width 384 caps the ratio at 48")
    assert claim.artefact_scales == ("demo", "cpu")
    assert not claim.judged_at("demo") and not claim.judged_at("cpu") and claim.judged_at("paper")
    assert _claim().judged_at("demo") and _claim().artefact_scales == ()
    row = _not_judged_at(load_recipe("han2021/fig2"), claim, "demo", None)
    assert row["reason_class"] == "untestable" and "untestable on this model" in row["reason"]
    assert "width 384" in row["reason"] and row["verdict"] == "inconclusive"
    with pytest.raises(ClaimError, match="artefact must say why"):
        _claim(artefact=" ")
    with pytest.raises(ClaimError, match="artefact_scales needs an artefact"):
        _claim(artefact_scales=["demo"])


def test_the_papers_n_needs_its_source():
    """paper_n: the runs per group behind the claim in the paper's own study, with its source;
    "not stated: ..." where the paper does not say (issue #56)."""
    claim = _claim(paper_n=5, paper_n_source="He et al. 2021 table 2: mean ± SD over 5 seeds")
    assert claim.paper_n == 5 and claim.paper_n_source.startswith("He")
    assert _claim(paper_n_source="not stated: figure 2 shows box plots").paper_n is None
    for change, message in (
        ({"paper_n": 5}, "needs a paper_n_source"),
        ({"paper_n": 0, "paper_n_source": "t"}, "whole number"),
        ({"paper_n": 5, "paper_n_source": "not stated: x"}, "exactly when"),
        ({"paper_n_source": "table 2"}, "exactly when"),
    ):
        with pytest.raises(ClaimError, match=message):
            _claim(**change)
