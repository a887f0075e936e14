"""The analysis registry: every analysis robustkit knows, found where it is declared.

An analysis is one module of ``robustkit/analysis/`` that registers itself with one call,
``DECLARED = register_analysis(Analysis(...))``, stating next to its computation its parameters,
options, summary and statistics (:mod:`robustkit.analysis.declare`); attacks
(``@register_attack``) and figures (``figures.register_figure(Figure(...))``) register the same
way. :data:`BUILTIN` names the module of each of robustkit's own analyses: importing this
registry imports those modules, which are light (heavy libraries are imported inside their
functions), so ``--help`` stays fast, and none imports another registering module at its top
(each imports on its own: ``tests/test_import_graph.py``); :func:`register_module` adds an
analysis of a module outside the package. Each :class:`Analysis` has a ``compute``
(``function(store, select, **params, **options)``, cached per run by
:mod:`robustkit.analysis.each_run`), typed parameters, ``options`` that never enter a cache
key, a summary and per-run statistics (:class:`Statistic`)::

    from robustkit.analysis.registry import get
    frame = get("rsa").run("runs/demo", ["task=rt"], tokens=2000)
    slopes = get("gradnorm").statistic("slope", get("gradnorm").run("runs/demo"), layer="top")

The ``robustkit analyze`` verbs, the figures and the claims read these entries. What each part
is and who reads it: ``docs/analyses.md``, "robustkit/analysis/registry.py"; adding an analysis:
CONTRIBUTING.md.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from robustkit.user_modules import import_file

if TYPE_CHECKING:  # annotations only: the registry is read by --help
    import pandas as pd


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
# registration: each analysis's module calls register_analysis once; BUILTIN says which modules

# name -> the module that registers it, for every analysis of robustkit: written by `python
# tools/docs_tables.py`, which imports every module of the package
# (a test compares; a new module is
# listed once it is run).
BUILTIN: dict[str, str] = {
    "ablation": "robustkit.analysis.ablation",
    "attack": "robustkit.analysis.attack",
    "connectivity": "robustkit.analysis.connectivity",
    "curvature": "robustkit.analysis.curvature",
    "curve-connectivity": "robustkit.analysis.curve_connectivity",
    "curves": "robustkit.analysis.curves",
    "forgetting": "robustkit.analysis.forgetting",
    "gradnorm": "robustkit.analysis.gradnorm",
    "intruders": "robustkit.analysis.intruders",
    "landscape": "robustkit.analysis.landscape",
    "lora-sharpness": "robustkit.analysis.lora_space",
    "epoch-scores": "robustkit.analysis.scores",
    "scores": "robustkit.analysis.scores",
    "rsa": "robustkit.analysis.similarity",
    "similarity-ci": "robustkit.analysis.similarity_ci",
    "surface": "robustkit.analysis.surface",
    "tradeoff": "robustkit.analysis.tradeoff",
    "tuning": "robustkit.analysis.tuning",
}


def register_analysis(analysis: Analysis) -> Analysis:
    """Register ``analysis`` (called once per analysis, at module level, by the module that
    declares and computes it: ``DECLARED = register_analysis(Analysis(...))``) and return it.

    Raises
    ------
    AnalysisError
        Another module registered an analysis of that name already.
    """
    known = ANALYSES.get(analysis.name)
    if known is not None and known.module == analysis.module and analysis.module is not None:
        del ANALYSES[analysis.name]  # its module imported again (a reload): the newer declaration
    return register(analysis)


def import_module(path: str | Path, name: str | None = None):
    """Import the module file ``path`` (outside robustkit, e.g. a project's own analysis) as
    ``name`` (default: its file name), so that its functions load as robustkit's do."""
    path = Path(path)
    return import_file(path, name or path.stem)


def register_module(path: str | Path, name: str | None = None) -> Analysis:
    """Import the analysis module ``path`` (outside the package), whose ``register_analysis``
    call registers its analysis, and return that analysis.

    Raises
    ------
    AnalysisError
        The module registers no analysis.
    """
    module = import_module(path, name).__name__
    registered = [a for a in ANALYSES.values() if a.module == module]
    if not registered:
        raise AnalysisError(
            f"{path} registers no analysis: call register_analysis(Analysis(..., module=__name__)) in it"
        )
    return registered[0]


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
    analysis, statistic = statistic_of(reference)
    names = {p.name for p in (*analysis.params, *analysis.options)}
    if device is not None and "device" in names:
        params = {**params, "device": device}
    frame = analysis.run(store, select, progress=False, **{k: v for k, v in params.items() if k in names})
    own = {k: v for k, v in params.items() if k not in names}
    # by its path, as a declaration names a function: the scores analysis registers itself here
    with_outcome = load("robustkit.analysis.scores:with_outcome")
    return with_outcome(analysis.statistic(statistic.name, frame, store, **own), store)


for _module in dict.fromkeys(BUILTIN.values()):  # each module's register_analysis call registers it
    importlib.import_module(_module)
