"""`robustkit demo`: train the embedded-default grid and print its runs (the grid itself is
:mod:`robustkit.verdicts.demo`'s)."""

from __future__ import annotations

import time
from pathlib import Path

from robustkit.cli.arguments import output_folder
from robustkit.cli.common import add_device, report


def add_parser(commands) -> None:
    demo = commands.add_parser(
        "demo",
        help="train the embedded-default grid and print its runs",
        description="minilm-l6 on rt with 1k training examples: houlsby and full, 2 seeds, 3 epochs at the calibrated "
        "demo learning rates (4 runs of the han2021/fig2 demo recipe, about 9 minutes on 2 idle CPU "
        "cores, 17 minutes of CPU time, as bench/README.md measures; see recipes/README.md).",
    )
    demo.add_argument("--store", default="runs/demo", type=output_folder, help="run store folder")
    demo.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="runs trained at once (one torch thread each on 2 cores is ~1.5x the throughput of one run with 2 "
        "threads)",
    )
    add_device(demo)
    demo.set_defaults(func=run)


def run(args) -> int:
    from robustkit.verdicts.demo import run_demo

    started = time.time()
    code = report(run_demo(args.store, jobs=args.jobs, device=args.device), args.store)
    print(f"Demo took {time.time() - started:.0f} s. Store: {Path(args.store).resolve()}")
    print("In a notebook: robustkit.load_runs(store), robustkit.load_history(store), robustkit.load_gradnorms(store)")
    return code
