"""The analysis registry: every analysis robustkit knows, found where it is declared.

An analysis is one module of ``robustkit/analysis/`` whose ``DECLARED = Analysis(...)`` states,
next to its computation, its parameters, options, summary and statistics
(:mod:`robustkit.analysis.declare`). The registry discovers those declarations by reading the
modules' source (:func:`discover`), without importing them; :func:`register_module` adds an
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

import ast
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
    return import_file(path, name or path.stem)


def register_module(path: str | Path, name: str | None = None) -> Analysis:
    """Import the analysis module ``path`` (outside the package) and register its ``DECLARED``."""
    declared = getattr(import_module(path, name), DECLARED, None)
    if not isinstance(declared, Analysis):
        raise AnalysisError(f"{path} declares no analysis ({DECLARED} = Analysis(...))")
    return register(declared)


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
