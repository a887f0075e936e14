"""The data a saved run was trained and scored on, as an analysis reads it: its task
(:func:`run_task`) and its splits (:func:`run_splits`), after checking that the data is still
what the run's id recorded.

A run carries its data: its task is resolved from the run itself (a built-in task by name; the
user's own data from the spec's ``data_dir``, which for a DataFrame or ``datasets`` object of a
notebook is the copy :func:`keep_in_store` saved in the store's ``.data/`` folder), never from
what this process happened to register first, so an analysis gives the same answer in a new
process and in any order.

A run's id holds its data's fingerprint (:func:`robustkit.specs.spec.data_identity`), and its manifest
the sha256 of each local file it read; where the data lives (``data_dir``) is not part of the id.
Files edited after training (a flipped label in ``dev.tsv``), or another folder found under the
same relative path, would silently change every analysis of the run; :func:`run_splits` refuses
them instead, naming the file that differs. An analysis's cache is bound to the same identity:
its files are named by the run id (which holds the fingerprint) and only read while the data
checks out here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from robustkit.data import tasks
from robustkit.data.catalogue import TASKS, Task
from robustkit.errors import DataChangedError, TaskError
from robustkit.specs.spec import RunSpec, TspSpec, full_data_fingerprint

if TYPE_CHECKING:  # a type only: `runs` checks a store's data files without loading them (issue #57)
    import datasets

DATA_FOLDER = ".data"  # in a store: copies of in-memory user data, by fingerprint


def run_task(spec: RunSpec | TspSpec, run_dir: str | Path | None = None) -> Task:
    """The task of a run, resolved from the run alone: every analysis calls this.

    Parameters
    ----------
    spec : RunSpec or TspSpec
        The run's spec, as its manifest records it.
    run_dir : path, optional
        The run's folder: names the run in messages, and finds the store's copy of in-memory
        data whose recorded ``data_dir`` is gone (a store moved as a whole).

    Returns
    -------
    Task

    Raises
    ------
    TaskError
        The run's data is missing: one line naming the run and the file or folder it read.
    """
    if spec.task in TASKS:
        return TASKS[spec.task]
    from robustkit.data import user_data, user_sources

    run = Path(run_dir).name if run_dir is not None else spec.run_id
    source = run_source(spec, run_dir)
    if source is None:
        loaded = user_data.registered(spec.task)
        if loaded is not None and (spec.data_fingerprint in (None, loaded.fingerprint)):
            return loaded.task
        raise TaskError(
            f"run {run!r} records no data source for task {spec.task!r} (trained from an object in a "
            "notebook before runs kept their data): register the same data (robustkit.data.user_data.register)"
        )
    location = str(source).split("#", 1)[0]
    if not location.startswith(user_sources.HUB_PREFIX) and not Path(location).exists():
        raise TaskError(
            f"run {run!r} was trained on {location}, which is not there any more (moved or deleted?): "
            "put the data back there, or pass the run's data with --data"
        )
    return user_data.ensure(spec.task, source).task


def run_spec(run_dir: str | Path, spec: RunSpec | None = None):
    """The resolved spec of the run in ``run_dir`` (read from its manifest unless given), its
    data resolved as :func:`run_task` does: the store's copy where the recorded ``data_dir`` is
    gone; a missing data file named in one line (TaskError).

    Returns
    -------
    robustkit.specs.spec.ResolvedRunSpec
    """
    if spec is None:
        from robustkit.store.manifest import read_spec

        spec = read_spec(run_dir)
    return _with_source(spec, run_task(spec, run_dir), run_dir).resolved()


def _with_source(spec, task: Task, run_dir):
    """``spec`` reading a user task's data from :func:`run_source` (looked up once)."""
    if task.source != "user":
        return spec
    source = run_source(spec, run_dir)
    return spec if source == spec.data_dir else dataclasses.replace(spec, data_dir=source)


def run_source(spec: RunSpec | TspSpec, run_dir: str | Path | None = None) -> str | None:
    """Where a run's user data is read from: its ``data_dir``, or, where that is gone, the
    copy its store kept (:func:`keep_in_store`) when ``run_dir`` is given."""
    from robustkit.data import user_sources

    source = spec.data_dir
    if run_dir is not None and (source is None or not user_sources.is_source(source)):
        source = _store_copy(Path(run_dir).parent, spec.data_fingerprint) or source
    return None if source is None else str(source)


def keep_in_store(store: str | Path, spec: RunSpec) -> RunSpec:
    """``spec`` reading its data from the store when that data lives in this process only (a
    DataFrame or ``datasets`` object registered in a notebook): the data is saved once under
    ``store/.data/<fingerprint>`` and becomes the spec's ``data_dir`` (not part of the run id),
    so a later process analyses the run. Other specs are returned as they are."""
    if spec.task in TASKS or spec.data_dir is not None:
        return spec
    from robustkit.data import user_data, user_dataset

    loaded = user_data.registered(spec.task)
    if loaded is None:
        return spec
    folder = user_dataset.save_copy(loaded, Path(store) / DATA_FOLDER / loaded.fingerprint.rsplit(":", 1)[-1])
    return dataclasses.replace(spec, data_dir=str(folder.resolve())).resolved()


def _store_copy(store: Path, fingerprint: str | None) -> str | None:
    """The store's saved copy of the data of ``fingerprint``, if there is one."""
    if not fingerprint:
        return None
    folder = store / DATA_FOLDER / fingerprint.rsplit(":", 1)[-1]
    return str(folder) if folder.is_dir() else None


def check_run_data(spec: RunSpec | TspSpec, run: str | None = None, recorded_files: dict | None = None) -> None:
    """Refuse when the data ``spec`` reads now is not the data its run was trained on.

    Parameters
    ----------
    spec : RunSpec or TspSpec
        The run's spec as its manifest records it (``data_fingerprint`` included).
    run : str, optional
        The run's name, for the message.
    recorded_files : dict, optional
        The manifest's ``data.files`` (file name -> sha256) of a local TSV folder: names the
        file that changed.

    Raises
    ------
    DataChangedError
        The data's fingerprint differs from the recorded one.
    """
    if spec.data_fingerprint is None and spec.data_dir is not None:
        # a spec made now, not read from a manifest (a recorded local folder has a fingerprint,
        # None stands only for the legacy hub and embedded data): nothing recorded to check
        return
    expected = full_data_fingerprint(spec)
    actual = tasks.data_fingerprint(spec.task, spec.data_dir)
    if actual == expected:
        return
    where = f"{spec.data_dir}" if spec.data_dir else f"the data of task {spec.task!r}"
    changed = ""
    if recorded_files and spec.data_dir:
        now = tasks.data_record(spec.task, spec.data_dir).get("files", {})
        differs = sorted(name for name in set(recorded_files) | set(now) if recorded_files.get(name) != now.get(name))
        if differs:
            changed = f" ({', '.join(differs)} changed since)"
    raise DataChangedError(
        f"run {run or spec.run_id!r} was trained on data {expected}, but {where} now gives {actual}{changed}: "
        "refusing to analyse it on other data; restore the data it was trained on (or point data_dir at it)"
    )


def run_splits(spec: RunSpec | TspSpec, run_dir: str | Path | None = None) -> dict[str, datasets.Dataset]:
    """The run's ``{"train", "validation", "test"}`` splits (its ``train_size`` and
    ``split_seed``), after :func:`check_run_data`.

    Parameters
    ----------
    run_dir : path, optional
        The run's folder: its manifest's file hashes name a changed file.
    """
    recorded = None
    if run_dir is not None:
        from robustkit.store.manifest import read_manifest

        recorded = read_manifest(Path(run_dir)).get("data", {}).get("files")
    task = run_task(spec, run_dir)
    spec = _with_source(spec, task, run_dir)  # the store's copy where the recorded data_dir is gone
    check_run_data(spec, Path(run_dir).name if run_dir is not None else None, recorded)
    return tasks.load_splits(task, data_dir=spec.data_dir, train_size=spec.train_size, split_seed=spec.split_seed)


class DataChangedWarning(UserWarning):
    """Runs of the store whose local data changed (or went missing) since they were trained:
    their recorded scores stand, analyses that read the data refuse them."""


def changed_data(runs) -> dict[str, str]:
    """Which runs' local data is no longer the data they were trained on, each source checked once.

    Parameters
    ----------
    runs : DataFrame
        Rows of :func:`robustkit.store.tables.load_runs` (``run_id, task, data_dir,
        data_fingerprint``). Runs without a local ``data_dir`` (embedded, hub) are not checked.

    Returns
    -------
    dict of str to str
        run_id -> one line: the file or folder and what it gives now (another fingerprint, or
        that it is missing or unreadable).
    """
    if "data_dir" not in runs or "data_fingerprint" not in runs:
        return {}
    local = runs[runs["data_dir"].map(lambda d: isinstance(d, str) and not d.startswith("hub:"))]
    local = local[local["data_fingerprint"].map(lambda f: isinstance(f, str) and bool(f))]
    changed = {}
    for (task, data_dir, recorded), group in local.groupby(["task", "data_dir", "data_fingerprint"], sort=False):
        why = _why_changed(task, data_dir, recorded)
        if why is None:
            continue
        for run_id in group["run_id"]:
            changed[run_id] = why
    return changed


def _why_changed(task: str, data_dir: str, recorded: str) -> str | None:
    """Why local ``data_dir`` no longer gives the ``recorded`` fingerprint, in one line; None if it does."""
    location = data_dir.split("#", 1)[0]
    if not Path(location).exists():  # said as such, not in the words of reading a task nothing registered
        return f"the training data {location} is not there any more (moved or deleted?)"
    try:
        actual = tasks.data_fingerprint(task, data_dir)
    except (TaskError, OSError, ValueError) as error:
        cause = str(error).splitlines()[0] if str(error) else type(error).__name__
        return f"{location} is missing or unreadable ({cause})"
    if actual == recorded:
        return None
    return f"{location} changed since training: it gives {actual[:24]}…, the runs had {recorded[:24]}…"
