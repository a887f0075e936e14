"""`robustkit analyze ...` and `robustkit plot ...`: parse, call the analysis, print or plot."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: --help must not import pandas
    import pandas as pd

from robustkit.attacks import ATTACKS
from robustkit.errors import RobustkitError


def _store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("store", help="run store folder")
    parser.add_argument("--select", action="append", metavar="KEY=VALUE[,VALUE]", help="keep runs whose column KEY has one of the values (repeatable), e.g. --select task=rt --select method=houlsby,full")


def _attack_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=200, help="test examples attacked per run (the same sample for every run); default: 200")
    parser.add_argument("--seed", type=int, default=0, help="seed of the example sample; default: 0")
    parser.add_argument("--engine", choices=["fast", "openattack"], default="fast", help="fast: robustkit's PWWS, float32 decisions certified against float64 (identical outputs); openattack: OpenAttack's own PWWSAttacker; default: fast")
    parser.add_argument("--threads", type=int, help="torch CPU threads; default: torch's (OMP_NUM_THREADS, else all cores)")


def _landscape_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--alpha", default="-2:2:20", help="interpolation coefficients: start:stop:count (both ends included) or a comma list; default: -2:2:20 (He et al. 2021)")
    parser.add_argument("--splits", default="validation", help="comma-separated splits to evaluate on (validation, train); default: validation")
    parser.add_argument("--checkpoint", default="best", help="theta_1: best or last (theta_0 is step-0); default: best")


def _similarity_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokens", type=int, default=5000, help="tokens sampled once from the task's dev set ([CLS]/[SEP]/[PAD] skipped); default: 5000 (He et al. 2021)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the token sample; default: 0")
    parser.add_argument("--checkpoint", default="best", help="tuned checkpoint compared with the base model: best, last or step-0; default: best")


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

    if args.threads is not None:
        if args.threads < 1:
            raise RobustkitError(f"--threads must be at least 1, got {args.threads}")
        import torch

        torch.set_num_threads(args.threads)
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


def _analyze_tradeoff(args) -> int:
    from robustkit.analysis import tradeoff

    frame = tradeoff.table(args.store, args.select, checkpoint=args.checkpoint)
    shown = tradeoff.summarize(frame, ["task", "split", "method", "adapter_size", "top_k", "adapter_sharing", "init_std"])
    return _write_or_print(frame, args.output, shown)


def _analyze_curves(args) -> int:
    from robustkit.analysis import curves

    frame = curves.run(args.store, args.select)
    return _write_or_print(frame, args.output, curves.mean_best(frame))


def _analyze_curvature(args) -> int:
    from robustkit.analysis import curvature

    frame = curvature.run(args.store, args.select, checkpoints=args.checkpoints.split(","), examples=args.examples,
                          grouping=args.grouping, max_iterations=args.max_iterations, tol=args.tol, samples=args.samples,
                          seed=args.seed, block_eigenvalues=not args.no_block_eigenvalues, device=args.device,
                          micro_batch=args.micro_batch)
    return _write_or_print(frame, args.output, curvature.summarize(frame))


def _analyze_surface(args) -> int:
    from robustkit.analysis import surface

    frame = surface.run(args.store, args.select, checkpoint=args.checkpoint, grid=args.grid, split=args.split,
                        examples=args.examples, seed=args.seed, device=args.device)
    shown = frame[frame["metric"] == "loss"].groupby(["run_id", "method", "seed"])["value"].agg(["min", "median", "max"])
    return _write_or_print(frame, args.output, shown.reset_index())


def _analyze_connectivity(args) -> int:
    from robustkit.analysis import connectivity

    frame = connectivity.run(args.store, args.select, checkpoint=args.checkpoint, alphas=args.alpha, split=args.split,
                             examples=args.examples, seed=args.seed, device=args.device)
    table = connectivity.barriers(frame)
    return _write_or_print(frame, args.output, table.drop(columns=[c for c in table if c not in (
        "run_id", "method", "seed", "run_id_b", "seed_b", "split", "metric", "barrier", "argmax_alpha", "end_a", "end_b")]))


def _analyze_similarity_ci(args) -> int:
    from robustkit.analysis import similarity_ci

    frame = similarity_ci.run(args.store, args.select, tokens=args.tokens, seed=args.seed, checkpoint=args.checkpoint,
                              groups=args.groups, resamples=args.resamples, confidence=args.confidence)
    return _write_or_print(frame, args.output, frame.drop(columns=[c for c in frame if c not in (
        "run_id", "method", "seed", "layer", "measure", "value", "ci_low", "ci_high")]))


def _analyze_tuning(args) -> int:
    from robustkit.analysis import tuning

    frame = tuning.run(args.store, args.select, split=args.split, checkpoint=args.checkpoint, metric=args.metric,
                       by=args.by.split(","), confidence=args.confidence, exclude_failed=args.exclude_failed)
    return _write_or_print(frame, args.output)


def add_analyze_commands(commands) -> None:
    analyze = commands.add_parser("analyze", help="run an analysis on the runs of a store", description="Each analysis returns a tidy DataFrame (cached next to the runs, keyed by the checkpoints' sha256); printed, or written with -o.")
    analyses = analyze.add_subparsers(dest="analysis", required=True, help="the analysis to run")

    attack = analyses.add_parser("attack", help="adversarial attack (PWWS or DeepWordBug, --attacker) on each selected run (Han et al. 2021, section 4)", description="Attack each selected run's checkpoint with the chosen attacker (PWWS or DeepWordBug, both as OpenAttack 2.1.1 defines them) on a reproducible sample of its test split; results are saved per example and an interrupted attack resumes. Needs WordNet, the perceptron POS tagger and Punkt in an NLTK data folder ($NLTK_DATA).")
    _store_arguments(attack)
    _attack_arguments(attack)
    attack.add_argument("--attacker", choices=list(ATTACKS), default="pwws", help="attack: pwws (Han et al. 2021's) or deepwordbug (character-level, Gao et al. 2018); default: pwws")
    attack.add_argument("--query-budget", type=int, help="victim queries allowed per example (attack fails past it); default: no limit")
    attack.add_argument("--checkpoint", default="best", help="checkpoint attacked: best, last or step-0; default: best")
    attack.add_argument("-o", "--output", help="write the per-example results to this parquet file")
    attack.set_defaults(func=_analyze_attack)

    rsa = analyses.add_parser("rsa", help="RSA and linear CKA per layer, base model vs each tuned run (He et al. 2021, section 2.2)", description="Representations of the same sampled dev tokens at every layer (embeddings + each encoder layer) of the base model and each selected run; RSA (Pearson r of the cosine-similarity matrices' upper triangles) and linear CKA per layer.")
    _store_arguments(rsa)
    _similarity_arguments(rsa)
    rsa.add_argument("-o", "--output", help="write the tidy result (per run x layer x measure) to this parquet file")
    rsa.set_defaults(func=_analyze_rsa)

    sim = analyses.add_parser("similarity-ci", help="RSA, linear CKA, debiased CKA and Procrustes distance per layer vs the base model, each with a token-bootstrap interval (issue #16)", description="The representations of 'analyze rsa' (the same sampled dev tokens, base model vs each run), four measures per layer, and for each a basic bootstrap interval from random halves of random token groups (no token paired with its own copy).")
    _store_arguments(sim)
    _similarity_arguments(sim)
    sim.add_argument("--groups", type=int, default=20, help="random token groups (even, >= 4); default: 20")
    sim.add_argument("--resamples", type=int, default=200, help="random halves per layer; default: 200")
    sim.add_argument("--confidence", type=float, default=0.95, help="level of the intervals; default: 0.95")
    sim.add_argument("-o", "--output", help="write the tidy result (per run x layer x measure) to this parquet file")
    sim.set_defaults(func=_analyze_similarity_ci)

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

    curv = analyses.add_parser("curvature", help="top Hessian eigenvalue and trace of the training loss, whole trained set and per layer/module (issue #16)", description="Hessian-vector products over the parameters each run trains (adapters, LayerNorms and head for adapter runs; everything for full fine-tuning) on one fixed batch of training examples: the top eigenvalue by power iteration (with its residual bound and iteration count) and the trace by Hutchinson (with its standard error), for the whole set and each block; prints mean +- std over seeds.")
    _store_arguments(curv)
    curv.add_argument("--checkpoints", default="step-0,best,last", help="comma-separated checkpoints: step-0 (theta_0; for tsp_step > 0 the TSP checkpoint with a fresh head), best, last, tsp (the masked-LM loss at the TSP checkpoint itself, runs with tsp_step > 0); default: step-0,best,last")
    curv.add_argument("--examples", type=int, default=32, help="training examples in the fixed batch; default: 32")
    curv.add_argument("--grouping", choices=["layer", "module", "none"], default="layer", help="blocks besides the whole set: layer (as the gradient norms group them), module (each module's own tensors), none; default: layer")
    curv.add_argument("--max-iterations", type=int, default=30, help="power iteration cap per eigenvalue; default: 30")
    curv.add_argument("--tol", type=float, default=1e-3, help="power iteration stops at this relative change; default: 1e-3")
    curv.add_argument("--samples", type=int, default=30, help="Hutchinson samples (every block's trace from the same ones); default: 30")
    curv.add_argument("--seed", type=int, default=0, help="seed of the batch and the random vectors; default: 0")
    curv.add_argument("--no-block-eigenvalues", action="store_true", help="skip the per-block power iterations (the costly part with --grouping module); traces stay per block")
    curv.add_argument("--device", help="where the products run: cpu, cuda; default: the GPU if there is one")
    curv.add_argument("--micro-batch", type=int, help="run each Hessian-vector product in parts of this many examples, one part's graph in memory at a time (the same numbers up to rounding; the graph is rebuilt at every product, so slower); default: the whole batch, its graph built once")
    curv.add_argument("-o", "--output", help="write the tidy result (per run x checkpoint x block x estimator) to this parquet file")
    curv.set_defaults(func=_analyze_curvature)

    surf = analyses.add_parser("surface", help="2-D loss surface around a checkpoint along two filter-normalised random directions (Li et al. 2018)", description="Loss and metrics at theta* + a d1 + b d2 on a grid, d1 and d2 Gaussian directions with every row of every weight matrix rescaled to that row's norm in theta* (biases and LayerNorms fixed), over the tensors each run trains; prints min/median/max loss per run.")
    _store_arguments(surf)
    surf.add_argument("--checkpoint", default="best", choices=["best", "last", "step-0"], help="the centre theta*; default: best")
    surf.add_argument("--grid", default="-1:1:11", help="coefficients of each direction: start:stop:count or a comma list; default: -1:1:11")
    surf.add_argument("--split", default="train", choices=["train", "validation", "test"], help="split the loss is taken on; default: train")
    surf.add_argument("--examples", type=int, default=256, help="examples of the split, drawn with --seed; default: 256")
    surf.add_argument("--seed", type=int, default=0, help="seed of the directions and the examples; default: 0")
    surf.add_argument("--device", help="where the model runs: cpu, cuda; default: the GPU if there is one")
    surf.add_argument("-o", "--output", help="write the tidy grid (per run x a x b x metric) to this parquet file")
    surf.set_defaults(func=_analyze_surface)

    conn = analyses.add_parser("connectivity", help="linear mode connectivity: loss between two seeds of a configuration and its barrier (Frankle et al. 2020)", description="For every pair of selected runs that differ only in their seed: loss and metrics along (1 - alpha) theta_A + alpha theta_B over the tensors they train (adapter runs share the frozen base), and the barrier max - mean of the ends; prints the barriers.")
    _store_arguments(conn)
    conn.add_argument("--checkpoint", default="best", choices=["best", "last"], help="checkpoint of both ends; default: best")
    conn.add_argument("--alpha", default="0:1:11", help="interpolation coefficients, holding 0 and 1: start:stop:count or a comma list; default: 0:1:11")
    conn.add_argument("--split", default="train", choices=["train", "validation", "test"], help="split the loss is taken on; default: train")
    conn.add_argument("--examples", type=int, default=512, help="examples of the split, drawn with --seed; default: 512")
    conn.add_argument("--seed", type=int, default=0, help="seed of the examples; default: 0")
    conn.add_argument("--device", help="where the model runs: cpu, cuda; default: the GPU if there is one")
    conn.add_argument("-o", "--output", help="write the lines (per pair x alpha x metric) to this parquet file")
    conn.set_defaults(func=_analyze_connectivity)

    tune = analyses.add_parser("tuning", help="tuning curves: median and expected best score of k runs, with confidence bands (Dodge et al. 2019; opda)", description="Each group's runs (over seeds, and learning rates where a group has several) as draws of a search: the median best-of-k score with opda's simultaneous band and the expected best of k (expected validation performance), k = 1..n.")
    _store_arguments(tune)
    tune.add_argument("--split", choices=["validation", "test"], default="validation", help="split scored; default: validation (what a search selects on)")
    tune.add_argument("--checkpoint", choices=["best", "last"], default="best", help="checkpoint scored; default: best")
    tune.add_argument("--metric", help="metric; default: each task's main metric")
    tune.add_argument("--by", default="method", help="comma-separated grouping columns; default: method (settings that vary inside a group split it too)")
    tune.add_argument("--confidence", type=float, default=0.8, help="level of the simultaneous bands; default: 0.8")
    tune.add_argument("--exclude-failed", action="store_true", help="leave collapsed and diverged runs out (default: they count as draws)")
    tune.add_argument("-o", "--output", help="write the curves to this parquet file")
    tune.set_defaults(func=_analyze_tuning)

    curve = analyses.add_parser("curves", help="dev loss and metric vs step; mean and best dev metric (He et al. 2021, table 6)", description="Validation history of each run; prints the mean and best dev main metric over all evaluation steps, mean +- std over seeds.")
    _store_arguments(curve)
    curve.add_argument("-o", "--output", help="write the learning curves to this parquet file")
    curve.set_defaults(func=_analyze_curves)


# ---------------------------------------------------------------------------------------------
# plot: one verb per registered figure (robustkit.figures), its flags from the figure's parameters


def _plot(args) -> int:
    from robustkit import figures
    from robustkit.plots.style import save_pdf

    figure = figures.get(args.figure)
    params = {p.name: getattr(args, p.name) for p in figure.parameters}
    fig = figure.draw(args.store, args.select, subtitle=args.subtitle, footer=args.footer, **params)
    print(f"wrote {save_pdf(fig, args.output)}")
    return 0


def _add_param(parser: argparse.ArgumentParser, param) -> None:
    """``param`` (:class:`robustkit.figures.Param`) as a flag: a switch for booleans (``--no-<name>``
    for one that is on by default), a comma-separated value for lists."""
    if param.type is bool:
        if param.default:  # on unless switched off: the flag is --no-<name>
            parser.add_argument("--no-" + param.flag[2:], dest=param.name, action="store_false", help=param.help)
        else:
            parser.add_argument(param.flag, dest=param.name, action="store_true", help=param.help)
        return
    kind = param.type if param.type in (int, float) else str
    parser.add_argument(param.flag, dest=param.name, type=kind, default=param.default,
                        choices=list(param.choices) or None, help=param.help)


def add_plot_commands(commands) -> None:
    from robustkit.figures import FIGURES

    plot = commands.add_parser("plot", help="render a paper figure from a store as PDF", description="Runs the figure's analysis (cached) and writes the figure as PDF. The same figures are drawn in a notebook by robustkit.figures.draw(name, store, ...).")
    verbs = plot.add_subparsers(dest="figure", required=True, help="the figure to render")
    for name, figure in FIGURES.items():
        parser = verbs.add_parser(name, help=figure.help, description=figure.help)
        _store_arguments(parser)
        parser.add_argument("-o", "--output", required=True, help="PDF file to write")
        # --subtitle / --footer: robustkit reproduce passes the recipe's stand-in note and the
        # paper's claim with its verdict
        parser.add_argument("--subtitle", help="a second title line, e.g. 'minilm-l6 on rt, stand-in for BERT-base on SST-2'")
        parser.add_argument("--footer", help="text under the figure, wrapped to its width; '\\n' separates paragraphs (e.g. the claim and its verdict)")
        for param in figure.parameters:
            _add_param(parser, param)
        parser.set_defaults(func=_plot)


NEGATIVE_VALUE_OPTIONS = ("--alpha", "--alphas", "--grid")


def join_negative_values(argv: list[str]) -> list[str]:
    """``--alphas -2:2:20`` -> ``--alphas=-2:2:20``: argparse takes a value that starts with '-'
    for an option unless it looks like a plain number."""
    joined: list[str] = []
    for token in argv:
        if joined and joined[-1] in NEGATIVE_VALUE_OPTIONS and token.startswith("-"):
            joined[-1] = f"{joined[-1]}={token}"
        else:
            joined.append(token)
    return joined
