"""`robustkit reproduce`: train, analyse and draw paper figures from their recipes."""

from __future__ import annotations

import sys

from robustkit.cli.arguments import output_folder
from robustkit.cli.common import add_cluster_arguments, add_device, slurm_options, swap_from_args
from robustkit.errors import RobustkitError
from robustkit.verdicts.scales import SCALES


def add_parser(commands) -> None:
    from robustkit.verdicts.recipes import list_recipes

    known = ", ".join(list_recipes())
    reproduce = commands.add_parser(
        "reproduce",
        help="train, analyse and draw paper figures from their recipes (recipes/*/*.toml)",
        description="For each recipe: train the runs it needs that are not complete yet (runs shared between recipes "
        "are trained once), run its analysis (cached) and write its figure as PDF. Known recipes: " + known,
    )
    reproduce.add_argument(
        "recipes", nargs="*", metavar="RECIPE", help="recipe names, e.g. han2021/fig2 (see the list above)"
    )
    reproduce.add_argument("--all", action="store_true", help="every recipe with runs at --scale")
    reproduce.add_argument(
        "--scale",
        choices=SCALES,
        default="demo",
        help="demo: minilm-l6 on the embedded tasks (CPU, minutes per run); cpu: the headline claims sized to be "
        "decided on a 2-core machine (more seeds, each to a fixed budget; hours); paper: the papers' models, tasks and "
        "hyperparameters (GPU cluster)",
    )
    reproduce.add_argument("--store", type=output_folder, help="run store folder; default: runs/<scale>")
    reproduce.add_argument(
        "--figures",
        type=output_folder,
        help="folder the PDFs, claims.csv and their README.md index are "
        "written to; default: beside the store, <store>-figures (runs/demo-figures); `--figures results` "
        "updates this checkout's own results/",
    )
    reproduce.add_argument("--recipe-dir", help="folder of recipe files; default: the recipes/ folder of this checkout")
    reproduce.add_argument("--jobs", type=int, default=2, help="runs trained at once (local executor)")
    reproduce.add_argument(
        "--train-only",
        action="store_true",
        help="train the runs, draw nothing (plot later, e.g. once cluster jobs are done)",
    )
    reproduce.add_argument(
        "--plan",
        action="store_true",
        help="train nothing: print the distinct runs per recipe and in total (shared runs counted once), those the "
        "store holds, the models and tasks to fetch and an estimate of the GPU-hours (robustkit/sweeps/plan.py, "
        "from bench/gpu_throughput.toml)",
    )
    swap = reproduce.add_argument_group(
        "your setting",
        "Re-judge the recipes' claims on your model and data: every run of the recipes takes these in place of "
        "its own (the figures' index says what was swapped). Needs --store: your runs are kept apart from the "
        "scale's; figures and verdicts go beside it.",
    )
    swap.add_argument("--model", help="a model in place of the recipes' (embedded name, folder or hub name)")
    swap.add_argument("--data", metavar="FILE_OR_DIR", help="your data in place of the recipes' task (as train --data)")
    swap.add_argument("--task", help="a built-in task in place of the recipes' (rt, polarity, a GLUE task)")
    add_cluster_arguments(reproduce, submission_control=False)
    add_device(reproduce)
    reproduce.set_defaults(func=run)


def run(args) -> int:
    from robustkit.verdicts.recipes import RECIPE_DIR
    from robustkit.verdicts.reproduce import reproduce

    if bool(args.recipes) == args.all:
        raise RobustkitError("name recipes to reproduce, or pass --all (not both)")
    from robustkit.verdicts.reproduce import announce

    swap = swap_from_args(args, before_reading=announce)
    if args.data is not None:
        from robustkit.store.task_names import check_task_free

        check_task_free(args.store, swap["task"])  # a task name another data set has there is refused
    if swap and args.store is None:
        raise RobustkitError("--model/--data/--task train other runs than the recipes': give them their own --store")
    _lr_note(args, swap.get("model"))
    if args.plan:
        from robustkit.sweeps import plan as run_plan
        from robustkit.verdicts.recipes import load_defaults, load_recipe, recipe_names
        from robustkit.verdicts.reproduce import default_store

        folder = args.recipe_dir or RECIPE_DIR
        names = recipe_names(None if args.all else args.recipes, folder, args.scale)
        chosen = [load_recipe(name, folder).swapped(**swap) for name in names]
        per_recipe, runs = run_plan.plan(
            chosen, args.scale, args.store or default_store(args.scale), load_defaults(folder)
        )
        print(run_plan.describe(per_recipe, runs, args.scale))
        return 0
    results = reproduce(
        None if args.all else args.recipes,
        scale=args.scale,
        store=args.store,
        figures=args.figures,
        recipe_dir=args.recipe_dir or RECIPE_DIR,
        jobs=args.jobs,
        device=args.device,
        executor=args.executor,
        slurm_options=slurm_options(args),
        train_only=args.train_only,
        swap=swap,
    )
    from robustkit.cli import terminal

    # the table, then each recipe's verdict lines under it, one line per recipe: inside the table a
    # raw to_string printed their breaks as "\n" in one very wide row, and a narrow terminal cut them
    print(terminal.render(results.drop(columns=["verdicts"]), "table", keys=("recipe",)))
    for recipe, said in zip(results["recipe"], results["verdicts"].fillna("")):
        if said:
            print(f"{recipe}: {'; '.join(said.splitlines())}")
    return 1 if results["error"].notna().any() or results["failed_runs"].any() else 0


def _lr_note(args, model: str | None) -> None:
    """One line when the swapped-in model trains at rates calibrated on the scale's own model."""
    from robustkit.specs.calibration import lr_note
    from robustkit.verdicts.recipes import RECIPE_DIR, load_defaults

    scale = load_defaults(args.recipe_dir or RECIPE_DIR).get(args.scale, {})
    note = lr_note(args.scale, scale, model, data=args.data)
    if note:
        print(f"note: {note}", file=sys.stderr)
