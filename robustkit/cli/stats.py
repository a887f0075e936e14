"""`robustkit stats`: stability statistics over runs, per cell and group."""

from __future__ import annotations

from pathlib import Path

from robustkit.cli.arguments import RawDescriptionDefaultsHelpFormatter


def add_parser(commands) -> None:
    stats = commands.add_parser(
        "stats",
        help="stability statistics over runs: spread per method, tests (Levene, Brown-Forsythe, Mann-Whitney U), ASO "
        "and failed-run rates",
        formatter_class=RawDescriptionDefaultsHelpFormatter,
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
        help="column whose groups are compared pairwise (method, tsp_step, lr, ...)",
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
        "group, left out; see robustkit.store.collapse)",
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
    stats.set_defaults(func=run)


def run(args) -> int:
    from robustkit.progress import heartbeat

    # each stage says it is still running past a few seconds (issue #57: stats was silent for a minute)
    with heartbeat("stats: reading the runs and their scores"):
        from robustkit.analysis import aggregates, dominance, scores, stability

        within = None if args.within == "auto" else [c for c in args.within.split(",") if c and c != "none"]
        frame = scores.outcomes(
            args.store, args.select, checkpoint=args.checkpoint, split=args.split, metric=args.metric, epoch=args.epoch
        )
    with heartbeat(f"stats: bootstrap intervals and tests of {len(frame)} runs"):
        summary, tests = stability.tables(frame, by=args.by, within=within, include_failed=args.include_failed)
    cells = [c for c in tests.columns if c not in stability.COMPARE_COLUMNS]
    with heartbeat("stats: ASO (deepsig) of each pair of groups"):
        aso = (
            None
            if args.no_aso
            else dominance.aso_table(frame, args.by, within=cells, include_failed=args.include_failed)
        )
    with heartbeat("stats: failed-run rates, IQM and P(A > B) (rliable)"):
        failures = dominance.failure_rates(frame, [*cells, args.by])
        # rliable's summaries over tasks x seeds: the task is their stratum, the other cells stay cells
        iqm, improvement = aggregates.tables(frame, args.by, within=cells, include_failed=args.include_failed)
    from robustkit.cli import terminal
    from robustkit.store import collapse

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
        degenerate = summary[summary["note"].astype(bool)] if "note" in summary else summary.iloc[:0]
        notes = [
            f"note: {' '.join(str(row[c]) for c in (*cells, args.by) if c in row)}: {row['note']}"
            for _, row in degenerate.iterrows()
        ]
        print(
            terminal.render(summary.drop(columns=["note"], errors="ignore"), keys=keys["summary"]),
            *notes,
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
            f"failed ({collapse.FAILED_WORDS}) runs,\nexact binomial interval",  # within 80 characters
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
