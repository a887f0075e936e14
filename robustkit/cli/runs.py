"""`robustkit runs`: the table of the runs in a store."""

from __future__ import annotations

import sys


def add_parser(commands) -> None:
    runs = commands.add_parser(
        "runs",
        help="table of the runs in a store",
        description="One line per run: model, method, seed, status, outcome (ok / not-learned / collapsed / "
        "undecided / diverged), the settings that differ between the runs and the final metrics, cut to the "
        "terminal's width.",
    )
    runs.add_argument("store", help="run store folder")
    runs.add_argument("--tsp", action="store_true", help="also list task-specific pretraining runs")
    runs.add_argument(
        "--select",
        action="append",
        metavar="KEY=VALUE[,VALUE]",
        help="keep runs whose column KEY has one of the values (repeatable), e.g. --select run_id=ID --select "
        "method=houlsby,full",
    )
    from robustkit.cli.terminal import add_format_arguments

    add_format_arguments(
        runs, "write every column of every run (robustkit.load_runs) to this file (.csv, .json, else parquet)"
    )
    runs.set_defaults(func=run)


def run(args) -> int:
    from robustkit.cli import terminal
    from robustkit.cli.report import ALWAYS, KEYS, SETTINGS, damaged_notes, runs_table
    from robustkit.store.folders import open_store

    open_store(args.store, create=False)  # a missing store is an error, not an empty table
    if args.output:
        from robustkit.store.tables import load_runs

        full = load_runs(args.store, include_tsp=args.tsp, include_damaged=True)
        print(f"wrote {len(full)} rows to {terminal.write(full, args.output)}")
    else:
        table = runs_table(args.store, include_tsp=args.tsp, select=args.select)
        # an empty table says why: nothing trained yet, or only TSP stages, which --tsp lists
        stages = table.empty and not args.tsp and not runs_table(args.store, include_tsp=True).empty
        none = f"no runs in {args.store} but TSP stages: --tsp lists them" if stages else f"no runs in {args.store} yet"
        print(terminal.render(table, args.format, keep=ALWAYS, keys=KEYS, settings=SETTINGS, empty=none))
    for line in damaged_notes(args.store):
        print(line, file=sys.stderr)
    return 0
