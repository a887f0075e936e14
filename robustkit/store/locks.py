"""The lock a process holds on a run while it trains it (``<run>/.lock``, ``flock``).

The operating system's lock, not a lock file whose existence is the lock: it dies with its
process, so a killed run leaves no stale lock behind. Written on ``fcntl.flock`` rather than
``filelock`` (issue #28 asked for the library) for two things its ``FileLock`` does not do:
after locking, the lock is checked to be on the file that is at the path now (a refused run
removes its lock-only folder, :func:`remove_unstarted`, and a process that waited on the removed
file must not train under a lock nobody else can see), and a read-only lock file (a store
another user trained) is still locked, where ``filelock`` opens it for writing and fails. Windows
is not supported by the rest of the store either (atomic renames over open files).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator

from robustkit.errors import RunLockedError

LOCK_FILE = ".lock"


@contextlib.contextmanager
def run_lock(run_dir: Path, wait: bool = False) -> Iterator[None]:
    """Hold the run's lock for the duration.

    Fails at once if another process holds it, or with ``wait`` blocks until it is free.
    ``flock`` locks die with their process, so a killed run leaves no stale lock behind.

    A lock is held only on the file that is at ``<run>/.lock`` once it is locked: a process that
    waited on a lock file which its holder then removed (:func:`remove_unstarted`) takes the
    new one instead, so two processes never hold the same run.
    """
    path = Path(run_dir) / LOCK_FILE
    while True:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = _open_lock_file(path)
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                raise RunLockedError(f"run {Path(run_dir).name!r} is being trained by another process") from None
            if _same_file(handle, path):
                break
        except BaseException:
            handle.close()
            raise
        handle.close()  # removed while we waited: lock the file that is there now
    with handle:
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _same_file(handle, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


def remove_unstarted(run_dir: Path) -> bool:
    """Remove a run folder that holds nothing but its lock file (a run refused before it wrote
    anything), holding that lock: a rejected command leaves no folder behind.

    Returns
    -------
    bool
        Whether the folder was removed.
    """
    run_dir = Path(run_dir)
    try:
        if {p.name for p in run_dir.iterdir()} != {LOCK_FILE}:
            return False
        (run_dir / LOCK_FILE).unlink()
        run_dir.rmdir()
    except OSError:  # written meanwhile, or not ours to remove: kept
        return False
    return True


def _open_lock_file(path: Path):
    """The lock file, created if missing; read-only where this user may not write it (a store
    another user trained: ``flock`` needs no write access, so reading it is still safe)."""
    try:
        return open(path, "a")
    except PermissionError:
        if not path.is_file():
            raise
        return open(path)
