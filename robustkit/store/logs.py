"""A run's training logs (``history.parquet``, ``gradnorms.parquet``), hashed like its checkpoints.

Statistics, claims and figures are read from these logs as much as from the checkpoints: a
flipped bit in a history once moved a mean dev score from 0.451 to 0.201 with ``verify`` saying
"ok". Every write of the logs records their sha256 in the manifest (``logs: {file: sha256}``,
:func:`record_logs`); :func:`log_problems` re-hashes them, for ``robustkit verify`` and for the
loaders, which leave a damaged run's logs out with a warning naming it.

The logs of a run still training are rewritten at every checkpoint and may be a step ahead of
its manifest after a kill (resuming drops the rows past the checkpoint): only finished runs are
checked. Runs written before logs were hashed have no ``logs`` entry and are not checked.
"""

from __future__ import annotations

from pathlib import Path

from robustkit.store.atomic import sha256_file
from robustkit.store.folders import GRADNORMS, HISTORY
from robustkit.store.manifest import update_manifest
from robustkit.store.schema import FINISHED

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


def log_problems(run_dir: str | Path, manifest: dict) -> list[str]:
    """Why the logs of a finished run do not match its manifest (empty: they do, or are unchecked).

    Parameters
    ----------
    manifest : dict
        The run's manifest (its ``status`` and ``logs``).
    """
    listed = manifest.get("logs")
    if not isinstance(listed, dict) or manifest.get("status") not in FINISHED:
        return []
    problems = []
    for name, expected in listed.items():
        path = Path(run_dir) / name
        try:
            if not path.is_file():
                problems.append(f"{name} is missing")
            elif sha256_file(path) != expected:
                problems.append(f"{name} does not match its sha256 in the manifest")
        except PermissionError:
            problems.append(f"{name} cannot be read: permission denied")
    return problems
