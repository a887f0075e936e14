"""The rules a figure meets (CONTRIBUTING.md, "Add an analysis, its statistic, view and figure")."""

from __future__ import annotations

from robustkit.checks import Rule, source
from robustkit.checks.drawing import module_violations
from robustkit.checks.parameters import restated_defaults, second_defaults, untyped_nones

# What makes a canvas of its own, so that ``figures.draw(..., ax=)`` cannot draw into the caller's
# Axes: robustkit.figures.canvas's subplots / new_figure make one only where no Axes is given.
OWN_CANVAS = {"plt.subplots", "plt.figure", "pyplot.subplots", "pyplot.figure", "matplotlib.pyplot.subplots"}


def resolve(name: str, recipe_dir=None):
    from robustkit import figures

    return figures.get(name), {}


def _analysis_and_view(figure, context: dict) -> list[str]:
    from robustkit.analysis import registry

    if figure.analysis not in registry.ANALYSES:
        return [f"it draws analysis {figure.analysis!r}, which is not registered"]
    analysis = registry.ANALYSES[figure.analysis]
    found = [] if source.defines(figure.plot) else [f"its plot {figure.plot} is not defined there"]
    if figure.view is not None and figure.view not in analysis.views:
        found.append(f"its view {figure.view} is not one its analysis {analysis.name!r} declares")
    return found


def _own_parameters(figure, context: dict) -> list[str]:
    analysis = figure.source()
    shared = {p.name for p in (*analysis.params, *analysis.options)}
    found = [f"it declares its analysis's {p.name!r} again" for p in figure.params if p.name in shared]
    found += [f"defaults= names {n!r}, not a parameter of its analysis" for n in figure.defaults if n not in shared]
    where = f"figure {figure.name}"
    for path in filter(None, (figure.view, figure.plot)):
        signature = source.signature(path)
        found += second_defaults(figure.analysis_parameters, signature, path)
    found += restated_defaults(figure.params, where)
    found += untyped_nones(figure.params, source.signature(figure.plot), where)
    return found


def _only_draws(figure, context: dict) -> list[str]:
    module = figure.plot.partition(":")[0]
    if not module.startswith("robustkit.figures."):
        return []  # a project's own figure: its imports are its own business
    return [f"{module} {line}" for line in module_violations(module)]


def _into_axes(figure, context: dict) -> list[str]:
    path = source.path_of(figure.plot.partition(":")[0])
    called = source.calls(path) if path else set()
    if "canvas.current" in called:  # it asks for the caller's Axes first, and makes its own only without one
        return []
    made = sorted(OWN_CANVAS & called)
    return [f"{figure.plot.partition(':')[0]} calls {call}" for call in made]


RULES = (
    Rule(
        "analysis and view",
        "name a registered analysis, one of the views it declares, and a plot function of the declaring module",
        _analysis_and_view,
    ),
    Rule(
        "parameter help",
        "declare only the view's and the plot's own Params (defaults= changes an analysis's), say what each does, "
        "not its default, and give the plot and view no second default",
        _own_parameters,
    ),
    Rule(
        "plot only draws",
        "compute in the analysis or its view; a plot module imports drawing libraries and names only "
        "(tests/test_plots_only_draw.py lists what it may)",
        _only_draws,
    ),
    Rule(
        "into the user's Axes",
        "make the canvas with robustkit.figures.canvas.subplots (or new_figure), never plt.subplots: "
        "figures.draw(..., ax=) then draws into the caller's Axes",
        _into_axes,
    ),
)
