"""The figure registry: name -> (analysis, plot, plot-only parameters).

The package's other modules are the plots: each function takes a tidy DataFrame and returns a
matplotlib Figure; nothing there trains, loads models or reads the store.
:func:`robustkit.figures.style.save_pdf` writes them.

A figure is a registered analysis (:mod:`robustkit.analysis.registry`: selected runs of a store
-> tidy data, cached next to the runs), optionally a view of that data (``view``: a function in
``robustkit/analysis/`` that derives the finished tables a plot draws, its statistics included),
and a plot (that data -> a matplotlib Figure); the plot only draws. The ``robustkit plot`` verbs,
:func:`robustkit.verdicts.reproduce.reproduce` and a notebook all read this registry::

    from robustkit import figures
    fig = figures.draw("box-seeds", "runs/demo", select=["task=rt"], split="validation")
    fig, (a1, a2) = plt.subplots(1, 2)                  # or into the caller's Axes (one panel)
    figures.draw("box-seeds", "runs/demo", ax=a1); figures.draw("box-lr", "runs/demo", ax=a2)
    data = figures.data("box-seeds", "runs/demo")      # the analysis's DataFrame behind it

A figure's parameters are its analysis's (declared there, once) followed by its own, the ones
only the view or the plot reads; a figure may change an analysis parameter's default
(``defaults``), never redeclare it. Functions are named by import path and imported only when
a figure is drawn, so reading the registry (``robustkit plot --help``) imports nothing heavy.

Adding a figure is one plot module in ``robustkit/figures`` that registers it next to its plot
function with one call, ``DECLARED = figures.register_figure(figures.Figure("name", "help",
"analysis", ":plot_function", ..., module=__name__))``, and its line in :data:`BUILTIN` (the
module of each figure, which importing this package imports: plot modules import matplotlib
inside their functions, so this stays light); :func:`register_module` adds one from a module
outside the package.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from robustkit.analysis import registry
from robustkit.analysis.registry import Analysis, call, load
from robustkit.analysis.reuse import SAMPLE_SIZES
from robustkit.errors import RobustkitError
from robustkit.params import Param, resolve
from robustkit.progress import doing


class FigureError(RobustkitError):
    """An unknown figure or parameter, or a parameter value of the wrong type."""


class NothingToDraw(FigureError, ValueError):
    """The data a plot was given holds nothing it can draw (no runs, an empty frame, no rows of
    the metric asked for): a fact about the store or the selection, said in one line by the CLI.
    A ValueError too, as a plot function's bad input."""


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
        The registered analysis whose frame it draws (:func:`robustkit.analysis.registry.get`).
    plot : str
        ``"module:function"``, called as ``function(data, **params it names)`` (or ``**data``
        for a dict); returns a matplotlib Figure.
    params : tuple of Param
        The figure's own parameters (the view's and the plot's), with defaults.
    view : str, optional
        ``"module:function"``, one of its analysis's declared ``views``: ``function(frame, **params
        it names)`` (``store`` and ``select`` too, where it names them) -> the data the plot draws.
    defaults : dict
        The figure's defaults for some of its analysis's parameters.
    score_axis : bool
        The figure shows scores: collapsed and diverged runs are marked and left out of
        statistics unless ``include_failed`` (a parameter every such figure has).
    module : str, optional
        The declaring plot module (``__name__``): ``":name"`` references are its own.
    order : int
        Where the verb is listed among the others (ascending; ties by name).
    """

    name: str
    help: str
    analysis: str
    plot: str
    params: tuple[Param, ...] = ()
    view: str | None = None
    defaults: dict = field(default_factory=dict)
    score_axis: bool = False
    module: str | None = None
    order: int = 1000

    def __post_init__(self) -> None:
        # ":name" -> "<module>:name", as an analysis's declaration reads (robustkit.analysis.declare)
        for attribute in ("plot", "view"):
            path = getattr(self, attribute)
            if path is not None and path.startswith(":"):
                if self.module is None:
                    raise FigureError(f"figure {self.name!r} names {path!r} but declares no module=__name__")
                object.__setattr__(self, attribute, f"{self.module}{path}")

    def source(self) -> Analysis:
        """The registered analysis the figure draws."""
        return registry.get(self.analysis)

    @property
    def analysis_parameters(self) -> tuple[Param, ...]:
        """The analysis's parameters, with this figure's defaults."""
        return tuple(
            replace(p, default=self.defaults[p.name]) if p.name in self.defaults else p for p in self.source().params
        )

    @property
    def parameters(self) -> tuple[Param, ...]:
        """Every parameter: the analysis's, the figure's own, ``include_failed`` last for score figures."""
        extra = (INCLUDE_FAILED,) if self.score_axis else ()
        return (*self.analysis_parameters, *self.params, *extra)

    def resolve(self, **given: Any) -> dict[str, Any]:
        """Every parameter's value: ``given`` (checked and typed) over the defaults.

        Raises
        ------
        FigureError
            An unknown parameter (the known ones are listed) or a value of the wrong type.
        """
        return resolve(self.parameters, given, f"figure {self.name!r}", FigureError)

    def analysis_values(self, values: dict[str, Any]) -> dict[str, Any]:
        """The analysis's parameters out of resolved figure ``values``: what its cache entry is keyed by."""
        return {p.name: values[p.name] for p in self.source().params}

    @property
    def options(self) -> tuple[Param, ...]:
        """Its analysis's run-time options (device, threads, ...): how the data is computed, not
        what it is; never part of a cache key, and not figure parameters."""
        return self.source().options

    def _frame(
        self,
        store: str | Path,
        select,
        params: dict[str, Any],
        device: str | None,
        progress: bool = True,
        any_size: bool = False,
    ) -> tuple[dict[str, Any], Any]:
        """The resolved figure parameters of ``params`` and the analysis's frame, computed with
        the analysis options among ``params`` and ``device`` (where the analysis runs a model);
        ``any_size``: the sample sizes not in ``params`` read each run's largest cached frame
        (:meth:`_reused`)."""
        names = {p.name for p in self.options}
        options = {k: v for k, v in params.items() if k in names}
        if device is not None and "device" in names:
            options["device"] = device
        given = {k: v for k, v in params.items() if k not in names}
        values = self.resolve(**given)
        free = [p.name for p in self.source().params if p.name in SAMPLE_SIZES and p.name not in given]
        if not free or not any_size:
            return values, self.source().run(
                store, select, **self.analysis_values(values), **options, progress=progress
            )
        return self._reused(store, select, values, free, options, progress)

    def _reused(
        self, store: str | Path, select, values: dict[str, Any], free: list[str], options: dict, progress: bool
    ) -> tuple[dict[str, Any], Any]:
        """:meth:`_frame` where the sample sizes ``free`` were not given: each run's cached frame
        at its largest sample size that matches the other parameters, said in one line
        (:func:`robustkit.analysis.reuse.plan`); the runs with none are computed at ``values``."""
        import pandas as pd

        from robustkit.analysis import reuse
        from robustkit.analysis.select import select_runs

        runs = select_runs(store, select)
        flags = {p.name: p.flag for p in self.source().params}
        plan = reuse.plan(
            self.analysis, store, dict(zip(runs["run_id"], runs["path"])), self.analysis_values(values), free, flags
        )
        if plan.message:
            logging.getLogger("robustkit.analysis.reuse").info(plan.message)
        frames, provenance = [], {}
        for group_values, run_ids in plan.groups:
            chosen = select if run_ids is None else {"run_id": run_ids}
            frame = self.source().run(store, chosen, **group_values, **options, progress=progress)
            provenance.update(frame.attrs.get("provenance", {}))
            frames.append(frame)
        if len(frames) == 1:
            return {**values, **plan.groups[0][0]}, frames[0]
        order = {run_id: i for i, run_id in enumerate(runs["run_id"])}
        frame = pd.concat([f for f in frames if len(f)] or frames, ignore_index=True)
        frame = frame.sort_values("run_id", key=lambda ids: ids.map(order), kind="stable", ignore_index=True)
        frame.attrs["provenance"] = provenance
        # a caption that names the sample size gives the largest drawn (the runs say theirs in the line above)
        largest = max(plan.groups, key=lambda group: tuple(group[0][k] for k in free))[0]
        return {**values, **{k: largest[k] for k in free}}, frame

    def data(
        self,
        store: str | Path,
        select: dict | list[str] | None = None,
        progress: bool = True,
        device: str | None = None,
        any_size: bool = False,
        **params: Any,
    ) -> Any:
        """The figure's data: its analysis's frame of the selected runs of ``store``.

        ``device`` (``cpu``, ``cuda``; default: the GPU if there is one) is where an analysis that
        runs a model runs it; the others load none and ignore it. ``params`` may hold the
        analysis's other options (:attr:`options`). ``any_size``: a sample size (``n``,
        ``tokens``, ...; :data:`robustkit.analysis.reuse.SAMPLE_SIZES`) not in ``params`` is each
        run's largest cached one, said in one line (``robustkit plot`` does this), instead of
        the default; off by default, so that a figure and a claim judged at the defaults read
        the same frame.
        """
        return self._frame(store, select, params, device, progress, any_size)[1]

    def draw(
        self,
        store: str | Path,
        select: dict | list[str] | None = None,
        subtitle: str | None = None,
        footer: str | None = None,
        device: str | None = None,
        ax=None,
        fig=None,
        any_size: bool = False,
        **params: Any,
    ):
        """The figure (a matplotlib Figure) of the selected runs of ``store``.

        ``subtitle`` is a second title line (e.g. the model and task used), ``footer`` text
        under the figure (e.g. the paper's claim and its verdict); ``device`` and the analysis's
        options and ``any_size`` as in :meth:`data`.

        ``ax`` (a matplotlib Axes) draws a one-panel figure into it, seaborn's convention, and
        returns the Axes' figure; ``fig`` (a matplotlib Figure or SubFigure, e.g. one of
        ``plt.figure().subfigures(1, 2)``) lays any figure's panels out in it and returns it. The
        caller's canvas keeps its size: the title goes on the Axes (unless the panel has its
        own) or the SubFigure, the legend beside the panel, and the notes (tests, what bars and
        bands are), ``subtitle`` and ``footer`` only on the figure's own canvas
        (:mod:`robustkit.figures.canvas`).

        Raises
        ------
        FigureError
            ``ax`` for a figure of several panels (use ``fig``), both ``ax`` and ``fig``, or
            ``subtitle``/``footer`` with either.
        """
        from robustkit.figures import canvas
        from robustkit.figures.style import decorate

        target = ax if ax is not None else fig
        if ax is not None and fig is not None:
            raise FigureError(f"figure {self.name!r}: pass ax= (one panel) or fig= (any panels), not both")
        if target is not None and (subtitle or footer):
            raise FigureError(
                f"figure {self.name!r}: subtitle and footer go on the figure's own canvas, not with ax= or fig="
            )
        try:
            canvas.check(target)  # before the analysis runs, which may take minutes
        except canvas.CanvasError as error:
            raise FigureError(f"figure {self.name!r}: {error}") from None
        doing(f"the {self.analysis} frame")  # what a heartbeat line names (robustkit plot)
        values, frame = self._frame(store, select, params, device, any_size=any_size)
        doing("drawing")
        result = self.shown(frame, store, select, **values)
        plot = load(self.plot)
        try:
            with canvas.into(target):
                drawn = (
                    call(plot, (), {**values, **result}) if isinstance(result, dict) else call(plot, (result,), values)
                )
        except canvas.CanvasError as error:
            raise FigureError(f"figure {self.name!r} {error}") from None
        return drawn if target is not None else decorate(drawn, subtitle=subtitle, footer=footer)

    def shown(
        self, data: Any, store: str | Path | None = None, select: dict | list[str] | None = None, **params: Any
    ) -> Any:
        """What the plot draws from ``data`` (the analysis's frame, :meth:`data`): the view's
        dict of the plot's keyword arguments, or ``data`` itself for a figure without a view.
        ``params`` are the figure's (unknown ones raise, missing ones default)."""
        if self.view is None:
            return data
        return call(load(self.view), (data,), {**self.resolve(**params), "store": store, "select": select})


INCLUDE_FAILED = Param(
    "include_failed",
    False,
    "keep collapsed and diverged runs (robustkit.store.collapse) in boxes, means, error bars and tests; they are "
    "marked either way; default: left out",
)

FIGURES: dict[str, Figure] = {}


def register(figure: Figure) -> Figure:
    """Add ``figure`` to the registry (its name must be new, its own parameters not its analysis's)."""
    if figure.name in FIGURES:
        raise FigureError(f"figure {figure.name!r} is registered twice")
    analysis = {p.name for p in figure.source().params}
    twice = sorted(analysis.intersection(p.name for p in figure.params)) + sorted(set(figure.defaults) - analysis)
    if twice:
        raise FigureError(
            f"figure {figure.name!r}: {twice} are not its own parameters (declare an analysis's parameters in the "
            "analysis; defaults may only change those)"
        )
    if figure.view is not None and figure.view not in figure.source().views:
        raise FigureError(
            f"figure {figure.name!r}: its view {figure.view!r} is not one its analysis {figure.analysis!r} declares "
            "(declare it in the analysis's views, next to its computation)"
        )
    FIGURES[figure.name] = figure
    listed = sorted(FIGURES.values(), key=lambda f: (f.order, f.name))
    FIGURES.clear()  # in place: modules hold this very dict
    FIGURES.update((f.name, f) for f in listed)
    return figure


def register_figure(figure: Figure) -> Figure:
    """Register ``figure`` (called once per figure, at module level, by the plot module that
    draws it: ``DECLARED = figures.register_figure(figures.Figure(...))``) and return it; its
    module imported again (a reload) replaces it."""
    known = FIGURES.get(figure.name)
    if known is not None and known.module == figure.module and figure.module is not None:
        del FIGURES[figure.name]
    return register(figure)


def register_module(path: str | Path, name: str | None = None) -> tuple[Figure, ...]:
    """Import the plot module ``path`` (outside the package), whose ``register_figure`` calls
    register its figure(s), and return them.

    Raises
    ------
    FigureError
        The module registers no figure.
    """
    module = registry.import_module(path, name).__name__
    registered = tuple(f for f in FIGURES.values() if f.module == module)
    if not registered:
        raise FigureError(
            f"{path} registers no figure: call figures.register_figure(figures.Figure(..., module=__name__)) in it"
        )
    return registered


def get(name: str) -> Figure:
    """The registered figure ``name``."""
    if name not in FIGURES:
        raise FigureError(f"unknown figure {name!r}; known figures: {', '.join(FIGURES)}")
    return FIGURES[name]


def data(
    name: str, store: str | Path, select: dict | list[str] | None = None, device: str | None = None, **params: Any
) -> Any:
    """The data behind figure ``name`` (see :meth:`Figure.data`)."""
    return get(name).data(store, select, device=device, **params)


def draw(
    name: str,
    store: str | Path,
    select: dict | list[str] | None = None,
    subtitle: str | None = None,
    footer: str | None = None,
    device: str | None = None,
    ax=None,
    fig=None,
    **params: Any,
):
    """Figure ``name`` of the selected runs of ``store``, on its own canvas or into the caller's
    ``ax`` (one panel) or ``fig`` (see :meth:`Figure.draw`)."""
    return get(name).draw(store, select, subtitle=subtitle, footer=footer, device=device, ax=ax, fig=fig, **params)


# ---------------------------------------------------------------------------------------------
# parameters several figures share

ASO = Param(
    "aso",
    False,
    "add ASO's epsilon_min of each method over the other (deepsig, Dror et al. 2019) to the caption, where the figure "
    "compares two methods",
)
CONVENTION = Param(
    "convention",
    "openattack",
    "openattack: prediction flips, misclassified inputs included; gold: only correctly classified inputs",
    choices=("openattack", "gold"),
)
SHOWN_SPLIT = Param(
    "split",
    "validation",
    "split whose metric is shown (Houlsby et al. report validation); the best learning rate per point is always "
    "selected on validation",
    choices=("validation", "test"),
)

# name -> the plot module that registers it, for every figure of robustkit: written by `python
# tools/docs_tables.py`, which imports every module of the package
# (a test compares; a new module is
# listed once it is run).
BUILTIN: dict[str, str] = {
    "ablation": "robustkit.figures.ablation",
    "attack-boxes": "robustkit.figures.attack",
    "attack-by-attacker": "robustkit.figures.attack",
    "attack-vs-tsp": "robustkit.figures.attack",
    "connectivity": "robustkit.figures.connectivity",
    "curvature": "robustkit.figures.curvature",
    "curve-connectivity": "robustkit.figures.curve_connectivity",
    "curves": "robustkit.figures.curves",
    "curves-by-tsp": "robustkit.figures.curves",
    "mean-best": "robustkit.figures.curves",
    "forgetting": "robustkit.figures.forgetting",
    "gradnorm": "robustkit.figures.gradnorm",
    "init-std": "robustkit.figures.init_std",
    "intruders": "robustkit.figures.intruders",
    "landscape": "robustkit.figures.landscape",
    "lora-sharpness": "robustkit.figures.lora_space",
    "rsa": "robustkit.figures.similarity",
    "similarity-ci": "robustkit.figures.similarity_ci",
    "box-lr": "robustkit.figures.stability",
    "box-seeds": "robustkit.figures.stability",
    "box-tsp": "robustkit.figures.stability",
    "box-tsp-epochs": "robustkit.figures.stability",
    "train-size": "robustkit.figures.stability",
    "stability-length": "robustkit.figures.stability_length",
    "surface": "robustkit.figures.surface",
    "table": "robustkit.figures.tables",
    "tradeoff": "robustkit.figures.tradeoff",
    "tradeoff-aggregate": "robustkit.figures.tradeoff",
    "tuning-curves": "robustkit.figures.tuning",
}

for _module in dict.fromkeys(BUILTIN.values()):  # each plot module's register_figure calls register its figures
    importlib.import_module(_module)
