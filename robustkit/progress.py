"""Progress bars that a person can turn off and that never write into a file.

Every bar of robustkit is :func:`bar` (tqdm's, ``tqdm.auto``: a widget in a notebook). A bar is
drawn only where someone watches it: ``show`` (the ``progress=`` argument of the function that
draws it) is true, ``$TQDM_DISABLE`` is not set to a true value (``1``, ``true``, ``yes``, ``on``:
tqdm's own switch, which an explicit ``disable=`` would otherwise override; ``robustkit -q`` sets
it, so worker processes inherit it), and the stream it writes to is a terminal or a notebook's
output. So a log redirected to a file (``robustkit train ... 2> log``) holds no carriage-return
bar lines.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

ENV = "TQDM_DISABLE"
_TRUE = ("1", "true", "yes", "on")


def bar(iterable: Iterable | None = None, *, show: bool = True, **kwargs: Any):
    """A ``tqdm.auto.tqdm`` bar over ``iterable`` (or a manual one with ``total=``), drawn only
    where :func:`wanted` (``kwargs``: tqdm's, e.g. ``desc``, ``unit``, ``leave``, ``file``)."""
    from tqdm.auto import tqdm  # may import IPython: only where a bar is made

    return tqdm(iterable, disable=not wanted(show, kwargs.get("file")), **kwargs)


def wanted(show: bool = True, stream=None) -> bool:
    """Whether a bar is drawn: ``show``, ``$TQDM_DISABLE`` unset or false, and ``stream`` (default
    stderr) a terminal, or the output of a notebook."""
    if not show or os.environ.get(ENV, "").strip().lower() in _TRUE:
        return False
    if in_notebook():
        return True
    stream = sys.stderr if stream is None else stream
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (where tqdm.auto draws widgets)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def silence() -> None:
    """Turn every bar off in this process and the processes it starts (``robustkit -q``)."""
    os.environ[ENV] = "1"
