"""The lock a process holds on a run while it trains it (``<run>/.lock``, flock)."""

from __future__ import annotations

import contextlib
import fcntl
from pathlib import Path
from typing import Iterator

from robustkit.errors import RunLockedError


@contextlib.contextmanager
def run_lock(run_dir: Path, wait: bool = False) -> Iterator[None]:
    """Hold the run's lock for the duration.

    Fails at once if another process holds it, or with ``wait`` blocks until it is free.
    ``flock`` locks die with their process, so a killed run leaves no stale lock behind.
    """
    path = Path(run_dir) / ".lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise RunLockedError(f"run {Path(run_dir).name!r} is being trained by another process") from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
