"""Executors: where a sweep's jobs run. One small protocol, :class:`Executor`, that the sweep
calls; :class:`LocalExecutor` (worker processes on this machine) implements it here and
:class:`robustkit.slurm.SlurmExecutor` (one Slurm job per run) in :mod:`robustkit.slurm`.

The sweep decides *what* runs (:mod:`robustkit.sweep`: grids, skipping complete runs, which
TSP runs the supervised runs start from); an executor decides only *where and when*, and runs
every job through the same :func:`robustkit.jobs.run_job`.
"""

from __future__ import annotations

import concurrent.futures as futures
import multiprocessing
import os
from typing import Protocol, Sequence

from robustkit.jobs import Job, JobResult, run_job, waves


class Executor(Protocol):
    """Runs a batch of jobs.

    ``run`` gets every job of a sweep at once and returns one :class:`robustkit.jobs.JobResult`
    per job, in the order of ``jobs``. A job with ``needs`` must start only after the job of that
    run id has ended (:func:`robustkit.jobs.waves`: TSP runs first); what happens when that job
    failed is the executor's choice (the run's own job retries a missing TSP run, under its
    lock). An executor that does not wait for its jobs returns them as ``submitted``.
    """

    def run(self, jobs: Sequence[Job]) -> list[JobResult]: ...


class LocalExecutor:
    """Jobs in worker processes on this machine, ``workers`` at a time.

    One worker runs in this process (with each run's own progress bar); more run in spawned
    processes that split the CPU cores' torch threads between them. A supervised run whose TSP
    run failed is reported failed without being tried: the same TSP run would fail again in it.
    """

    def __init__(self, workers: int = 1, progress: bool = True) -> None:
        self.workers = workers
        self.progress = progress

    def run(self, jobs: Sequence[Job]) -> list[JobResult]:
        results: list[JobResult | None] = [None] * len(jobs)
        first, then = waves(jobs)
        for i, result in zip(first, self._map([jobs[i] for i in first]), strict=True):
            results[i] = result
        failed = {results[i]["run_id"]: results[i]["error"] for i in first if results[i]["status"] == "failed"}
        for i in then:
            if jobs[i].needs in failed:
                results[i] = {"run_id": jobs[i].run_id, "status": "failed", "error": f"TSP run failed: {failed[jobs[i].needs]}"}
        runnable = [i for i in then if results[i] is None]
        for i, result in zip(runnable, self._map([jobs[i] for i in runnable]), strict=True):
            results[i] = result
        return results  # type: ignore[return-value] - every position is filled above

    def _map(self, jobs: list[Job]) -> list[JobResult]:
        """:func:`run_job` of each job, in the order given."""
        if not jobs:
            return []
        from tqdm.auto import tqdm  # tqdm.auto may import IPython: only when there is work

        label = "TSP runs" if all(job.is_tsp for job in jobs) else "runs"
        with tqdm(total=len(jobs), desc=label, disable=not self.progress, unit="run") as bar:
            if self.workers <= 1:
                results = []
                for job in jobs:
                    results.append(run_job(job, progress=self.progress))
                    bar.update(1)
                return results
            threads = max(1, (os.cpu_count() or 1) // self.workers)
            # spawn, not fork: CUDA and torch's thread pools do not survive a fork
            context = multiprocessing.get_context("spawn")
            with futures.ProcessPoolExecutor(self.workers, mp_context=context, initializer=_set_threads,
                                             initargs=(threads,)) as pool:
                pending = {pool.submit(run_job, job, progress=False): i for i, job in enumerate(jobs)}
                done: dict[int, JobResult] = {}
                for future in futures.as_completed(pending):
                    done[pending[future]] = future.result()
                    bar.update(1)
            return [done[i] for i in range(len(jobs))]


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
