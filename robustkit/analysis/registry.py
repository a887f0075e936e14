"""The analysis registry: every analysis robustkit knows, found where it is declared.

An analysis is one module of ``robustkit/analysis/`` whose ``DECLARED = Analysis(...)`` states,
next to its computation, its parameters, options, summary and statistics
(:mod:`robustkit.analysis.declare`). The registry discovers those declarations by reading the
modules' source (:func:`discover`), without importing them: reading the registry (``--help``)
imports nothing heavy, and a module's functions are imported only when called. An analysis in a
module outside the package (a project's own) is added by :func:`register_module`.

What every other part of robustkit reads is an :class:`Analysis`:

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
same cache entry::

    from robustkit.analysis.registry import get
    frame = get("rsa").run("runs/demo", ["task=rt"], tokens=2000)
    slopes = get("gradnorm").statistic("slope", get("gradnorm").run("runs/demo"), layer="top")

Adding an analysis is one module in ``robustkit/analysis/`` (CONTRIBUTING.md). Some analyses
are still declared below by :func:`register` calls, until they move into their modules.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robustkit.analysis import declare
from robustkit.analysis.declare import (  # noqa: F401  (the names users import from the registry)
    DECLARED,
    DEVICE,
    EXAMPLES,
    FLAT,
    INTRUDER_EPSILON,
    LAYER,
    LOSS_SPLIT,
    MATRICES,
    METRIC,
    METRIC_NAME,
    NEVER_LEARNED,
    PROGRESS,
    RANK_MEASURE,
    SEED,
    SIMILARITY_CHECKPOINT,
    TOKENS,
    Analysis,
    AnalysisError,
    Statistic,
    call,
    checkpoint_param,
    load,
)
from robustkit.attacks import ATTACKS  # names only: the attacks' modules load when one is built
from robustkit.params import Param

if TYPE_CHECKING:  # annotations only: the registry is read by --help
    import pandas as pd

_checkpoint = checkpoint_param  # the name the declarations below use
STATISTICS = "robustkit.analysis.statistics"


ANALYSES: dict[str, Analysis] = {}


def register(analysis: Analysis) -> Analysis:
    """Add ``analysis`` to the registry (its name must be new), listed by its ``order``."""
    if analysis.name in ANALYSES:
        raise AnalysisError(f"analysis {analysis.name!r} is registered twice")
    ANALYSES[analysis.name] = analysis
    listed = sorted(ANALYSES.values(), key=lambda a: (a.order, a.name))
    ANALYSES.clear()  # in place: modules hold this very dict
    ANALYSES.update((a.name, a) for a in listed)
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
# discovery: the declarations of the modules, read from their source


def declaration(
    text: str, module: str, filename: str, kind: str = "Analysis", names: dict[str, Any] | None = None
) -> Any:
    """The object a module's source ``text`` declares in ``DECLARED = <kind>(...)`` (or a tuple of
    them), evaluated with :mod:`robustkit.analysis.declare`'s names (and ``names``: a figure's
    declaration has :mod:`robustkit.figures`'s too) and ``__name__ = module``; None where the
    module declares no such thing.

    Only that statement is parsed (a formatted call closes at column 0), so reading every
    module's declaration costs milliseconds and imports nothing.

    Raises
    ------
    AnalysisError
        The declaration uses a name that is neither a literal nor one of
        :mod:`robustkit.analysis.declare`'s (it must be readable without importing its module).
    """
    mark = f"\n{DECLARED} = "
    start = text.find(mark)
    if start < 0:
        return None
    start += 1
    ends = [text.find("\n", start)] + [i + 2 for i in _closings(text, start)]
    for end in (e for e in ends if e > start):
        try:
            (statement,) = ast.parse(text[start:end], filename).body
            break
        except SyntaxError:
            continue
    else:
        raise AnalysisError(f"{filename}: cannot read its {DECLARED} = ... statement")
    value = statement.value
    calls = value.elts if isinstance(value, ast.Tuple) else [value]
    if not all(isinstance(c, ast.Call) and _dotted(c.func) == kind for c in calls):
        return None
    namespace = {**vars(declare), **(names or {}), "__name__": module}
    try:
        return eval(compile(ast.Expression(value), filename, "eval"), namespace)  # noqa: S307 (the package's own source)
    except NameError as error:
        raise AnalysisError(
            f"{filename}: a declaration may use literals and robustkit.analysis.declare's names only ({error})"
        ) from None


def _dotted(node: ast.expr) -> str | None:
    """``Analysis`` or ``figures.Figure``: the name a call is made by."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _closings(text: str, start: int):
    """Offsets of the ``)`` lines at column 0 after ``start``."""
    at = text.find("\n)", start)
    while at >= 0:
        yield at + 1
        at = text.find("\n)", at + 1)


def discover(folder: Path, package: str, kind: str = "Analysis", names: dict[str, Any] | None = None) -> list[Any]:
    """Every ``kind`` declared by the modules of ``folder`` (the package ``package``), by file
    name (:func:`declaration`)."""
    found = []
    for path in sorted(folder.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        declared = declaration(text, f"{package}.{path.stem}", str(path), kind, names)
        if declared is not None:
            found.extend(declared if isinstance(declared, tuple) else [declared])
    return found


def import_module(path: str | Path, name: str | None = None):
    """Import the module file ``path`` (outside robustkit, e.g. a project's own analysis) as
    ``name`` (default: its file name), so that its functions load as robustkit's do."""
    path = Path(path)
    name = name or path.stem
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise AnalysisError(f"{path} is not a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def register_module(path: str | Path, name: str | None = None) -> Analysis:
    """Import the analysis module ``path`` (outside the package) and register its ``DECLARED``."""
    declared = getattr(import_module(path, name), DECLARED, None)
    if not isinstance(declared, Analysis):
        raise AnalysisError(f"{path} declares no analysis ({DECLARED} = Analysis(...))")
    return register(declared)


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
        order=10,
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
        order=20,
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
        order=30,
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
        order=40,
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
        order=50,
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
        order=60,
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
        order=70,
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
        order=90,
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
        order=140,
    )
)

# ---------------------------------------------------------------------------------------------
# beyond the papers: the findings on LoRA and full fine-tuning that followed them (issue #30)


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


for _declared in discover(Path(__file__).parent, __package__):
    register(_declared)
