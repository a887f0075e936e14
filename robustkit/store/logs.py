"""A run's training logs (``history.parquet``, ``gradnorms.parquet``), hashed like its checkpoints.

Statistics, claims and figures are read from these logs as much as from the checkpoints: a
flipped bit in a history once moved a mean dev score from 0.451 to 0.201 with ``verify`` saying
"ok". Every write of the logs records their sha256 in the manifest (``logs: {file: sha256}``,
:func:`record_logs`); :func:`robustkit.store.integrity.log_problems` checks them with the
checkpoints, for ``robustkit verify`` and every reader, which leaves a damaged run out with a
warning naming it.

The logs of a run still training are rewritten at every checkpoint and may be a step ahead of
its manifest after a kill (resuming drops the rows past the checkpoint): only finished runs are
checked. Runs written before logs were hashed have no ``logs`` entry and are not checked.
"""

from __future__ import annotations

from pathlib import Path

from robustkit.store.atomic import sha256_file
from robustkit.store.folders import GRADNORMS, HISTORY
from robustkit.store.integrity import log_problems
from robustkit.store.manifest import update_manifest

__all__ = ["LOGS", "log_problems", "record_logs"]  # log_problems: checked with every other file

LOGS = (HISTORY, GRADNORMS)


def record_logs(run_dir: str | Path) -> dict[str, str]:
    """Hash the run's log files that exist and record them in its manifest (``logs``).

    Returns
    -------
    dict
        File name -> sha256 (hex).
    """
    run_dir = Path(run_dir)
    hashes = {name: sha256_file(run_dir / name) for name in LOGS if (run_dir / name).is_file()}
    update_manifest(run_dir, logs=hashes)
    return hashes
