"""How an analysis declares itself: the :class:`Analysis` and :class:`Statistic` types, and the
parameters several analyses share (each declared once).

An analysis is one module of ``robustkit/analysis/`` that registers, next to its computation,
everything the rest of robustkit reads about it, with one module-level call::

    from robustkit.analysis.declare import DEVICE, Analysis, Param, Statistic, checkpoint_param
    from robustkit.analysis.registry import register_analysis

    DECLARED = register_analysis(
        Analysis(
            "weight-change",                        # the registry key and the `analyze` verb
            "relative change of each layer's weights",
            "The longer text of the verb's --help.",
            ":run",                                 # this module's run(store, select, **params, **options)
            (checkpoint_param("the tuned checkpoint", default="last"), Param("top_k", 10, "...")),
            (DEVICE,),                              # options: how it runs, never cached on
            summary=":summarize",
            statistics=(Statistic("mean", ":mean_change", "the mean relative change (fraction)"),),
            module=__name__,
            order=...,                              # where its verb is listed (default: after the others)
        )
    )

``":name"`` is ``name`` in the declaring module. Every ``--help`` imports the module to list
it, so it imports torch, pandas and matplotlib inside its functions; its functions take their
defaults from ``DECLARED`` (``DECLARED.default("top_k")``), never a second literal.
:data:`ATTACKERS` and :func:`registered_attackers` read the attack registry live.

Why, in full: ``docs/analyses.md``, "robustkit/analysis/declare.py".
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robustkit.attacks import ATTACKS  # names, labels and declared needs: no attack's module is imported
from robustkit.errors import RobustkitError
from robustkit.params import Param, resolve

if TYPE_CHECKING:  # annotations only: declarations are read by --help
    import pandas as pd

# The variable a module declares its analysis (or figures) in.
DECLARED = "DECLARED"


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
        runs (shown, never tested: :mod:`robustkit.verdicts.rules`).
    unit : str
        What one observation is: ``run``, or ``disjoint pair`` (two runs of one configuration,
        each run in at most one pair: independent, and half as many as the runs, which
        :mod:`robustkit.verdicts.decidability` counts so).
    ends : bool
        It depends on how training ended: a value at a checkpoint at or near the end (the final
        or best score, representations, curvature or landscape at ``last`` or ``best``, attack
        success) or over every evaluation up to it (a dev-loss rise, a mean over evaluations).
        A claim on such a statistic is judged only where its runs have stopped improving
        (:mod:`robustkit.analysis.convergence`). A statistic read at ``checkpoint = "step-0"``
        never does. False for statistics of the path of training itself (gradient-norm slopes).
    better : {"higher", "lower"} or None
        Which values are the better outcome of training (accuracy: higher). A failed run
        (:mod:`robustkit.store.collapse`) then ranks as the worst outcome, below every learned run,
        in the claim's test with its failures (:mod:`robustkit.verdicts.rules`); None: no value is better
        (a similarity, a slope), and failed runs enter with their values.
    undefined_on_failed : str
        Why the statistic says nothing about a failed run (a constant classifier cannot be
        attacked), or "" where it does: failed runs are then left out and the reason says why.
    schedule : bool
        It reads the run's whole training schedule, up to its budget (a dev-loss rise after its
        minimum, the spread over epoch ends, a gradient-norm slope over the steps). A run
        trained ``until_converged`` stops once it has converged, so the schedule after that
        point was never trained, and the statistic would measure the stopping rule rather than
        the run. A claim on it is therefore *untestable* on such runs
        (:func:`robustkit.verdicts.tally.verdicts`).
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
    schedule: bool = False

    def ends_with_training(self, params: dict) -> bool:
        """Whether the statistic at these parameters depends on how training ended (``ends``,
        unless it is read at the starting checkpoint)."""
        return self.ends and params.get("checkpoint") != "step-0"


@dataclass(frozen=True)
class Analysis:
    """An analysis's declaration (module docstring).

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
    views : tuple of str
        ``"module:function"`` (``":name"``: its own) of each view of its frame a figure may draw:
        ``function(frame, **params it names)`` (``store`` and ``select`` too, where it names them)
        -> the finished tables a plot draws (:mod:`robustkit.figures`).
    module : str, optional
        The declaring module (``__name__``): function references ``":name"`` are its own.
    order : int
        Where the verb is listed among the others (ascending; ties by name).
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
    views: tuple[str, ...] = ()
    module: str | None = None
    order: int = 1000

    def __post_init__(self) -> None:
        # ":name" -> "<module>:name": what the rest of robustkit reads is always a full path
        def full(path: str | None) -> str | None:
            if path is None or not path.startswith(":"):
                return path
            if self.module is None:
                raise AnalysisError(f"analysis {self.name!r} names {path!r} but declares no module=__name__")
            return f"{self.module}{path}"

        object.__setattr__(self, "compute", full(self.compute))
        object.__setattr__(self, "summary", full(self.summary))
        object.__setattr__(self, "views", tuple(full(view) for view in self.views))
        object.__setattr__(
            self,
            "statistics",
            tuple(dataclasses.replace(s, function=full(s.function)) for s in self.statistics),
        )

    def default(self, name: str) -> Any:
        """The declared default of parameter or option ``name`` (what a function below the
        declaration takes as its own default, so that it is written once)."""
        for param in (*self.params, *self.options):
            if param.name == name:
                return param.default
        raise AnalysisError(f"analysis {self.name!r} has no parameter {name!r}")

    def resolve(self, **given: Any) -> dict[str, Any]:
        """Every parameter's value, ``given`` over the defaults (unknown names are errors)."""
        return resolve(self.params, given, f"analysis {self.name!r}", AnalysisError)

    def run(self, store: str | Path, select: dict | list[str] | None = None, **given: Any) -> pd.DataFrame:
        """The analysis on the selected runs of ``store``: ``given`` are its parameters and
        options (e.g. ``device="cuda"``, ``progress=False``); unknown names are errors.

        The frame's ``attrs["provenance"]`` maps each run (or run pair) whose result came from a
        run's cache to how it was computed (``device``, ``device_name``, ``torch``, ``computed``;
        :mod:`robustkit.analysis.each_run`), whether computed now or read back.
        """
        from robustkit.analysis.each_run import collect_provenance
        from robustkit.analysis.reuse import computing

        options = {p.name: p for p in (*self.options, PROGRESS)}
        chosen = resolve(
            options.values(), {k: v for k, v in given.items() if k in options}, f"analysis {self.name!r}", AnalysisError
        )
        values = self.resolve(**{k: v for k, v in given.items() if k not in options})
        compute = load(self.compute)
        accepted = inspect.signature(compute).parameters  # not every analysis shows progress
        gaps = self.device_contract_gaps(accepted)
        if gaps:
            raise AnalysisError(f"analysis {self.name!r} ({self.compute}): {'; '.join(gaps)}")
        with collect_provenance() as provenance, computing(self.name, values):  # entries record what they are
            frame = compute(store, select, **values, **{k: v for k, v in chosen.items() if k in accepted})
        if self._declares_device() and len(frame) and not provenance:
            raise AnalysisError(
                f"analysis {self.name!r} ({self.compute}) runs a model but recorded no provenance: pass "
                "provenance=computed_on(device) to each_run / each_pair (robustkit.analysis.each_run)"
            )
        frame.attrs["provenance"] = provenance
        return frame

    def _declares_device(self) -> bool:
        return any(p.name == "device" for p in self.options)

    def device_contract_gaps(self, accepted) -> list[str]:
        """What the device contract misses (CONTRIBUTING.md, "A new analysis"): an analysis that
        runs a model declares the ``DEVICE`` option, and its function takes ``device`` and
        ``progress``; one that takes ``device`` declares the option. ``accepted``: the
        function's parameter names. Empty when the contract holds."""
        gaps = []
        if self._declares_device():
            gaps += [
                f"declares DEVICE but its function takes no {name!r}"
                for name in ("device", "progress")
                if name not in accepted
            ]
        elif "device" in accepted:
            gaps.append("its function takes device but the declaration has no DEVICE option (options=(DEVICE,))")
        return gaps

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


# ---------------------------------------------------------------------------------------------
# parameters several analyses share (declared once)


def checkpoint_param(help_: str, choices: tuple = ("best", "last"), default: str = "best") -> Param:
    """The ``checkpoint`` parameter: which of a run's checkpoints is read (``help_``: what it is for)."""
    return Param("checkpoint", default, f"{help_}: {', '.join(choices)}", choices=choices)


METRIC_NAME = "robustkit.data.metrics:check_name"  # a Param's check: the metric is one robustkit records
METRIC = Param(
    "metric", None, "metric (accuracy, f1, mcc, ...)", default_note="each task's main metric", check=METRIC_NAME
)
# checked when given, as `train --device` is: a device this machine lacks is refused before any work
DEVICE = Param(
    "device",
    None,
    "where the model runs: cpu, cuda",
    default_note="the GPU if there is one",
    check="robustkit.specs.preflight:check_device",
)
SEED = Param("seed", 0, "seed of every random draw of the analysis (sample, directions, resamples)")
TOKENS = Param(
    "tokens",
    5000,
    "tokens sampled once from the task's dev set ([CLS]/[SEP]/[PAD] skipped)",
    default_note="He et al. 2021",
)
SIMILARITY_CHECKPOINT = checkpoint_param("tuned checkpoint compared with the base model", ("best", "last", "step-0"))
LAYER = Param(
    "layer",
    "each",
    "each: one observation per layer; top / bottom: the mean over the top / bottom third of the encoder layers",
    choices=("each", "top", "bottom"),
)
LOSS_SPLIT = "split the loss is taken on"
EXAMPLES = "examples of the split, drawn with --seed (the same for every run)"
# the loss split and examples of the two seed-pair analyses (connectivity, curve-connectivity)
PAIR_SPLIT = Param("split", "train", LOSS_SPLIT, choices=("train", "validation", "test"))
PAIR_EXAMPLES = Param("examples", 512, EXAMPLES)
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
    "weight matrices counted: comma-separated kinds (q, k, v, attention-output, intermediate, output) or all",
    default_note="the matrices LoRA adapts in Hu et al. 2021 and the zoo",
)
INTRUDER_EPSILON = Param(
    "epsilon",
    0.5,
    "a top singular vector is an intruder when its largest |cosine| with the start's singular vectors is below this",
    default_note="huggingface/peft's implementation of Shuttleworth et al. 2024",
)
RANK_MEASURE = Param(
    "rank_measure",
    "energy_rank",
    "energy_rank: the rank holding 90% of the update's squared norm (Biderman et al. 2024); effective_rank: Roy and "
    "Vetterli 2007's exp(entropy)",
    choices=("energy_rank", "effective_rank"),
)


# ---------------------------------------------------------------------------------------------
# the attack registry (robustkit.attacks.registry), as the attack analysis declares its attackers

# The registered attackers' names as a Param's choices: a live view of the registry, so an attack
# registered after a declaration was read (a decorated class imported later in the session,
# robustkit.attacks.load_attacks) is a valid choice too.
ATTACKERS = ATTACKS.keys()


def registered_attackers(labels: bool = True, nltk_data: bool = False) -> str:
    """The attackers registered when a declaration is read, for its help text:
    ``"deepwordbug (DeepWordBug), pwws (PWWS)"`` (``labels``: with the label figures show, where
    it is not the name; ``nltk_data``: only those that declare NLTK data they read)."""
    return ", ".join(
        f"{name} ({info.label})" if labels and info.label != name else name
        for name, info in ATTACKS.items()
        if info.nltk_data or not nltk_data
    )
