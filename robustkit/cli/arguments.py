"""Value types the command line's verbs share: a bad value is refused while the command line is
parsed (one line, exit status 2, before any work), not when a verb finally reaches it.

Each is an argparse ``type``: it returns the parsed value or raises
:class:`argparse.ArgumentTypeError`, which argparse turns into ``robustkit <verb>: error:
argument <flag>: <message>``. Nothing heavy is imported here: ``robustkit --help`` builds every
parser.

The help formatters say an argument's default once: :class:`DefaultsHelpFormatter` prints a
literal ``default=`` after the help, so that a help string never restates it.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path


def count(minimum: int = 0) -> Callable[[str], int]:
    """An integer of at least ``minimum`` (a number of jobs, minutes, GPUs, ...)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    parse.__name__ = "count"  # argparse names the type in its own messages
    return parse


def output_file(text: str) -> str:
    """A file the verb will write: not a folder, and under a folder that exists or can be made."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty file name")
    path = Path(text).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; give a file name")
    _creatable(path.parent, text)
    return text


def output_folder(text: str) -> str:
    """A folder the verb writes into (a run store, a figures folder): a folder that exists, or a
    path where one can be made."""
    if not text.strip():  # '' would be the current folder: a lost variable, not a choice
        raise argparse.ArgumentTypeError("an empty folder name (give a path; '.' for the current folder)")
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder")
    _creatable(path, text)
    return text


def _creatable(folder: Path, text: str) -> None:
    """Refuse ``folder`` unless it is, or can be made as, a writable folder: its nearest existing
    ancestor must be a folder this user may write to."""
    here = folder if str(folder) else Path(".")
    while not here.exists():
        if here.parent == here:
            break
        here = here.parent
    if not here.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: {str(here)!r} is a file, not a folder")
    if not os.access(here, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: no permission to write in {str(here)!r}")


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """argparse's help, with ``; default: <value>`` after the help of each argument that takes a
    value and has a default (not None, not an empty list: an ``append`` flag starts empty). Help
    that speaks of its default already keeps its own words: a default said in words (``default:
    the GPU if there is one``), or one whose value is not printed as the command line takes it
    (``--seed``'s ``[0]`` is ``0``)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if not text or text == argparse.SUPPRESS or action.nargs == 0 or "default" in text.lower():
            return text
        empty = isinstance(action.default, (list, tuple)) and not action.default
        if action.default is None or action.default is argparse.SUPPRESS or empty:
            return text
        return text + "; default: %(default)s"


class RawDescriptionDefaultsHelpFormatter(DefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """:class:`DefaultsHelpFormatter` for a verb whose description is laid out by hand (``stats``)."""
