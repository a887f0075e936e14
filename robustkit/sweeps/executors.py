"""Executors: where a sweep's jobs run. One small protocol, :class:`Executor`, that the sweep
calls; :class:`LocalExecutor` (worker processes on this machine) implements it here and
:class:`robustkit.sweeps.slurm.SlurmExecutor` (one Slurm job per run) in :mod:`robustkit.sweeps.slurm`.

The sweep decides *what* runs (:mod:`robustkit.sweeps.grid`: grids, skipping complete runs, which
TSP runs the supervised runs start from); an executor decides only *where and when*, and runs
every job through the same :func:`robustkit.sweeps.jobs.run_job`.

The local executor's worker processes never outlive the sweep that started them: each one is
killed when its parent dies (Linux: ``PR_SET_PDEATHSIG``; elsewhere, and for a parent that died
before the worker asked, a watchdog thread that sees the parent's pid change), and a sweep that
is stopped (SIGTERM, Ctrl-C, any exception) kills its workers before it goes. A worker killed
mid-run leaves that run resumable, and its run lock (``flock``) dies with it, so the next sweep
trains it.
"""

from __future__ import annotations

import concurrent.futures as futures
import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from typing import Iterator, Protocol, Sequence

from robustkit.sweeps.jobs import Job, JobResult, run_job, waves


class Executor(Protocol):
    """Runs a batch of jobs.

    ``run`` gets every job of a sweep at once and returns one :class:`robustkit.sweeps.jobs.JobResult`
    per job, in the order of ``jobs``. A job with ``needs`` must start only after the job of that
    run id has ended (:func:`robustkit.sweeps.jobs.waves`: TSP runs first); what happens when that job
    failed is the executor's choice (the run's own job retries a missing TSP run, under its
    lock). An executor that does not wait for its jobs returns them as ``submitted``.
    """

    def run(self, jobs: Sequence[Job]) -> list[JobResult]: ...


class LocalExecutor:
    """Jobs in worker processes on this machine, ``workers`` at a time.

    One worker runs in this process (with each run's own progress bar); more run in spawned
    processes that split the CPU cores' torch threads between them (for their work outside
    training: each run trains with its own ``threads`` setting). A supervised run whose TSP
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
                results[i] = {
                    "run_id": jobs[i].run_id,
                    "status": "failed",
                    "error": f"TSP run failed: {failed[jobs[i].needs]}",
                }
        runnable = [i for i in then if results[i] is None]
        for i, result in zip(runnable, self._map([jobs[i] for i in runnable]), strict=True):
            results[i] = result
        return results  # type: ignore[return-value] - every position is filled above

    def _map(self, jobs: list[Job]) -> list[JobResult]:
        """:func:`run_job` of each job, in the order given."""
        if not jobs:
            return []
        from robustkit.progress import bar as progress_bar

        label = "TSP runs" if all(job.is_tsp for job in jobs) else "runs"
        with progress_bar(total=len(jobs), desc=label, show=self.progress, unit="run") as bar:
            if self.workers <= 1:
                results = []
                for job in jobs:
                    results.append(run_job(job, progress=self.progress))
                    bar.update(1)
                return results
            threads = max(1, (os.cpu_count() or 1) // self.workers)
            # spawn, not fork: CUDA and torch's thread pools do not survive a fork
            context = multiprocessing.get_context("spawn")
            # the workers' runs draw no bars: their start, evaluation and end lines come here, through
            # a pipe without a lock (a line is one write, shorter than PIPE_BUF: whole at the reader),
            # so a worker killed mid-line blocks no one and leaves no semaphore behind
            reader, writer = context.Pipe(duplex=False)

            def worker() -> futures.ProcessPoolExecutor:
                return futures.ProcessPoolExecutor(
                    1, mp_context=context, initializer=_init_worker, initargs=(threads, os.getpid(), writer)
                )

            # One single-process pool per slot, not one pool of N: a pool whose worker dies breaks
            # with every run it holds, so one killed (or OOM-killed) worker would end the sweep and
            # the other workers' runs with it. A slot whose worker died reports that run failed
            # (it resumes when trained again) and gets a new worker; the other slots go on.
            slots = [worker() for _ in range(min(self.workers, len(jobs)))]
            queue = list(enumerate(jobs))[::-1]  # popped from the end: jobs start in order
            running: dict[futures.Future, tuple[int, int]] = {}
            done: dict[int, JobResult] = {}

            def start(slot: int) -> None:
                if queue:
                    i, job = queue.pop()
                    running[slots[slot].submit(run_job, job, progress=False)] = (i, slot)

            with _workers_stop_with(slots), _relayed(reader, writer):
                for slot in range(len(slots)):
                    start(slot)
                while running:
                    finished, _ = futures.wait(running, return_when=futures.FIRST_COMPLETED)
                    for future in finished:
                        i, slot = running.pop(future)
                        try:
                            done[i] = future.result()
                        except futures.process.BrokenProcessPool:
                            done[i] = {
                                "run_id": jobs[i].run_id,
                                "status": "failed",
                                "error": "its worker process died (killed, or out of memory); training it "
                                "again resumes from its last checkpoint",
                            }
                            slots[slot].shutdown(wait=False, cancel_futures=True)
                            slots[slot] = worker()
                        bar.update(1)
                        start(slot)
                for pool in slots:
                    pool.shutdown(wait=True)
            return [done[i] for i in range(len(jobs))]


@contextlib.contextmanager
def _relayed(reader, writer) -> Iterator[None]:
    """Write the workers' event lines (:func:`robustkit.progress.event`), which they send to
    ``writer``, as they come out of ``reader``, from a thread, until the block ends; then the
    lines still in the pipe; then close both ends."""
    from robustkit.progress import write_event

    stop = threading.Event()

    def relay() -> None:
        while True:
            try:
                if not reader.poll(0.2):
                    if stop.is_set():
                        return
                    continue
                line = reader.recv_bytes().decode("utf-8", "replace")
            except (EOFError, OSError):  # every writer gone, or the pipe closed
                return
            write_event(line, above_bar=True)

    thread = threading.Thread(target=relay, name="robustkit-worker-events", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()  # every job has ended: its lines were written before its result came back
        thread.join(timeout=5)
        writer.close()
        reader.close()


# How often a worker's watchdog checks that its parent is alive (where PR_SET_PDEATHSIG is not
# available, or was set too late): the longest a worker can outlive its parent.
WATCHDOG_SECONDS = 0.5


def _init_worker(threads: int, parent: int, events=None) -> None:
    """Set up a worker process: its torch threads, its death when ``parent`` dies, and its event
    lines sent to ``events`` (the write end of the parent's pipe)."""
    # Ctrl-C reaches the whole process group: the sweep answers it (it kills its workers, whose
    # runs stay resumable); a worker's own KeyboardInterrupt would only print a traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)
    from tqdm import tqdm

    # a thread lock for tqdm, not its default multiprocessing one (a workers' bars are off): a
    # worker killed with its sweep would leave that semaphore behind, and multiprocessing's
    # resource tracker would print a two-line "leaked semaphore" warning after the Ctrl-C line
    tqdm.set_lock(threading.RLock())
    if events is not None:
        from robustkit.progress import to_parent

        # at most 1,000 bytes: one write, shorter than PIPE_BUF, never interleaved with another's
        to_parent(lambda line: events.send_bytes(line.encode("utf-8")[:1000]))
    import torch

    torch.set_num_threads(threads)


def _die_with_parent(parent: int) -> None:
    """End this process as soon as the process ``parent`` is gone.

    A worker whose sweep died would otherwise go on training, take queued runs and hold their
    locks, then wait forever for a parent that will never send it more work.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: the kernel kills us with the parent
    if os.getppid() != parent:  # the parent died before the line above: no signal will come
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCHDOG_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="robustkit-parent-watchdog", daemon=True).start()


@contextlib.contextmanager
def _workers_stop_with(pools: list[futures.ProcessPoolExecutor]) -> Iterator[None]:
    """Kill the workers of ``pools`` (a list the block may refill) when this process leaves the
    block early or is sent SIGTERM.

    Leaving a pool's ``with`` block waits for every queued job: after an exception (a Ctrl-C, a
    failed result) the workers would go on training what nobody waits for. On SIGTERM the
    workers are killed, then the previous handler runs; by default this process then exits
    with status 128 + 15 through ``SystemExit``, so that multiprocessing's own clean-up runs (dying
    of the signal left the pools' semaphores to the resource tracker, which printed "leaked
    semaphore" warnings). The runs the workers were training stay resumable.
    """
    installed = False
    if threading.current_thread() is threading.main_thread():  # only there can handlers be set
        previous = signal.getsignal(signal.SIGTERM)
        if previous is not signal.SIG_IGN:

            def on_sigterm(signum, frame):
                # only signals: the main thread may hold the pools' locks where this interrupts it
                for pool in list(pools):
                    _kill_workers(pool, reap=False)
                if callable(previous):
                    previous(signum, frame)
                    return
                raise SystemExit(128 + signum)  # unwinds: the pools are reaped below, then at exit

            signal.signal(signal.SIGTERM, on_sigterm)
            installed = True
    try:
        yield
    except BaseException:
        for pool in list(pools):
            _kill_workers(pool)
        raise
    finally:
        if installed:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def _kill_workers(pool: futures.ProcessPoolExecutor, reap: bool = True) -> None:
    """SIGKILL every worker of the pool; with ``reap``, also cancel its queued jobs and wait
    for the workers to be gone."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        with contextlib.suppress(OSError, ValueError):
            process.kill()
    if not reap:
        return
    manager = getattr(pool, "_executor_manager_thread", None)  # shutdown() forgets it
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            process.join(timeout=5)
    # The pool's manager thread closes its wake-up pipe when it sees the workers gone. Python
    # 3.11's exit hook writes to that pipe unlocked: were the thread still closing it then, the
    # exit printed "Exception ignored ... Bad file descriptor" under the one-line Ctrl-C message.
    if manager is not None and manager is not threading.current_thread():
        manager.join(timeout=5)
