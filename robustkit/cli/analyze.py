"""`robustkit analyze ...`: parse, call the analysis, print its summary; and the flags of the
registries' parameters that `analyze`, `plot` and `stats` share."""

from __future__ import annotations

import argparse
import dataclasses

from robustkit.cli import terminal


def store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", help="run store folder")
    parser.add_argument(
        "--select",
        action="append",
        metavar="KEY=VALUE[,VALUE]",
        help="keep runs whose column KEY has one of the values (repeatable), e.g. --select task=rt --select "
        "method=houlsby,full",
    )


# ---------------------------------------------------------------------------------------------
# analyze: one verb per registered analysis (robustkit.analysis.registry), its flags from the
# analysis's parameters and options


def add_parser(commands) -> None:
    from robustkit.analysis.registry import ANALYSES

    analyze = commands.add_parser(
        "analyze",
        help="run an analysis on the runs of a store",
        description="Each analysis returns a tidy DataFrame (cached next to the runs, keyed by the checkpoints' "
        "sha256); its summary is printed, or the whole frame written with -o. The same analyses in a "
        "notebook: robustkit.analysis.registry.get(name).run(store, ...).",
    )
    verbs = analyze.add_subparsers(dest="analysis", required=True, help="the analysis to run")
    for name, analysis in ANALYSES.items():
        parser = verbs.add_parser(name, help=analysis.help, description=analysis.description)
        store_arguments(parser)
        for param in (*analysis.params, *analysis.options):
            add_param(parser, param)
        terminal.add_format_arguments(
            parser,
            f"write {analysis.output}, every column, to this file (.csv, .json, else parquet) "
            "instead of printing the summary",
        )
        parser.set_defaults(func=run)


def run(args) -> int:
    from robustkit.analysis.registry import get
    from robustkit.progress import heartbeat

    analysis = get(args.analysis)
    given = {p.name: getattr(args, p.name) for p in (*analysis.params, *analysis.options)}
    with heartbeat(f"analyze {analysis.name}"):  # each run says its own; the stages around them this
        frame = analysis.run(args.store, args.select, **given)
        if args.output:
            said = f"wrote {len(frame)} rows to {terminal.write(frame, args.output)}"
        else:
            # its results and their outcome are the keys: settings are cut first, never those
            said = terminal.render(analysis.summarize(frame), args.format, keys=terminal.RESULTS)
    print(said)
    return 0


# ---------------------------------------------------------------------------------------------
# the registries' parameters as flags (analyze, plot, stats) and their negative values


def add_param(parser: argparse.ArgumentParser, param) -> None:
    """``param`` (:class:`robustkit.params.Param`) as a flag: a switch for booleans (``--no-<name>``
    for one that is on by default), a comma-separated value for lists."""
    param = dataclasses.replace(param, help=param.described.replace("%", "%%"))  # argparse %-formats help ("90%")
    if param.type is bool:
        if param.default:  # on unless switched off: the flag is --no-<name>
            parser.add_argument("--no-" + param.flag[2:], dest=param.name, action="store_false", help=param.help)
        else:
            parser.add_argument(param.flag, dest=param.name, action="store_true", help=param.help)
        return
    choices = list(param.choices) if param.choices and param.type is not list else None  # argparse lists them in --help
    parser.add_argument(
        param.flag, dest=param.name, type=_parsed_by(param), default=param.default, choices=choices, help=param.help
    )


def _parsed_by(param):
    """The argparse type of ``param``: its own checks (:meth:`robustkit.params.Param.coerce`:
    type, choices, minimum, ``check``) while the command line is parsed, so that a bad value
    stops the verb before any work, as one line."""

    def parse(text: str):
        from robustkit.errors import RobustkitError

        try:
            return param.coerce(text)
        except RobustkitError as error:
            raise argparse.ArgumentTypeError(
                str(error).removeprefix(f"parameter {param.name!r}").lstrip(": ")
            ) from None

    parse.__name__ = param.type.__name__  # argparse names the type in its messages
    return parse


def may_be_negative(param) -> bool:
    """Whether a value of ``param`` (:class:`robustkit.params.Param`) may start with '-': a number
    without a non-negative minimum, or free text (a grid such as ``-2:2:20``); never a switch or a
    choice."""
    if param.type is bool or param.choices:
        return False
    if param.type in (int, float):
        return param.minimum is None or param.minimum < 0
    return True


def negative_value_options() -> frozenset[str]:
    """The flags of every registered analysis and figure parameter that :func:`may_be_negative`
    (derived from the registries, so a new parameter is covered without being listed)."""
    from robustkit.analysis.registry import ANALYSES
    from robustkit.figures import FIGURES

    params = [p for a in ANALYSES.values() for p in (*a.params, *a.options)]
    params += [p for f in FIGURES.values() for p in (*f.parameters, *f.options)]
    return frozenset(p.flag for p in params if may_be_negative(p))


def _negative(token: str) -> bool:
    """``-2``, ``-.5``, ``-2:2:20``: a value, not a flag (flags start with a letter or a dash)."""
    return len(token) > 1 and token[0] == "-" and (token[1].isdigit() or token[1] == ".")


def join_negative_values(argv: list[str]) -> list[str]:
    """``--alphas -2:2:20`` -> ``--alphas=-2:2:20``: argparse takes a value that starts with '-'
    for an option unless it looks like a plain number. Only the flags of parameters that may be
    negative (:func:`negative_value_options`) are joined; the registries are read only when a
    command line holds such a value."""
    if not any(_negative(token) for token in argv):
        return list(argv)
    flags = negative_value_options()
    joined: list[str] = []
    for token in argv:
        if joined and joined[-1] in flags and _negative(token):
            joined[-1] = f"{joined[-1]}={token}"
        else:
            joined.append(token)
    return joined
