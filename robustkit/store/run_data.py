"""The data a saved run was trained and scored on, as an analysis reads it: its splits, after
checking that the data is still what the run's id recorded.

A run's id holds its data's fingerprint (:func:`robustkit.specs.spec.data_identity`), and its manifest
the sha256 of each local file it read; where the data lives (``data_dir``) is not part of the id.
Files edited after training (a flipped label in ``dev.tsv``), or another folder found under the
same relative path, would silently change every analysis of the run; :func:`run_splits` refuses
them instead, naming the file that differs. An analysis's cache is bound to the same identity:
its files are named by the run id (which holds the fingerprint) and only read while the data
checks out here.
"""

from __future__ import annotations

from pathlib import Path

import datasets

from robustkit.data import tasks
from robustkit.errors import DataChangedError
from robustkit.specs.spec import RunSpec, TspSpec, full_data_fingerprint


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
    check_run_data(spec, Path(run_dir).name if run_dir is not None else None, recorded)
    return tasks.load_splits(spec.task, data_dir=spec.data_dir, train_size=spec.train_size, split_seed=spec.split_seed)
