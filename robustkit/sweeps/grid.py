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
    lr = [1e-4, 2e-5]       # leave out to use [lr] below, else each method's paper default

    [lr]                    # optional: each method's rate where [base] and [grid] set none
    houlsby = 5e-4
    full = 1e-4

Running a sweep first trains each distinct TSP run once, up to the largest TSP step any of its
runs asks for (one masked-LM run, checkpoints at every requested step), then the supervised runs.
Complete runs are skipped, so re-running a sweep only trains what is missing; a complete run
counts only once its ``best`` and ``last`` files hash to its manifest's sha256, and a damaged run
(:mod:`robustkit.analysis.verify`) is reported, not trained over, until ``robustkit verify --repair``
moves it aside.

This module decides which runs a sweep trains; where and when they train is an executor's
business (:mod:`robustkit.sweeps.executors`: the protocol and the local executor; :mod:`robustkit.sweeps.slurm`).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from robustkit.errors import RobustkitError, SweepError
from robustkit.specs.limits import MAX_GRID_FILE_BYTES, MAX_GRID_RUNS, MAX_JOBS, MAX_TOML_DEPTH
from robustkit.specs.spec import SPEC_FIELDS, RunSpec, TspSpec
from robustkit.sweeps.executors import Executor, LocalExecutor
from robustkit.sweeps.jobs import Job

if TYPE_CHECKING:
    import pandas as pd

GRID_SECTIONS = ("base", "grid", "lr")
log = logging.getLogger(__name__)


def read_grid(path: str | Path) -> dict:
    """Parse a grid file; errors name the file and the bad key or value.

    Raises
    ------
    SweepError
        A path that does not exist, is a folder or cannot be read; a file that is not UTF-8
        text or not valid TOML.
    """
    path = Path(path)
    try:
        with path.open("rb") as handle:  # bounded: a device or a huge file is refused, not read
            data = handle.read(MAX_GRID_FILE_BYTES + 1)
        if len(data) > MAX_GRID_FILE_BYTES:
            raise SweepError(f"grid file {str(path)!r} is larger than {MAX_GRID_FILE_BYTES >> 10} KiB: not a grid file")
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise SweepError(f"grid file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise SweepError(f"grid file {str(path)!r} is a folder, not a TOML grid file") from None
    except OSError as error:
        raise SweepError(f"cannot read grid file {str(path)!r}: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise SweepError(
            f"grid file {str(path)!r} is not UTF-8 text (TOML must be): byte "
            f"{error.object[error.start]:#04x} at offset {error.start}"
        ) from None
    depth = _nesting(text)
    if depth > MAX_TOML_DEPTH:  # tomllib recurses once per level: refused before it overflows
        raise SweepError(f"grid file {str(path)!r} nests arrays or tables {depth} deep (at most {MAX_TOML_DEPTH})")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise SweepError(f"grid file {str(path)!r} is not valid TOML: {error}") from None


def _nesting(text: str) -> int:
    """An upper bound of the deepest nesting of ``[`` and ``{`` in TOML text (brackets inside
    strings and comments counted too, so it errs towards refusing only absurd files)."""
    depth = deepest = 0
    for char in text:
        if char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth = max(0, depth - 1)
    return deepest


def expand_grid(
    grid: dict | str | Path, defaults: dict | None = None, max_runs: int | None = MAX_GRID_RUNS
) -> list[RunSpec]:
    """Every run of a grid, in a stable order (product of the axes, in file order).

    Parameters
    ----------
    grid : dict or path
        A parsed grid (``{"base": {...}, "grid": {axis: [values]}, "lr": {method: rate}}``) or
        a grid file. ``lr`` (optional) gives each method its learning rate in the runs whose
        ``[base]`` and ``[grid]`` set none; methods it does not name take their paper default.
    max_runs : int or None
        Refuse a grid of more runs than this (:func:`grid_size`, counted before anything is
        expanded); None: no limit (``robustkit sweep --yes``).

    Raises
    ------
    SweepError
        Unknown section or key (named), a section that is not a table, an axis that is not a
        non-empty list, a grid without any field (it would train one run of every default), an
        ``[lr]`` key that is no method or a rate that is not a positive number, or a value the
        run spec rejects, or a grid of more than ``max_runs`` runs.
    defaults : dict, optional
        ``{"base": {...}, "lr": {...}}`` under the grid's own ``[base]`` and ``[lr]`` (a preset:
        :func:`robustkit.verdicts.recipes.preset`).
    """
    source, base, axes, rates = _parsed(grid, defaults)
    check_size(math.prod(len(values) for values in axes.values()), source, max_runs)
    specs = []
    for combination in itertools.product(*axes.values()):
        fields = {**base, **dict(zip(axes, combination))}
        method = _method_name(fields.get("method", RunSpec.method))
        if "lr" not in fields and method in rates:
            fields["lr"] = rates[method]
        try:
            specs.append(RunSpec(**fields).resolved())
        except RobustkitError as error:
            raise SweepError(f"grid run {fields}: {error}") from None
    return specs


def grid_size(grid: dict | str | Path) -> int:
    """How many runs a grid has (the product of its axes' lengths), without expanding it.

    Raises
    ------
    SweepError
        As :func:`expand_grid`, for the grid's shape (its values are checked when expanded).
    """
    _, _, axes, _ = _parsed(grid)
    return math.prod(len(values) for values in axes.values())


def check_size(runs: int, source: str, max_runs: int | None = MAX_GRID_RUNS) -> None:
    """Refuse ``runs`` runs of ``source`` (a grid file, a command line) beyond ``max_runs``
    (None: no limit), naming both and how to confirm.

    Raises
    ------
    SweepError
        ``runs > max_runs``.
    """
    if max_runs is not None and runs > max_runs:
        raise SweepError(
            f"the {source} has {runs:,} runs, more than {max_runs:,}: pass --yes to expand and train "
            "them all, or shorten its axes"
        )


def _parsed(grid: dict | str | Path, defaults: dict | None = None) -> tuple[str, dict, dict, dict]:
    """A grid's source (for messages), its ``base`` fields, its axes and its ``[lr]`` rates
    (under ``defaults``, see :func:`expand_grid`), checked for shape."""
    source = "grid" if isinstance(grid, dict) else f"grid file {str(grid)!r}"
    if not isinstance(grid, dict):
        grid = read_grid(grid)
    if defaults:
        grid = {**grid, **{key: {**defaults.get(key, {}), **grid.get(key, {})} for key in ("base", "lr")}}
    unknown = sorted(set(grid) - set(GRID_SECTIONS))
    if unknown:
        raise SweepError(f"unknown grid section(s) {unknown}; expected {list(GRID_SECTIONS)}")
    for section in GRID_SECTIONS:
        if not isinstance(grid.get(section, {}), dict):
            raise SweepError(
                f"{section!r} in {source} must be a table ([{section}] with one key per run "
                f"field), got {grid[section]!r}"
            )
    base, axes, rates = dict(grid.get("base", {})), dict(grid.get("grid", {})), _rates(grid.get("lr", {}), source)
    if not base and not axes:
        raise SweepError(f"the {source} defines no runs: [base] and [grid] are empty or missing")
    for section, keys in (("base", base), ("grid", axes)):
        bad = sorted(set(keys) - set(SPEC_FIELDS))
        if bad:
            raise SweepError(f"unknown key(s) {bad} in [{section}]; known keys: {', '.join(SPEC_FIELDS)}")
    for axis, values in axes.items():
        if not isinstance(values, list) or not values:
            raise SweepError(f"grid axis {axis!r} must be a non-empty list, got {values!r}")
    return source, base, axes, rates


def _rates(table: dict, source: str) -> dict[str, float]:
    """A grid's ``[lr]`` table, checked: method name (robustkit's, an AdapterHub name taken as
    it) -> positive learning rate."""
    from robustkit.errors import MethodError
    from robustkit.methods.registry import get_method

    rates = {}
    for method, rate in table.items():
        try:
            name = get_method(method).name
        except MethodError as error:
            raise SweepError(f"[lr] of the {source}: {error}") from None
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
            raise SweepError(f"[lr] {method} = {rate!r} in the {source}: a learning rate is a positive number")
        rates[name] = rate
    return rates


def _method_name(method) -> str | None:
    """robustkit's name of a grid run's method (None for a value the run spec will refuse)."""
    from robustkit.errors import MethodError
    from robustkit.methods.registry import get_method

    try:
        return get_method(method).name
    except MethodError:
        return None


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
        Local executor: runs trained at once, one per worker process. Each run trains with its
        own ``threads`` setting (part of its id), so ``jobs`` never changes a run's bytes.
    progress : bool
        Local executor: show progress bars.
    device : str, optional
        Where runs train (default: the GPU if there is one, else the CPU).
    executor : str or Executor
        ``local`` (worker processes on this machine, :class:`robustkit.sweeps.executors.LocalExecutor`),
        ``slurm`` (one job per run, :class:`robustkit.sweeps.slurm.SlurmExecutor`; ``slurm_options`` is
        a :class:`robustkit.sweeps.slurm.SlurmOptions`), or any :class:`robustkit.sweeps.executors.Executor`.
    wait : bool
        Slurm only: wait for the jobs to end (else return once they are submitted, with status
        ``submitted``).

    Returns
    -------
    DataFrame
        One row per spec, in their order: ``run_id, status`` (``complete``, ``skipped`` if it
        already was, ``locked`` if another process is training it, ``failed``, ``submitted``,
        ``damaged`` if its folder cannot be trusted: not trained over, see
        :func:`robustkit.store.checkpoints.finished_state`) and ``error``.
    """
    import pandas as pd

    from robustkit.specs import preflight
    from robustkit.store.checkpoints import finished_state
    from robustkit.store.folders import new_store, open_store, repair_hint
    from robustkit.store.schema import DAMAGED

    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= MAX_JOBS:
        raise SweepError(f"jobs (runs trained at once) must be an integer between 1 and {MAX_JOBS}, got {jobs!r}")
    root = Path(store).expanduser().resolve()  # absolute: a job running elsewhere (Slurm) must find it
    if root.exists():
        open_store(root, create=False)  # a file is refused now
    if isinstance(executor, str):
        executor = make_executor(executor, root, jobs=jobs, progress=progress, slurm_options=slurm_options, wait=wait)
    # finished runs count once their best/last files hash right; damaged ones are not trained over
    states = [finished_state(root / spec.run_id) for spec in specs]
    pending = [not finished and not problem for finished, problem in states]
    todo = [spec for spec, wanted in zip(specs, pending) if wanted]
    # a bad model, device or data stops the sweep here, before the store or any run folder exists
    # (runs trained elsewhere, by Slurm, may ask for a device that this machine lacks)
    preflight.check_runs(todo, device, device_here=isinstance(executor, LocalExecutor))
    log.info(
        "%d run(s) to train, %d complete already%s; store %s",
        len(todo),
        sum(f for f, _ in states),
        "".join(f", {n} damaged" for n in [sum(bool(p) for _, p in states)] if n),
        root,
    )
    tsp = [Job(spec, str(root), device, tuple(steps), data_dir) for spec, (steps, data_dir) in tsp_jobs(todo).items()]
    runs = [Job(spec, str(root), device, needs=spec.tsp_spec().run_id if spec.tsp_step else None) for spec in todo]
    # rows are the specs' runs; a TSP run shows in the runs that start from it (see the executors)
    with new_store(root):
        results = iter(executor.run(tsp + runs)[len(tsp) :])
    rows = [
        next(results)
        if wanted
        else {"run_id": spec.run_id, "status": DAMAGED, "error": f"{problem}; {repair_hint(root / spec.run_id)}"}
        if problem
        else {"run_id": spec.run_id, "status": "skipped", "error": None}
        for spec, wanted, (_, problem) in zip(specs, pending, states)
    ]
    return pd.DataFrame(rows, columns=["run_id", "status", "error"])


def make_executor(
    name: str, store: Path, jobs: int = 1, progress: bool = True, slurm_options=None, wait: bool = True
) -> Executor:
    """The executor called ``name`` (``local`` or ``slurm``, the CLI's ``--executor``)."""
    if name == "local":
        return LocalExecutor(workers=jobs, progress=progress)
    if name == "slurm":
        from robustkit.sweeps.slurm import SlurmExecutor  # imports submitit: only for Slurm sweeps

        return SlurmExecutor(store, slurm_options, wait=wait)
    raise SweepError(f"unknown executor {name!r}; known: local, slurm")


def with_data_dir(specs: list[RunSpec], data_dir: str) -> list[RunSpec]:
    """The runs of GLUE tasks read their TSV files from ``data_dir`` (a sweep's ``--data-dir``);
    runs of embedded tasks, whose data ships with robustkit, stay as they are.

    Raises
    ------
    SweepError
        No run is of a GLUE task: the folder would be ignored.
    """
    from robustkit.data.tasks import get_task

    glue = [get_task(spec.task).source == "glue" for spec in specs]
    if not any(glue):
        names = ", ".join(sorted({spec.task for spec in specs}))
        raise SweepError(
            f"data_dir {str(data_dir)!r} is for GLUE tasks, and every run of the grid is of an "
            f"embedded task ({names}), whose data ships with robustkit"
        )
    # data_fingerprint=None: the fingerprint is of the old folder; resolved() takes the new one's
    return [
        dataclasses.replace(spec, data_dir=data_dir, data_fingerprint=None).resolved() if is_glue else spec
        for spec, is_glue in zip(specs, glue)
    ]
