"""`settle` calibrated across effects (issue #56 item 5): from 5-run pilots at a true effect, an
offered n decides on fresh stores of the true model with at least 80% power (a lower bound),
and most inconclusive pilots are offered one. The full table, at 0, 0.5, 1 and 2 SD, is
tools/settle_calibration.py's (bench/README.md, "settle")."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from robustkit.verdicts import settle
from robustkit.verdicts.rules import tested_rows as selected_rows
from robustkit.verdicts.spec import AGREES, CONTRADICTS

_spec = importlib.util.spec_from_file_location(
    "settle_calibration", Path(__file__).resolve().parents[1] / "tools" / "settle_calibration.py"
)
calibration = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(calibration)


def test_the_smoothed_bootstrap_keeps_mean_and_spread_and_is_continuous():
    """Resampling 5 runs gave a world of 5 values, where P(a > b) moves in steps and a shrunk
    1 SD effect decided 16% of the time at 20 runs and at 200 alike; the smoothed draws are
    continuous with the runs' mean and variance."""
    claim = calibration.claim_of("location")
    pilot = calibration.store(1.0, 5, np.random.default_rng(3))
    boot = settle.Bootstrap(claim, pilot)
    drawn = np.concatenate(
        [boot.draw(200, np.random.default_rng(k))[0].query("method == 'lora'")["value"] for k in range(20)]
    )
    runs = pilot.query("method == 'lora'")["value"].to_numpy()
    assert len(np.unique(drawn)) == len(drawn)  # no run repeats: continuous
    assert drawn.mean() == pytest.approx(runs.mean(), abs=0.05)
    assert drawn.var() == pytest.approx(runs.var(ddof=1), rel=0.1)
    # rates are not smoothed: their values stay 0 and 1
    rate = settle.Bootstrap(calibration.claim_of("rate"), pilot.assign(value=(pilot["value"] > 0.5).astype(float)))
    assert set(rate.draw(50, np.random.default_rng(0))[0]["value"]) <= {0.0, 1.0}


@pytest.mark.parametrize("effect", [1.0, -1.0])
def test_the_planned_effect_lies_between_the_null_and_the_pilots_own(effect):
    """The effect drawn is the pilot's, moved toward no effect, never past it: the side offered is
    the one the pilot points to."""
    claim = calibration.claim_of("location")
    rng = np.random.default_rng(7)
    for _ in range(10):
        pilot = calibration.store(effect, 5, rng)
        observed = settle.observed_effects(claim, pilot)[0]
        moved, why = settle.conservative(claim, selected_rows(claim, pilot))
        if moved is None:
            assert "20% interval reaches the null" in why
            continue
        planned = settle.observed_effects(claim, moved)[0]
        assert 0 < planned / observed < 1, (observed, planned)


@pytest.mark.slow
def test_at_one_sd_most_pilots_are_offered_an_n_that_decides():
    """Both halves at a true 1 SD effect (where about 13 runs per group reach 80% power), on 8
    inconclusive 5-run pilots: more than half are offered an n (before: 0 of 12); each offer is
    for the verdict its pilot points to; and the offers for the true verdict decide on fresh
    stores with a one-sided 95% lower bound of at least 0.8.

    As first written (seed 56 fixed before the run) the bound was over every offer, and it failed:
    one of the 8 pilots pointed the wrong way past its 60% bound and was offered n to contradict,
    which a true claim never gives (about 3% of 1 SD pilots; a symmetric rule cannot tell). So
    wrong-way offers are checked to be rare here (at most 1 of 8), and the bound over every offer,
    which needs more pilots than a test can afford, is tools/settle_calibration.py's table."""
    rows = calibration.calibrate("location", 1.0, pilots=12, draws=30, seed=56, simulations=100)
    rows = rows[rows["pilot"] == "inconclusive"].head(8)
    assert len(rows) == 8, rows
    offered = rows[rows["n"].notna()]
    assert len(offered) > 4, rows
    pointed = np.where(offered["observed"] > 0, AGREES, CONTRADICTS)
    assert (offered["side"].to_numpy() == pointed).all(), offered
    assert (offered["side"] == CONTRADICTS).sum() <= 1, offered
    true_side = offered[offered["side"] == AGREES]
    assert calibration.summary(true_side.assign(pilot="inconclusive"), 1.0)["lower bound"] >= 0.8, true_side
