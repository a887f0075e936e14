"""`robustkit` command line: parses arguments and calls the library; no logic of its own.

Each verb is a module of this package that declares its arguments (``add_parser(commands)``) and
does its work (``run(args)``): train, sweep, runs, verify, import_runs (``import``), stats, assets,
demo, reproduce, claims, analyze, plot and check; what several verbs declare alike is in
:mod:`robustkit.cli.common`. Here: the parser that gathers them, logging, and :func:`main`, where
every error meets the user.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys

from robustkit.cli.arguments import DefaultsHelpFormatter
from robustkit.errors import RobustkitError


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with its errors on one line (argparse prints the usage line first):
    every error of the command is one line on stderr. Subcommands' parsers are of this class
    too (``add_subparsers`` makes them of their parent's class), and print each default once
    (:class:`robustkit.cli.arguments.DefaultsHelpFormatter`)."""

    def __init__(self, *args, formatter_class: type[argparse.HelpFormatter] = DefaultsHelpFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)

    def error(self, message: str):
        choice = re.match(r"argument .*: invalid choice: '([^']*)' \(choose from (.*)\)$", " ".join(message.split()))
        if choice:  # a mistyped verb or figure: the closest name (Python 3.14's suggest_on_error)
            from robustkit.errors import did_you_mean

            message += did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    # each verb's module, in the order --help lists them; imported here, not above: a verb imports
    # its libraries only when it runs, and `import robustkit.cli` stays light
    from robustkit.cli import (
        analyze,
        assets,
        check,
        claims,
        demo,
        import_runs,
        plot,
        reproduce,
        runs,
        stats,
        sweep,
        train,
        verify,
    )

    parser = _Parser(
        prog="robustkit",
        description="Adapter-based tuning vs full fine-tuning: train runs into a store, analyse them, plot the "
        "papers' figures.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for verb in (
        train,
        sweep,
        runs,
        verify,
        import_runs,
        stats,
        assets,
        demo,
        reproduce,
        claims,
        analyze,
        plot,
        check,
    ):
        verb.add_parser(commands)
    return parser


def _add_verbosity(parser: argparse.ArgumentParser, top: bool = True) -> None:
    """``-v`` / ``-q`` on ``parser`` and every command under it, so that they go before or after
    the command (``robustkit -q train ...``, ``robustkit train ... -q``)."""
    default = {} if top else {"default": argparse.SUPPRESS}  # a command's flag must not reset the top's
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        help="say more: every step robustkit logs (logging level DEBUG)",
        **({"default": 0} if top else default),
    )
    group.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="warnings and errors only, no progress bars (sets TQDM_DISABLE=1, which worker processes inherit)",
        **({"default": False} if top else default),
    )
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _add_verbosity(sub, top=False)


class _Handler(logging.StreamHandler):
    """robustkit's log lines on stderr, written through tqdm where a bar is drawn (so that a line
    never lands inside a bar): ``robustkit: warning: ...`` for warnings and errors, the message
    alone otherwise."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        return f"robustkit: {record.levelname.lower()}: {text}" if record.levelno >= logging.WARNING else text

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm = sys.modules.get("tqdm")
            if tqdm is not None:
                tqdm.tqdm.write(self.format(record), file=sys.stderr)
            else:
                print(self.format(record), file=sys.stderr)
        except Exception:  # noqa: BLE001 - logging must not fail the command
            self.handleError(record)


HUB_VERBOSITY = ("HF_HUB_VERBOSITY", "DATASETS_VERBOSITY", "TRANSFORMERS_VERBOSITY")


def configure_logging(verbose: int = 0, quiet: bool = False) -> None:
    """The ``robustkit`` logger as the command line shows it: INFO (what a command does) on
    stderr; ``verbose`` DEBUG; ``quiet`` warnings and errors only, and no progress bars
    (:func:`robustkit.progress.silence`). A notebook leaves logging as Python sets it up
    (warnings shown) and can call this too."""
    logger = logging.getLogger("robustkit")
    if not any(isinstance(h, _Handler) for h in logger.handlers):
        logger.addHandler(_Handler())
    logger.setLevel(logging.WARNING if quiet else logging.DEBUG if verbose else logging.INFO)
    # The hub client logs every retry of an unreachable hub (a page of lines per load); the
    # failure itself reaches the user as robustkit's one-line error. -v shows them.
    # Through their own variables: each library sets its logger's level as it is imported
    # (later than this), and worker processes inherit the environment, not the loggers.
    level = "debug" if verbose > 1 else "warning" if verbose else "error"
    for variable in HUB_VERBOSITY:
        os.environ.setdefault(variable, level)  # a user's own setting wins
    if quiet:
        from robustkit.progress import silence

        silence()


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse a robustkit command line (``["plot", "rsa", ...]``) as the ``robustkit`` command does."""
    from robustkit.cli.analyze import join_negative_values

    parser = build_parser()
    _add_verbosity(parser)
    return parser.parse_args(join_negative_values(argv))


# Set to 1 for the traceback of an unexpected error instead of its one-line report.
TRACEBACK_VARIABLE = "ROBUSTKIT_TRACEBACK"
# Exit statuses besides 0 and 2 (bad input, as argparse): 130 = 128 + SIGINT, as a shell reports
# a command that Ctrl-C stopped; 1 for everything else that went wrong.
EXIT_INTERRUPTED, EXIT_FAILED = 130, 1


def _one_line_warnings() -> None:
    """robustkit's own warnings (a damaged run, changed data) as one ``warning: ...`` line on
    stderr, as errors are; other libraries' warnings keep Python's format. Only the format is
    changed, so that ``warnings.catch_warnings(record=True)`` still records them."""
    import warnings

    if getattr(warnings.formatwarning, "robustkit", False):
        return
    plain = warnings.formatwarning

    def one_line(message, category, filename, lineno, line=None):
        if category.__module__.startswith("robustkit."):
            return f"warning: {message}\n"
        return plain(message, category, filename, lineno, line)

    one_line.robustkit = True
    warnings.formatwarning = one_line


def main(argv: list[str] | None = None) -> int:
    """Run a robustkit command line; the one place where errors meet the user, each as one line
    on stderr, never a traceback:

    - :class:`robustkit.errors.RobustkitError` (bad input, anywhere below): its message, status 2,
      as argparse gives a malformed command line;
    - Ctrl-C (KeyboardInterrupt): a line saying the runs resume, status 130 (a run stopped
      mid-step keeps its last checkpoint and resumes from it, bit-identically);
    - a closed stdout (``robustkit runs | head``): nothing more, status 1 (the Python
      documentation's recipe: stdout is pointed at devnull, so that the exit's flush is quiet);
    - any other :class:`OSError` (a folder or file that cannot be read or written): the reason
      and the path, status 1;
    - anything else: its type and message and how to see the traceback (``ROBUSTKIT_TRACEBACK=1``),
      status 1.
    """
    argv = sys.argv[1:] if argv is None else argv
    try:
        try:
            args = parse_args(argv)
            configure_logging(args.verbose, args.quiet)
            _one_line_warnings()
            from robustkit.progress import stdout_is_data

            stdout_is_data(getattr(args, "format", "table") != "table")  # csv / json: no log lines in it
            _check_store(args)
            _check_device(args)
            return args.func(args)
        finally:
            sys.stdout.flush()  # here, not at exit: a reader that went away raises inside the guard
    except RobustkitError as error:
        return _say(f"error: {error}", 2)
    except KeyboardInterrupt:
        if os.environ.get(TRACEBACK_VARIABLE) == "1":
            raise
        return _say(
            "interrupted; runs resume from their last checkpoint when the command is run again", EXIT_INTERRUPTED
        )
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_FAILED
    except Exception as error:  # noqa: BLE001 - the one place every error is turned into one line
        if os.environ.get(TRACEBACK_VARIABLE) == "1":
            raise
        if isinstance(error, OSError) and error.filename is not None:
            paths = " -> ".join(repr(str(p)) for p in (error.filename, error.filename2) if p is not None)
            return _say(f"error: {error.strerror or type(error).__name__}: {paths}", EXIT_FAILED)
        message = " ".join(str(error).split())
        return _say(
            f"unexpected {type(error).__name__}{': ' + message if message else ''} "
            f"(run again with {TRACEBACK_VARIABLE}=1 for the traceback)",
            EXIT_FAILED,
        )


# The verbs that only read a store: a missing one is said at once, before their heavy imports.
READ_STORE = ("runs", "verify", "stats", "analyze", "plot")


def _check_store(args: argparse.Namespace) -> None:
    store = getattr(args, "store", None)
    if args.command in READ_STORE and isinstance(store, str) and not os.path.exists(os.path.expanduser(store)):
        from robustkit.errors import StoreError

        raise StoreError(f"store {store!r} does not exist")


def _check_device(args: argparse.Namespace) -> None:
    """Refuse a ``--device`` this machine lacks before the verb starts, for every verb that takes
    one (as ``train`` always did; an analysis's is checked as it is parsed too). Runs a Slurm
    executor trains run on other machines: there the name alone is checked."""
    device = getattr(args, "device", None)
    if device is not None:
        from robustkit.specs.preflight import check_device

        check_device(device, here=getattr(args, "executor", "local") == "local")


def _say(line: str, code: int) -> int:
    """Print ``robustkit: <line>`` on stderr and return ``code`` (the exit status)."""
    print(f"robustkit: {line}", file=sys.stderr, flush=True)
    return code


def _quiet_stdout() -> None:
    """Point stdout at devnull: Python flushes it at exit, and a closed pipe would raise again
    there, outside any handler (https://docs.python.org/3/library/signal.html, SIGPIPE note)."""
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test's capture): nothing to flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, descriptor)
    os.close(devnull)
