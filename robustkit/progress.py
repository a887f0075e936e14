"""Progress bars that a person can turn off and that never write into a file.

Every bar of robustkit is :func:`bar` (tqdm's, ``tqdm.auto``: a widget in a notebook). A bar is
drawn only where someone watches it: ``show`` (the ``progress=`` argument of the function that
draws it) is true, ``$TQDM_DISABLE`` is not set to a true value (``1``, ``true``, ``yes``, ``on``:
tqdm's own switch, which an explicit ``disable=`` would otherwise override; ``robustkit -q`` sets
it, so worker processes inherit it), and the stream it writes to is a terminal or a notebook's
output. So a log redirected to a file (``robustkit train ... 2> log``) holds no carriage-return
bar lines.

Where no bar is watched, long work still speaks: :func:`event` writes one timestamped line per
run start, evaluation and end (what a training loop reports) to the first of stderr and stdout
that is not a terminal (``robustkit demo > log`` and ``2> log`` both get them; a file that is
both streams gets them once). A run trained in a worker process (``--jobs N``) sends its lines to
the parent (:func:`to_parent`), which writes them the same way, or above its bar on a terminal,
so ``--jobs 2`` shows every run's evaluations as they finish. ``$TQDM_DISABLE`` (``robustkit
-q``) turns them off with the bars.

A stage that computes for long without a bar or a line of its own (a run's landscape, the
bootstrap intervals of ``stats``) runs inside :func:`heartbeat`: past :data:`HEARTBEAT_SECONDS`
it says, and says again every as many seconds, which stage it is in and for how long, so that no
log or terminal stays silent for more than that; a fast stage says nothing.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TextIO

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
    if not show or silenced():
        return False
    if in_notebook():
        return True
    return _terminal(sys.stderr if stream is None else stream)


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (where tqdm.auto draws widgets)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def silence() -> None:
    """Turn every bar off in this process and the processes it starts (``robustkit -q``)."""
    os.environ[ENV] = "1"


# Set in a worker process (``--jobs N``): where its event lines go (the parent's queue).
_sink: Callable[[str], None] | None = None
# False where stdout is data (``--format csv`` / ``json``): event lines never go there.
_stdout_for_events = True


def stdout_is_data(data: bool = True) -> None:
    """Say that this command's stdout is data for a program (``--format csv``), not a log:
    :func:`event` lines then never go to it."""
    global _stdout_for_events
    _stdout_for_events = not data


def silenced() -> bool:
    """Whether ``$TQDM_DISABLE`` turns bars and event lines off (``robustkit -q``)."""
    return os.environ.get(ENV, "").strip().lower() in _TRUE


def _terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def event_stream() -> TextIO | None:
    """Where :func:`event` lines go in this process: stderr if it is not a terminal, else stdout if
    it is not one (and not data, :func:`stdout_is_data`); None where both are terminals (the bars
    are watched there), in a notebook, or when silenced."""
    if silenced() or in_notebook():
        return None
    streams = (sys.stderr, sys.stdout) if _stdout_for_events else (sys.stderr,)
    for stream in streams:
        if stream is not None and not _terminal(stream):
            return stream
    return None


def stamp(message: str) -> str:
    """``message`` after the local time, ``2026-11-28 08:21:07``."""
    return f"{time.strftime('%Y-%m-%d %H:%M:%S')} {message}"


def event(message: str) -> None:
    """One line of a long job's progress (a run started, evaluated, ended), timestamped.

    In a worker process it goes to the parent (:func:`to_parent`); in the parent to
    :func:`event_stream`, if any (on terminals the bars show the same).
    """
    line = stamp(message)
    if _sink is not None:
        _sink(line)
        return
    write_event(line)


def write_event(line: str, above_bar: bool = False) -> None:
    """Write a stamped event line to :func:`event_stream`; with ``above_bar`` (a worker's line,
    which no bar of this process shows), on a terminal too, above the bars (tqdm's ``write``)."""
    stream = event_stream()
    if stream is not None:
        print(line, file=stream, flush=True)
    elif above_bar and not silenced() and not in_notebook():
        from tqdm import tqdm

        tqdm.write(line, file=sys.stderr)


def to_parent(sink: Callable[[str], None] | None) -> None:
    """Send this process's event lines to ``sink`` (a worker: its queue to the parent)."""
    global _sink
    _sink = sink


def elapsed(seconds: float) -> str:
    """``seconds`` as ``12 s``, ``4 min 05 s`` or ``1 h 02 min``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


# A stage running this long without a line says so, and again as often (issue #57: nothing silent
# for more than 10 s); a stage that ends sooner says nothing.
HEARTBEAT_SECONDS = 6.0
_BEATING: list[list] = []  # the heartbeats running now, outermost first: [its stop event, what it is doing]


@contextlib.contextmanager
def heartbeat(what: str, every: float | None = None) -> Iterator[None]:
    """Inside the block, a stamped line ``<what>: still running, 16 s in`` every ``every``
    seconds (default :data:`HEARTBEAT_SECONDS`) until it ends; the first only after ``every``
    seconds, so a fast block says nothing.

    The lines go to stderr (a worker's to its parent, as :func:`event`'s), never into a stdout
    that holds a command's tables; on a terminal only while no bar is drawn (a bar shows the
    same). ``robustkit -q`` silences them.
    Where heartbeats nest (a verb's around a run's), only the innermost speaks. The lines are
    written from a timer thread (daemon: it never keeps the process alive).
    """
    every = HEARTBEAT_SECONDS if every is None else every
    if silenced() or in_notebook():
        yield
        return
    start = time.monotonic()
    stop = threading.Event()
    stage = [stop, ""]  # the event that ends it, and what it is doing now (doing())
    _BEATING.append(stage)

    def beat() -> None:
        while not stop.wait(every):
            if _BEATING and _BEATING[-1] is stage:  # the innermost stage speaks (a run's, not its verb's)
                now = f"{stage[1]}, " if stage[1] else ""
                _say_still(f"{what}: {now}still running, {elapsed(time.monotonic() - start)} in")

    thread = threading.Thread(target=beat, name="robustkit-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        _BEATING.remove(stage)
        thread.join()


def doing(status: str) -> None:
    """Say what the innermost :func:`heartbeat`'s stage is doing now (``alpha 3/21``): its next
    line names it. Nothing outside a heartbeat."""
    if _BEATING:
        _BEATING[-1][1] = status


def _say_still(message: str) -> None:
    line = stamp(message)
    if _sink is not None:
        _sink(line)
    elif sys.stderr is not None and not (_terminal(sys.stderr) and _bar_drawn()):
        print(line, file=sys.stderr, flush=True)


def _bar_drawn() -> bool:
    """Whether a tqdm bar is on the terminal now (its own count says more than a heartbeat)."""
    tqdm_module = sys.modules.get("tqdm.std")
    instances = getattr(getattr(tqdm_module, "tqdm", None), "_instances", None) or ()
    return any(not getattr(bar, "disable", True) for bar in list(instances))
