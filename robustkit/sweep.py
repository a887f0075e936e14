"""Grids of runs: a TOML grid file expands to :class:`RunSpec` s, run by an executor.

Grid file::

    [base]                  # fields shared by every run (any RunSpec field)
    model = "minilm-l6"
    task = "rt"
    train_size = 1000

    [grid]                  # axes: every combination is one run
    method = ["houlsby", "full"]
    seed = [0, 1, 2]
    tsp_step = [0, 300]
    lr = [1e-4, 2e-5]       # leave out to use each method's paper default

Running a sweep first trains each distinct TSP run once, up to the largest TSP step any of its
runs asks for (one masked-LM run, checkpoints at every requested step), then the supervised runs.
Complete runs are skipped, so re-running a sweep only trains what is missing.
"""

from __future__ import annotations

import concurrent.futures as futures
import dataclasses
import itertools
import multiprocessing
import os
import tomllib
from pathlib import Path
from typing import Callable, Iterable

import pandas as pd
from tqdm.auto import tqdm

from robustkit.errors import RobustkitError, RunLockedError, SweepError
from robustkit.spec import SPEC_FIELDS, RunSpec, TspSpec

GRID_SECTIONS = ("base", "grid")


def read_grid(path: str | Path) -> dict:
    """Parse a grid file; errors name the file and the bad key or value."""
    path = Path(path)
    try:
        grid = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SweepError(f"grid file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as error:
        raise SweepError(f"grid file {str(path)!r} is not valid TOML: {error}") from None
    return grid


def expand_grid(grid: dict | str | Path) -> list[RunSpec]:
    """Every run of a grid, in a stable order (product of the axes, in file order).

    Parameters
    ----------
    grid : dict or path
        A parsed grid (``{"base": {...}, "grid": {axis: [values]}}``) or a grid file.

    Raises
    ------
    SweepError
        Unknown section or key (named), an axis that is not a non-empty list, or a value the
        run spec rejects.
    """
    if not isinstance(grid, dict):
        grid = read_grid(grid)
    unknown = sorted(set(grid) - set(GRID_SECTIONS))
    if unknown:
        raise SweepError(f"unknown grid section(s) {unknown}; expected {list(GRID_SECTIONS)}")
    base, axes = dict(grid.get("base", {})), dict(grid.get("grid", {}))
    for section, keys in (("base", base), ("grid", axes)):
        bad = sorted(set(keys) - set(SPEC_FIELDS))
        if bad:
            raise SweepError(f"unknown key(s) {bad} in [{section}]; known keys: {', '.join(SPEC_FIELDS)}")
    for axis, values in axes.items():
        if not isinstance(values, list) or not values:
            raise SweepError(f"grid axis {axis!r} must be a non-empty list, got {values!r}")
    specs = []
    for combination in itertools.product(*axes.values()):
        fields = {**base, **dict(zip(axes, combination))}
        try:
            specs.append(RunSpec(**fields).resolved())
        except RobustkitError as error:
            raise SweepError(f"grid run {fields}: {error}") from None
    return specs


def tsp_jobs(specs: Iterable[RunSpec]) -> dict[TspSpec, tuple[list[int], str | None]]:
    """Distinct TSP runs the specs need, each with every TSP step asked of it."""
    jobs: dict[TspSpec, tuple[list[int], str | None]] = {}
    for spec in specs:
        if spec.tsp_step:
            steps, data_dir = jobs.setdefault(spec.tsp_spec(), ([], spec.data_dir))
            steps.append(spec.tsp_step)
    return {tsp: (sorted(set(steps)), data_dir) for tsp, (steps, data_dir) in jobs.items()}


def run_sweep(
    specs: list[RunSpec],
    store: str | Path,
    jobs: int = 1,
    progress: bool = True,
    device: str | None = None,
    executor: str = "local",
    slurm_options=None,
    wait: bool = True,
) -> pd.DataFrame:
    """Train every run that is not complete yet: TSP runs first, then supervised runs.

    Parameters
    ----------
    jobs : int
        Runs trained at once, one per worker process; torch threads are split between them.
    device : str, optional
        Where runs train (default: the GPU if there is one, else the CPU).
    executor : str
        ``local`` (worker processes on this machine) or ``slurm`` (one job per run, see
        :mod:`robustkit.slurm`; ``slurm_options`` is a :class:`robustkit.slurm.SlurmOptions`).
    wait : bool
        Slurm only: wait for the jobs to end (else return once they are submitted, with status
        ``submitted``).

    Returns
    -------
    DataFrame
        One row per run: ``run_id, status`` (``complete``, ``skipped`` if it already was,
        ``locked`` if another process is training it, ``failed``) and ``error``.
    """
    from robustkit.store import open_store
    from robustkit.train import _is_complete

    root = open_store(store)
    todo = [s for s in specs if not _is_complete(root / s.run_id)]
    done = [{"run_id": s.run_id, "status": "skipped", "error": None} for s in specs if s not in todo]
    if executor == "slurm":
        return pd.DataFrame(done + _run_on_slurm(todo, root, slurm_options, device, wait), columns=["run_id", "status", "error"])
    if executor != "local":
        raise SweepError(f"unknown executor {executor!r}; known: local, slurm")
    tsp = [(spec, steps, data_dir, str(root), device) for spec, (steps, data_dir) in tsp_jobs(todo).items()]
    rows = _map(_pretrain_job, tsp, jobs, progress, "TSP runs")
    failed_tsp = {row["run_id"]: row["error"] for row in rows if row["status"] == "failed"}
    runnable = [s for s in todo if not s.tsp_step or s.tsp_spec().run_id not in failed_tsp]
    for spec in todo:
        if spec not in runnable:
            done.append({"run_id": spec.run_id, "status": "failed", "error": f"TSP run failed: {failed_tsp[spec.tsp_spec().run_id]}"})
    done += _map(_train_job, [(spec, str(root), device) for spec in runnable], jobs, progress, "runs")
    return pd.DataFrame(done, columns=["run_id", "status", "error"])


def _run_on_slurm(todo: list[RunSpec], root: Path, options, device: str | None, wait: bool) -> list[dict]:
    from robustkit import slurm

    tsp = [(spec, steps, data_dir) for spec, (steps, data_dir) in tsp_jobs(todo).items()]
    submitted = slurm.submit(tsp, todo, root.resolve(), options or slurm.SlurmOptions(), device)
    run_jobs = submitted[len(tsp):]
    if not wait:
        return [{"run_id": s.run_id, "status": "submitted", "error": f"job {j.job_id}"} for s, j in zip(todo, run_jobs, strict=True)]
    slurm.wait(submitted)
    return [slurm.outcome(job, spec.run_id) for spec, job in zip(todo, run_jobs, strict=True)]


def _map(function: Callable, items: list[tuple], jobs: int, progress: bool, label: str) -> list[dict]:
    """Local executor: ``function(*item)`` for each item, in ``jobs`` worker processes."""
    if not items:
        return []
    bar = tqdm(total=len(items), desc=label, disable=not progress, unit="run")
    if jobs <= 1:
        results = []
        for item in items:
            results.append(function(*item, progress=progress))
            bar.update(1)
        bar.close()
        return results
    threads = max(1, (os.cpu_count() or 1) // jobs)
    context = multiprocessing.get_context("spawn")
    with futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_set_threads, initargs=(threads,)) as pool:
        pending = [pool.submit(function, *item, progress=False) for item in items]
        results = []
        for future in futures.as_completed(pending):
            results.append(future.result())
            bar.update(1)
    bar.close()
    return results


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def _pretrain_job(spec: TspSpec, steps: list[int], data_dir: str | None, store: str, device: str | None, progress: bool) -> dict:
    from robustkit.train import pretrain

    return _guarded(spec.run_id, lambda: pretrain(spec, steps, store, data_dir=data_dir, progress=progress, device=device))


def _train_job(spec: RunSpec, store: str, device: str | None, progress: bool) -> dict:
    from robustkit.train import train

    return _guarded(spec.run_id, lambda: train(spec, store, progress=progress, device=device))


def _guarded(run_id: str, work: Callable) -> dict:
    """Run one job; a failure is reported in the result instead of stopping the sweep."""
    try:
        work()
    except RunLockedError as error:  # another sweep is training it: not ours to report as failed
        return {"run_id": run_id, "status": "locked", "error": str(error)}
    except Exception as error:  # noqa: BLE001 - reported per run, the sweep goes on
        return {"run_id": run_id, "status": "failed", "error": f"{type(error).__name__}: {error}"}
    return {"run_id": run_id, "status": "complete", "error": None}


def with_overrides(specs: list[RunSpec], **changes) -> list[RunSpec]:
    """The same runs with some fields changed (e.g. ``data_dir``)."""
    return [dataclasses.replace(spec, **changes).resolved() for spec in specs]
