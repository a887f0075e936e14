"""Stability statistics the field reports (issue #16 item 4): ASO through deepsig, failed-run rates
with exact intervals, tuning curves through opda against their closed forms; in `robustkit stats`
and in a box plot's caption."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats as scipy_stats

from robustkit.analysis import boxes, dominance, stability, tuning
from robustkit.figures.stability import box_seeds
from robustkit.figures.style import figure_texts


def _runs(
    values: dict[str, list[float]], metric: str = "accuracy", outcomes: dict[str, list[str]] | None = None
) -> pd.DataFrame:
    rows = []
    for method, scores in values.items():
        for seed, value in enumerate(scores):
            outcome = (outcomes or {}).get(method, ["ok"] * len(scores))[seed]
            rows.append(
                {
                    "run_id": f"{method}-{seed}",
                    "task": "rt",
                    "method": method,
                    "seed": seed,
                    "metric": metric,
                    "split": "validation",
                    "value": value,
                    "baseline": 0.5,
                    "outcome": outcome,
                }
            )
    return pd.DataFrame(rows)


def test_aso_reads_a_clear_shift_as_dominance_and_orients_losses():
    rng = np.random.default_rng(0)
    low = rng.normal(0.70, 0.01, 8)
    frame = _runs({"houlsby": list(low + 0.1), "full": list(low)})
    table = dominance.aso_table(frame, within=["task"], num_bootstrap_iterations=200).set_index(["group_a", "group_b"])
    # every quantile of houlsby's scores lies above full's: no violation, epsilon_min = 0 (about 1 the other way)
    assert table.loc[("houlsby", "full"), "eps_min"] == pytest.approx(0.0, abs=1e-9)
    assert table.loc[("full", "houlsby"), "eps_min"] > 0.95  # 1 up to the bootstrap's conservative bound
    losses = dominance.aso_table(
        _runs({"houlsby": list(low), "full": list(low + 0.1)}, metric="loss"),
        within=["task"],
        num_bootstrap_iterations=200,
    ).set_index(["group_a", "group_b"])
    assert losses.loc[("houlsby", "full"), "eps_min"] == pytest.approx(0.0, abs=1e-9)  # lower loss dominates
    assert "negated" in losses.loc[("houlsby", "full"), "note"]
    text = dominance.aso_sentence(table.reset_index())
    assert "ε_min(houlsby over full) = 0.00" in text and "95%" in text
    one = dominance.aso_table(_runs({"houlsby": [0.7], "full": [0.6, 0.7]}), within=["task"])
    assert one["eps_min"].isna().all() and "fewer than 2 runs" in one["note"].iloc[0]


def test_failure_rates_have_the_exact_binomial_interval():
    frame = _runs({"houlsby": [0.7, 0.7, 0.7], "full": [0.7, 0.5, 0.7]}, outcomes={"full": ["ok", "collapsed", "ok"]})
    table = dominance.failure_rates(frame, ["task", "method"]).set_index("method")
    # closed forms: 0 of 3 -> [0, 1 - 0.025^(1/3)]; 1 of 3 -> Clopper-Pearson beta quantiles
    assert table.loc["houlsby", "ci_high"] == pytest.approx(1 - 0.025 ** (1 / 3), rel=1e-9)
    assert table.loc["houlsby", ["n_failed", "failed_rate", "ci_low"]].tolist() == [0, 0.0, 0.0]
    assert table.loc["full", "ci_low"] == pytest.approx(scipy_stats.beta.ppf(0.025, 1, 3), rel=1e-9)
    assert table.loc["full", "ci_high"] == pytest.approx(scipy_stats.beta.ppf(0.975, 2, 2), rel=1e-9)


def test_tuning_curves_equal_their_closed_forms():
    values = [0.61, 0.74, 0.70, 0.58, 0.77, 0.72, 0.69, 0.75, 0.66, 0.73]
    curve = tuning.tuning_curve(values, "accuracy", confidence=0.8).set_index("k")
    ys, n = np.sort(values), len(values)
    for k in curve.index:
        # expected maximum of k draws from the empirical distribution (Dodge et al. 2019)
        expected = sum(ys[i - 1] * ((i / n) ** k - ((i - 1) / n) ** k) for i in range(1, n + 1))
        assert curve.loc[k, "mean"] == pytest.approx(expected, rel=1e-12)
        # the median of the maximum: the empirical quantile at 0.5^(1/k)
        assert curve.loc[k, "median"] == ys[int(np.ceil(0.5 ** (1 / k) * n)) - 1]
    assert (curve["median_low"] <= curve["median"]).all() and (curve["median"] <= curve["median_high"]).all()
    assert (curve["mean_low"] <= curve["mean"] + 1e-12).all() and (curve["mean"] <= curve["mean_high"] + 1e-12).all()
    assert curve["mean"].is_monotonic_increasing
    losses = tuning.tuning_curve([1 - v for v in values], "loss").set_index("k")  # minimised: the mirror image
    np.testing.assert_allclose(losses["mean"], 1 - curve["mean"], rtol=1e-12)


def test_tuning_curves_per_method_keep_failed_runs_as_draws():
    frame = _runs(
        {"houlsby": [0.70, 0.72, 0.71, 0.5], "full": [0.6, 0.8, 0.75, 0.7]},
        outcomes={"houlsby": ["ok", "ok", "ok", "collapsed"]},
    )
    curves = tuning.curves(frame)
    assert set(curves["method"]) == {"houlsby", "full"}
    kept = curves[curves["method"] == "houlsby"]
    assert kept["n_runs"].iloc[0] == 4 and kept["n_failed"].iloc[0] == 1 and kept["k"].max() == 4
    dropped = tuning.curves(frame, exclude_failed=True)
    assert dropped[dropped["method"] == "houlsby"]["k"].max() == 3


def test_aso_in_the_caption_of_a_two_method_box_plot():
    rng = np.random.default_rng(2)
    frame = _runs({"houlsby": list(rng.normal(0.75, 0.01, 5)), "full": list(rng.normal(0.70, 0.05, 5))})
    texts = " ".join(" ".join(figure_texts(box_seeds(**boxes.box_seeds(frame, aso=True)))).split())  # unwrapped
    assert "ASO (deepsig" in texts and "ε_min(full over houlsby)" in texts
    assert "ASO" not in " ".join(figure_texts(box_seeds(**boxes.box_seeds(frame))))
    summary, tests = stability.tables(frame, within=["task"])
    assert "ASO" not in stability.caption(summary, tests)


def test_stats_cli_prints_and_writes_aso_and_failure_rates(tiny_store, tmp_path, capsys):
    from robustkit.cli import main

    out = tmp_path / "stats.csv"
    assert (
        main(["stats", str(tiny_store), "--metric", "accuracy", "--within", "task", "--include-failed", "-o", str(out)])
        == 0
    )
    printed = capsys.readouterr().out
    assert "ASO (almost stochastic order" in printed and "exact binomial interval" in printed
    aso, failures = (pd.read_csv(tmp_path / f) for f in ("stats-aso.csv", "stats-failures.csv"))
    assert len(aso) == 2 and aso["note"].str.contains("fewer than 2 runs").all()  # one seed per method
    assert set(failures["method"]) == {"houlsby", "full"} and (failures["n_runs"] == 1).all()
    assert main(["stats", str(tiny_store), "--within", "task", "--no-aso", "--include-failed"]) == 0
    assert "ASO" not in capsys.readouterr().out
