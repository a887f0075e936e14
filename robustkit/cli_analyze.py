"""`robustkit analyze ...` and `robustkit plot ...`: parse, call the analysis, print or plot."""

from __future__ import annotations

import argparse

import pandas as pd


def _store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", help="run store folder")
    parser.add_argument("--select", action="append", metavar="KEY=VALUE[,VALUE]", help="keep runs whose column KEY has one of the values (repeatable), e.g. --select task=rt --select method=houlsby,full")


def _attack_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=200, help="test examples attacked per run (the same sample for every run); default: 200")
    parser.add_argument("--seed", type=int, default=0, help="seed of the example sample; default: 0")
    parser.add_argument("--engine", choices=["fast", "openattack"], default="fast", help="fast: robustkit's batched PWWS with float32 screening (identical outputs); openattack: OpenAttack's own PWWSAttacker; default: fast")


def _landscape_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--alpha", default="-2:2:20", help="interpolation coefficients: start:stop:count (both ends included) or a comma list; default: -2:2:20 (He et al. 2021)")
    parser.add_argument("--splits", default="validation", help="comma-separated splits to evaluate on (validation, train); default: validation")
    parser.add_argument("--checkpoint", default="best", help="theta_1: best or last (theta_0 is step-0); default: best")


def _similarity_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokens", type=int, default=5000, help="tokens sampled once from the task's dev set ([CLS]/[SEP]/[PAD] skipped); default: 5000 (He et al. 2021)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the token sample; default: 0")
    parser.add_argument("--checkpoint", default="best", help="tuned checkpoint compared with the base model: best, last or step-0; default: best")


def _stability_arguments(parser: argparse.ArgumentParser, epochs: bool = False) -> None:
    parser.add_argument("--metric", help="metric shown (accuracy, f1, mcc, ...); default: each task's main metric")
    if epochs:  # epoch-end evaluations come from the history: validation only, no checkpoint
        return
    parser.add_argument("--split", choices=["test", "validation"], default="test", help="split scored; default: test")
    parser.add_argument("--checkpoint", choices=["best", "last"], default="best", help="best: best validation main metric; last: end of training; default: best")


def _similarity(args) -> pd.DataFrame:
    from robustkit.analysis import similarity

    return similarity.run(args.store, args.select, tokens=args.tokens, seed=args.seed, checkpoint=args.checkpoint)


def _write_or_print(frame: pd.DataFrame, output: str | None, shown: pd.DataFrame | None = None) -> int:
    if output:
        frame.to_parquet(output, index=False)
        print(f"wrote {len(frame)} rows to {output}")
    else:
        print((frame if shown is None else shown).to_string(index=False))
    return 0


# ---------------------------------------------------------------------------------------------
# analyze


def _analyze_attack(args) -> int:
    from robustkit.analysis import attack

    examples = attack.run(args.store, args.select, n=args.n, seed=args.seed, attacker=args.attacker,
                          engine=args.engine, query_budget=args.query_budget, checkpoint=args.checkpoint)
    print(attack.summarize(examples).drop(columns=["model", "lr", "adapter_size"]).to_string(index=False))
    if args.output:
        examples.to_parquet(args.output, index=False)
        print(f"per-example results (original and adversarial text): {args.output}")
    return 0


def _analyze_rsa(args) -> int:
    from robustkit.analysis import similarity

    frame = _similarity(args)
    return _write_or_print(frame, args.output, similarity.summarize(frame))


def _analyze_ablation(args) -> int:
    from robustkit.analysis import ablation

    frame = ablation.run(args.store, args.select, checkpoint=args.checkpoint)
    return _write_or_print(frame, args.output)


def _analyze_landscape(args) -> int:
    from robustkit.analysis import landscape

    frame = landscape.run(args.store, args.select, alphas=args.alpha, splits=tuple(args.splits.split(",")), checkpoint=args.checkpoint)
    return _write_or_print(frame, args.output)


def _analyze_gradnorm(args) -> int:
    from robustkit.analysis import gradnorm

    frame = gradnorm.run(args.store, args.select)
    return _write_or_print(frame, args.output, gradnorm.summary(frame, every=max(1, int(frame["step"].max()) // 10)))


def _tradeoff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--split", choices=["validation", "test"], default="validation", help="split whose metric is shown (Houlsby et al. report validation); the best learning rate per point is always selected on validation; default: validation")
    parser.add_argument("--checkpoint", choices=["best", "last"], default="best", help="checkpoint whose metrics are used: best (selected on validation) or last; default: best")
    parser.add_argument("--metric", help="metric shown (accuracy, f1, mcc, ...; Houlsby et al. plot accuracy for CoLA too); default: each task's main metric")


def _analyze_tradeoff(args) -> int:
    from robustkit.analysis import tradeoff

    frame = tradeoff.table(args.store, args.select, checkpoint=args.checkpoint)
    shown = tradeoff.summarize(frame, ["task", "split", "method", "adapter_size", "top_k", "adapter_sharing", "init_std"])
    return _write_or_print(frame, args.output, shown)


def _analyze_curves(args) -> int:
    from robustkit.analysis import curves

    frame = curves.run(args.store, args.select)
    return _write_or_print(frame, args.output, curves.mean_best(frame))


def add_analyze_commands(commands) -> None:
    analyze = commands.add_parser("analyze", help="run an analysis on the runs of a store", description="Each analysis returns a tidy DataFrame (cached next to the runs, keyed by the checkpoints' sha256); printed, or written with -o.")
    analyses = analyze.add_subparsers(dest="analysis", required=True, help="the analysis to run")

    attack = analyses.add_parser("attack", help="PWWS adversarial attack on each selected run (Han et al. 2021, section 4)", description="Attack each selected run's checkpoint with PWWS (OpenAttack 2.1.1 semantics) on a reproducible sample of its test split; results are saved per example and an interrupted attack resumes. Needs WordNet, the perceptron POS tagger and Punkt in an NLTK data folder ($NLTK_DATA).")
    _store_arguments(attack)
    _attack_arguments(attack)
    attack.add_argument("--attacker", choices=["pwws"], default="pwws", help="attack method; default: pwws")
    attack.add_argument("--query-budget", type=int, help="victim queries allowed per example (attack fails past it); default: no limit")
    attack.add_argument("--checkpoint", default="best", help="checkpoint attacked: best, last or step-0; default: best")
    attack.add_argument("-o", "--output", help="write the per-example results to this parquet file")
    attack.set_defaults(func=_analyze_attack)

    rsa = analyses.add_parser("rsa", help="RSA and linear CKA per layer, base model vs each tuned run (He et al. 2021, section 2.2)", description="Representations of the same sampled dev tokens at every layer (embeddings + each encoder layer) of the base model and each selected run; RSA (Pearson r of the cosine-similarity matrices' upper triangles) and linear CKA per layer.")
    _store_arguments(rsa)
    _similarity_arguments(rsa)
    rsa.add_argument("-o", "--output", help="write the tidy result (per run x layer x measure) to this parquet file")
    rsa.set_defaults(func=_analyze_rsa)

    ablate = analyses.add_parser("ablation", help="remove the adapters of every layer span i..j and re-evaluate (Houlsby et al. 2019, figure 6)", description="For each adapter run and every span of layers i..j, skip those layers' adapters (nothing re-trained) and evaluate on the dev set; reports each metric and its relative change vs the fully adapted model. Full fine-tuning runs are skipped with a warning.")
    _store_arguments(ablate)
    ablate.add_argument("--checkpoint", default="best", help="checkpoint ablated: best or last; default: best")
    ablate.add_argument("-o", "--output", help="write the tidy result (per run x span x metric) to this parquet file")
    ablate.set_defaults(func=_analyze_ablation)

    land = analyses.add_parser("landscape", help="loss along theta_0 + alpha (theta_1 - theta_0) (He et al. 2021, section 5)", description="Linear interpolation between each run's step-0 and best checkpoints, over the parameters the run trains; evaluated fresh at every alpha, the model restored exactly afterwards.")
    _store_arguments(land)
    _landscape_arguments(land)
    land.add_argument("-o", "--output", help="write the tidy result to this parquet file")
    land.set_defaults(func=_analyze_landscape)

    grads = analyses.add_parser("gradnorm", help="per-layer L2 gradient norms logged during training (Han et al. 2021, figure 3)", description="Every step's gradient norm per layer group (before clipping), from the runs' gradnorms.parquet; prints a per-run summary.")
    _store_arguments(grads)
    grads.add_argument("-o", "--output", help="write every step's norms to this parquet file")
    grads.set_defaults(func=_analyze_gradnorm)

    trade = analyses.add_parser("tradeoff", help="trained parameters vs main metric per run (Houlsby et al. 2019 section 3.4)", description="From the manifests (no model is loaded): each selected run's trainable parameters, its share of the model's parameters and its main metric at the chosen checkpoint on validation and test; prints the mean +- std over seeds per method setting.")
    _store_arguments(trade)
    trade.add_argument("--checkpoint", choices=["best", "last"], default="best", help="checkpoint whose metrics are used: best (selected on validation) or last; default: best")
    trade.add_argument("-o", "--output", help="write the tidy per-run table to this parquet file")
    trade.set_defaults(func=_analyze_tradeoff)

    curve = analyses.add_parser("curves", help="dev loss and metric vs step; mean and best dev metric (He et al. 2021, table 6)", description="Validation history of each run; prints the mean and best dev main metric over all evaluation steps, mean +- std over seeds.")
    _store_arguments(curve)
    curve.add_argument("-o", "--output", help="write the learning curves to this parquet file")
    curve.set_defaults(func=_analyze_curves)


# ---------------------------------------------------------------------------------------------
# plot


def _stability_figure(args):
    """The stability box plots: one score per run (or per run x epoch end), then the figure."""
    from robustkit.analysis import stability
    from robustkit.plots import stability as plots

    failed = args.include_failed
    if args.figure == "box-tsp-epochs":
        frame = stability.epoch_outcomes(args.store, args.select, metric=args.metric)
        return plots.box_tsp_epochs(frame, pool_epochs=args.pool_epochs, include_failed=failed)
    frame = stability.outcomes(args.store, args.select, checkpoint=args.checkpoint, split=args.split, metric=args.metric)
    if args.figure == "table":
        return _summary_table(frame, [c.strip() for c in args.by.split(",")], args.title, failed)
    if args.figure == "box-tsp":
        return plots.box_tsp(frame, pooled=args.pooled, include_failed=failed)
    if args.figure == "train-size":
        return plots.train_size(frame, kind=args.kind, include_failed=failed)
    return {"box-seeds": plots.box_seeds, "box-lr": plots.box_lr}[args.figure](frame, include_failed=failed)


def _summary_table(frame: pd.DataFrame, by: list[str], title: str, include_failed: bool = False):
    """The results table: statistics of the kept runs, failure counts and the majority
    baseline per row; settings that vary inside a row become columns (never pooled)."""
    from robustkit.analysis import stability
    from robustkit.analysis.pooling import split_columns
    from robustkit.collapse import marked
    from robustkit.plots.stability import value_label
    from robustkit.plots.style import paper_title, scale
    from robustkit.plots.tables import summary_table

    frame = marked(frame)
    by = split_columns(frame, by)
    within = [c for c in by if c != "method"] or None
    tests = stability.compare(frame, by="method", within=within, include_failed=include_failed)
    summary = stability.summarize(frame, by=by, include_failed=include_failed)
    if "baseline" in frame:
        summary = summary.merge(frame.groupby(by, dropna=False)["baseline"].mean().reset_index(), on=by, how="left")
    metric = str(frame["metric"].iloc[0]) if frame["metric"].nunique() == 1 else ""
    caption = stability.caption(summary, tests, group="row")
    return summary_table(summary.sort_values(by), by, paper_title(title, frame), value_label(frame), caption,
                         scale=scale(metric) if metric else None, include_failed=include_failed)


def _curves_with_outcomes(args):
    """Learning curves + each run's outcome at the end of training (on validation) and the
    majority baseline of its main metric, when the store can say (else unmarked curves)."""
    import warnings

    from robustkit.analysis import curves, stability
    from robustkit.errors import RobustkitError

    frame = curves.run(args.store, args.select)
    try:
        scores = stability.outcomes(args.store, args.select, checkpoint="last", split="validation")
    except RobustkitError as error:
        warnings.warn(f"learning curves drawn without run outcomes: {error}", stacklevel=2)
        return frame
    return curves.with_outcomes(frame, scores)


def _tradeoff_figure(args):
    from robustkit.analysis import tradeoff

    frame = tradeoff.table(args.store, args.select, checkpoint=args.checkpoint, metric=args.metric)
    if args.figure == "tradeoff":
        from robustkit.plots.tradeoff import tradeoff_figure

        return tradeoff_figure(frame, args.split, include_failed=args.include_failed)
    if args.figure == "tradeoff-aggregate":
        from robustkit.plots.tradeoff import tradeoff_aggregate_figure

        aggregate = tradeoff.aggregate(frame, split=args.split, include_failed=args.include_failed)
        return tradeoff_aggregate_figure(aggregate, frame[frame["split"] == args.split], split=args.split)
    from robustkit.plots.init_std import init_std_figure

    return init_std_figure(frame, args.split, include_failed=args.include_failed)


def _figure(args):
    """The figure ``args.figure`` names, from its analysis."""
    if args.figure.startswith("box-") or args.figure in ("train-size", "table"):
        return _stability_figure(args)
    if args.figure in ("tradeoff", "tradeoff-aggregate", "init-std"):
        return _tradeoff_figure(args)
    from robustkit.analysis import curves, gradnorm, landscape
    from robustkit.plots import curves as curve_plots
    from robustkit.plots.gradnorm import gradnorm_curves
    from robustkit.plots.landscape import landscape_curves

    if args.figure == "attack-vs-tsp":
        from robustkit.analysis import attack
        from robustkit.plots.attack import attack_vs_tsp

        examples = attack.run(args.store, args.select, n=args.n, seed=args.seed, engine=args.engine)
        summary = attack.with_outcomes(attack.summarize(examples), args.store)
        return attack_vs_tsp(summary, args.convention, include_failed=args.include_failed)
    if args.figure == "rsa":
        from robustkit.plots.similarity import rsa_by_layer

        return rsa_by_layer(_similarity(args), args.measure)
    if args.figure == "ablation":
        from robustkit.analysis import ablation
        from robustkit.plots.ablation import ablation_heatmap

        return ablation_heatmap(ablation.run(args.store, args.select, checkpoint=args.checkpoint), args.metric, args.paper_figure)
    if args.figure == "gradnorm":
        return gradnorm_curves(gradnorm.summary(gradnorm.run(args.store, args.select)))
    if args.figure == "landscape":
        frame = landscape.run(args.store, args.select, alphas=args.alpha, splits=tuple(args.splits.split(",")), checkpoint=args.checkpoint)
        return landscape_curves(frame)
    frame = _curves_with_outcomes(args)
    if args.figure == "curves":
        return curve_plots.dev_curves(frame, include_failed=args.include_failed)
    if args.figure == "curves-by-tsp":
        return curve_plots.curves_by_tsp(frame, include_failed=args.include_failed)
    return curve_plots.mean_best_table(curves.mean_best(frame, include_failed=args.include_failed))


def _plot(args) -> int:
    from robustkit.plots.style import decorate, save_pdf

    fig = decorate(_figure(args), subtitle=args.subtitle, footer=args.footer)
    print(f"wrote {save_pdf(fig, args.output)}")
    return 0


# Figures with a score axis: collapsed runs are marked there and left out unless --include-failed.
SCORE_PLOTS = {"box-seeds", "box-tsp", "box-tsp-epochs", "box-lr", "train-size", "table", "tradeoff", "tradeoff-aggregate",
               "init-std", "curves", "curves-by-tsp", "mean-best", "attack-vs-tsp"}


def _figure_text_arguments(parser: argparse.ArgumentParser) -> None:
    """--subtitle / --footer: every plot verb has them (robustkit reproduce passes the recipe's
    stand-in note and the paper's claim with its verdict)."""
    parser.add_argument("--subtitle", help="a second title line, e.g. 'minilm-l6 on rt, stand-in for BERT-base on SST-2'")
    parser.add_argument("--footer", help="text under the figure, wrapped to its width; '\\n' separates paragraphs (e.g. the claim and its verdict)")


PLOTS = {
    "rsa": "He et al. 2021 figure 2: similarity of each layer's representations to the base model's",
    "attack-vs-tsp": "Han et al. 2021 figure 5: PWWS attack success rate vs TSP steps, with vs without adapters",
    "ablation": "Houlsby et al. 2019 figure 6: relative change of the dev metric when the adapters of layers i..j are removed",
    "gradnorm": "Han et al. 2021 figure 3: per-layer gradient norms during training (log scale)",
    "landscape": "He et al. 2021 figure 6: loss along the line from theta_0 to theta_1",
    "curves": "He et al. 2021 figures 5 and 9: dev loss and metric vs training step",
    "curves-by-tsp": "Han et al. 2021 figures 1 and 13: dev metric vs step, one line per TSP step",
    "mean-best": "He et al. 2021 table 6: mean and best dev metric over all evaluation steps, as a table",
    "box-seeds": "Han et al. 2021 figure 2: box plot of each method's score over random seeds, one panel per task",
    "box-tsp": "Han et al. 2021 figure 4: box plots of the score per TSP step and method (--pooled: one box per method over TSP steps)",
    "box-tsp-epochs": "Han et al. 2021 figures 9-10: box plots of the dev score at each fine-tuning epoch end, per TSP step, one panel per method (--pool-epochs: one box per TSP step and method over every epoch end, the paper's)",
    "box-lr": "He et al. 2021 figure 4: box plots of the score over seeds per learning rate and method",
    "train-size": "He et al. 2021 figure 3: score vs number of training examples, per method (boxes or mean +- std)",
    "table": "Han et al. 2021 table 1, He et al. 2021 tables 2 and 5: mean +- std, bootstrap CI, range and failed runs per group, as a PDF table",
    "tradeoff": "Houlsby et al. 2019 figure 4 (per task; figure 3's curves): metric vs trained parameters (log) for adapter sizes, top-k fine-tuning, LayerNorm-only and full fine-tuning; each point the best learning rate of its sweep, error bars s.e.m.",
    "tradeoff-aggregate": "Houlsby et al. 2019 figure 3: score minus full fine-tuning vs trained parameters, 20th/50th/80th percentiles across tasks, adapters vs top-k",
    "init-std": "Houlsby et al. 2019 figure 6 right: metric vs the std of the adapters' weight init (log)",
}


def add_plot_commands(commands) -> None:
    plot = commands.add_parser("plot", help="render a paper figure from a store as PDF", description="Runs the figure's analysis (cached) and writes the figure as PDF.")
    figures = plot.add_subparsers(dest="figure", required=True, help="the figure to render")
    for name, help_text in PLOTS.items():
        figure = figures.add_parser(name, help=help_text, description=help_text)
        _store_arguments(figure)
        figure.add_argument("-o", "--output", required=True, help="PDF file to write")
        _figure_text_arguments(figure)
        if name in SCORE_PLOTS:
            figure.add_argument("--include-failed", action="store_true", help="keep collapsed and diverged runs (robustkit.collapse) in boxes, means, error bars and tests; they are marked either way; default: left out")
        if name == "attack-vs-tsp":
            _attack_arguments(figure)
            figure.add_argument("--convention", choices=["openattack", "gold"], default="openattack", help="openattack: prediction flips, misclassified inputs included; gold: only correctly classified inputs; default: openattack")
        if name == "landscape":
            _landscape_arguments(figure)
        if name == "ablation":
            figure.add_argument("--checkpoint", default="best", help="checkpoint ablated: best or last; default: best")
            figure.add_argument("--metric", help="metric whose relative change is shown (Houlsby et al. plot validation accuracy); default: the task's main metric")
            figure.add_argument("--paper-figure", default="Houlsby et al. 2019, figure 6", help="the figure named in the title; default: Houlsby et al. 2019, figure 6 (the course report's figure 8 is the same ablation of layer-shared adapters)")
        if name in ("tradeoff", "tradeoff-aggregate", "init-std"):
            _tradeoff_arguments(figure)
        if name.startswith("box-") or name in ("train-size", "table"):
            _stability_arguments(figure, epochs=name == "box-tsp-epochs")
        if name == "table":
            figure.add_argument("--by", default="task,method", help="comma-separated columns that define a row (task, method, tsp_step, train_size, adapter_size, lr, ...); default: task,method")
            figure.add_argument("--title", default="Results over runs", help="table title (the model and task used are appended)")
        if name == "box-tsp-epochs":
            figure.add_argument("--pool-epochs", action="store_true", help="one box per TSP step and method over every fine-tuning epoch end of every run (Han et al. 2021 figures 9-10: 'development scores from 100 runs ... epochs ranging from 1 to 100') instead of a box per epoch")
        if name == "box-tsp":
            figure.add_argument("--pooled", action="store_true", help="one box per method over all TSP steps (each run differs by its TSP step, as in the paper) instead of a box per TSP step")
        if name == "train-size":
            figure.add_argument("--kind", choices=["box", "mean"], default="box", help="box: boxes over seeds; mean: mean +- std (ddof 1) as in the paper; default: box")
        if name == "rsa":
            _similarity_arguments(figure)
            figure.add_argument("--measure", choices=["rsa", "cka"], default="rsa", help="rsa (He et al. 2021) or linear CKA (Kornblith et al. 2019); default: rsa")
        figure.set_defaults(func=_plot)


NEGATIVE_VALUE_OPTIONS = ("--alpha",)


def join_negative_values(argv: list[str]) -> list[str]:
    """``--alpha -2:2:20`` -> ``--alpha=-2:2:20``: argparse takes a value that starts with '-'
    for an option unless it looks like a plain number."""
    joined: list[str] = []
    for token in argv:
        if joined and joined[-1] in NEGATIVE_VALUE_OPTIONS and token.startswith("-"):
            joined[-1] = f"{joined[-1]}={token}"
        else:
            joined.append(token)
    return joined


def parse_plot_args(argv: list[str]) -> argparse.Namespace:
    """Parse a ``robustkit plot ...`` command line (``["plot", "rsa", store, "-o", pdf, ...]``)
    as the ``robustkit`` command does, without building the other commands (for reproduce)."""
    parser = argparse.ArgumentParser(prog="robustkit")
    add_plot_commands(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(join_negative_values(argv))
