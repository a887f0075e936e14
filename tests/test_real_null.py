"""The verdict path on a null built from real runs (robustkit.verdicts.real_null, issue #45 item 6):
one group's runs relabelled into two groups; any decision is false."""

import numpy as np
import pandas as pd
from observation_frames import location_claim, runs_frame

from robustkit.verdicts import real_null
from robustkit.verdicts.rules import judge

_claim = location_claim  # the shared test claim


# two clearly different groups: the real claim agrees, the relabelled null must not
LOW = [0.690, 0.695, 0.700, 0.705, 0.730, 0.698, 0.702, 0.711]
HIGH = [0.822, 0.839, 0.812, 0.845, 0.816, 0.829, 0.833, 0.820]


def test_relabelled_copies_one_group_as_both():
    claim, observations = _claim(), runs_frame({"houlsby": LOW, "full": HIGH})
    frame = real_null.relabelled(claim, observations, "b")
    assert sorted(frame["method"].unique()) == ["full", "houlsby"]
    a, b = (frame.loc[frame["method"] == m, "value"].sort_values().to_numpy() for m in ("houlsby", "full"))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, np.sort(HIGH))
    assert frame["run_id"].is_unique


def test_a_clear_effect_on_the_runs_gives_no_decision_on_their_relabelled_null():
    claim, observations = _claim(), runs_frame({"houlsby": LOW, "full": HIGH})
    assert judge(claim, observations).iloc[-1]["verdict"] == "agrees"
    found = real_null.null_rates(claim, observations, draws=120)
    assert found["draws"] == 120 and found["n"] == 8 and found["source"][:2] in ("a=", "b=")
    assert found["false_agrees"] <= 0.09 and found["false_contradicts"] <= 0.09, found


def test_what_is_false_depends_on_the_kind():
    assert real_null.counted(_claim()) == (True, True)
    assert real_null.counted(_claim(compare="equivalence", value=0.01, direction=None)) == (False, True)
    assert not real_null.drawable(_claim(compare="threshold", a=None, b=None, value=0.5, direction="greater"))


def test_still_improving_flags_travel_with_their_runs(monkeypatch):
    claim, observations = _claim(final=True), runs_frame({"houlsby": LOW, "full": HIGH})
    ids = observations["run_id"].unique()
    late = pd.Series(True, index=ids)
    seen = []
    original = real_null.judge

    def judged(claim, frame, improving=None, **kwargs):
        seen.append(improving)
        return original(claim, frame, improving=improving, **kwargs)

    monkeypatch.setattr(real_null, "judge", judged)
    # every run still improves: no relabelled store is decided (each cell is not converged)
    found = real_null.null_rates(claim, observations, late, draws=20)
    assert found["false_agrees"] == 0 and found["false_contradicts"] == 0
    assert len(seen) == 40 and all(flags is not None and flags.all() and len(flags) == 16 for flags in seen)
