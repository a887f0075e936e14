"""The lock a process holds on a run while it trains it (``<run>/.lock``).

``filelock``'s lock, the operating system's own (``flock`` on POSIX, ``msvcrt`` on Windows), not
a lock file whose existence is the lock: it dies with its process, so a killed run leaves no
stale lock behind. Its fallback to such a "soft" lock file (on a file system without ``flock``)
is switched off for that reason: there, taking the lock is an error, as it was with ``fcntl``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

from robustkit.errors import RunLockedError


@contextlib.contextmanager
def run_lock(run_dir: Path, wait: bool = False) -> Iterator[None]:
    """Hold the run's lock for the duration.

    Fails at once if another process (or another ``run_lock`` of this one) holds it, or with
    ``wait`` blocks until it is free.
    """
    path = Path(run_dir) / ".lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path, thread_local=False, fallback_to_soft=False, preserve_lock_file=True)
    try:
        lock.acquire(timeout=-1 if wait else 0)
    except Timeout:
        raise RunLockedError(f"run {Path(run_dir).name!r} is being trained by another process") from None
    try:
        yield
    finally:
        lock.release()
