"""A run's training logs (``history.parquet``, ``gradnorms.parquet``), hashed like its checkpoints.

Statistics, claims and figures are read from these logs as much as from the checkpoints: a
flipped bit in a history once moved a mean dev score from 0.451 to 0.201 with ``verify`` saying
"ok". Every write of the logs records their sha256 in the manifest (``logs: {file: sha256}``,
:func:`record_logs`); :func:`robustkit.store.integrity.log_problems` checks them with the
checkpoints, for ``robustkit verify`` and every reader, which leaves a damaged run out with a
warning naming it.

The logs of a run still training are rewritten at every checkpoint: training records their new
sha256 in the manifest before it writes them and keeps the sha256 it wrote in the ``last``
checkpoint, so that after a kill each log hashes to one of the two. Resuming checks that
(:func:`robustkit.store.integrity.resume_log_problems`) and refuses a log that was edited,
deleted or swapped in from another run, naming it; ``verify`` reports such a run damaged.
Runs written before logs were hashed have no ``logs`` entry and are not checked.
"""

from __future__ import annotations

from pathlib import Path

from robustkit.store.atomic import sha256_file
from robustkit.store.folders import GRADNORMS, HISTORY
from robustkit.store.integrity import log_problems, resume_log_problems
from robustkit.store.manifest import update_manifest

__all__ = ["LOGS", "log_problems", "record_logs", "resume_log_problems"]  # log_problems: checked with every other file

LOGS = (HISTORY, GRADNORMS)


def record_logs(run_dir: str | Path, hashes: dict[str, str] | None = None) -> dict[str, str]:
    """Record the logs' sha256 in the run's manifest (``logs``).

    Parameters
    ----------
    hashes : dict, optional
        File name -> sha256 of the logs about to be written (training records them first);
        None: hash the run's log files that exist.

    Returns
    -------
    dict
        File name -> sha256 (hex).
    """
    run_dir = Path(run_dir)
    if hashes is None:
        hashes = {name: sha256_file(run_dir / name) for name in LOGS if (run_dir / name).is_file()}
    update_manifest(run_dir, logs=hashes)
    return hashes
