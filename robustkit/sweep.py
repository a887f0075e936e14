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

This module decides which runs a sweep trains; where and when they train is an executor's
business (:mod:`robustkit.executors`: the protocol and the local executor; :mod:`robustkit.slurm`).
"""

from __future__ import annotations

import dataclasses
import itertools
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from robustkit.errors import RobustkitError, SweepError
from robustkit.executors import Executor, LocalExecutor
from robustkit.jobs import Job
from robustkit.spec import SPEC_FIELDS, RunSpec, TspSpec

if TYPE_CHECKING:
    import pandas as pd

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
    executor: str | Executor = "local",
    slurm_options=None,
    wait: bool = True,
) -> pd.DataFrame:
    """Train every run that is not complete yet: TSP runs first, then supervised runs.

    Parameters
    ----------
    jobs : int
        Local executor: runs trained at once, one per worker process; torch threads are split
        between them.
    progress : bool
        Local executor: show progress bars.
    device : str, optional
        Where runs train (default: the GPU if there is one, else the CPU).
    executor : str or Executor
        ``local`` (worker processes on this machine, :class:`robustkit.executors.LocalExecutor`),
        ``slurm`` (one job per run, :class:`robustkit.slurm.SlurmExecutor`; ``slurm_options`` is
        a :class:`robustkit.slurm.SlurmOptions`), or any :class:`robustkit.executors.Executor`.
    wait : bool
        Slurm only: wait for the jobs to end (else return once they are submitted, with status
        ``submitted``).

    Returns
    -------
    DataFrame
        One row per spec, in their order: ``run_id, status`` (``complete``, ``skipped`` if it
        already was, ``locked`` if another process is training it, ``failed``, ``submitted``)
        and ``error``.
    """
    import pandas as pd

    from robustkit.store import open_store
    from robustkit.train import _is_complete

    root = open_store(store).resolve()  # absolute: a job running elsewhere (Slurm) must find it
    if isinstance(executor, str):
        executor = make_executor(executor, root, jobs=jobs, progress=progress, slurm_options=slurm_options, wait=wait)
    pending = [not _is_complete(root / spec.run_id) for spec in specs]
    todo = [spec for spec, wanted in zip(specs, pending) if wanted]
    tsp = [Job(spec, str(root), device, tuple(steps), data_dir) for spec, (steps, data_dir) in tsp_jobs(todo).items()]
    runs = [Job(spec, str(root), device, needs=spec.tsp_spec().run_id if spec.tsp_step else None) for spec in todo]
    # rows are the specs' runs; a TSP run shows in the runs that start from it (see the executors)
    results = iter(executor.run(tsp + runs)[len(tsp):])
    rows = [next(results) if wanted else {"run_id": spec.run_id, "status": "skipped", "error": None}
            for spec, wanted in zip(specs, pending)]
    return pd.DataFrame(rows, columns=["run_id", "status", "error"])


def make_executor(name: str, store: Path, jobs: int = 1, progress: bool = True, slurm_options=None,
                  wait: bool = True) -> Executor:
    """The executor called ``name`` (``local`` or ``slurm``, the CLI's ``--executor``)."""
    if name == "local":
        return LocalExecutor(workers=jobs, progress=progress)
    if name == "slurm":
        from robustkit.slurm import SlurmExecutor  # imports submitit: only for Slurm sweeps

        return SlurmExecutor(store, slurm_options, wait=wait)
    raise SweepError(f"unknown executor {name!r}; known: local, slurm")


def with_overrides(specs: list[RunSpec], **changes) -> list[RunSpec]:
    """The same runs with some fields changed (e.g. ``data_dir``)."""
    return [dataclasses.replace(spec, **changes).resolved() for spec in specs]
