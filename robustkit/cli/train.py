"""`robustkit train`: one run per seed x TSP step, from the run flags (and a preset)."""

from __future__ import annotations

import argparse
import sys

from robustkit.cli.arguments import output_folder
from robustkit.cli.common import add_device, add_preset, add_yes, report
from robustkit.errors import RobustkitError
from robustkit.models.precision import DEFAULT_PRECISION, PRECISIONS
from robustkit.specs.limits import MAX_GRID_RUNS


def add_parser(commands) -> None:
    train = commands.add_parser(
        "train",
        help="train runs (one per seed x TSP step) into a store",
        description="Train supervised runs, with task-specific pretraining first when --tsp-steps asks for it. "
        "Complete runs are skipped; interrupted ones resume.",
    )
    add_run_arguments(train)
    add_preset(train)
    train.add_argument("--store", required=True, type=output_folder, help="run store folder (created if missing)")
    train.add_argument("--jobs", type=int, default=1, help="runs trained at once (worker processes)")
    add_yes(train)
    train.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=DEFAULT_PRECISION,
        help="bf16: every forward pass under bfloat16 autocast (weights and checkpoints stay float32); part of the "
        "run id",
    )
    train.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads each run trains with, whatever --jobs is; part of the run id, since a CPU run's bytes "
        "depend on it",
    )
    add_device(train)
    train.set_defaults(func=run)


def run(args) -> int:
    from robustkit.sweeps.grid import run_sweep
    from robustkit.train.data_notes import size_notes

    specs = specs_from_args(args)
    if args.preset and args.model and args.lr is None:  # the preset's rates, calibrated on its own model
        from robustkit.specs.calibration import lr_note
        from robustkit.verdicts.recipes import preset

        note = lr_note(args.preset, preset(args.preset), args.model, lr_flag=True, data=args.data)
        if note:
            print(f"note: {note}", file=sys.stderr)
    for line in size_notes(specs):  # before training: sizes the user did not choose, or too small
        print(f"note: {line}", file=sys.stderr)
    return report(run_sweep(specs, args.store, jobs=args.jobs, device=args.device), args.store)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    # the method objects' metadata only (robustkit.methods.registry imports neither torch nor
    # AdapterHub): --help must answer at once
    from robustkit.methods.registry import METHOD_NAMES, defaults_help, options_help, spec_fields

    run_group = parser.add_argument_group("run")
    run_group.add_argument(
        "--task",
        help="task name: a GLUE task (cola, sst2, mrpc, qqp, stsb, mnli, qnli, rte, wnli) or an embedded one (rt, "
        "polarity); default: rt",
    )
    run_group.add_argument(
        "--method",
        default="houlsby",
        type=_method_name,
        metavar="METHOD",
        help=f"tuning method: {', '.join(METHOD_NAMES)}, or adapterhub:<config string> for any AdapterHub config "
        "(e.g. adapterhub:lora[r=4,alpha=16])",
    )
    run_group.add_argument(
        "--model",
        help="embedded model (minilm-l6, bert-tiny), a local model folder, or a Hugging Face hub name; default: "
        "minilm-l6",
    )
    run_group.add_argument(
        "--seed", type=_ints, default=[0], help="random seed(s), comma-separated: one run per seed; default: 0"
    )
    run_group.add_argument(
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
    hyper.add_argument(
        "--until-converged",
        action="store_true",
        default=None,
        help="stop at the first evaluation where the dev loss is no longer improving (the rule the claims' "
        "convergence guard checks), once a dev score is significantly above the majority class; --epochs "
        "is then the budget. Part of the run's identity",
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
    hyper.add_argument("--warmup-ratio", type=float, default=0.1, help="fraction of steps with linear warmup")
    hyper.add_argument("--weight-decay", type=float, default=0.0, help="AdamW weight decay; default: 0")
    hyper.add_argument("--max-grad-norm", type=float, default=1.0, help="gradient clipping norm (0 = none)")
    hyper.add_argument(
        "--eval-every", type=int, help="evaluate every N steps besides every epoch end; default: epoch ends only"
    )
    hyper.add_argument("--tsp-lr", type=float, help="TSP learning rate; default: the run's lr")
    hyper.add_argument("--tsp-batch-size", type=int, help="TSP batch size; default: 32")
    hyper.add_argument("--tsp-seed", type=int, default=0, help="seed of the TSP run (shared by runs of all seeds)")
    data = parser.add_argument_group("data")
    data.add_argument(
        "--train-size",
        type=_train_size,
        help="low-resource setting (He et al. 2021 3.2): N training + 1k validation examples drawn from the training "
        "data, the original validation split becomes test (your own data: N of its training examples, validation "
        "and test as they are); all: the full training data; default: all (a preset's where one is given)",
    )
    data.add_argument("--split-seed", type=int, default=0, help="seed of the low-resource draw")
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
    own.add_argument(
        "--allow-rare-labels",
        action="store_true",
        help="keep a label of fewer than 3 rows as a class of its own (refused by default: likely a typo)",
    )


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


def specs_from_args(args) -> list:
    from robustkit.methods.registry import spec_fields
    from robustkit.specs.spec import RunSpec
    from robustkit.verdicts.recipes import preset_spec

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
        until_converged=args.until_converged,
        # the method options that are run-spec fields (--adapter-size, --top-k, ...), where given
        **{name: getattr(args, name) for name in spec_fields() if getattr(args, name) is not None},
    )
    own = (args.data, args.dataset, args.task_name, args.text_column, args.text_pair_column, args.label_column)
    if any(value is not None for value in own):  # the user's own data: a task named by it
        from robustkit.data.user_data import run_fields
        from robustkit.store.task_names import check_task_free

        fields.update(
            run_fields(
                args.data,
                args.dataset,
                args.task_name or args.task,
                args.text_column,
                args.text_pair_column,
                args.label_column,
                args.allow_rare_labels,
            )
        )
        check_task_free(args.store, fields["task"])  # a task name another data set has there is refused
    from robustkit.sweeps.grid import check_size

    fields = {
        name: value for name, value in fields.items() if value is not None
    }  # not given: the preset's, else RunSpec's
    make = (lambda **given: preset_spec(args.preset, **given)) if args.preset else RunSpec
    check_size(
        len(args.seed) * len(args.tsp_steps), "command line (--seed x --tsp-steps)", None if args.yes else MAX_GRID_RUNS
    )
    return [make(seed=seed, tsp_step=step, **fields).resolved() for seed in args.seed for step in args.tsp_steps]
