"""Plots only draw (issue "One home per analysis", item 2): a module of robustkit/figures is
checked, from its source (``ast``), against one rule on what it may import (the figure rule
"plot only draws" of :mod:`robustkit.checks.figure`; ``tests/test_plots_only_draw.py`` tests the rule).

A plot receives finished DataFrames (statistics, tests, selected points, caption text) from an
analysis or a figure's view (:mod:`robustkit.figures`) and draws them; data flows one way,
from analysis to figure. So a plot module may import

- the standard library, ``matplotlib``, ``seaborn``, ``numpy``, ``pandas`` (drawing and
  layout: positions, labels, scales);
- ``robustkit.figures`` and its modules;
- from :mod:`robustkit.store.collapse` only what reads the ``outcome`` column or names it
  (:data:`COLLAPSE_NAMES`: the outcome names, ``kept``, the labels), never what computes an
  outcome or a count (``mark``, ``marked``, ``outcome``, ``failure_rates``, ...);
- from :mod:`robustkit.methods` the methods' names, labels and colours, and an AdapterHub
  config's short label (:data:`METHOD_NAMES`);
- from :mod:`robustkit.errors` its exceptions;
- from any ``robustkit.analysis`` module its constants only (UPPER_CASE names: column names,
  symbols), and the layout helpers of :data:`LAYOUT_HELPERS`;
- the names a figure is declared with (:data:`DECLARING`): a plot module declares its figures
  next to its plot functions (issue #40, one place to extend), ``DECLARED =
  figures.register_figure(figures.Figure(...))`` with its own ``Param`` declarations and the
  figures' shared parameters;
- from :mod:`robustkit.attacks.registry` what an attack declares about itself (its label, the
  unit of its success rate: :data:`ATTACK_NAMES`), read without importing the attack;

and nothing else: no scipy, deepsig, opda, statsmodels, sklearn or torch, no computing
function of ``robustkit.analysis`` (stability, dominance, tradeoff's selection, tuning,
scores, ...), nothing of :mod:`robustkit.figures` that runs an analysis (``draw``, ``data``),
no attack built or run, whether imported by name or reached as ``module.function``, at module
level or inside a function.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PLOTS = Path(__file__).resolve().parents[1] / "figures"  # the plot modules, beside the registry
DRAWING = {"matplotlib", "seaborn", "numpy", "pandas"}
COLLAPSE_NAMES = {
    *("OK", "NOT_LEARNED", "COLLAPSED", "UNDECIDED", "DIVERGED", "OUTCOMES", "FAILED_WORDS", "kept"),
    *("label", "counts_label", "outcomes_label"),  # text of counts already made, or of an outcome column
}
METHOD_NAMES = {"method_colours", "method_labels"}
# An AdapterHub config's short label: text for a legend, from the config's JSON alone.
CONFIG_LABEL = ("robustkit.methods.adapterhub", "short_config")
# Which run settings vary inside a group: it decides panels and rows, computes no statistic.
LAYOUT_HELPERS = {"robustkit.analysis.pooling": {"mixed_settings"}}
# A figure's registration (issue #58: a plot module registers its figures, DECLARED =
# figures.register_figure(figures.Figure(...))): the declaration types, the registration call and
# the shared parameters (the modules' constants, figures.ASO, declare's MATRICES) are names, not
# computation. figures.draw and figures.data run an analysis: still refused, as is every other
# function of these modules.
DECLARING = {
    "robustkit.figures": {"Figure", "register_figure"},
    "robustkit.params": {"Param"},
    "robustkit.analysis.declare": {"Param", "checkpoint_param"},
}
# What a plot raises when its data hold nothing to draw.
FIGURE_ERRORS = {"NothingToDraw", "FigureError"}
# What an attack declares about itself, read from the attack registry without importing the
# attack (its label, the unit of its success rate); building, preparing or running one
# (robustkit.attacks.create, prepare, registry.load_class) stays refused.
ATTACK_REGISTRY = "robustkit.attacks.registry"
ATTACK_NAMES = {"ATTACKS", "get", "label_of", "success_metric", "success_metrics"}


def _constant(name: str) -> bool:
    return name.isupper()  # POINT_COLUMN, _KEYS: a constant by the project's naming


def allowed(module: str, name: str | None) -> bool:
    """May a plot import ``name`` from ``module`` (``name`` None: the module itself)?"""
    top = module.split(".")[0]
    if module == "__future__" or (top != "robustkit" and (top in DRAWING or top in sys.stdlib_module_names)):
        return True
    if module.startswith("robustkit.figures."):  # another plot module (robustkit.figures is the registry)
        return True
    if name is None:  # a robustkit module bound as a whole: its attributes are checked where used
        return module in (
            "robustkit.figures",
            "robustkit.store.collapse",
            "robustkit.methods",
            "robustkit.methods.registry",
            "robustkit.errors",
            *DECLARING,
            ATTACK_REGISTRY,
        ) or module.startswith("robustkit.analysis.")
    if module in DECLARING and name in DECLARING[module]:
        return True
    if module == ATTACK_REGISTRY:
        return name in ATTACK_NAMES or _constant(name)
    if module == "robustkit.figures" and name in FIGURE_ERRORS:
        return True
    if module in ("robustkit.figures", "robustkit.params"):
        return _constant(name)
    if module == "robustkit.store.collapse":
        return name in COLLAPSE_NAMES or _constant(name)
    if module in ("robustkit.methods", "robustkit.methods.registry"):
        return name in METHOD_NAMES or _constant(name)
    if (module, name) == CONFIG_LABEL:
        return True
    if module == "robustkit.errors":
        return True
    if module == "robustkit.analysis" or module.startswith("robustkit.analysis."):
        return _constant(name) or name in LAYOUT_HELPERS.get(module, set())
    return False


def violations(source: str, module: str = "robustkit.figures.example") -> list[str]:
    """What ``source`` (a module of robustkit/figures named ``module``) imports against the rule,
    as ``"line N: text"``; empty when it only draws."""
    tree = ast.parse(source)
    found, bound = [], {}  # bound: local name -> robustkit module bound to it
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not allowed(alias.name, None):
                    found.append(f"line {node.lineno}: import {alias.name}")
                elif alias.name.startswith("robustkit."):
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:  # import robustkit.x.y binds robustkit: attributes are reached through it
                        bound["robustkit"] = "robustkit"
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the plots package
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], *([base] if base else [])]
                )
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                if base.startswith("robustkit") and _is_module(candidate):
                    if allowed(candidate, None):
                        bound[alias.asname or alias.name] = candidate
                        continue
                    found.append(f"line {node.lineno}: from {base} import {alias.name}")
                elif not allowed(base, alias.name):
                    found.append(f"line {node.lineno}: from {base} import {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            module_name = bound[node.value.id]
            if module_name == "robustkit":
                candidate = f"robustkit.{node.attr}"
                if not (_is_module(candidate) and allowed(candidate, None)) and not allowed("robustkit", node.attr):
                    found.append(f"line {node.lineno}: robustkit.{node.attr}")
            elif not _is_module(f"{module_name}.{node.attr}") and not allowed(module_name, node.attr):
                found.append(f"line {node.lineno}: {node.value.id}.{node.attr} ({module_name})")
    return sorted(set(found), key=lambda text: int(text.split(":")[0].split()[1]))


def _is_module(dotted: str) -> bool:
    """Is ``dotted`` a module or package of robustkit (by its source file)?"""
    parts = dotted.split(".")
    if parts[0] != "robustkit":
        return False
    path = PLOTS.parents[1].joinpath(*parts)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def plot_modules() -> list[str]:
    """Every module of robustkit/figures but the registry (plots and their helpers), dotted."""
    return sorted(f"robustkit.figures.{p.stem}" for p in PLOTS.glob("*.py") if p.name != "__init__.py")


def module_violations(module: str) -> list[str]:
    """:func:`violations` of the module file of ``module`` (dotted)."""
    path = PLOTS.parents[1].joinpath(*module.split(".")).with_suffix(".py")
    return violations(path.read_text(encoding="utf-8"), module)
