"""`robustkit import`: a model, adapter or checkpoint series trained elsewhere as one run of a store
(the module is not named import: a keyword)."""

from __future__ import annotations

from robustkit.cli.arguments import output_folder
from robustkit.cli.common import add_device


def add_parser(commands) -> None:
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
    add_device(imports)
    imports.set_defaults(func=run)


def run(args) -> int:
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
