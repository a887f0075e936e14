"""When a file's stat can stand for its content: a key under which what was read from a file
(its sha256, its parsed rows) is remembered, and the rule for when it cannot be trusted yet.

A file modified within the file system's timestamp granularity may change again without its
mtime changing (git's "racily clean" rule), so a file that recent gets no key: it is read again.
"""

from __future__ import annotations

import time
from pathlib import Path

# How recently modified a file must not be for its stat to key its content, ns.
RACY_NS = 2_000_000_000


def stat_key(path: str | Path) -> tuple | None:
    """``(resolved path, inode, size, mtime_ns)`` of a file; None while it was modified less
    than :data:`RACY_NS` ago.

    Raises
    ------
    OSError
        The file cannot be stat'ed (missing, no permission).
    """
    path = Path(path)
    stat = path.stat()
    if time.time_ns() - stat.st_mtime_ns < RACY_NS:
        return None
    return (str(path.resolve()), stat.st_ino, stat.st_size, stat.st_mtime_ns)
