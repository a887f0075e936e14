"""What a run's manifest records of its inputs: the data it trains on (checked against the data
the run is for) and the parameters it trains."""

from __future__ import annotations

from pathlib import Path

from robustkit.data import tasks
from robustkit.errors import DataChangedError
from robustkit.methods import adaptation_of, adapter_parameter_counts
from robustkit.methods.model_parts import count_parameters
from robustkit.specs.spec import RunSpec, TspSpec, full_data_fingerprint
from robustkit.store.folders import MANIFEST
from robustkit.store.manifest import read_manifest


def check_data(run_dir: Path, spec: RunSpec | TspSpec, data_dir: str | None, splits: dict) -> dict:
    """The manifest's record of the data the run reads now (:func:`robustkit.data.tasks.data_record`),
    after checking it is the data the run is for.

    The run id holds the data's fingerprint, and the manifest of a started run records it (with
    the ``datasets`` fingerprints of hub data, which the id cannot hold): training or resuming a
    run on other data would mix two datasets in one run (a spec resolved before the data
    changed, a Slurm job that starts after it did, a resume after the TSV files were edited).

    Raises
    ------
    DataChangedError
        The data differs from the run's; the message names both fingerprints.
    """
    record = tasks.data_record(spec.task, data_dir, splits)
    where = f"data_dir {data_dir}" if record["source"] == "tsv" else f"the {record['source']} data of {spec.task!r}"
    recorded = read_manifest(run_dir).get("data", {}) if (run_dir / MANIFEST).exists() else {}
    claims = [
        ("its run id", full_data_fingerprint(spec), record["fingerprint"]),
        ("its manifest's datasets fingerprints", recorded.get("datasets"), record.get("datasets")),
    ]
    for source, expected, actual in claims:
        if expected and actual and expected != actual:
            raise DataChangedError(
                f"run {run_dir.name!r} is for data {expected} ({source}), but {where} now gives {actual}: "
                "refusing to train or resume it on different data. Restore the data it was trained on, "
                "or train the new data as a run of its own (a spec resolved now has a new run id)"
            )
    return record


def trainable_summary(model, names: list[str]) -> dict:
    """The manifest's ``trainable``: count and names of what trains, the model's total, the
    parameters the method added (``added``; ``total - added`` is the pretrained model with its
    head) and each bottleneck adapter module's count; and ``method_check``, the method's
    trainable-count check against its formula (:meth:`robustkit.methods.base.Method.check`)."""
    adaptation = adaptation_of(model)
    return {
        "count": count_parameters(model, names),
        "total": count_parameters(model),
        "names": names,
        "added": count_parameters(model, adaptation.added),
        "adapter_modules": adapter_parameter_counts(model),
        "method_check": adaptation.check,
    }
