"""`robustkit sweep`: train the runs of a TOML grid, here or on a Slurm cluster."""

from __future__ import annotations

from robustkit.cli.arguments import output_folder
from robustkit.cli.common import add_cluster_arguments, add_device, add_preset, add_yes, report, slurm_options
from robustkit.errors import SweepError
from robustkit.specs.limits import MAX_GRID_RUNS


def add_parser(commands) -> None:
    sweep = commands.add_parser(
        "sweep",
        help="train a grid of runs from a TOML grid file",
        description="Expand a TOML grid ([base] fields, [grid] axes, [lr] a learning rate per method where base and "
        "grid set none) into runs and train those not yet complete.",
    )
    sweep.add_argument("grid", help="grid file (TOML): [base] holds fixed run fields, [grid] lists axes")
    add_preset(sweep)
    sweep.add_argument("--store", required=True, type=output_folder, help="run store folder (created if missing)")
    sweep.add_argument("--jobs", type=int, default=1, help="runs trained at once (worker processes)")
    sweep.add_argument(
        "--data-dir", help="local folder of GLUE-format TSV files for every run of a GLUE task in the grid"
    )
    add_yes(sweep)
    add_cluster_arguments(sweep)
    from robustkit.cli.terminal import add_format_arguments

    add_format_arguments(
        sweep,
        "with --status: write the whole state table to this file (.csv, .json, else parquet)",
        "csv / json: every column (with --status)",
    )
    add_device(sweep)
    sweep.set_defaults(func=run)


def run(args) -> int:
    from robustkit.sweeps.grid import expand_grid, grid_size, run_sweep, with_data_dir
    from robustkit.verdicts.recipes import preset

    if (args.output or args.format != "table") and not args.status:  # refused before a long expansion
        raise SweepError("--format and -o/--output print the table of --status: use them with --status")
    size = grid_size(args.grid)  # counted, not expanded: a refused grid is refused at once, naming its size
    if args.yes and size > MAX_GRID_RUNS:  # said at once: expanding takes minutes (a run id per run)
        print(f"{args.grid}: {size:,} runs; expanding them", flush=True)
    specs = expand_grid(
        args.grid, preset(args.preset) if args.preset else None, max_runs=None if args.yes else MAX_GRID_RUNS
    )
    if args.data_dir:
        specs = with_data_dir(specs, args.data_dir)
    if args.status:
        from robustkit.cli import terminal
        from robustkit.sweeps import slurm

        states = slurm.status(specs, args.store)
        if args.output:
            terminal.note(f"wrote {len(states)} rows to {terminal.write(states, args.output)}", args.format)
        print(terminal.render(states, args.format, keep=("run_id", "state")))
        terminal.note("\n" + ", ".join(f"{n} {s}" for s, n in states.state.value_counts().items()), args.format)
        return 0
    results = run_sweep(
        specs,
        args.store,
        jobs=args.jobs,
        device=args.device,
        executor=args.executor,
        slurm_options=slurm_options(args),
        wait=not args.no_wait,
    )
    return report(results, args.store)
