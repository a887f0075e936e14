"""Long stages announce themselves (issue #57 item 6): a stage that runs past the heartbeat says
which stage it is and for how long, every few seconds, into a redirected log; a fast one says
nothing, `-q` silences them, and nested stages speak once (the innermost). Not a timing test:
the heartbeat is shortened and each stage sleeps several of them."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest

from robustkit import progress

BEAT = 0.05


@pytest.fixture
def fast_beat(monkeypatch):
    monkeypatch.setattr(progress, "HEARTBEAT_SECONDS", BEAT)
    monkeypatch.delenv(progress.ENV, raising=False)


def test_a_long_stage_says_it_is_still_running(fast_beat, capsys):
    with progress.heartbeat("stats: bootstrap intervals"):
        time.sleep(BEAT * 6)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 2, lines
    assert all("stats: bootstrap intervals: still running" in line for line in lines)


def test_a_fast_stage_says_nothing_and_quiet_says_nothing(fast_beat, capsys, monkeypatch):
    with progress.heartbeat("fast"):
        pass
    monkeypatch.setenv(progress.ENV, "1")  # robustkit -q
    with progress.heartbeat("quiet"):
        time.sleep(BEAT * 4)
    assert capsys.readouterr().err == ""


def test_nested_stages_speak_once(fast_beat, capsys):
    with progress.heartbeat("plot box-seeds"):
        with progress.heartbeat("landscape 1/2 run-a"):
            time.sleep(BEAT * 5)
    err = capsys.readouterr().err
    assert "landscape 1/2 run-a: still running" in err and "plot box-seeds" not in err


def test_each_run_announces_a_long_run(fast_beat, capsys, tmp_path):
    """What `analyze landscape` prints per run into a log: computing, still running, done."""
    from robustkit.analysis.each_run import each_run
    from robustkit.store.manifest import write_manifest

    rows = []
    for name in ("run-a", "run-b"):
        run = tmp_path / "runs" / name
        run.mkdir(parents=True)
        checkpoints = {"last": {"step": 4, "files": {"model.safetensors": "a" * 64}}}
        write_manifest(run, {"run_id": name, "kind": "finetune", "spec": {"task": "rt"}, "checkpoints": checkpoints})
        rows.append({"run_id": name, "path": str(run)})

    def slow_landscape(row: pd.Series) -> pd.DataFrame:
        time.sleep(BEAT * 5)
        return pd.DataFrame({"alpha": [0.0, 1.0], "loss": [0.7, 0.3]})

    frame = each_run(pd.DataFrame(rows), "landscape", {"alphas": "0,1"}, ["last"], slow_landscape)
    assert len(frame) == 4
    lines = capsys.readouterr().err.splitlines()
    for name, position in (("run-a", 1), ("run-b", 2)):
        mine = [line for line in lines if f"landscape {position}/2 {name}" in line]
        assert "computing" in mine[0] and "done in" in mine[-1], mine
        assert any("still running" in line for line in mine[1:-1]), mine
    assert Path(tmp_path / "runs" / ".cache" / "landscape").is_dir()


def test_a_run_whose_data_changed_is_refused_before_any_run_is_computed(capsys, tmp_path, monkeypatch):
    """Issue #57 why 9: the refusal came after a "computing" line, with two 64-hex hashes; now
    no run is computed or said to be, and the line names the file with short hashes."""
    from robustkit.analysis.each_run import each_run
    from robustkit.errors import DataChangedError
    from robustkit.store.manifest import write_manifest

    monkeypatch.delenv(progress.ENV, raising=False)
    why = "/data/mine.csv changed since training: it gives user:sha256:cf10c4b3…, the runs had user:sha256:0a1b2c3d…"
    rows = []
    for name, changed in (("run-a", ""), ("run-b", why)):
        run = tmp_path / "runs" / name
        run.mkdir(parents=True)
        checkpoints = {"last": {"step": 4, "files": {"model.safetensors": "a" * 64}}}
        write_manifest(run, {"run_id": name, "kind": "finetune", "spec": {"task": "rt"}, "checkpoints": checkpoints})
        rows.append({"run_id": name, "path": str(run), "data_changed": changed})
    computed = []

    def reads_the_data(row: pd.Series) -> pd.DataFrame:
        if row["data_changed"]:
            raise DataChangedError(
                f"run {row['run_id']!r} was trained on data user:sha256:{'0' * 64}, but /data/mine.csv now gives "
                f"user:sha256:{'1' * 64}: refusing to analyse it on other data; restore the data it was trained on"
            )
        computed.append(row["run_id"])
        return pd.DataFrame({"loss": [0.5]})

    with pytest.raises(DataChangedError) as refused:
        each_run(pd.DataFrame(rows), "landscape", {}, ["last"], reads_the_data)
    message = str(refused.value)
    assert computed == [] and "computing" not in capsys.readouterr().err
    assert message.startswith("landscape: run 'run-b'") and "/data/mine.csv" in message and "\n" not in message
    assert "sha256:000000000000…" in message and "0" * 13 not in message and "1" * 13 not in message

    def reads_weights_only(row: pd.Series) -> pd.DataFrame:
        computed.append(row["run_id"])
        return pd.DataFrame({"norm": [1.0]})

    frame = each_run(pd.DataFrame(rows), "weights", {}, ["last"], reads_weights_only)
    assert list(frame["run_id"]) == ["run-a", "run-b"]  # the runs' order, whichever went first
    assert computed == ["run-b", "run-a"]


def test_a_landscape_on_a_tiny_model_names_its_alpha_in_the_log(fast_beat, capsys, monkeypatch):
    """A run's landscape inside its heartbeat (as each_run runs it): the lines name the alpha it
    is at, so a redirected log shows how far it got."""
    import torch

    from robustkit.analysis import landscape

    def slow_evaluate(model, batches, task):
        time.sleep(BEAT * 3)
        return {"loss": float(model.weight.sum())}

    monkeypatch.setattr("robustkit.train.evaluate.evaluate", slow_evaluate)  # landscape imports it on call
    model = torch.nn.Linear(2, 2)
    theta0 = {name: p.detach().clone() for name, p in model.named_parameters()}
    theta1 = {name: p + 1 for name, p in theta0.items()}
    with progress.heartbeat("landscape 1/1 run-a"):
        frame = landscape.interpolate(model, theta0, theta1, [0.0, 0.5, 1.0], [{}], "rt")
    assert len(frame) == 3
    said = [line for line in capsys.readouterr().err.splitlines() if "still running" in line]
    assert any("landscape 1/1 run-a: alpha 2 of 3, still running" in line for line in said), said
