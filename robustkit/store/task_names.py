"""One task name, one data set per store: runs of a user's data join a store only under a task name
that no other data set's runs there hold (``mixed.csv`` and ``mixed.jsonl`` are both task
``mixed`` by default; one name would put two data sets in one table row and figure panel).

``train --data`` and ``reproduce --data`` call :func:`check_name_free` before training; the data
itself is read by :mod:`robustkit.data.user_data`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from robustkit.data.user_sources import HUB_PREFIX, parse_source
from robustkit.errors import TaskError
from robustkit.store.folders import MANIFEST, run_dirs

if TYPE_CHECKING:
    from robustkit.data.user_dataset import UserData


def check_name_free(store: str | Path, loaded: UserData) -> None:
    """Refuse to add runs of ``loaded`` to ``store`` under a task name that runs there already
    give to other data (another file or hub dataset, another fingerprint): ``mixed.csv`` and
    ``mixed.jsonl`` are both task ``mixed`` by default, and one name would put two data sets in
    one table row and figure panel. The same file edited since is not refused here (every verb
    flags it, :mod:`robustkit.store.run_data`).

    Raises
    ------
    TaskError
        Naming the other data, a run of it, and a ``--task-name`` to give instead.
    """
    if loaded.source is None or not Path(store).is_dir():
        return
    name, here = loaded.task.name, parse_source(loaded.source)[0]
    for run_dir in run_dirs(store):
        try:
            manifest = json.loads((run_dir / MANIFEST).read_bytes())
            spec, record = manifest.get("spec") or {}, manifest.get("data") or {}
        except (OSError, ValueError, AttributeError):  # a damaged run: verify names it
            continue
        if (
            spec.get("task") != name
            or record.get("source") != "user"
            or record.get("fingerprint") == loaded.fingerprint
        ):
            continue
        there = parse_source(str(record.get("data_dir") or spec.get("data_dir") or ""))[0]
        if there == here or (not there.startswith(HUB_PREFIX) and _same_file(there, here)):
            continue
        suffix = Path(here).suffix.lstrip(".") or "data"
        raise TaskError(
            f"task {name!r} of store {store} is already other data ({there}, e.g. run {run_dir.name}): two data sets "
            f"under one name would share its table rows and figure panels; name this one apart "
            f"(--task-name {name}-{suffix})"
        )


def _same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name the same file or folder (both resolved)."""
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def check_task_free(store: str | Path | None, task: str) -> None:
    """:func:`check_name_free` for the user data this process registered as ``task`` (what
    :func:`robustkit.data.user_data.run_fields` just read); nothing when ``store`` is None.

    Raises
    ------
    TaskError
        ``store`` gives the name ``task`` to other data.
    """
    from robustkit.data.user_data import registered

    loaded = registered(task)
    if store is not None and loaded is not None:
        check_name_free(store, loaded)
