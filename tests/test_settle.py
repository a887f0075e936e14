"""What would settle an inconclusive claim (robustkit.verdicts.settle, issue #37 item 8): the runs per
group at which the observed effect is decided with 80% power (a bootstrap of the observed runs,
judged by the claim's own path), and the training budget at which still-improving runs would
pass the convergence guard; `robustkit claims` prints it."""

import numpy as np
import pandas as pd
import pytest
from observation_frames import location_claim, runs_frame

from robustkit.analysis.convergence import improving
from robustkit.verdicts import budget, settle
from robustkit.verdicts.rules import NOT_CONVERGED, judge
from robustkit.verdicts.rules import tested_rows as selected_rows
from robustkit.verdicts.spec import AGREES, Claim

_claim = location_claim  # the shared test claim


_runs = runs_frame  # the shared observation frame


# a clear shift of about 1.3 SD that 4 runs against 4 do not decide (one-sided p = 0.1)
LOW, HIGH = [0.690, 0.695, 0.700, 0.705, 0.730], [0.722, 0.739, 0.712, 0.745, 0.716]


def _agree_rate(claim: Claim, observations: pd.DataFrame, n: int, draws: int, seed: int) -> float:
    """How often n runs per group agree, drawn at the effect settle sizes for (its 20% interval's
    end nearest no effect)."""
    shrunk = settle.conservative(claim, selected_rows(claim, observations))[0]
    boot, rng = settle.Bootstrap(claim, shrunk), np.random.default_rng(seed)
    return float(
        np.mean(
            [judge(claim, boot.draw(n, rng)[0], describe=False).iloc[-1]["verdict"] == AGREES for _ in range(draws)]
        )
    )


def test_more_runs_settle_a_clear_effect_that_five_runs_do_not():
    claim, observations = _claim(), _runs({"houlsby": LOW, "full": HIGH})
    assert judge(claim, observations).iloc[-1]["verdict"] == "inconclusive"
    found = settle.runs_to_decide(claim, observations, simulations=150)
    assert found["n"] is not None and found["n"] > 5 and found["side"] == AGREES and found["observed_n"] == 5, found
    assert found["power"] >= 0.8 and found["tried"][5] < 0.8
    # checked apart from the search, on other draws: the n it names decides in at least 80% of
    # stores (its 95% bound reached 0.8), up to Monte-Carlo noise
    assert _agree_rate(claim, observations, found["n"], 150, seed=12345) >= 0.75
    # and it is the smallest such n, up to the 10% bracket and Monte-Carlo noise: half as many do not
    assert _agree_rate(claim, observations, max(5, found["n"] // 2), 80, seed=54321) < 0.8
    assert settle.runs_text(found).startswith(
        f"about {found['n']} runs per group (most likely verdict: agrees; at least 80% power"
    )


def test_over_cells_each_cell_draws_its_own_runs():
    """A claim on each of 2 cells: every cell gets n runs per group; the rule needs both."""
    claim = _claim(within=["task"], quantifier="each")
    observations = pd.concat(
        [
            _runs({"houlsby": LOW, "full": HIGH}, task="rte"),
            _runs({"houlsby": np.array(LOW) - 0.01, "full": HIGH}, task="sst2"),
        ]
    )
    boot = settle.Bootstrap(claim, observations)
    frame, _ = boot.draw(7, np.random.default_rng(0))
    assert frame.groupby(["task", "method"])["run_id"].nunique().eq(7).all() and len(boot.strata) == 4
    found = settle.runs_to_decide(claim, observations, simulations=60)
    assert found["n"] is not None and found["side"] == AGREES and found["power"] >= 0.8, found
    # the rule needs both cells: on the same simulated stores the claim agrees no more often than
    # its rte cell alone (comparing two searches' n instead failed on their Monte-Carlo noise:
    # 21 vs 26 where both decide about 93% at 21)
    boot = settle.Bootstrap(claim, settle.conservative(claim, selected_rows(claim, observations))[0])
    rng, both, first = np.random.default_rng(5), [], []
    for _ in range(30):
        frame = boot.draw(found["n"], rng)[0]
        both.append(judge(claim, frame, describe=False).iloc[-1]["verdict"] == AGREES)
        first.append(judge(_claim(), frame[frame["task"] == "rte"], describe=False).iloc[-1]["verdict"] == AGREES)
    assert sum(both) <= sum(first) and sum(both) > 0, (both, first)


def test_spread_draws_pairs_of_distinct_runs():
    claim = _claim(compare="spread")
    boot = settle.Bootstrap(claim, _runs({"houlsby": LOW, "full": HIGH}))
    frame, _ = boot.draw(10, np.random.default_rng(0))
    for _, group in frame.groupby("method"):
        values = group.sort_values("seed")["value"].to_numpy()
        assert len(values) == 10 and (values[0::2] != values[1::2]).all()


def test_no_effect_no_runs():
    claim = _claim()
    found = settle.runs_to_decide(claim, _runs({"houlsby": LOW, "full": LOW[::-1]}))
    assert found["n"] is None and "observed effect is 0" in found["reason"]
    failed = _runs({"houlsby": LOW, "full": HIGH}).assign(outcome="collapsed")
    assert "every observed run failed" in settle.runs_to_decide(claim, failed)["reason"]
    paired = settle.runs_to_decide(_claim(), _runs({"houlsby": LOW, "full": HIGH}), max_runs=4)
    assert paired["n"] is None and paired["reason"].startswith("more than 4 runs per group")


def _history(curves: dict[str, np.ndarray], every: int = 50) -> pd.DataFrame:
    return pd.concat(
        [
            pd.DataFrame(
                {
                    "run_id": run_id,
                    "step": every * np.arange(1, len(loss) + 1),
                    "epoch": every * np.arange(1, len(loss) + 1) / 500,
                    "split": "validation",
                    "metric": "loss",
                    "value": loss,
                }
            )
            for run_id, loss in curves.items()
        ],
        ignore_index=True,
    )


STEPS = 50.0 * np.arange(1, 2001)
DECAYING = 0.5 + 10.0 * STEPS**-0.7  # a power law still falling at 20 evaluations (passes the rule at 115)


def test_a_still_improving_run_would_pass_the_guard_when_trained_that_long():
    assert improving(DECAYING[:20])
    found = budget.budget_to_converge(None, ["late"], _history({"late": DECAYING[:20]}))
    multiple = found["multiple"]
    assert multiple is not None and multiple > 1
    evaluations = int(round(multiple * 20))
    assert not improving(DECAYING[:evaluations])  # the run truncated at that budget passes the rule
    assert improving(DECAYING[: evaluations - 2])  # and not much earlier (the fit is close to the curve)
    assert found["steps"] == pytest.approx(multiple * 1000) and found["epochs"] == pytest.approx(multiple * 2)


def test_a_group_passes_when_none_still_improves():
    flat = np.full(20, 0.5)
    curves = {"a": DECAYING[:20], "b": 0.5 + 20.0 * STEPS[:20] ** -0.7, "c": flat}
    found = budget.budget_to_converge(None, list(curves), _history(curves))
    runs = found["runs"].set_index("run_id")
    assert runs.loc["c", "multiple"] == 1.0 and runs.loc["b", "multiple"] > runs.loc["a", "multiple"] > 1
    assert found["multiple"] == runs.loc["b", "multiple"]  # every run must pass: the largest (issue #55)
    # a curve that keeps falling past the longest budget looked at gets no estimate, and says why
    multiple, why = budget.fitted_budget(STEPS[:20], DECAYING[:20], max_multiple=3)
    assert multiple is None and "still improves by the rule at 3x" in why


def test_would_settle_says_train_longer_where_the_runs_still_improve():
    claim = _claim(final=True)
    observations = _runs({"houlsby": LOW, "full": HIGH})
    ids = list(observations["run_id"])
    late = pd.Series([run.startswith("full") for run in ids], index=ids)
    verdict = judge(claim, observations, improving=late).iloc[-1]
    assert verdict["reason_class"] == NOT_CONVERGED
    history = _history({run: DECAYING[:20] if late[run] else np.full(20, 0.5) for run in ids})
    text = settle.would_settle(claim, verdict, observations, late, None, history)
    assert text.startswith("train about ") and "5 of 5 full runs still improve" in text and "epochs" in text
    agreed = {**verdict.to_dict(), "verdict": "agrees"}
    assert settle.would_settle(claim, agreed, observations, late, None, history) == ""


def test_claims_prints_what_would_settle_each_inconclusive_claim(tmp_path, capsys, monkeypatch):
    import robustkit.analysis.convergence
    import robustkit.verdicts.tally
    from robustkit.cli import main
    from robustkit.verdicts.recipes import load_recipe
    from robustkit.verdicts.rules import VERDICT_COLUMNS

    recipe = load_recipe("han2021/fig2")
    claim = recipe.claims[0]
    observations = _runs(
        {"houlsby": 0.75 + 0.002 * np.arange(6), "full": 0.75 + 0.03 * np.array([0, 1, -1, 2, -2, 0.5])}
    )
    table = judge(claim, observations).assign(recipe=recipe.name)[VERDICT_COLUMNS]
    assert table.iloc[-1]["verdict"] == "inconclusive"
    monkeypatch.setattr(robustkit.verdicts.tally, "verdicts", lambda *args, **kwargs: table)
    monkeypatch.setattr(robustkit.verdicts.tally, "observations", lambda *args, **kwargs: observations)
    monkeypatch.setattr(
        robustkit.analysis.convergence, "still_improving", lambda store, run_ids: pd.Series(False, index=list(run_ids))
    )
    monkeypatch.setenv("COLUMNS", "400")
    argv = ["claims", recipe.name, "--scale", "paper", "--store", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "would_settle" in out and "runs per group (most likely verdict: agrees; at least 80% power" in out, out
    assert main([*argv, "--no-settle"]) == 0
    assert "would_settle" not in capsys.readouterr().out


def test_claims_plan_with_a_store_gives_the_runs_the_observed_effect_needs(tmp_path, capsys, monkeypatch):
    from robustkit.cli import main

    seen = {}

    def observed(store, recipes, scales, defaults, device, **options):
        seen.update(store=store, scales=scales)
        return pd.DataFrame(
            [{"recipe": "han2021/fig2", "scale": "paper", "claim": "spread", "observed": "about 17 runs per group"}]
        )

    monkeypatch.setattr(settle, "plan_observed", observed)
    monkeypatch.setenv("COLUMNS", "400")
    main(["claims", "--plan", "han2021/fig2", "--store", str(tmp_path)])
    out = capsys.readouterr().out
    assert "observed" in out and "about 17 runs per group" in out and seen["store"] == str(tmp_path)
    main(["claims", "--plan", "han2021/fig2"])
    assert "about 17" not in capsys.readouterr().out


@pytest.mark.slow
def test_the_runs_it_recommends_keep_their_promise_on_fresh_stores():
    """Issue #45: at the recommended n the real chance of deciding averaged 0.70 (true effect
    1 SD, 5-run pilots), as n was sized at the point estimate with a point estimate of power.
    Now n is sized at the effect's 20% interval end nearest no effect (issue #56), by a 95% bound
    on the simulated rate: on fresh stores of the true model the recommendations keep their 80%.
    (2 SD here, where most pilots agree already and the rest get an n; 0.5, 1 and 2 SD:
    tests/test_settle_calibration.py and tools/settle_calibration.py.)"""
    claim = _claim()
    # pilots and fresh stores from their own streams: which pilots are drawn does not depend on
    # the n offered before (at 2 SD most pilots agree already; pilots are drawn until 4 are offered)
    pilots, stores = np.random.default_rng(2024), np.random.default_rng(2025)
    rates = []
    for _ in range(60):
        if len(rates) == 4:
            break
        pilot = _runs(
            {"houlsby": 0.70 + 0.01 * pilots.standard_normal(5), "full": 0.72 + 0.01 * pilots.standard_normal(5)}
        )
        if judge(claim, pilot, describe=False).iloc[-1]["verdict"] != "inconclusive":
            continue
        found = settle.runs_to_decide(claim, pilot, simulations=100)
        if found["n"] is None:
            continue
        assert found["side"] == AGREES, found  # the true effect's side
        n = found["n"]
        fresh = [
            judge(
                claim,
                _runs(
                    {
                        "houlsby": 0.70 + 0.01 * stores.standard_normal(n),
                        "full": 0.72 + 0.01 * stores.standard_normal(n),
                    }
                ),
                describe=False,
            ).iloc[-1]["verdict"]
            == AGREES
            for _ in range(100)
        ]
        rates.append(float(np.mean(fresh)))
    print(f"fresh-store decision rates at the recommended n: {rates}")
    assert len(rates) >= 3, rates
    assert np.mean(rates) >= 0.8 and min(rates) >= 0.7, rates
