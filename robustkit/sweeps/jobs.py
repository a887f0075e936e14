"""Jobs: one TSP run or one supervised run, as a value any executor can ship and run.

A :class:`Job` carries everything its worker needs (spec, store, device), so it runs the same
in this process, in a worker process (pickled) or in a Slurm job (pickled by submitit).
:func:`run_job` is the one function every executor calls; it reports a failure in its result
instead of raising, so one bad run never stops a sweep.

This module imports no executor (:mod:`robustkit.sweeps.executors`, :mod:`robustkit.sweeps.slurm`): they
import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Sequence, TypedDict

from robustkit.errors import RunLockedError
from robustkit.specs.spec import RunSpec, TspSpec

Status = Literal["complete", "skipped", "locked", "failed", "submitted"]
# Why a job skipped its run: another process (a concurrent sweep) finished it between the
# sweep's look at the store and this job's lock. Counted as that process's run, not this one's.
TRAINED_ELSEWHERE = "trained elsewhere: another process finished it first"


class JobResult(TypedDict):
    """What became of one run.

    ``status``: ``complete`` (trained now, by this job), ``skipped`` (was complete already: set by
    the sweep, or by the job when another process finished the run meanwhile, with ``error``
    :data:`TRAINED_ELSEWHERE`),
    ``locked`` (another process is training it), ``failed`` or ``submitted`` (handed to a
    scheduler that was not waited for). ``error``: why it failed, or the scheduler's job id.
    """

    run_id: str
    status: Status
    error: str | None


@dataclass(frozen=True)
class Job:
    """One run to train into ``store``.

    Attributes
    ----------
    spec : RunSpec or TspSpec
        A supervised run, or a TSP (masked-LM) run.
    store : str
        The run store's folder (absolute, so that a job running elsewhere finds it).
    device : str or None
        Where it trains (None: the GPU if there is one, else the CPU).
    tsp_steps : tuple of int
        TSP runs only: every step whose checkpoint the sweep's runs start from.
    data_dir : str or None
        Local folder of GLUE-format TSV files (TSP runs; a RunSpec carries its own).
    needs : str or None
        Run id of the TSP job of the same batch this run starts from: executors start it after
        that job has ended.
    """

    spec: RunSpec | TspSpec
    store: str
    device: str | None = None
    tsp_steps: tuple[int, ...] = ()
    data_dir: str | None = None
    needs: str | None = None

    @property
    def run_id(self) -> str:
        return self.spec.run_id

    @property
    def is_tsp(self) -> bool:
        return isinstance(self.spec, TspSpec)


def waves(jobs: Sequence[Job]) -> tuple[list[int], list[int]]:
    """Positions of the jobs that others of the batch need (TSP runs), then of the rest.

    Every executor starts the second wave only after the first has ended.

    Raises
    ------
    ValueError
        A needed job needs another job itself (only one level of dependency is supported).
    """
    needed = {job.needs for job in jobs if job.needs is not None}
    first = [i for i, job in enumerate(jobs) if job.run_id in needed]
    if any(jobs[i].needs is not None for i in first):
        raise ValueError("a job that other jobs need must need none itself")
    chosen = set(first)
    return first, [i for i in range(len(jobs)) if i not in chosen]


def run_job(job: Job, progress: bool = False) -> JobResult:
    """Train the job's run (resuming it if it was interrupted); never raises for a bad run.

    ``progress`` shows the run's own progress bar (only where one job runs at a time).
    """
    # train imports torch, transformers and AdapterHub: only in the process that trains
    from robustkit.train import pretrain, train_counted

    def tsp() -> bool:
        pretrain(job.spec, list(job.tsp_steps), job.store, data_dir=job.data_dir, progress=progress, device=job.device)
        return True  # not counted either way: a sweep reports the runs that start from it

    if job.is_tsp:
        return guarded(job.run_id, tsp)
    return guarded(job.run_id, lambda: train_counted(job.spec, job.store, progress=progress, device=job.device)[1])


def guarded(run_id: str, work: Callable[[], bool]) -> JobResult:
    """Run one job's work (True: it trained the run; False: the run was finished already);
    a failure is reported in the result instead of stopping the sweep."""
    try:
        trained = work()
    except RunLockedError as error:  # another sweep is training it: not ours to report as failed
        return {"run_id": run_id, "status": "locked", "error": str(error)}
    except Exception as error:  # noqa: BLE001 - reported per run, the sweep goes on
        return {"run_id": run_id, "status": "failed", "error": f"{type(error).__name__}: {error}"}
    if not trained:
        return {"run_id": run_id, "status": "skipped", "error": TRAINED_ELSEWHERE}
    return {"run_id": run_id, "status": "complete", "error": None}
