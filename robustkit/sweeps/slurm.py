"""Sweeps on a Slurm cluster, through submitit (no scheduler of robustkit's own):
:class:`SlurmExecutor`, an :class:`robustkit.sweeps.executors.Executor`.

One job per run, as job arrays: first the distinct TSP runs, then the supervised runs, whose
array starts after the TSP array has ended (``afterany``: a supervised job whose TSP run failed
retries it itself, under the same lock). Every job trains into the shared run store with the
same locked, atomic writes as local runs, so two sweeps over one store never train a run twice.

A job that Slurm preempts or that reaches its time limit is requeued by submitit
(:class:`submitit.helpers.Checkpointable`) and resumes from the run's last checkpoint.

Job states come from ``squeue`` and the store, not from ``sacct`` (clusters without accounting
have no ``sacct``). The job id of each run is kept in ``<store>/.slurm/jobs.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Sequence

import pandas as pd
import submitit

from robustkit.errors import RobustkitError
from robustkit.specs.spec import RunSpec
from robustkit.sweeps.jobs import Job, JobResult, run_job, waves

SLURM_DIR = ".slurm"
JOBS_FILE = "jobs.json"


@dataclasses.dataclass(frozen=True)
class SlurmOptions:
    """Resources and scheduling of each run's job.

    Attributes
    ----------
    partition : str or None
        Slurm partition (None: the cluster's default).
    time_min : int
        Time limit per job, minutes; past it the job is requeued and resumes.
    gpus_per_run, cpus_per_run : int
        GPUs and CPU cores per job.
    mem_gb : int or None
        Memory per job in GB (None: the partition's default).
    max_parallel : int
        Jobs of one array running at once (``--array=...%N``).
    extra : dict
        Further ``sbatch`` options, passed through (``--slurm-arg key=value``).
    """

    partition: str | None = None
    time_min: int = 240
    gpus_per_run: int = 0
    cpus_per_run: int = 2
    mem_gb: int | None = None
    max_parallel: int = 16
    extra: dict = dataclasses.field(default_factory=dict)


class RunJob(submitit.helpers.Checkpointable):
    """What a Slurm job runs: one :class:`robustkit.sweeps.jobs.Job` (a TSP run or a supervised run).

    ``Checkpointable`` makes submitit requeue the job with the same arguments on preemption or
    timeout; the run then resumes from its ``last`` checkpoint in the store.
    """

    def __call__(self, job: Job) -> JobResult:
        import torch

        # torch would use every core of the node; the job owns only --cpus-per-run of them (a run
        # trains with its own `threads` setting, which is part of its id).
        torch.set_num_threads(int(os.environ.get("SLURM_CPUS_PER_TASK", torch.get_num_threads())))
        return run_job(job, progress=False)


class SlurmExecutor:
    """One Slurm job per run, as job arrays: the TSP runs' array, then the other runs' array,
    which starts once the first has ended (``afterany``: a run whose TSP run failed retries it
    in its own job, under the TSP run's lock).

    Parameters
    ----------
    store : Path
        The run store: submitit's logs go to ``<store>/.slurm/logs`` and each run's job id to
        ``<store>/.slurm/jobs.json`` (for :func:`status`).
    options : SlurmOptions
        Resources and scheduling of each job.
    wait : bool
        Wait for the jobs to leave the queue and return their results; else return at once, each
        job ``submitted`` with its Slurm job id as ``error``.
    """

    def __init__(self, store: str | Path, options: SlurmOptions | None = None, wait: bool = True) -> None:
        self.store = Path(store).resolve()
        self.options = options or SlurmOptions()
        self.wait = wait

    def run(self, jobs: Sequence[Job]) -> list[JobResult]:
        if not jobs:  # every run complete: nothing to submit, no need for a reachable squeue
            return []
        check_cluster()  # before submitit writes its folder: no cluster, nothing left behind
        submitted = submit(jobs, self.store, self.options)
        if not self.wait:
            return [
                {"run_id": job.run_id, "status": "submitted", "error": f"job {handle.job_id}"}
                for job, handle in zip(jobs, submitted, strict=True)
            ]
        wait_until_done(submitted)
        return [outcome(handle, job.run_id) for job, handle in zip(jobs, submitted, strict=True)]


def check_cluster(timeout_s: float = 30.0) -> None:
    """Refuse, in one line, where no Slurm controller answers here (``scontrol ping``): no
    Slurm client installed, no configuration found, or the controller down. Called before any
    job is submitted, so a sweep sent to a missing cluster leaves no ``.slurm`` folder."""
    try:
        pinged = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError:
        raise RobustkitError(
            "no Slurm here: scontrol is not installed (run on a cluster's login node, or use --executor local)"
        ) from None
    except subprocess.TimeoutExpired:
        raise RobustkitError(
            f"no Slurm controller answered `scontrol ping` within {timeout_s:g} s (use --executor local off a cluster)"
        ) from None
    if pinged.returncode != 0 or " is UP" not in pinged.stdout:
        said = [line.strip() for line in (pinged.stderr + pinged.stdout).splitlines() if line.strip()]
        raise RobustkitError(
            "no Slurm controller answers here (scontrol ping: "
            f"{said[-1] if said else f'exit {pinged.returncode}'}); use --executor local off a cluster"
        )


def make_executor(store: Path, options: SlurmOptions) -> submitit.AutoExecutor:
    """A submitit executor writing its logs under ``<store>/.slurm/logs``."""
    executor = submitit.AutoExecutor(folder=store / SLURM_DIR / "logs" / "%j", cluster="slurm")
    parameters = {
        "timeout_min": options.time_min,
        "cpus_per_task": options.cpus_per_run,
        "slurm_array_parallelism": options.max_parallel,
        "slurm_additional_parameters": dict(options.extra),
        "name": "robustkit",
    }
    if options.partition:
        parameters["slurm_partition"] = options.partition
    if options.gpus_per_run:
        parameters["gpus_per_node"] = options.gpus_per_run
    if options.mem_gb:
        parameters["mem_gb"] = options.mem_gb
    executor.update_parameters(**parameters)
    return executor


def submit(jobs: Sequence[Job], store: Path, options: SlurmOptions) -> list[submitit.Job]:
    """Submit the array of the jobs others need (TSP runs), then the array of the rest after it;
    record each run's job id.

    Returns
    -------
    list of submitit.Job
        One per job, in the order of ``jobs``.
    """
    executor = make_executor(store, options)
    task = RunJob()
    handles: list[submitit.Job | None] = [None] * len(jobs)
    first, then = waves(jobs)
    if first:
        with executor.batch():
            pending = [executor.submit(task, jobs[i]) for i in first]
        for i, handle in zip(first, pending, strict=True):
            handles[i] = handle
        # The tasks of one array share its id ("123_4"): afterany:123 waits for the whole array.
        array = pending[0].job_id.split("_")[0]
        executor.update_parameters(slurm_additional_parameters={**options.extra, "dependency": f"afterany:{array}"})
    if then:
        with executor.batch():
            pending = [executor.submit(task, jobs[i]) for i in then]
        for i, handle in zip(then, pending, strict=True):
            handles[i] = handle
    _record_jobs(store, {job.run_id: handle.job_id for job, handle in zip(jobs, handles, strict=True)})
    return handles  # type: ignore[return-value] - every position is filled above


def _record_jobs(store: Path, ids: dict[str, str]) -> None:
    from robustkit.store.atomic import atomic_write_json

    path = store / SLURM_DIR / JOBS_FILE
    known = json.loads(path.read_text()) if path.exists() else {}
    known.update(ids)
    atomic_write_json(path, known)


def wait_until_done(jobs: list[submitit.Job], poll_s: float = 2.0) -> None:
    """Block until none of the jobs is in the Slurm queue any more (``squeue``, not ``sacct``)."""
    ids = {job.job_id for job in jobs}
    while ids & set(queue_states()):
        time.sleep(poll_s)


def outcome(job: submitit.Job, run_id: str) -> dict:
    """The finished job's own report, or a failure naming the job if it left no result (cancelled,
    killed with its node, out of memory)."""
    if not job.paths.result_pickle.exists():
        return {
            "run_id": run_id,
            "status": "failed",
            "error": f"slurm job {job.job_id} ended without a result (cancelled or killed); see {job.paths.stderr}",
        }
    try:
        return job.result()
    except Exception as error:  # noqa: BLE001 - the job raised: report it for this run
        return {
            "run_id": run_id,
            "status": "failed",
            "error": f"slurm job {job.job_id}: {type(error).__name__}: {error}",
        }


def queue_states() -> dict[str, str]:
    """Job id -> Slurm state (PENDING, RUNNING, ...) of every job ``squeue`` lists, array tasks
    one per line."""
    try:
        out = subprocess.run(["squeue", "-r", "-h", "-o", "%i %T"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        raise RobustkitError(f"cannot read the Slurm queue (squeue): {error}") from None
    return dict(line.split(maxsplit=1) for line in out.splitlines() if line.strip())


def status(specs: list[RunSpec], store: str | Path) -> pd.DataFrame:
    """State of each run of a sweep: ``done``, ``diverged`` (finished, its outcome a divergence),
    ``running``, ``pending``, ``failed``, ``not submitted`` or ``damaged`` (a missing or broken
    manifest: ``robustkit verify``), from the store first, then ``squeue``.

    Returns
    -------
    DataFrame
        ``run_id, job_id, state``.
    """
    from robustkit.store.manifest import damage, read_manifest
    from robustkit.store.schema import DAMAGED

    store = Path(store)
    path = store / SLURM_DIR / JOBS_FILE
    jobs = json.loads(path.read_text()) if path.exists() else {}
    queue = queue_states()
    rows = []
    for spec in specs:
        if damage(store / spec.run_id):
            rows.append({"run_id": spec.run_id, "job_id": jobs.get(spec.run_id), "state": DAMAGED})
            continue
        manifest_path = store / spec.run_id / "manifest.json"
        stored = read_manifest(store / spec.run_id).get("status") if manifest_path.exists() else None
        job_id = jobs.get(spec.run_id)
        rows.append({"run_id": spec.run_id, "job_id": job_id, "state": _state(stored, queue.get(job_id or ""), job_id)})
    return pd.DataFrame(rows, columns=["run_id", "job_id", "state"])


def _state(stored: str | None, queued: str | None, job_id: str | None) -> str:
    if stored == "complete":
        return "done"
    if stored == "diverged":  # finished (stopped at a non-finite value, robustkit.store.collapse): not to resubmit
        return "diverged"
    if queued in ("RUNNING", "COMPLETING", "CONFIGURING"):
        return "running"
    if queued in ("PENDING", "REQUEUED", "REQUEUE_HOLD", "SUSPENDED"):
        return "pending"
    if stored in ("failed", "running") or job_id:
        return "failed"  # left the queue without completing the run (a kill, a crash, a cancel)
    return "not submitted"
