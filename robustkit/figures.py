"""The figure registry: name -> (analysis, view, plot, typed parameters with defaults).

A figure is an analysis (selected runs of a store -> tidy data, cached next to the runs),
optionally a view (that data -> what the figure shows: the statistics, tests, selected points
and caption, computed in :mod:`robustkit.analysis`) and a plot (-> a matplotlib Figure);
statistics belong to the analysis and the view, the plot only draws. The ``robustkit plot`` verbs, :func:`robustkit.reproduce.reproduce` and a
notebook all read this registry::

    from robustkit import figures
    fig = figures.draw("box-seeds", "runs/demo", select=["task=rt"], split="validation")
    data = figures.data("box-seeds", "runs/demo")      # the DataFrame behind it

Adding a figure is one :func:`register` call here, its plot function in ``robustkit/plots``
and, for a paper figure, a recipe in ``analyses/``. Functions are named by import path
(``"robustkit.analysis.landscape:run"``) and imported only when a figure is drawn, so reading
the registry (e.g. for ``robustkit plot --help``) imports nothing heavy.

Parameters are routed by name: each function receives the figure's parameters that appear in
its signature (an analysis gets ``store`` and ``select`` too). A view gets the analysis result
as its first argument and returns a dict. A dict (the view's, or the analysis's where there is
no view) passes its items to the plot as keyword arguments; any other result is the plot's
first argument.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from robustkit.attacks import ATTACKS  # names only: the attacks' modules load when one is built
from robustkit.errors import RobustkitError


class FigureError(RobustkitError):
    """An unknown figure or parameter, or a parameter value of the wrong type."""


@dataclass(frozen=True)
class Param:
    """One typed parameter of a figure.

    Attributes
    ----------
    name : str
        Python name; the command-line flag is ``--<name with dashes>``.
    default : Any
        Value when not given; its type is the parameter's type unless ``kind`` says otherwise.
    help : str
        What it does (shown by ``robustkit plot <figure> --help``).
    choices : tuple
        Allowed values (empty = any).
    kind : type, optional
        ``int``, ``float``, ``str``, ``bool`` or ``list`` (a list of str; comma-separated on
        the command line). Default: the type of ``default``, ``str`` when it is None.
    """

    name: str
    default: Any
    help: str
    choices: tuple = ()
    kind: type | None = None

    @property
    def type(self) -> type:
        if self.kind is not None:
            return self.kind
        return str if self.default is None else type(self.default)

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def coerce(self, value: Any) -> Any:
        """``value`` as this parameter's type (a comma-separated str becomes a list)."""
        if value is None:
            return None
        kind = self.type
        try:
            if kind is list:
                value = [v.strip() for v in value.split(",")] if isinstance(value, str) else [str(v) for v in value]
            elif kind is bool:
                if not isinstance(value, bool):
                    raise TypeError(f"expected true or false, got {value!r}")
            elif kind is float:
                value = float(value)
            elif kind is int:
                if isinstance(value, bool) or float(value) != int(float(value)):
                    raise TypeError(f"expected an integer, got {value!r}")
                value = int(float(value))
            else:
                value = str(value)
        except (TypeError, ValueError) as error:
            raise FigureError(f"parameter {self.name!r}: {error}") from None
        if self.choices and value not in self.choices:
            raise FigureError(f"parameter {self.name!r} must be one of {list(self.choices)}, got {value!r}")
        return value


@dataclass(frozen=True)
class Figure:
    """A registered figure.

    Attributes
    ----------
    name : str
        Registry key and ``robustkit plot`` verb, e.g. ``box-seeds``.
    help : str
        The paper figure(s) it draws and what it shows.
    analysis : str
        ``"module:function"``, called as ``function(store, select, **params)``; returns the
        tidy data the figure shows (a DataFrame, or a dict of them).
    plot : str
        ``"module:function"``, called as ``function(data, **params)`` (or ``**data`` for a
        dict: the view's); returns a matplotlib Figure and computes nothing.
    params : tuple of Param
        The figure's parameters, with defaults.
    score_axis : bool
        The figure shows scores: collapsed and diverged runs are marked and left out of
        statistics unless ``include_failed`` (a parameter every such figure has).
    view : str, optional
        ``"module:function"`` in :mod:`robustkit.analysis`, called as ``function(data,
        **params)`` on the analysis result ``data``; returns a dict of the plot's keyword
        arguments (statistics, tests, selected points, caption). None: the analysis result
        goes to the plot as it is.
    """

    name: str
    help: str
    analysis: str
    plot: str
    params: tuple[Param, ...] = ()
    score_axis: bool = False
    view: str | None = None
    _all: tuple[Param, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        extra = (INCLUDE_FAILED,) if self.score_axis else ()
        object.__setattr__(self, "_all", (*self.params, *extra))

    @property
    def parameters(self) -> tuple[Param, ...]:
        """Every parameter, ``include_failed`` last for score figures."""
        return self._all

    def resolve(self, **given: Any) -> dict[str, Any]:
        """Every parameter's value: ``given`` (checked and typed) over the defaults.

        Raises
        ------
        FigureError
            An unknown parameter (the known ones are listed) or a value of the wrong type.
        """
        known = {p.name: p for p in self._all}
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise FigureError(f"figure {self.name!r} has no parameter(s) {unknown}; it has: {sorted(known) or 'none'}")
        return {name: p.coerce(given[name]) if name in given else p.default for name, p in known.items()}

    def data(self, store: str | Path, select: dict | list[str] | None = None, **params: Any) -> Any:
        """The figure's data: its analysis on the selected runs of ``store``."""
        values = self.resolve(**params)
        return _call(_load(self.analysis), (store, select), values)

    def draw(self, store: str | Path, select: dict | list[str] | None = None, subtitle: str | None = None,
             footer: str | None = None, **params: Any):
        """The figure (a matplotlib Figure) of the selected runs of ``store``.

        ``subtitle`` is a second title line (e.g. the model and task used), ``footer`` text
        under the figure (e.g. the paper's claim and its verdict).
        """
        from robustkit.plots.style import decorate

        values = self.resolve(**params)
        result = self.shown(_call(_load(self.analysis), (store, select), values), **values)
        plot = _load(self.plot)
        fig = _call(plot, (), {**values, **result}) if isinstance(result, dict) else _call(plot, (result,), values)
        return decorate(fig, subtitle=subtitle, footer=footer)

    def shown(self, data: Any, **params: Any) -> Any:
        """What the plot draws from ``data`` (the analysis result, :meth:`data`): the view's
        dict of the plot's keyword arguments, or ``data`` itself for a figure without a view.

        ``params`` are the figure's parameters (unknown ones raise, missing ones default); the
        view receives those its signature names.
        """
        if self.view is None:
            return data
        return _call(_load(self.view), (data,), self.resolve(**params))


INCLUDE_FAILED = Param("include_failed", False, "keep collapsed and diverged runs (robustkit.collapse) in boxes, means, error bars and tests; they are marked either way; default: left out")

FIGURES: dict[str, Figure] = {}


def register(figure: Figure) -> Figure:
    """Add ``figure`` to the registry (its name must be new)."""
    if figure.name in FIGURES:
        raise FigureError(f"figure {figure.name!r} is registered twice")
    FIGURES[figure.name] = figure
    return figure


def get(name: str) -> Figure:
    """The registered figure ``name``."""
    if name not in FIGURES:
        raise FigureError(f"unknown figure {name!r}; known figures: {', '.join(FIGURES)}")
    return FIGURES[name]


def data(name: str, store: str | Path, select: dict | list[str] | None = None, **params: Any) -> Any:
    """The data behind figure ``name`` (see :meth:`Figure.data`)."""
    return get(name).data(store, select, **params)


def draw(name: str, store: str | Path, select: dict | list[str] | None = None, subtitle: str | None = None,
         footer: str | None = None, **params: Any):
    """Figure ``name`` of the selected runs of ``store`` (see :meth:`Figure.draw`)."""
    return get(name).draw(store, select, subtitle=subtitle, footer=footer, **params)


def _load(path: str) -> Callable:
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _call(function: Callable, positional: tuple, values: dict[str, Any]) -> Any:
    """``function(*positional, **the values its signature names)``."""
    accepted = inspect.signature(function).parameters
    return function(*positional, **{k: v for k, v in values.items() if k in accepted})


# ---------------------------------------------------------------------------------------------
# parameters shared by several figures

def _metric(help_extra: str = "") -> Param:
    return Param("metric", None, f"metric shown (accuracy, f1, mcc, ...){help_extra}; default: each task's main metric")


SPLIT = Param("split", "test", "split scored; default: test", choices=("test", "validation"))
CHECKPOINT = Param("checkpoint", "best", "best: best validation main metric; last: end of training; default: best", choices=("best", "last"))
SCORES = (SPLIT, CHECKPOINT, _metric())
OUTCOMES = "robustkit.analysis.scores:outcomes"
ASO = Param("aso", False, "add ASO's epsilon_min of each method over the other (deepsig, Dror et al. 2019) to the caption, where the figure compares two methods")
BOXES = "robustkit.plots.stability"
BOX_VIEWS = "robustkit.analysis.boxes"
TRADEOFF_PARAMS = (
    Param("split", "validation", "split whose metric is shown (Houlsby et al. report validation); the best learning rate per point is always selected on validation; default: validation", choices=("validation", "test")),
    Param("checkpoint", "best", "checkpoint whose metrics are used: best (selected on validation) or last; default: best", choices=("best", "last")),
    _metric(" (Houlsby et al. plot accuracy for CoLA too)"),
)
ATTACK_PARAMS = (
    Param("n", 200, "test examples attacked per run (the same sample for every run); default: 200"),
    Param("seed", 0, "seed of the example sample and of randomized attacks (per example); default: 0"),
    Param("engine", "fast", "PWWS's engine (other attackers ignore it): fast: robustkit's batched PWWS with float32 screening (identical outputs); openattack: OpenAttack's own PWWSAttacker; default: fast", choices=("fast", "openattack")),
)
CONVENTION = Param("convention", "openattack", "openattack: prediction flips, misclassified inputs included; gold: only correctly classified inputs; default: openattack", choices=("openattack", "gold"))

# ---------------------------------------------------------------------------------------------
# the figures

register(Figure(
    "rsa", "He et al. 2021 figure 2: similarity of each layer's representations to the base model's",
    "robustkit.analysis.similarity:run", "robustkit.plots.similarity:rsa_by_layer",
    (Param("tokens", 5000, "tokens sampled once from the task's dev set ([CLS]/[SEP]/[PAD] skipped); default: 5000 (He et al. 2021)"),
     Param("seed", 0, "seed of the token sample; default: 0"),
     Param("checkpoint", "best", "tuned checkpoint compared with the base model: best, last or step-0; default: best", choices=("best", "last", "step-0")),
     Param("measure", "rsa", "rsa (He et al. 2021) or linear CKA (Kornblith et al. 2019); default: rsa", choices=("rsa", "cka")))))
register(Figure(
    "attack-vs-tsp", "Han et al. 2021 figure 5: PWWS (or another attacker's) attack success rate vs TSP steps, with vs without adapters",
    "robustkit.analysis.attack:success", "robustkit.plots.attack:attack_vs_tsp",
    (Param("attacker", "pwws", "pwws: PWWS (Ren et al. 2019), Han et al.'s; deepwordbug: DeepWordBug (Gao et al. 2018), character-level; default: pwws", choices=tuple(ATTACKS)),
     *ATTACK_PARAMS, CONVENTION),
    score_axis=True))
register(Figure(
    "attack-by-attacker", "Han et al. 2021 figure 5 with a second attack: PWWS and DeepWordBug success rate vs TSP steps side by side (one panel each, shared y axis), with vs without adapters",
    "robustkit.analysis.attack:success_by_attacker", "robustkit.plots.attack:attack_by_attacker",
    (Param("attackers", ["pwws", "deepwordbug"], f"comma-separated attackers, one panel each ({', '.join(ATTACKS)}); default: pwws,deepwordbug", kind=list),
     *ATTACK_PARAMS, CONVENTION),
    score_axis=True))
register(Figure(
    "attack-boxes", "Attack success rate per method, one box over each method's victims (seeds), with the tests between methods (runs at one TSP step)",
    "robustkit.analysis.attack:success_scores", "robustkit.plots.attack:attack_boxes",
    (Param("attacker", "pwws", "pwws or deepwordbug; default: pwws", choices=tuple(ATTACKS)), *ATTACK_PARAMS, CONVENTION),
    score_axis=True, view=f"{BOX_VIEWS}:method_boxes"))
register(Figure(
    "ablation", "Houlsby et al. 2019 figure 6: relative change of the dev metric when the adapters of layers i..j are removed",
    "robustkit.analysis.ablation:run", "robustkit.plots.ablation:ablation_heatmap",
    (Param("checkpoint", "best", "checkpoint ablated: best or last; default: best", choices=("best", "last")),
     Param("metric", None, "metric whose relative change is shown (Houlsby et al. plot validation accuracy); default: the task's main metric"),
     Param("paper_figure", "Houlsby et al. 2019, figure 6", "the figure named in the title; default: Houlsby et al. 2019, figure 6 (the course report's figure 8 is the same ablation of layer-shared adapters)"))))
register(Figure(
    "gradnorm", "Han et al. 2021 figure 3: per-layer gradient norms during training (log scale)",
    "robustkit.analysis.gradnorm:summarized", "robustkit.plots.gradnorm:gradnorm_curves"))
register(Figure(
    "landscape", "He et al. 2021 figure 6: loss along the line from theta_0 to theta_1",
    "robustkit.analysis.landscape:run", "robustkit.plots.landscape:landscape_curves",
    (Param("alphas", "-2:2:20", "interpolation coefficients: start:stop:count (both ends included) or a comma list; default: -2:2:20 (He et al. 2021)"),
     Param("splits", ["validation"], "comma-separated splits to evaluate on (validation, train); default: validation", kind=list),
     Param("checkpoint", "best", "theta_1: best or last (theta_0 is step-0); default: best", choices=("best", "last")))))
register(Figure(
    "curves", "He et al. 2021 figures 5 and 9: dev loss and metric vs training step",
    "robustkit.analysis.curves:with_run_outcomes", "robustkit.plots.curves:dev_curves", score_axis=True))
register(Figure(
    "curves-by-tsp", "Han et al. 2021 figures 1 and 13: dev metric vs step, one line per TSP step",
    "robustkit.analysis.curves:with_run_outcomes", "robustkit.plots.curves:curves_by_tsp", score_axis=True))
register(Figure(
    "mean-best", "He et al. 2021 table 6: mean and best dev metric over all evaluation steps, as a table",
    "robustkit.analysis.curves:mean_best_of_runs", "robustkit.plots.curves:mean_best_table", score_axis=True))
register(Figure(
    "box-seeds", "Han et al. 2021 figure 2: box plot of each method's score over random seeds, one panel per task",
    OUTCOMES, f"{BOXES}:box_seeds", (*SCORES, ASO), score_axis=True, view=f"{BOX_VIEWS}:box_seeds"))
register(Figure(
    "box-tsp", "Han et al. 2021 figure 4: box plots of the score per TSP step and method (pooled: one box per method over TSP steps)",
    OUTCOMES, f"{BOXES}:box_tsp",
    (*SCORES, Param("pooled", False, "one box per method over all TSP steps (each run differs by its TSP step, as in the paper) instead of a box per TSP step"), ASO),
    score_axis=True, view=f"{BOX_VIEWS}:box_tsp"))
register(Figure(
    "box-tsp-epochs", "Han et al. 2021 figures 9-10: box plots of the dev score at each fine-tuning epoch end, per TSP step, one panel per method (pool_epochs: one box per TSP step and method over every epoch end, the paper's)",
    "robustkit.analysis.scores:epoch_outcomes", f"{BOXES}:box_tsp_epochs",
    (_metric(), Param("pool_epochs", False, "one box per TSP step and method over every fine-tuning epoch end of every run (Han et al. 2021 figures 9-10: 'development scores from 100 runs ... epochs ranging from 1 to 100') instead of a box per epoch")),
    score_axis=True, view=f"{BOX_VIEWS}:box_tsp_epochs"))
register(Figure(
    "box-lr", "He et al. 2021 figure 4: box plots of the score over seeds per learning rate and method",
    OUTCOMES, f"{BOXES}:box_lr", (*SCORES, ASO), score_axis=True, view=f"{BOX_VIEWS}:box_lr"))
register(Figure(
    "train-size", "He et al. 2021 figure 3: score vs number of training examples, per method (boxes or mean +- std)",
    OUTCOMES, f"{BOXES}:train_size",
    (*SCORES, Param("kind", "box", "box: boxes over seeds; mean: mean +- std (ddof 1) as in the paper; default: box", choices=("box", "mean")), ASO),
    score_axis=True, view=f"{BOX_VIEWS}:train_size"))
register(Figure(
    "table", "Han et al. 2021 table 1, He et al. 2021 tables 2 and 5: mean +- std, bootstrap CI, range and failed runs per group, as a PDF table",
    "robustkit.analysis.results:results_table", "robustkit.plots.tables:results_table_figure",
    (*SCORES,
     Param("by", ["task", "method"], "comma-separated columns that define a row (task, method, tsp_step, train_size, adapter_size, lr, ...); default: task,method", kind=list),
     Param("title", "Results over runs", "table title (the model and task used are appended)")),
    score_axis=True))
register(Figure(
    "tradeoff", "Houlsby et al. 2019 figure 4 (per task; figure 3's curves): metric vs trained parameters (log) for adapter sizes, top-k fine-tuning, LayerNorm-only and full fine-tuning; each point the best learning rate of its sweep, error bars s.e.m.",
    "robustkit.analysis.tradeoff:table", "robustkit.plots.tradeoff:tradeoff_figure", TRADEOFF_PARAMS, score_axis=True,
    view="robustkit.analysis.tradeoff:tradeoff_points"))
register(Figure(
    "tradeoff-aggregate", "Houlsby et al. 2019 figure 3: score minus full fine-tuning vs trained parameters, 20th/50th/80th percentiles across tasks, adapters vs top-k",
    "robustkit.analysis.tradeoff:aggregated", "robustkit.plots.tradeoff:tradeoff_aggregate_figure", TRADEOFF_PARAMS, score_axis=True))
register(Figure(
    "init-std", "Houlsby et al. 2019 figure 6 right: metric vs the std of the adapters' weight init (log)",
    "robustkit.analysis.tradeoff:table", "robustkit.plots.init_std:init_std_figure", TRADEOFF_PARAMS, score_axis=True,
    view="robustkit.analysis.tradeoff:init_std_points"))

# ---------------------------------------------------------------------------------------------
# beyond the papers (issue #16): the field's own measures of sharpness, connectivity, similarity

CURVATURE_PARAMS = (
    Param("checkpoints", ["step-0", "best", "last"], "comma-separated checkpoints: step-0 (theta_0; a TSP run's start for tsp_step > 0), best, last, tsp (the masked-LM loss at the TSP checkpoint, runs with tsp_step > 0); default: step-0,best,last", kind=list),
    Param("examples", 32, "training examples in the one fixed batch the loss is taken on (the same for every run); default: 32"),
    Param("max_iterations", 30, "power iteration cap (Hessian-vector products per eigenvalue); default: 30"),
    Param("samples", 30, "Hutchinson samples for the traces; default: 30"),
    Param("seed", 0, "seed of the batch, the start vectors and the Rademacher samples; default: 0"),
    Param("block_eigenvalues", True, "a power iteration per layer block besides the whole set's (the costly part: one per block); off (--no-block-eigenvalues): per-layer traces only", kind=bool),
)
register(Figure(
    "curvature", "Curvature of the training loss: top Hessian eigenvalue (power iteration) and trace (Hutchinson) over the trained parameters, per checkpoint and per layer block",
    "robustkit.analysis.curvature:run", "robustkit.plots.curvature:curvature_figure",
    (*CURVATURE_PARAMS,
     Param("layer_checkpoint", "best", "checkpoint of the per-layer panels; default: best", choices=("step-0", "best", "last")))))
register(Figure(
    "surface", "Li et al. 2018: 2-D loss surface around each run's checkpoint along two filter-normalised random directions (contours; only the trained tensors move)",
    "robustkit.analysis.surface:run", "robustkit.plots.surface:surface_contours",
    (Param("checkpoint", "best", "the centre theta*: best, last or step-0; default: best", choices=("best", "last", "step-0")),
     Param("grid", "-1:1:11", "coefficients of each direction: start:stop:count or a comma list; default: -1:1:11 (121 points)"),
     Param("split", "train", "split the loss is taken on; default: train (Li et al.'s)", choices=("train", "validation", "test")),
     Param("examples", 256, "examples of the split, drawn with --seed (the same for every run); default: 256"),
     Param("seed", 0, "seed of the two directions and of the examples; default: 0"),
     Param("max_seeds", 3, "runs drawn per method (the lowest seeds); default: 3"))))
register(Figure(
    "connectivity", "Frankle et al. 2020: linear mode connectivity between runs that differ only in their seed; the loss along the line and the barrier per method as a box over seed pairs",
    "robustkit.analysis.connectivity:lines_and_barriers", "robustkit.plots.connectivity:connectivity_figure",
    (Param("checkpoint", "best", "checkpoint of both ends: best or last; default: best", choices=("best", "last")),
     Param("alphas", "0:1:11", "interpolation coefficients (must hold 0 and 1): start:stop:count or a comma list; default: 0:1:11"),
     Param("split", "train", "split the loss is taken on; default: train", choices=("train", "validation", "test")),
     Param("examples", 512, "examples of the split, drawn with --seed (the same for every pair); default: 512"),
     Param("seed", 0, "seed of the examples; default: 0"))))
register(Figure(
    "similarity-ci", "RSA, linear CKA, debiased linear CKA and orthogonal Procrustes distance of each layer to the base model, side by side, each run with a bootstrap interval over the token sample",
    "robustkit.analysis.similarity_ci:run", "robustkit.plots.similarity_ci:similarity_panels",
    (Param("tokens", 5000, "tokens sampled once from the task's dev set ([CLS]/[SEP]/[PAD] skipped); default: 5000 (He et al. 2021)"),
     Param("seed", 0, "seed of the token sample, its groups and the resampled halves; default: 0"),
     Param("checkpoint", "best", "tuned checkpoint compared with the base model: best, last or step-0; default: best", choices=("best", "last", "step-0")),
     Param("groups", 20, "random token groups of the half-sampling bootstrap (even, >= 4); default: 20"),
     Param("resamples", 200, "random halves per layer; default: 200"))))
register(Figure(
    "tuning-curves", "Dodge et al. 2019 / Lourie et al. 2024: tuning curves per method, the median (with confidence band) and expected best score of a budget of k runs over seeds or learning rates",
    "robustkit.analysis.tuning:run", "robustkit.plots.tuning:tuning_curves",
    (Param("split", "validation", "split scored; default: validation (what a search selects on)", choices=("validation", "test")),
     Param("checkpoint", "best", "best or last; default: best", choices=("best", "last")),
     _metric(),
     Param("confidence", 0.8, "level of the simultaneous bands; default: 0.8 (opda's examples)"),
     Param("exclude_failed", False, "leave collapsed and diverged runs out (default: they count as draws of the search, which a budget of k runs can draw)"))))
