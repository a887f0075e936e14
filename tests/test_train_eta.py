"""A run on a CPU that will take long says so, with its measured estimate, before it has taken
long (issue #28 item 5); with the papers' epochs and length it names ``--preset demo``."""

from __future__ import annotations

import dataclasses
import logging

import pytest
from conftest import TINY_RTE, write_rte

from robustkit.store.manifest import read_manifest
from robustkit.train import eta, train


def test_projection_arithmetic():
    projection = eta.Projection(
        "r", "cpu", first_step=10, total_steps=110, eval_steps=4, eval_examples=300, batch_size=10
    )
    # 100 steps at 2 s, and 4 evaluations of 30 batches at a third of a step each
    assert projection.project(2.0) == pytest.approx(100 * 2.0 + 4 * 30 * 2.0 / 3)
    assert eta.duration(5400) == "1.5 h" and eta.duration(600) == "10 min" and eta.duration(42) == "42 s"


@pytest.mark.parametrize("epochs, hint", [(None, True), (8, False)])
def test_a_long_cpu_run_warns_with_its_estimate(tmp_path, caplog, monkeypatch, epochs, hint):
    monkeypatch.setattr(eta, "WARN_OVER_S", 0.0)  # every run is "long": the message is what is tested
    glue = write_rte(tmp_path / "glue", train=8)  # one step per epoch: 20 steps at the papers' 20 epochs
    spec = dataclasses.replace(
        TINY_RTE, method="houlsby", data_dir=str(glue), epochs=epochs, max_length=None if epochs is None else 32
    )
    with caplog.at_level(logging.WARNING, logger="robustkit"):
        train(spec, tmp_path / "runs", progress=False, device="cpu")
    warnings = [r.getMessage() for r in caplog.records if r.name == "robustkit.train.eta"]
    assert len(warnings) == 1
    # issue #46 item 7: the projection is kept beside the time the run took (bench/eta.py compares them)
    (run_dir,) = [p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")]
    recorded = read_manifest(run_dir)["eta"]
    assert recorded["projected_s"] > 0 and recorded["measured_s"] > 0
    steps = 20 if epochs is None else epochs  # houlsby's 20 epochs by default
    assert "rte/houlsby/s0/tsp0: about " in warnings[0] and f"({steps:,} steps at " in warnings[0]
    assert ("--preset demo" in warnings[0]) == hint and ("20 epochs, length 256" in warnings[0]) == hint


def test_no_warning_under_the_threshold(tmp_path, caplog):
    glue = write_rte(tmp_path / "glue")
    with caplog.at_level(logging.WARNING, logger="robustkit"):
        train(
            dataclasses.replace(TINY_RTE, method="houlsby", data_dir=str(glue)),
            tmp_path / "runs",
            progress=False,
            device="cpu",
        )
    assert not [r for r in caplog.records if r.name == "robustkit.train.eta"]
