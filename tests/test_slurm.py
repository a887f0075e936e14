"""Sweeps through a real one-node Slurm cluster (.ci/slurm.sh starts it for this module).

On CI (CI=true) a Slurm that cannot start fails these tests; elsewhere they are skipped with
the reason, since starting Slurm needs root and Debian's packages.
"""

import os
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from robustkit.specs.spec import RunSpec
from robustkit.store.manifest import read_manifest
from robustkit.store.tables import load_runs
from robustkit.sweeps import slurm
from robustkit.sweeps.grid import expand_grid, run_sweep
from robustkit.sweeps.slurm import SlurmOptions
from robustkit.train import train

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "slurm.sh"
OPTIONS = SlurmOptions(cpus_per_run=1, max_parallel=2, time_min=10)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    folder = tmp_path_factory.mktemp("slurm")
    started = subprocess.run(["bash", str(SCRIPT), "start", str(folder)], capture_output=True, text=True)
    if started.returncode != 0:
        message = f"Slurm did not start: {started.stderr[-2000:]}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(folder / "slurm.conf")
    yield folder
    subprocess.run(["bash", str(SCRIPT), "stop", str(folder)], check=False)
    if previous is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = previous


@pytest.mark.slow
def test_grid_with_tsp_through_slurm(cluster, tmp_path):
    grid = {
        "base": {
            "model": "bert-tiny",
            "task": "rt",
            "train_size": 32,
            "epochs": 1,
            "batch_size": 16,
            "max_length": 24,
            "adapter_size": 8,
            "method": "houlsby",
        },
        "grid": {"tsp_step": [0, 2]},
    }
    specs = expand_grid(grid)
    results = run_sweep(specs, tmp_path / "runs", executor="slurm", slurm_options=OPTIONS)
    assert list(results.status) == ["complete", "complete"], results.error.tolist()
    states = slurm.status(specs, tmp_path / "runs")
    assert set(states.state) == {"done"} and states.job_id.notna().all()
    assert len(load_runs(tmp_path / "runs", include_tsp=True)) == 3  # one TSP run, two supervised
    again = run_sweep(specs, tmp_path / "runs", executor="slurm", slurm_options=OPTIONS)
    assert set(again.status) == {"skipped"}


@pytest.mark.slow
def test_cancelled_job_resubmitted_resumes_to_the_same_result(cluster, tmp_path):
    # 10 epochs of 12 steps, evaluated at each epoch end: long enough to be cancelled mid-way
    spec = RunSpec(
        model="bert-tiny", task="rt", method="full", train_size=96, epochs=10, batch_size=8, max_length=24
    ).resolved()
    reference = train(spec, tmp_path / "reference", progress=False)
    runs = tmp_path / "runs"
    submitted = run_sweep([spec], runs, executor="slurm", slurm_options=OPTIONS, wait=False)
    job_id = submitted.error[0].split()[-1]
    run_dir = runs / spec.run_id
    deadline = time.time() + 300
    while not _has_progress(run_dir):
        assert time.time() < deadline, "the job made no checkpoint in 5 minutes"
        time.sleep(0.1)
    subprocess.run(["scancel", job_id], check=True)
    while job_id in slurm.queue_states():
        time.sleep(0.5)
    manifest = read_manifest(run_dir)
    assert manifest["status"] == "running", "the job finished before it could be cancelled"
    assert slurm.status([spec], runs).state[0] == "failed"
    resumed = run_sweep([spec], runs, executor="slurm", slurm_options=OPTIONS)
    assert list(resumed.status) == ["complete"], resumed.error.tolist()
    pd.testing.assert_frame_equal(
        pd.read_parquet(run_dir / "history.parquet"), pd.read_parquet(reference / "history.parquet")
    )
    assert read_manifest(run_dir)["final"] == read_manifest(reference)["final"]


def _has_progress(run_dir: Path) -> bool:
    if not (run_dir / "manifest.json").exists():
        return False
    last = read_manifest(run_dir).get("checkpoints", {}).get("last")
    return bool(last) and last["step"] >= 12


def test_status_states_from_the_store_first_then_the_queue():
    """No cluster needed: a diverged run is finished (never shown as failed and resubmitted)."""
    assert slurm._state("complete", None, "7") == "done"
    assert slurm._state("diverged", None, "7") == "diverged"
    assert slurm._state("running", "RUNNING", "7") == "running"
    assert slurm._state(None, "PENDING", "7") == "pending"
    assert slurm._state("running", None, "7") == "failed"  # left the queue unfinished
    assert slurm._state(None, None, None) == "not submitted"
