"""The analysis registry: one entry per analysis, the single home of its parameters and statistics.

An :class:`Analysis` is what every other part of robustkit reads:

- its **computation**: ``compute`` (``"module:function"``), called as
  ``function(store, select, **params, **options)``; one tidy DataFrame of the selected runs,
  cached per run next to them (:mod:`robustkit.analysis.each_run`);
- its **parameters**, typed and declared once (:class:`robustkit.params.Param`: default, help,
  choices); ``options`` are the settings that change how it runs, not what it returns (device,
  threads), so they never enter a cache key;
- its **summary**: the table ``robustkit analyze <name>`` prints;
- its **statistics** (:class:`Statistic`): the per-run numbers claims are tested on, each a
  function of the analysis's own frame, named ``<analysis>.<statistic>`` in recipes.

The ``robustkit analyze`` verbs are generated from these entries (:mod:`robustkit.cli_analyze`),
figures name an analysis plus plot-only parameters (:mod:`robustkit.figures`), and a claim is
judged on the very frame its figure drew (:mod:`robustkit.claim`): the same parameters, so the
same cache entry. Functions are named by import path and imported only when called, so reading
the registry (``--help``) imports nothing heavy::

    from robustkit.analysis.registry import get
    frame = get("rsa").run("runs/demo", ["task=rt"], tokens=2000)
    slopes = get("gradnorm").statistic("slope", get("gradnorm").run("runs/demo"), layer="top")

Adding an analysis is one module in ``robustkit/analysis/`` and one :func:`register` call here.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robustkit.attacks import ATTACKS  # names only: the attacks' modules load when one is built
from robustkit.errors import RobustkitError
from robustkit.params import Param, resolve

if TYPE_CHECKING:  # annotations only: the registry is read by --help
    import pandas as pd


class AnalysisError(RobustkitError):
    """An unknown analysis, statistic or parameter (the message lists the valid ones)."""


def load(path: str) -> Callable:
    """The function ``"module:function"`` (imported now)."""
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


def call(function: Callable, positional: tuple, values: dict[str, Any]) -> Any:
    """``function(*positional, **the values its signature names)``.

    Routing, not checking: every value was checked against a declaration before it gets here
    (:func:`robustkit.params.resolve`), and a declared parameter that a function does not use is
    simply not its business (a plot does not take an analysis's ``tokens``).
    """
    accepted = inspect.signature(function).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        return function(*positional, **values)
    return function(*positional, **{k: v for k, v in values.items() if k in accepted})


@dataclass(frozen=True)
class Statistic:
    """One number per run (or per run x cell) derived from an analysis's frame: what a claim tests.

    Attributes
    ----------
    name : str
        Short name; recipes write ``<analysis>.<name>``.
    function : str
        ``"module:function"``, called as ``function(frame, store=..., **params)`` on the
        analysis's frame; returns one row per observation with the run identity columns, any
        cell columns (e.g. ``layer``) and ``value``.
    help : str
        What the number is, with its unit and sign (e.g. "negative = vanishing").
    params : tuple of Param
        Its own parameters (never the analysis's: those are the figure's).
    independent : bool
        Its observations are independent runs; False for a statistic of run pairs that share
        runs (shown, never tested: :mod:`robustkit.claim`).
    unit : str
        What one observation is: ``run``, or ``disjoint pair`` (two runs of one configuration,
        each run in at most one pair: independent, and half as many as the runs, which
        :mod:`robustkit.decidability` counts so).
    ends : bool
        It depends on how training ended: a value at a checkpoint at or near the end (the final
        or best score, representations, curvature or landscape at ``last`` or ``best``, attack
        success) or over every evaluation up to it (a dev-loss rise, a mean over evaluations).
        A claim on such a statistic is judged only where its runs have stopped improving
        (:mod:`robustkit.analysis.convergence`). A statistic read at ``checkpoint = "step-0"``
        never does. False for statistics of the path of training itself (gradient-norm slopes).
    better : {"higher", "lower"} or None
        Which values are the better outcome of training (accuracy: higher). A failed run
        (:mod:`robustkit.collapse`) then ranks as the worst outcome, below every learned run,
        in the claim's test with its failures (:mod:`robustkit.claim`); None: no value is better
        (a similarity, a slope), and failed runs enter with their values.
    undefined_on_failed : str
        Why the statistic says nothing about a failed run (a constant classifier cannot be
        attacked), or "" where it does: failed runs are then left out and the reason says why.
    """

    name: str
    function: str
    help: str
    params: tuple[Param, ...] = ()
    independent: bool = True
    unit: str = "run"
    ends: bool = True
    better: str | None = None
    undefined_on_failed: str = ""

    def ends_with_training(self, params: dict) -> bool:
        """Whether the statistic at these parameters depends on how training ended (``ends``,
        unless it is read at the starting checkpoint)."""
        return self.ends and params.get("checkpoint") != "step-0"


@dataclass(frozen=True)
class Analysis:
    """A registered analysis (module docstring).

    Attributes
    ----------
    name : str
        Registry key and ``robustkit analyze`` verb.
    help, description : str
        One line for the verb list; the verb's ``--help`` text.
    compute : str
        ``"module:function"``: ``function(store, select, **params, **options)`` -> DataFrame.
    params : tuple of Param
        What changes the result (defaults declared here only).
    options : tuple of Param
        What changes only how it runs (device, threads); never cached on.
    summary : str, optional
        ``"module:function"``: ``function(frame) -> DataFrame``, the table the verb prints
        (default: the frame itself).
    statistics : tuple of Statistic
        The per-run statistics claims name.
    output : str
        What ``-o`` writes (for the verb's help).
    """

    name: str
    help: str
    description: str
    compute: str
    params: tuple[Param, ...] = ()
    options: tuple[Param, ...] = ()
    summary: str | None = None
    statistics: tuple[Statistic, ...] = ()
    output: str = "the tidy result"

    def resolve(self, **given: Any) -> dict[str, Any]:
        """Every parameter's value, ``given`` over the defaults (unknown names are errors)."""
        return resolve(self.params, given, f"analysis {self.name!r}", AnalysisError)

    def default(self, name: str) -> Any:
        """The declared default of parameter or option ``name`` (what a function below the registry
        takes as its own default, so that it is written once)."""
        for param in (*self.params, *self.options):
            if param.name == name:
                return param.default
        raise AnalysisError(f"analysis {self.name!r} has no parameter {name!r}")

    def run(self, store: str | Path, select: dict | list[str] | None = None, **given: Any) -> pd.DataFrame:
        """The analysis on the selected runs of ``store``: ``given`` are its parameters and
        options (e.g. ``device="cuda"``, ``progress=False``); unknown names are errors.

        The frame's ``attrs["provenance"]`` maps each run (or run pair) whose result came from a
        run's cache to how it was computed (``device``, ``device_name``, ``torch``, ``computed``;
        :mod:`robustkit.analysis.each_run`), whether computed now or read back.
        """
        from robustkit.analysis.each_run import collect_provenance

        options = {p.name: p for p in (*self.options, PROGRESS)}
        chosen = resolve(
            options.values(), {k: v for k, v in given.items() if k in options}, f"analysis {self.name!r}", AnalysisError
        )
        values = self.resolve(**{k: v for k, v in given.items() if k not in options})
        compute = load(self.compute)
        accepted = inspect.signature(compute).parameters  # not every analysis shows progress
        with collect_provenance() as provenance:
            frame = compute(store, select, **values, **{k: v for k, v in chosen.items() if k in accepted})
        frame.attrs["provenance"] = provenance
        return frame

    def summarize(self, frame: pd.DataFrame) -> pd.DataFrame:
        """The table the ``analyze`` verb prints."""
        return frame if self.summary is None else load(self.summary)(frame)

    def get_statistic(self, name: str) -> Statistic:
        for statistic in self.statistics:
            if statistic.name == name:
                return statistic
        known = ", ".join(s.name for s in self.statistics) or "none"
        raise AnalysisError(f"analysis {self.name!r} has no statistic {name!r}; it has: {known}")

    def statistic(self, name: str, frame: pd.DataFrame, store: str | Path | None = None, **given: Any) -> pd.DataFrame:
        """Statistic ``name`` of this analysis's ``frame`` (``given``: its own parameters)."""
        statistic = self.get_statistic(name)
        values = resolve(statistic.params, given, f"statistic {self.name}.{name}", AnalysisError)
        return call(load(statistic.function), (frame,), {**values, "store": store})


PROGRESS = Param("progress", True, "show a progress bar")

ANALYSES: dict[str, Analysis] = {}


def register(analysis: Analysis) -> Analysis:
    """Add ``analysis`` to the registry (its name must be new)."""
    if analysis.name in ANALYSES:
        raise AnalysisError(f"analysis {analysis.name!r} is registered twice")
    ANALYSES[analysis.name] = analysis
    return analysis


def get(name: str) -> Analysis:
    """The registered analysis ``name``."""
    if name not in ANALYSES:
        raise AnalysisError(f"unknown analysis {name!r}; known analyses: {', '.join(ANALYSES)}")
    return ANALYSES[name]


def statistic_of(reference: str) -> tuple[Analysis, Statistic]:
    """``"<analysis>.<statistic>"`` -> the analysis and its statistic."""
    name, dot, statistic = reference.rpartition(".")
    if not dot:
        known = ", ".join(f"{a.name}.{s.name}" for a in ANALYSES.values() for s in a.statistics)
        raise AnalysisError(f"a statistic is named <analysis>.<statistic>, got {reference!r}; known: {known}")
    analysis = get(name)
    return analysis, analysis.get_statistic(statistic)


# ---------------------------------------------------------------------------------------------
# parameters several analyses share (declared once)


def _checkpoint(help_: str, choices: tuple = ("best", "last"), default: str = "best") -> Param:
    return Param("checkpoint", default, f"{help_}: {', '.join(choices)}; default: {default}", choices=choices)


METRIC_NAME = "robustkit.metrics:check_name"  # a Param's check: the metric is one robustkit records
METRIC = Param("metric", None, "metric (accuracy, f1, mcc, ...); default: each task's main metric", check=METRIC_NAME)
# checked when given, as `train --device` is: a device this machine lacks is refused before any work
DEVICE = Param(
    "device",
    None,
    "where the model runs: cpu, cuda; default: the GPU if there is one",
    check="robustkit.preflight:check_device",
)
SEED = Param("seed", 0, "seed of every random draw of the analysis (sample, directions, resamples); default: 0")
TOKENS = Param(
    "tokens",
    5000,
    "tokens sampled once from the task's dev set ([CLS]/[SEP]/[PAD] skipped); default: 5000 (He et al. 2021)",
)
SIMILARITY_CHECKPOINT = _checkpoint("tuned checkpoint compared with the base model", ("best", "last", "step-0"))
LAYER = Param(
    "layer",
    "each",
    "each: one observation per layer; top / bottom: the mean over the top / bottom third of the encoder layers",
    choices=("each", "top", "bottom"),
)
LOSS_SPLIT = "split the loss is taken on; default: train"
EXAMPLES = "examples of the split, drawn with --seed (the same for every run)"
STATISTICS = "robustkit.analysis.statistics"
NEVER_LEARNED = (
    "a run that never left the majority class (not-learned) was under-trained by its budget: it did not learn and "
    "fall back, "
    "and whether it would have collapsed is unknown, so it is neither a collapse nor a run that stayed up"
)
FLAT = (
    "a run that never left the majority class did not move its weights: its landscape is flat by construction, "
    "which says nothing of the minimum fine-tuning reaches"
)
# shared by statistics and the figures that draw them (declared once)
MATRICES = Param(
    "matrices",
    "q,v",
    "weight matrices counted: comma-separated kinds (q, k, v, attention-output, intermediate, output) or all; "
    "default: q,v (the matrices LoRA adapts in Hu et al. 2021 and the zoo)",
)
INTRUDER_EPSILON = Param(
    "epsilon",
    0.5,
    "a top singular vector is an intruder when its largest |cosine| with the start's singular vectors is below this; "
    "default: 0.5 (huggingface/peft's implementation of Shuttleworth et al. 2024)",
)
RANK_MEASURE = Param(
    "rank_measure",
    "energy_rank",
    "energy_rank: the rank holding 90% of the update's squared norm (Biderman et al. 2024); effective_rank: Roy and "
    "Vetterli 2007's exp(entropy)",
    choices=("energy_rank", "effective_rank"),
)

# ---------------------------------------------------------------------------------------------
# the analyses

register(
    Analysis(
        "scores",
        "each run's final score and outcome (ok / collapsed / diverged) on a split",
        "From the manifests (no model is loaded): each selected run's metric at the chosen checkpoint and split, and "
        "its outcome (robustkit.collapse).",
        "robustkit.analysis.scores:outcomes",
        (
            Param("split", "test", "split scored; default: test", choices=("test", "validation")),
            _checkpoint("best: best validation main metric; last: end of training"),
            METRIC,
        ),
        statistics=(
            Statistic(
                "score", f"{STATISTICS}:score", "the run's score (fraction units for accuracy / F1)", better="higher"
            ),
            Statistic(
                "failed",
                f"{STATISTICS}:failed",
                "1 for a collapsed or diverged run, 0 otherwise (failure rates: every run counts)",
            ),
            Statistic(
                "collapsed",
                f"{STATISTICS}:collapsed",
                "1 for a run that learned and fell back to the majority class (collapsed) or diverged, 0 for an ok run "
                "(a rate's ones, unitless; He et al. 2021 §5's collapse); a run that never left the majority class is "
                "left out",
                ends=True,
                better=None,
                undefined_on_failed=NEVER_LEARNED,
            ),
        ),
        output="the per-run scores",
    )
)
register(
    Analysis(
        "epoch-scores",
        "each run's validation score at every fine-tuning epoch end (Han et al. 2021 figures 9-10)",
        "The validation main metric (or --metric) at the end of each fine-tuning epoch of each selected run, with the "
        "run's outcome.",
        "robustkit.analysis.scores:epoch_outcomes",
        (METRIC,),
        statistics=(
            Statistic(
                "score",
                f"{STATISTICS}:epoch_score",
                "the validation score at the end of one epoch (one observation per run), or at every epoch end "
                "('all': one per run x epoch)",
                (
                    Param(
                        "epoch",
                        "all",
                        "an epoch number, last (each run's last epoch end), or all (one observation per run x epoch)",
                    ),
                ),
                better="higher",
            ),
            Statistic(
                "spread",
                f"{STATISTICS}:epoch_spread",
                "standard deviation of a run's validation scores over its epoch ends (ddof 1; one value per run: "
                "training-time instability)",
            ),
            Statistic(
                "mean",
                f"{STATISTICS}:epoch_mean",
                "mean of a run's validation scores over its epoch ends (one value per run)",
                better="higher",
            ),
            Statistic(
                "pair-gap-drop",
                f"{STATISTICS}:pair_gap_drop",
                "|score A - score B| of a disjoint seed pair of one configuration at its first epoch end minus at its "
                "last "
                "(score units, fraction for accuracy; positive = the two seeds came closer after training longer); "
                "one value per pair, from its two runs alone",
                unit="disjoint pair",
                ends=False,
                better=None,
                undefined_on_failed="",
            ),
        ),
        output="the per-run x epoch scores",
    )
)
register(
    Analysis(
        "curves",
        "dev loss and metric vs step; mean and best dev metric (He et al. 2021, table 6)",
        "Validation history of each run with its outcome at the end of training; prints the mean and best dev main "
        "metric over all evaluation steps, mean +- std over seeds.",
        "robustkit.analysis.curves:with_run_outcomes",
        summary="robustkit.analysis.curves:mean_best",
        statistics=(
            Statistic(
                "overfit",
                f"{STATISTICS}:overfit",
                "rise of the dev loss from its minimum to the end of training (loss units; He et al. 2021 §5)",
            ),
            Statistic(
                "metric-fall",
                f"{STATISTICS}:metric_fall",
                "best of the main dev metric over all evaluations minus its value at the last one (metric units, "
                "fraction for accuracy; "
                ">= 0, positive = fell from its best by the end of training: overfitting in the metric; He et al. "
                "2021 §5, figure 9)",
                ends=True,
                better=None,
                undefined_on_failed="",
            ),
            Statistic(
                "best-minus-mean",
                f"{STATISTICS}:best_minus_mean",
                "best minus mean of the main dev metric over all evaluations (He et al. 2021 table 6)",
            ),
            Statistic(
                "mean-dev",
                f"{STATISTICS}:mean_dev",
                "mean of the main dev metric over all evaluations (He et al. 2021 table 6)",
                better="higher",
            ),
        ),
        output="the learning curves",
    )
)
register(
    Analysis(
        "gradnorm",
        "per-layer L2 gradient norms logged during training (Han et al. 2021, figure 3)",
        "Every step's gradient norm per layer group (before clipping), from the runs' gradnorms.parquet; prints a "
        "per-run summary: per run and layer kind, the mean norm over the first and last tenth of the steps, their "
        "ratio and the slope of log10 norm per 1,000 steps. Runs without gradient norms (imports) are left out and "
        "named.",
        "robustkit.analysis.gradnorm:run",
        summary="robustkit.analysis.gradnorm:per_run_summary",
        statistics=(
            Statistic(
                "slope",
                f"{STATISTICS}:gradnorm_slope",
                "slope of log10 gradient norm over training steps, per 1,000 steps (negative = vanishing)",
                (
                    Param(
                        "layer",
                        "classifier",
                        "a logged layer group (pooler, classifier, embeddings, layer.<i>) or top / bottom (mean slope "
                        "over the top / bottom third of the encoder layers)",
                    ),
                ),
                ends=False,
            ),
        ),
        output="every step's norms",
    )
)
register(
    Analysis(
        "rsa",
        "RSA and linear CKA per layer, base model vs each tuned run (He et al. 2021, section 2.2)",
        "Representations of the same sampled dev tokens at every layer (embeddings + each encoder layer) of the base "
        "model and each selected run; RSA (Pearson r of the cosine-similarity matrices' upper triangles) and linear "
        "CKA per layer.",
        "robustkit.analysis.similarity:run",
        (TOKENS, Param("seed", 0, "seed of the token sample; default: 0"), SIMILARITY_CHECKPOINT),
        (DEVICE,),
        summary="robustkit.analysis.similarity:summarize",
        statistics=(
            Statistic(
                "similarity",
                f"{STATISTICS}:rsa",
                "similarity of each layer's representations to the base model's (1 = the same)",
                (Param("measure", "rsa", "rsa or cka", choices=("rsa", "cka")), LAYER),
            ),
        ),
        output="the tidy result (per run x layer x measure)",
    )
)
register(
    Analysis(
        "similarity-ci",
        "RSA, linear CKA, debiased CKA and Procrustes distance per layer vs the base model, each with a "
        "token-bootstrap interval",
        "The representations of 'analyze rsa' (the same sampled dev tokens, base model vs each run), four measures "
        "per layer, and for each a basic bootstrap interval from random halves of random token groups (no token "
        "paired with its own copy).",
        "robustkit.analysis.similarity_ci:run",
        (
            TOKENS,
            Param("seed", 0, "seed of the token sample, its groups and the resampled halves; default: 0"),
            SIMILARITY_CHECKPOINT,
            Param("groups", 20, "random token groups of the half-sampling bootstrap (even, >= 4); default: 20"),
            Param("resamples", 200, "random halves per layer; default: 200"),
            Param("confidence", 0.95, "level of the intervals; default: 0.95"),
        ),
        (DEVICE,),
        summary="robustkit.analysis.similarity_ci:summarize",
        statistics=(
            Statistic(
                "similarity",
                f"{STATISTICS}:similarity_ci",
                "a measure of each layer's representations vs the base model's",
                (
                    Param(
                        "measure",
                        "cka-debiased",
                        "rsa, cka, cka-debiased or procrustes",
                        choices=("rsa", "cka", "cka-debiased", "procrustes"),
                    ),
                    LAYER,
                ),
            ),
        ),
        output="the tidy result (per run x layer x measure)",
    )
)
register(
    Analysis(
        "ablation",
        "remove the adapters of every layer span i..j and re-evaluate (Houlsby et al. 2019, figure 6)",
        "For each adapter run and every span of layers i..j, skip those layers' adapters (nothing re-trained) and "
        "evaluate on the dev set; reports each metric and its relative change vs the fully adapted model. Full "
        "fine-tuning runs are skipped with a warning.",
        "robustkit.analysis.ablation:run",
        (_checkpoint("checkpoint ablated"),),
        (DEVICE,),
        statistics=(
            Statistic(
                "max-single-drop",
                f"{STATISTICS}:ablation_max_single_drop",
                "largest relative drop of the dev metric when one layer's adapters are removed (fraction, positive = "
                "worse)",
                (METRIC,),
            ),
            Statistic(
                "all-removed-gap",
                f"{STATISTICS}:ablation_all_removed_gap",
                "dev metric with every adapter removed minus the majority baseline (0 = down to the majority class)",
                (METRIC,),
            ),
            Statistic(
                "low-minus-high",
                f"{STATISTICS}:ablation_low_minus_high",
                "mean relative drop of the spans in the lower half of the layers minus the upper half's (negative = "
                "lower layers matter less)",
                (METRIC,),
            ),
        ),
        output="the tidy result (per run x span x metric)",
    )
)
register(
    Analysis(
        "landscape",
        "loss along theta_0 + alpha (theta_1 - theta_0) (He et al. 2021, section 5)",
        "Linear interpolation between each run's step-0 and best (or last) checkpoints, over the parameters the run "
        "trains; evaluated fresh at every alpha, the model restored exactly afterwards.",
        "robustkit.analysis.landscape:run",
        (
            Param(
                "alphas",
                "-2:2:20",
                "interpolation coefficients: start:stop:count (both ends included) or a comma list; default: -2:2:20 "
                "(He et al. 2021)",
            ),
            Param(
                "splits",
                ["validation"],
                "comma-separated splits to evaluate on (validation, train); default: validation",
                kind=list,
            ),
            _checkpoint("theta_1 (theta_0 is step-0)"),
        ),
        (DEVICE,),
        statistics=(
            Statistic(
                "curvature",
                f"{STATISTICS}:landscape_curvature",
                "second derivative of a quadratic fitted to the 5 grid points nearest alpha = 1 (loss per alpha^2; "
                "smaller = flatter)",
                (Param("split", "validation", "split of the loss", choices=("validation", "train")),),
                undefined_on_failed=FLAT,
            ),
        ),
    )
)
register(
    Analysis(
        "tradeoff",
        "trained parameters vs main metric per run (Houlsby et al. 2019 section 3.4)",
        "From the manifests (no model is loaded): each selected run's trainable parameters, its share of the model's "
        "parameters and its main metric at the chosen checkpoint on validation and test; prints the mean +- std over "
        "seeds per method setting.",
        "robustkit.analysis.tradeoff:table",
        (
            _checkpoint("checkpoint whose metrics are used: best (selected on validation) or last"),
            Param(
                "metric",
                None,
                "metric shown (Houlsby et al. plot accuracy for CoLA too); default: each task's main metric",
                check=METRIC_NAME,
            ),
        ),
        summary="robustkit.analysis.tradeoff:settings_summary",
        output="the tidy per-run table",
    )
)
register(
    Analysis(
        "curvature",
        "top Hessian eigenvalue and trace of the training loss, whole trained set and per layer/module",
        "Hessian-vector products over the parameters each run trains (adapters, LayerNorms and head for adapter runs; "
        "everything for full fine-tuning) on one fixed batch of training examples: the top eigenvalue by power "
        "iteration (with its residual bound and iteration count) and the trace by Hutchinson (with its standard "
        "error), for the whole set and each block; prints mean +- std over seeds.",
        "robustkit.analysis.curvature:run",
        (
            Param(
                "checkpoints",
                ["step-0", "best", "last"],
                "comma-separated checkpoints: step-0 (theta_0; a TSP run's start for tsp_step > 0), best, last, tsp "
                "(the masked-LM loss at the TSP checkpoint, runs with tsp_step > 0); default: step-0,best,last",
                kind=list,
            ),
            Param(
                "examples",
                32,
                "training examples in the one fixed batch the loss is taken on (the same for every run); default: 32",
            ),
            Param(
                "grouping",
                "layer",
                "blocks besides the whole set: layer (as the gradient norms group them), module (each module's own "
                "tensors), none; default: layer",
                choices=("layer", "module", "none"),
            ),
            Param("max_iterations", 30, "power iteration cap (Hessian-vector products per eigenvalue); default: 30"),
            Param("tol", 1e-3, "power iteration stops at this relative change; default: 1e-3"),
            Param("samples", 30, "Hutchinson samples for the traces (every block's from the same ones); default: 30"),
            Param("seed", 0, "seed of the batch, the start vectors and the Rademacher samples; default: 0"),
            Param(
                "block_eigenvalues",
                True,
                "a power iteration per layer block besides the whole set's (the costly part: one per block); off "
                "(--no-block-eigenvalues): per-layer traces only",
                kind=bool,
            ),
        ),
        (
            DEVICE,
            Param(
                "micro_batch",
                None,
                "run each Hessian-vector product in parts of this many examples, one part's graph in memory at a time "
                "(the same numbers up to rounding; slower); default: the whole batch",
                kind=int,
                minimum=1,
            ),
        ),
        summary="robustkit.analysis.curvature:summarize",
        statistics=(
            Statistic(
                "sharpness",
                f"{STATISTICS}:curvature",
                "top Hessian eigenvalue or Hessian trace at one checkpoint, over the trained set or one block (nats "
                "per squared parameter unit; smaller = flatter)",
                (
                    _checkpoint("checkpoint", ("step-0", "best", "last", "tsp"), default="last"),
                    Param(
                        "estimator", "top_eigenvalue", "top_eigenvalue or trace", choices=("top_eigenvalue", "trace")
                    ),
                    Param("group", "all", "all (the whole trained set) or a block (layer.3)"),
                ),
                undefined_on_failed=FLAT,
            ),
        ),
        output="the tidy result (per run x checkpoint x block x estimator)",
    )
)
register(
    Analysis(
        "surface",
        "2-D loss surface around a checkpoint along two filter-normalised random directions (Li et al. 2018)",
        "Loss and metrics at theta* + a d1 + b d2 on a grid, d1 and d2 Gaussian directions with every row of every "
        "weight matrix rescaled to that row's norm in theta* (biases and LayerNorms fixed), over the tensors each run "
        "trains; prints min/median/max loss per run.",
        "robustkit.analysis.surface:run",
        (
            _checkpoint("the centre theta*", ("best", "last", "step-0")),
            Param(
                "grid",
                "-1:1:11",
                "coefficients of each direction: start:stop:count or a comma list; default: -1:1:11 (121 points)",
            ),
            Param("split", "train", f"{LOSS_SPLIT} (Li et al.'s)", choices=("train", "validation", "test")),
            Param("examples", 256, f"{EXAMPLES}; default: 256"),
            Param("seed", 0, "seed of the two directions and of the examples; default: 0"),
        ),
        (DEVICE,),
        summary="robustkit.analysis.surface:loss_range",
        output="the tidy grid (per run x a x b x metric)",
    )
)
register(
    Analysis(
        "connectivity",
        "linear mode connectivity: loss between two seeds of a configuration and its barrier (Frankle et al. 2020)",
        "For every pair of selected runs that differ only in their seed: loss and metrics along (1 - alpha) theta_A + "
        "alpha theta_B over the tensors they train (adapter runs share the frozen base), and the barrier max - mean "
        "of the ends; prints the barriers.",
        "robustkit.analysis.connectivity:run",
        (
            _checkpoint("checkpoint of both ends"),
            Param(
                "alphas",
                "0:1:11",
                "interpolation coefficients (must hold 0 and 1): start:stop:count or a comma list; default: 0:1:11",
            ),
            Param("split", "train", LOSS_SPLIT, choices=("train", "validation", "test")),
            Param("examples", 512, f"{EXAMPLES}; default: 512"),
            Param("seed", 0, "seed of the examples; default: 0"),
        ),
        (DEVICE,),
        summary="robustkit.analysis.connectivity:barrier_summary",
        statistics=(
            Statistic(
                "barrier",
                f"{STATISTICS}:barrier",
                "max over alpha of the loss (or '<metric> error') minus the mean of the two ends, "
                "one row per seed pair",
                (Param("metric", "loss", "loss, or a metric whose error is taken", check=METRIC_NAME),),
                independent=False,
            ),
        ),
        output="the lines (per pair x alpha x metric)",
    )
)
register(
    Analysis(
        "tuning",
        "tuning curves: median and expected best score of k runs, with confidence bands (Dodge et al. 2019; opda)",
        "Each group's runs (over seeds, and learning rates where a group has several) as draws of a search: the "
        "median best-of-k score with opda's simultaneous band and the expected best of k (expected validation "
        "performance), k = 1..n.",
        "robustkit.analysis.tuning:run",
        (
            Param(
                "split",
                "validation",
                "split scored; default: validation (what a search selects on)",
                choices=("validation", "test"),
            ),
            _checkpoint("checkpoint scored"),
            METRIC,
            Param(
                "by",
                ["method"],
                "comma-separated grouping columns; default: method (settings that vary inside a group split it too)",
                kind=list,
            ),
            Param("confidence", 0.8, "level of the simultaneous bands; default: 0.8 (opda's examples)"),
            Param(
                "exclude_failed",
                False,
                "leave collapsed and diverged runs out (default: they count as draws of the search, which a budget of "
                "k runs can draw)",
            ),
        ),
        output="the curves",
    )
)
register(
    Analysis(
        "attack",
        "adversarial attacks (PWWS, DeepWordBug) on each selected run (Han et al. 2021, section 4)",
        "Attack each selected run's checkpoint with each chosen attacker (PWWS and DeepWordBug as OpenAttack 2.1.1 "
        "defines them) on a reproducible sample of its test split; results are saved per example and an interrupted "
        "attack resumes. Its summary has two rows per run and attacker, one per success convention (column "
        "convention): openattack attacks every sampled example and counts a success when the prediction changes, "
        "misclassified examples included (OpenAttack's AttackEval); gold counts only the examples the run classified "
        "correctly (attacked: their number) and a success when one becomes misclassified, so its success_rate = 1 - "
        "accuracy_under_attack / accuracy_before (both over all n examples, in either row). Needs WordNet, Punkt and "
        "an averaged-perceptron POS tagger: robustkit's embedded assets (fetched from pinned registry packages), or "
        "the folders of $NLTK_DATA first.",
        "robustkit.analysis.attack:run_attackers",
        (
            Param(
                "attackers",
                ["pwws"],
                f"comma-separated attackers ({', '.join(ATTACKS)}): pwws (Ren et al. 2019, Han et al.'s), deepwordbug "
                "(Gao et al. 2018, character-level); default: pwws",
                kind=list,
                choices=tuple(ATTACKS),
            ),
            Param("n", 200, "test examples attacked per run (the same sample for every run); default: 200"),
            Param("seed", 0, "seed of the example sample and of randomized attacks (per example); default: 0"),
            Param(
                "query_budget",
                None,
                "victim queries allowed per example (the attack fails past it); default: no limit",
                kind=int,
            ),
            _checkpoint("checkpoint attacked", ("best", "last", "step-0")),
            Param(
                "attack_options",
                [],
                "an attacker's own options as NAME=VALUE, comma-separated (e.g. PWWS's engine=openattack: "
                "OpenAttack's own PWWSAttacker instead of robustkit's batched one with certified float32 screening, "
                "identical outputs); an option no chosen attacker takes is an error",
                kind=list,
            ),
        ),
        (
            DEVICE,
            Param(
                "threads",
                None,
                "torch CPU threads; default: torch's (OMP_NUM_THREADS, else all cores)",
                kind=int,
                minimum=1,
            ),
        ),
        summary="robustkit.analysis.attack:summarize",
        statistics=(
            Statistic(
                "success",
                f"{STATISTICS}:attack_success",
                "attack success rate of each run (fraction)",
                (
                    Param(
                        "convention",
                        "openattack",
                        "openattack: prediction flips, misclassified inputs included; gold: only correctly classified "
                        "inputs",
                        choices=("openattack", "gold"),
                    ),
                    Param("attacker", "pwws", "the attacker whose success is tested", choices=tuple(ATTACKS)),
                ),
                undefined_on_failed="a run stuck at the majority class cannot be attacked: it misclassifies the "
                "minority class "
                "already and no word swap flips a constant prediction, so its success rate says nothing of its "
                "robustness",
            ),
        ),
        output="the per-example results (original and adversarial text)",
    )
)

# ---------------------------------------------------------------------------------------------
# beyond the papers: the findings on LoRA and full fine-tuning that followed them (issue #30)

register(
    Analysis(
        "intruders",
        "intruder dimensions: top singular vectors of each tuned weight matrix vs the start's (Shuttleworth et al. "
        "2024)",
        "Per layer weight matrix of each run (LoRA-family updates merged into the matrix), the top-k left singular "
        "vectors of the matrix at the checkpoint, each with its largest |cosine| with the singular vectors of the "
        "matrix at step-0; prints each run's intruder count at a few thresholds. Runs whose method changes no weight "
        "matrix (adapters, prefix tuning) have nothing to measure.",
        "robustkit.analysis.intruders:run",
        (
            _checkpoint("the tuned checkpoint (the start is step-0)", default="last"),
            Param(
                "top_k",
                10,
                "top singular vectors of each tuned matrix compared; default: 10 (Shuttleworth et al. 2024)",
            ),
        ),
        (DEVICE,),
        summary="robustkit.analysis.intruders:summarize",
        statistics=(
            Statistic(
                "count",
                f"{STATISTICS}:intruder_count",
                "number of intruder dimensions of a run: top singular vectors whose largest |cosine| with the start's "
                "is below epsilon, summed over the chosen matrices of every layer",
                (INTRUDER_EPSILON, MATRICES),
            ),
        ),
        output="the tidy result (per run x matrix x rank)",
    )
)
register(
    Analysis(
        "forgetting",
        "learning vs forgetting: masked-LM loss on held-out text of the base head over each run's encoder, and the "
        "rank of each weight update (Biderman et al. 2024)",
        "Forgetting: the masked-LM loss (nats per masked token) on held-out English text that is no task's (WordNet "
        "3.0 glosses, masked once with --seed) of the base model's masked-LM head over the run's tuned encoder, minus "
        "the same over the pre-trained encoder; the head is the model's own where its checkpoint has one, else "
        "robustkit's TSP head fitted on the frozen pre-trained encoder (on other glosses). Update spectrum: per layer "
        "weight matrix, the rank holding 90% of the squared norm of W_tuned - W_0 and the effective rank (LoRA-family "
        "updates merged).",
        "robustkit.analysis.forgetting:run",
        (
            _checkpoint("the tuned checkpoint (the start is step-0)", default="last"),
            Param("texts", 1000, "held-out glosses the loss is taken on (the same for every run); default: 1000"),
            Param(
                "head",
                "auto",
                "masked-LM head: own (the model's pre-trained one), fitted (robustkit's TSP head fitted on the frozen "
                "pre-trained encoder), auto (own where the model has one, else fitted); default: auto",
                choices=("auto", "own", "fitted"),
            ),
            Param("head_texts", 10000, "glosses a fitted head is trained on (none of them evaluated); default: 10000"),
            Param("head_steps", 300, "optimiser steps of a fitted head; default: 300"),
            Param("seed", 0, "seed of the glosses drawn, their masks and a fitted head; default: 0"),
        ),
        (DEVICE,),
        summary="robustkit.analysis.forgetting:summarize",
        statistics=(
            Statistic(
                "forgetting",
                f"{STATISTICS}:forgetting",
                "masked-LM loss of the tuned encoder minus the pre-trained one's on held-out text (nats per masked "
                "token; larger = more forgotten)",
            ),
            Statistic(
                "update-rank",
                f"{STATISTICS}:update_rank",
                "rank of each weight update W_tuned - W_0, averaged over the chosen matrices that changed "
                "(directions; one value per run)",
                (RANK_MEASURE, MATRICES),
            ),
            Statistic(
                "update-rank-ratio",
                f"{STATISTICS}:update_rank_ratio",
                "update-rank over the rank r of a typical LoRA configuration (dimensionless: 10 = ten times as many "
                "directions as a rank-r LoRA update can have; larger = higher rank; Biderman et al. 2024's '10-100X')",
                (
                    RANK_MEASURE,
                    MATRICES,
                    Param(
                        "reference_rank",
                        8,
                        "rank r of the typical LoRA configuration the update's rank is divided by; default: 8 "
                        "(the zoo's and Hu et al. 2021's LoRA rank on GLUE, robustkit's lora default)",
                    ),
                ),
                ends=True,
                better=None,
                undefined_on_failed="",
            ),
        ),
        output="the tidy result (per run x measure x matrix)",
    )
)
register(
    Analysis(
        "lora-sharpness",
        "sharpness of a LoRA run's training loss in its LoRA parameters and in the merged weight matrices (Li et al. "
        "2024, Flat-LoRA)",
        "For each LoRA-family run, on one fixed batch of training examples: the top Hessian eigenvalue (power "
        "iteration) and trace (Hutchinson) of the loss over its low-rank factors (A and B of every adapted matrix), "
        "and over the same matrices with the update merged (W = W_0 + (alpha / r) B A), the head fixed in both; runs "
        "of other methods are left out.",
        "robustkit.analysis.lora_space:run",
        (
            _checkpoint("the checkpoint measured", default="last"),
            Param("examples", 32, "training examples in the one fixed batch (the same for every run); default: 32"),
            Param("max_iterations", 20, "power iteration cap (Hessian-vector products per eigenvalue); default: 20"),
            Param("samples", 20, "Hutchinson samples per trace; default: 20"),
            Param("seed", 0, "seed of the batch, the start vectors and the Rademacher samples; default: 0"),
        ),
        (DEVICE,),
        summary="robustkit.analysis.lora_space:summarize",
        statistics=(
            Statistic(
                "full-over-lora",
                f"{STATISTICS}:full_over_lora",
                "log10 of the merged weights' sharpness over the LoRA parameters' (positive = sharper in the full "
                "weights; NaN where either is not positive)",
                (
                    Param(
                        "estimator",
                        "top_eigenvalue",
                        "top_eigenvalue, or trace_per_parameter (the trace over the number of parameters: a mean over "
                        "directions, shown, which cannot test a claim about sharp directions)",
                        choices=("top_eigenvalue", "trace_per_parameter"),
                    ),
                ),
            ),
        ),
        output="the tidy result (per run x space x estimator)",
    )
)
register(
    Analysis(
        "curve-connectivity",
        "curved mode connectivity: a quadratic Bezier curve trained between two seeds' optima, its barrier against "
        "the line's (Garipov et al. 2018)",
        "For disjoint pairs of runs that differ only in their seed (seeds sorted, paired 1st-2nd, 3rd-4th, ...): the "
        "control point of the quadratic Bezier curve (1-t)^2 A + 2t(1-t) C + t^2 B trained on the training loss (t "
        "drawn uniformly at every step, the runs' own batches, learning rate, schedule and clipping; seeded, "
        "resumable), over the tensors the runs train; loss and metrics along the curve and along the line (the "
        "untrained curve, C the midpoint) on a grid of t.",
        "robustkit.analysis.curve_connectivity:run",
        (
            _checkpoint("checkpoint of both ends"),
            Param(
                "steps", None, "optimiser steps of the control point; default: as many as the runs trained", kind=int
            ),
            Param(
                "ts",
                "0:1:11",
                "points t of the curve and the line evaluated (must hold 0 and 1): start:stop:count or a comma list; "
                "default: 0:1:11",
            ),
            Param("split", "train", LOSS_SPLIT, choices=("train", "validation", "test")),
            Param("examples", 512, f"{EXAMPLES}; default: 512"),
            Param("seed", 0, "seed of the control point's training (t, dropout) and of the examples; default: 0"),
        ),
        (DEVICE,),
        summary="robustkit.analysis.curve_connectivity:barrier_summary",
        statistics=(
            Statistic(
                "barrier-drop",
                f"{STATISTICS}:barrier_drop",
                "barrier of the line minus barrier of the trained curve, one value per disjoint seed pair (loss "
                "units, or error; positive = the curve is lower)",
                (Param("metric", "loss", "loss, or a metric whose error is taken", check=METRIC_NAME),),
                unit="disjoint pair",
            ),
        ),
        output="the paths (per pair x path x t x metric)",
    )
)


def per_run(
    reference: str, store: str | Path, select: dict | list[str] | None = None, device: str | None = None, **params: Any
) -> pd.DataFrame:
    """Statistic ``"<analysis>.<statistic>"`` of the selected runs, with each run's outcome: the
    observations a claim tests, for a notebook. ``params`` are the analysis's and the statistic's
    own, routed by name (an unknown one is an error).

    Returns
    -------
    DataFrame
        One row per observation: identity columns, any cell columns, ``value`` and ``outcome``.
    """
    from robustkit.analysis.scores import with_outcome

    analysis, statistic = statistic_of(reference)
    names = {p.name for p in (*analysis.params, *analysis.options)}
    if device is not None and "device" in names:
        params = {**params, "device": device}
    frame = analysis.run(store, select, progress=False, **{k: v for k, v in params.items() if k in names})
    own = {k: v for k, v in params.items() if k not in names}
    return with_outcome(analysis.statistic(statistic.name, frame, store, **own), store)
