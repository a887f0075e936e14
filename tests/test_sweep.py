import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

from robustkit.errors import SweepError
from robustkit.store.folders import GRADNORMS, HISTORY
from robustkit.store.locks import run_lock
from robustkit.store.manifest import read_manifest
from robustkit.store.tables import load_runs
from robustkit.sweeps.grid import expand_grid, run_sweep, tsp_jobs

GRID = """
[base]
model = "bert-tiny"
task = "rt"
train_size = 32
epochs = 1
batch_size = 16
max_length = 24
adapter_size = 8

[grid]
method = ["houlsby", "full"]
seed = [0, 1]
tsp_step = [0, 2]
"""


def _write(tmp_path, text):
    path = tmp_path / "grid.toml"
    path.write_text(text)
    return path


def test_grid_expands_to_the_product_of_axes(tmp_path):
    specs = expand_grid(_write(tmp_path, GRID))
    assert len(specs) == 8 and len({s.run_id for s in specs}) == 8
    jobs = tsp_jobs(specs)
    assert len(jobs) == 2  # one TSP run per method, shared by both seeds
    assert all(steps == [2] for steps, _ in jobs.values())


@pytest.mark.parametrize(
    "text, named",
    [
        (GRID.replace("seed = [0, 1]", "seeds = [0, 1]"), "seeds"),
        (GRID + "\n[extra]\nx = 1\n", "extra"),
        (GRID.replace('task = "rt"', 'task = "nope"'), "nope"),
        (GRID.replace("seed = [0, 1]", "seed = 3"), "seed"),
        ("[grid\n", "not valid TOML"),
    ],
)
def test_bad_grids_are_named(tmp_path, text, named):
    with pytest.raises(SweepError, match=named):
        expand_grid(_write(tmp_path, text))


def test_missing_grid_file_is_named(tmp_path):
    with pytest.raises(SweepError, match="missing.toml"):
        expand_grid(tmp_path / "missing.toml")


@pytest.mark.slow
def test_sweep_trains_once_and_skips_complete_runs(tmp_path):
    specs = expand_grid(_write(tmp_path, GRID))
    first = run_sweep(specs, tmp_path / "runs", jobs=2, progress=False)
    assert list(first.status.unique()) == ["complete"], first.error.tolist()
    runs = load_runs(tmp_path / "runs")
    assert len(runs) == 8 and set(runs.status) == {"complete"}
    assert len(load_runs(tmp_path / "runs", include_tsp=True)) == 10
    second = run_sweep(specs, tmp_path / "runs", jobs=1, progress=False)
    assert set(second.status) == {"skipped"}


def test_a_run_locked_by_another_sweep_is_reported_not_failed(tmp_path):
    specs = expand_grid(_write(tmp_path, GRID))[:1]
    run_dir = tmp_path / "runs" / specs[0].run_id
    run_dir.mkdir(parents=True)
    with run_lock(run_dir):
        result = run_sweep(specs, tmp_path / "runs", progress=False)
    assert list(result.status) == ["locked"]
    assert not (run_dir / "manifest.json").exists()


def test_adapter_size_and_method_settings_are_grid_axes(tmp_path):
    text = GRID.replace('method = ["houlsby", "full"]', "adapter_size = [8, 64, 256]").replace(
        "adapter_size = 8\n", 'adapter_sharing = "layer"\nadapter_init_std = 1e-3\n'
    )
    specs = expand_grid(_write(tmp_path, text))
    assert len(specs) == 3 * 2 * 2 and len({s.run_id for s in specs}) == 12
    assert sorted({s.adapter_size for s in specs}) == [8, 64, 256]
    assert {(s.adapter_sharing, s.adapter_init_std) for s in specs} == {("layer", 1e-3)}
    topk = expand_grid({"base": {"model": "bert-tiny", "method": "topk"}, "grid": {"top_k": [1, 2]}})
    assert [s.top_k for s in topk] == [1, 2]


class _RecordingExecutor:
    """An Executor that trains nothing: it records the jobs and answers ``complete``."""

    def __init__(self):
        self.jobs = []

    def run(self, jobs):
        self.jobs = list(jobs)
        return [{"run_id": job.run_id, "status": "complete", "error": None} for job in jobs]


def test_sweep_hands_every_job_to_its_executor_tsp_first(tmp_path):
    specs = expand_grid(_write(tmp_path, GRID))
    executor = _RecordingExecutor()
    results = run_sweep(specs, tmp_path / "runs", executor=executor)
    assert list(results.run_id) == [s.run_id for s in specs] and set(results.status) == {"complete"}
    tsp = [job for job in executor.jobs if job.is_tsp]
    assert executor.jobs[: len(tsp)] == tsp and len(tsp) == 2  # one TSP run per method, before the runs
    assert [job.spec for job in executor.jobs[len(tsp) :]] == specs
    for job in executor.jobs[len(tsp) :]:
        assert job.needs == (job.spec.tsp_spec().run_id if job.spec.tsp_step else None)
        assert job.store == str((tmp_path / "runs").resolve())  # absolute: a Slurm job must find it
    assert {job.tsp_steps for job in tsp} == {(2,)}


def test_unknown_executor_is_named(tmp_path):
    with pytest.raises(SweepError, match="'nope'"):
        run_sweep(expand_grid(_write(tmp_path, GRID))[:1], tmp_path / "runs", executor="nope")


def test_local_executor_does_not_try_runs_whose_tsp_run_failed(tmp_path, monkeypatch):
    from robustkit.sweeps import executors
    from robustkit.sweeps.jobs import Job

    specs = expand_grid(_write(tmp_path, GRID))
    with_tsp = [s for s in specs if s.tsp_step][:1]
    without = [s for s in specs if not s.tsp_step][:1]
    tsp = with_tsp[0].tsp_spec()
    jobs = [Job(with_tsp[0], "store", needs=tsp.run_id), Job(tsp, "store", tsp_steps=(2,)), Job(without[0], "store")]
    ran = []

    def fake_run_job(job, progress=False):
        ran.append(job.run_id)
        status = "failed" if job.is_tsp else "complete"
        return {"run_id": job.run_id, "status": status, "error": "boom" if job.is_tsp else None}

    monkeypatch.setattr(executors, "run_job", fake_run_job)
    results = executors.LocalExecutor(workers=1, progress=False).run(jobs)
    assert ran == [tsp.run_id, without[0].run_id]  # the TSP run first; the run that needs it never
    assert [r["run_id"] for r in results] == [job.run_id for job in jobs]  # in the order given
    assert results[0] == {"run_id": with_tsp[0].run_id, "status": "failed", "error": "TSP run failed: boom"}


def test_a_needed_job_may_not_need_another(tmp_path):
    from robustkit.sweeps.jobs import Job, waves

    spec = expand_grid(_write(tmp_path, GRID))[0]
    first, then = waves([Job(spec, "s", needs="x")])
    assert (first, then) == ([], [0])  # a job it needs outside the batch: nothing to wait for
    tsp = spec.tsp_spec()
    with pytest.raises(ValueError, match="need none"):
        waves([Job(tsp, "s", needs=spec.run_id), Job(spec, "s", needs=tsp.run_id)])


# --- a killed sweep: its workers die with it ---------------------------------------------------

_SWEEP_GRID = """
[base]
model = "bert-tiny"
task = "rte"
method = "houlsby"
epochs = 2
batch_size = 8
max_length = 32
adapter_size = 16
eval_every = 25
data_dir = "{glue}"

[grid]
seed = [0, 1, 2]
"""
_MARK = "ROBUSTKIT_KILLED_SWEEP_TEST"  # in the environment of the sweep and of every process it starts


def _marked(mark: str) -> list[int]:
    """Live processes (zombies aside) whose environment holds ``_MARK=mark``."""
    needle = f"{_MARK}={mark}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (
                needle in (proc / "environ").read_bytes().split(b"\0")
                and (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            ):
                found.append(int(proc.name))
        except OSError:  # gone, or not ours
            continue
    return found


def _workers(mark: str) -> list[int]:
    """The marked processes that multiprocessing spawned to train runs (not the sweep itself,
    not multiprocessing's resource tracker)."""
    found = []
    for pid in _marked(mark):
        with contextlib.suppress(OSError):
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"spawn_main" in command:
                found.append(pid)
    return found


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _running(store_dir: Path) -> list[str]:
    runs = load_runs(store_dir) if store_dir.exists() else pd.DataFrame()
    return [] if runs.empty else runs[runs.status == "running"].run_id.tolist()


@contextlib.contextmanager
def _sweep_with_two_runs_training(tmp_path: Path, rte_folder):
    """``sweep --jobs 2`` of :data:`_SWEEP_GRID` in a subprocess, yielded once both workers hold
    a run's lock and train it, as ``(parent, runs, mark, grid)``. The workers are yielded
    stopped (SIGSTOP), so that their runs are surely unfinished: a block that wants one to go on
    sends it SIGCONT. Whatever happens in the block, no process of it outlives the block."""
    # 300 steps a run (about 8 s here): long enough that both workers train at once even when one
    # starts late (spawn and imports under a loaded parallel suite: 100-step runs of 2 s all ended
    # in one worker before the other began)
    glue = rte_folder(tmp_path / "glue", train=1200)
    grid = tmp_path / "grid.toml"
    grid.write_text(_SWEEP_GRID.format(glue=glue))
    runs = tmp_path / "runs"
    mark = uuid.uuid4().hex
    with open(tmp_path / "sweep.log", "wb") as log:
        parent = subprocess.Popen(
            [sys.executable, "-m", "robustkit", "sweep", str(grid), "--store", str(runs), "--jobs", "2"],
            env={**os.environ, _MARK: mark},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        while True:
            assert parent.poll() is None, (tmp_path / "sweep.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the sweep's workers never started training"
            # the workers are stopped while their runs are looked at: on a fast machine a run
            # could otherwise end between being seen 'running' and the signal the test sends
            workers = _workers(mark)
            _signal(workers, signal.SIGSTOP)
            if len(_running(runs)) >= 2:  # both workers hold a run's lock, frozen mid-training
                break
            _signal(workers, signal.SIGCONT)
            time.sleep(0.05)
        yield parent, runs, mark, grid
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.wait()
        for pid in _marked(mark):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the sweep's workers through /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=["SIGKILL", "SIGTERM", "Ctrl-C"])
def test_a_killed_sweep_leaves_no_worker_and_a_rerun_finishes_every_run(sig, tmp_path, rte_folder):
    """Killing a sweep's parent used to leave its workers training (then waiting forever): they
    took the queued runs and held their locks, so a re-run found them 'being trained by another
    process' and did nothing."""

    from robustkit.train import train

    with _sweep_with_two_runs_training(tmp_path, rte_folder) as (parent, runs, mark, grid):
        workers = [pid for pid in _marked(mark) if pid != parent.pid]
        assert len(workers) >= 2
        if sig == signal.SIGINT:  # Ctrl-C: the terminal signals the whole foreground process group
            os.killpg(parent.pid, sig)
            assert parent.wait(timeout=30) == 130  # robustkit.cli.main: one line, status 130
            log = (tmp_path / "sweep.log").read_text()
            assert "robustkit: interrupted; runs resume" in log, log[-3000:]
            assert "Traceback" not in log and "leaked semaphore" not in log, log[-3000:]
        else:
            parent.send_signal(sig)
            # SIGTERM: the workers are killed, then the sweep exits 128 + 15 through SystemExit so
            # multiprocessing cleans up (no resource-tracker "leaked semaphore" lines)
            assert parent.wait(timeout=30) == (-sig if sig == signal.SIGKILL else 128 + sig)
            if sig == signal.SIGTERM:
                time.sleep(1)  # the resource tracker outlives its parent briefly, and would warn then
                log = (tmp_path / "sweep.log").read_text()
                assert "Traceback" not in log and "leaked semaphore" not in log, log[-3000:]
        deadline = time.monotonic() + 10
        while _marked(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _marked(mark) == [], "worker processes outlived their sweep"
        interrupted = _running(runs)
        assert interrupted, "every run was complete before the kill: nothing was tested"
    specs = expand_grid(grid)
    # in this process, one run at a time: no worker start-up to wait for
    again = run_sweep(specs, runs, jobs=1, progress=False)  # no run is left locked by a stray worker
    assert set(again.status) <= {"complete", "skipped"}, again.to_dict("records")
    assert set(again[again.run_id.isin(interrupted)].status) == {"complete"}
    finished = load_runs(runs)
    assert sorted(finished.run_id) == sorted(spec.run_id for spec in specs) and set(finished.status) == {"complete"}
    # a run resumed after its worker was killed is the uninterrupted run (each run trains with
    # its own thread count, in a worker or in this process: reductions are bit-identical)
    if sig == signal.SIGKILL:
        spec = next(spec for spec in specs if spec.run_id == interrupted[0])
        reference = train(spec, tmp_path / "reference", progress=False)
        for table in (HISTORY, GRADNORMS):
            pd.testing.assert_frame_equal(
                pd.read_parquet(runs / spec.run_id / table), pd.read_parquet(reference / table), check_exact=True
            )
        assert read_manifest(runs / spec.run_id)["final"] == read_manifest(reference)["final"]


_WATCHED = textwrap.dedent(
    """
    import os, sys, time
    sys.platform = "darwin"  # no PR_SET_PDEATHSIG: only the watchdog thread
    from robustkit.sweeps.executors import _die_with_parent
    _die_with_parent(os.getppid())
    print("watching", flush=True)
    time.sleep(60)
    """
)
# starts the watched worker, then dies without a word to it, as a killed sweep
_PARENT = textwrap.dedent(
    """
    import os, subprocess, sys
    child = subprocess.Popen([sys.executable, "-c", {watched!r}], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "watching\\n"
    print(child.pid, flush=True)
    os._exit(0)
    """
)
# adopts the orphaned worker (a subreaper), to see how it ends: "exit <status>" or "survived"
_REAPER = textwrap.dedent(
    """
    import ctypes, os, subprocess, sys, time
    assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    parent = subprocess.Popen([sys.executable, "-c", {parent!r}], stdout=subprocess.PIPE, text=True)
    pid = int(parent.stdout.readline())
    parent.wait()
    deadline = time.monotonic() + {timeout}
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            print("exit", os.waitstatus_to_exitcode(status))
            break
        time.sleep(0.02)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        print("survived")
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="adopts the orphan with PR_SET_CHILD_SUBREAPER")
def test_a_worker_whose_parent_dies_ends_without_pdeathsig():
    """The watchdog alone (where PR_SET_PDEATHSIG does not exist) ends an orphaned worker."""
    from robustkit.sweeps.executors import WATCHDOG_SECONDS

    script = _REAPER.format(parent=_PARENT.format(watched=_WATCHED), timeout=4 * WATCHDOG_SECONDS + 2)
    reaper = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert reaper.stdout.split() == ["exit", "1"], reaper.stdout + reaper.stderr


def test_a_worker_whose_parent_died_before_it_started_ends_at_once():
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from robustkit.sweeps.executors import _die_with_parent; _die_with_parent(-5); print('alive')",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "alive" not in done.stdout


def test_a_sweep_that_finds_a_run_locked_exits_non_zero(tmp_path, capsys):
    """A re-run whose runs another process holds did nothing: it says so and does not exit 0."""
    from robustkit.cli import main

    grid = _write(tmp_path, GRID)
    spec = expand_grid(grid)[0]
    run_dir = tmp_path / "runs" / spec.run_id
    run_dir.mkdir(parents=True)
    one = _write(
        tmp_path,
        GRID.replace("seed = [0, 1]", f"seed = [{spec.seed}]")
        .replace('method = ["houlsby", "full"]', f'method = ["{spec.method}"]')
        .replace("tsp_step = [0, 2]", f"tsp_step = [{spec.tsp_step}]"),
    )
    assert [s.run_id for s in expand_grid(one)] == [spec.run_id]
    with run_lock(run_dir):
        code = main(["sweep", str(one), "--store", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert code == 1 and f"NOT DONE {spec.run_id}" in err and "being trained by another process" in err


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds the sweep's workers through /proc")
def test_one_dead_worker_fails_its_run_and_the_sweep_goes_on(tmp_path, rte_folder):
    """Issue #39 item 5: SIGKILL of one worker of `sweep --jobs 2` aborted the whole sweep
    ("unexpected BrokenProcessPool", exit 1) and killed the other worker's run. Now that run is
    reported failed, the other worker finishes its run, a new worker takes the queued one, and a
    re-run resumes the killed run."""
    with _sweep_with_two_runs_training(tmp_path, rte_folder) as (parent, runs, mark, grid):
        # a worker: a spawned child that is not multiprocessing's resource tracker
        workers = _workers(mark)
        assert len(workers) == 2, workers
        os.kill(workers[0], signal.SIGKILL)
        _signal(workers[1:], signal.SIGCONT)  # the other worker, stopped while its run was looked at, goes on
        assert parent.wait(timeout=600) == 1  # a failed run: exit 1, after every other run ended
    log = (tmp_path / "sweep.log").read_text()
    assert "Traceback" not in log and "unexpected" not in log and "BrokenProcessPool" not in log, log[-3000:]
    assert "worker process died" in log and "1 failed" in log, log[-3000:]
    finished = load_runs(runs)
    assert (finished.status == "complete").sum() == 2, finished[["run_id", "status"]].to_dict("records")
    specs = expand_grid(grid)
    again = run_sweep(specs, runs, jobs=1, progress=False)  # the killed run resumes
    assert set(again.status) <= {"complete", "skipped"} and (again.status == "complete").sum() == 1


def test_killing_a_pool_s_workers_waits_for_its_manager_thread():
    """After the kill, the pool's manager thread has ended (its wake-up pipe closed), so the exit
    hook of Python 3.11 finds nothing to write to: a Ctrl-C prints its one line and no
    'Exception ignored ... Bad file descriptor' under it."""
    import concurrent.futures as futures
    import time

    from robustkit.sweeps.executors import _kill_workers

    pool = futures.ProcessPoolExecutor(max_workers=1)
    pool.submit(time.sleep, 60)
    manager = pool._executor_manager_thread
    assert manager is not None and manager.is_alive()
    _kill_workers(pool)
    assert not manager.is_alive()
