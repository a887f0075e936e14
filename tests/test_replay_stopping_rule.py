"""tools/replay_stopping_rule.py: the stopping rule replayed on a run trained to its budget says
where it would stop, what that costs, and whether the loss rule alone stops it before it learned."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("replay_stopping_rule", ROOT / "tools" / "replay_stopping_rule.py")
replay_tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(replay_tool)


def _run(folder: Path, losses: list[float], scores: list[float], until_converged: bool = False) -> Path:
    folder.mkdir(parents=True)
    manifest = {
        "status": "complete",
        "main_metric": "accuracy",
        "spec": {"method": "houlsby", "until_converged": until_converged},
        "baselines": {"validation": {"n": 1000, "accuracy": 0.574}},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))
    rows = [
        {"step": 32 * (k + 1), "epoch": 0.0, "split": "validation", "metric": metric, "value": value}
        for k, (loss, score) in enumerate(zip(losses, scores))
        for metric, value in (("loss", loss), ("accuracy", score))
    ]
    pd.DataFrame(rows).to_parquet(folder / "history.parquet")
    return folder


def test_a_slow_starter_is_stopped_by_the_loss_rule_alone_and_not_by_the_rule(tmp_path):
    # flat at the majority class for four evaluations, then learning and settling
    losses = [0.69, 0.684, 0.683, 0.683, 0.60, 0.55, 0.54, 0.545, 0.546, 0.547]
    scores = [0.574, 0.574, 0.574, 0.574, 0.68, 0.71, 0.72, 0.72, 0.715, 0.718]
    found = replay_tool.replay(_run(tmp_path / "slow", losses, scores))
    assert found["loss_rule_stops_unlearned"] and found["learned_later"]
    assert found["stops"]  # it stops once it has learned and settled, before its 10 evaluations
    assert found["saved"] <= 0.5  # not at the 4th evaluation, where it had not learned
    assert found["best_lost"] < 0.01
    assert found["best_lost"] == max(scores) - max(scores[: round(10 * (1 - found["saved"]))])
    # where it stops, on the linear schedule over the budget's 320 steps (32 of warmup)
    at = 32 * round(10 * (1 - found["saved"]))
    assert found["stop_share"] == at / 320 < 1
    assert found["rate_at_stop"] == (320 - at) / (320 - 32) > 0


def test_a_run_the_rule_never_stops_ends_at_its_budget_with_its_rate_decayed(tmp_path):
    losses = [0.69 - 0.02 * k for k in range(8)]  # still falling at its end
    found = replay_tool.replay(_run(tmp_path / "falling", losses, [0.6 + 0.02 * k for k in range(8)]))
    assert not found["stops"] and found["stop_share"] == 1.0 and found["rate_at_stop"] == 0.0


def test_a_run_already_trained_until_converged_is_not_replayed(tmp_path):
    assert replay_tool.replay(_run(tmp_path / "on", [0.7] * 6, [0.574] * 6, until_converged=True)) is None
