"""What several verbs declare alike (--preset, --yes, --device, the Slurm flags) and how the verbs that
train report their runs."""

from __future__ import annotations

import argparse
import sys

from robustkit.cli.arguments import count
from robustkit.errors import RobustkitError, SweepError
from robustkit.specs.limits import MAX_GRID_RUNS


def add_yes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--yes",
        action="store_true",
        help=f"train more than {MAX_GRID_RUNS:,} runs (refused without it: "
        "an axis typed wrong would otherwise expand for minutes and train for years)",
    )


def add_device(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        default=None,
        help="where runs train (and, where the verb analyses them, where the analyses run their models): cpu, cuda, "
        "cuda:N; default: the GPU if there is one, else the CPU (recorded in the manifest, not part of the run "
        "id)",
    )


def add_preset(parser: argparse.ArgumentParser) -> None:
    from robustkit.verdicts.scales import SCALES

    parser.add_argument(
        "--preset",
        choices=SCALES,
        help="start from a scale of recipes/defaults.toml, under every flag given: demo = the "
        "calibrated demo settings (minilm-l6 on rt, 1k examples, 3 epochs, length 64, batch 16, each method at its "
        "calibrated learning rate; minutes per run on a CPU, see recipes/README.md); cpu = the demo's settings, "
        "each run to a fixed budget (the demo's 3 epochs, or its recipe's [cpu] epochs); paper = the papers' model "
        "(bert-base-uncased) and defaults; default: none (the papers' defaults on minilm-l6: hours per run on a CPU)",
    )


def add_cluster_arguments(parser: argparse.ArgumentParser, submission_control: bool = True) -> None:
    """Slurm options; ``submission_control`` adds --status and --no-wait (sweeps only)."""
    cluster = parser.add_argument_group("Slurm (--executor slurm: one job per run through submitit, as job arrays)")
    cluster.add_argument(
        "--executor",
        choices=["local", "slurm"],
        default="local",
        help="local: worker processes here; slurm: submit to a Slurm cluster",
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
        help="time limit per job in minutes; a job reaching it is requeued and resumes",
    )
    cluster.add_argument("--gpus-per-run", type=count(0), default=0, help="GPUs per job")
    cluster.add_argument("--cpus-per-run", type=count(1), default=2, help="CPU cores per job")
    cluster.add_argument("--mem-gb", type=count(1), help="memory per job in GB; default: the partition's default")
    cluster.add_argument("--max-parallel", type=count(1), default=16, help="jobs of an array running at once")
    cluster.add_argument(
        "--slurm-arg",
        action="append",
        metavar="KEY=VALUE",
        help="further sbatch option passed through, e.g. --slurm-arg account=nlp --slurm-arg qos=high (repeatable)",
    )


def slurm_options(args):
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


def report(results, store) -> int:
    """Print the runs of ``results`` (the command's own, not the whole store), then failures and
    counts; the exit status is 1 if a run failed or was not trained (damaged, or locked: being
    trained by another process)."""
    from robustkit.cli import terminal
    from robustkit.cli.report import ALWAYS, KEYS, SETTINGS, failed_outcomes, runs_table
    from robustkit.sweeps.jobs import TRAINED_ELSEWHERE

    table = runs_table(store, run_ids=list(results.run_id))
    print(terminal.render(table, keep=ALWAYS, keys=KEYS, settings=SETTINGS))
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
        f"by another process, {len(failed)} failed with an error"
        + (f", {len(damaged)} damaged" if len(damaged) else "")
        + _not_results(table)
        + f". Store: {store}"
    )
    return 1 if len(failed) or len(damaged) or len(locked) else 0


def _not_results(table) -> str:
    """The closing line's count of runs whose ``outcome`` (the runs table's word, as ``runs``,
    ``stats`` and the figures use it) is not ``ok``: they trained without error but are failed
    runs, not results; empty when every run is ok."""
    if "outcome" not in table or table.empty:
        return ""
    outcomes = table["outcome"].dropna()
    bad = outcomes[outcomes != "ok"]
    if bad.empty:
        return ""
    kinds = ", ".join(f"{kind} {n}" for kind, n in sorted(bad.value_counts().items()))
    return f"; failed runs, not results: {kinds} (the lines above)"


def swap_from_args(args, before_reading=None) -> dict:
    """The swap ``--model/--data/--task`` name (``model``, ``task``, ``data_dir``), as ``reproduce``
    and ``claims`` read it: the user's data is read (and checked) now; ``before_reading(text)``
    says so first, where a large file takes seconds.

    Raises
    ------
    RobustkitError
        Both ``--data`` and ``--task`` given.
    """
    swap = {"model": args.model, "task": args.task}
    if args.data is not None:
        if args.task is not None:
            raise RobustkitError("give --data (your data) or --task (a built-in task), not both")
        from robustkit.data.user_data import run_fields

        if before_reading is not None:
            before_reading(f"reading {args.data}")
        swap.update(run_fields(args.data))  # its task name and data_dir
    return {k: v for k, v in swap.items() if v is not None}
