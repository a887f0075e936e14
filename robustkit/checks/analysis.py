"""The rules an analysis meets (CONTRIBUTING.md, "Add an analysis, its statistic, view and figure")."""

from __future__ import annotations

import inspect

from robustkit.analysis.declare import Analysis
from robustkit.checks import Rule, source
from robustkit.checks.defaults import duplicated_defaults
from robustkit.checks.parameters import restated_defaults, second_defaults, untyped_nones

# The functions that load a model's weights: an analysis whose module (or a robustkit.analysis
# module it imports) names one of them runs a model, and must take a device.
LOADERS = {"load_run", "load_base", "load_run_model", "start_and_end"}
PER_RUN_LOOPS = {"each_run", "each_pair"}
UNITS = ("run", "disjoint pair")


def resolve(name: str, recipe_dir=None) -> tuple[Analysis, dict]:
    from robustkit.analysis.registry import get

    return get(name), {}


def module_of(analysis: Analysis) -> str:
    return analysis.compute.partition(":")[0]


def loads_a_model(analysis: Analysis) -> bool:
    """Does its computation's module, or a robustkit.analysis module it imports, load a model?"""
    return bool(source.uses_transitively(module_of(analysis), LOADERS, "robustkit.analysis"))


def _signature(path: str) -> dict[str, inspect.Parameter]:
    return source.signature(path)


def _computation(analysis: Analysis, context: dict) -> list[str]:
    signature = _signature(analysis.compute)
    found = [] if list(signature)[:2] == ["store", "select"] else [f"{analysis.compute} takes {list(signature)[:2]}"]
    for param in analysis.params:
        given = signature.get(param.name)
        if given is None:
            found.append(f"{analysis.compute} takes no {param.name!r}")
        elif given.kind is not inspect.Parameter.KEYWORD_ONLY or given.default is not inspect.Parameter.empty:
            found.append(f"{analysis.compute} takes {param.name!r} positionally or with a default of its own")
    found += [f"{analysis.compute} takes no option {p.name!r}" for p in analysis.options if p.name not in signature]
    return found


def _statistics(analysis: Analysis, context: dict) -> list[str]:
    found = []
    shared = {p.name for p in analysis.params}
    for statistic in analysis.statistics:
        where = f"statistic {statistic.name!r}"
        taken = _signature(statistic.function)
        found += [f"{where} redeclares the analysis's {p.name!r}" for p in statistic.params if p.name in shared]
        for param in statistic.params:
            if param.name not in taken:
                found.append(f"{where}: {statistic.function} takes no {param.name!r}")
            elif taken[param.name].default is not inspect.Parameter.empty:
                found.append(f"{where}: {statistic.function} gives {param.name!r} a default of its own")
        if statistic.unit not in UNITS:
            found.append(f"{where} has unit {statistic.unit!r}")
        if statistic.unit == "disjoint pair" and not statistic.independent:
            found.append(f"{where} counts disjoint pairs but says its observations are not independent")
    return found


def _functions_load(analysis: Analysis, context: dict) -> list[str]:
    found = []
    for path in filter(None, (analysis.summary, *analysis.views)):
        if not source.defines(path):
            found.append(f"{path}: its module defines no such function")
    return found


def _device(analysis: Analysis, context: dict) -> list[str]:
    runs = loads_a_model(analysis)
    declared = any(p.name == "device" for p in analysis.options)
    takes = "device" in _signature(analysis.compute)
    if runs == declared == takes:
        return []
    said = "loads a model" if runs else "loads no model"
    return [
        f"it {said}, {'declares' if declared else 'lacks'} DEVICE, its function {'takes' if takes else 'lacks'} device"
    ]


def _per_run_loop(analysis: Analysis, context: dict) -> list[str]:
    if not loads_a_model(analysis):
        return []
    path = source.path_of(module_of(analysis))
    used = source.names(path)
    found = [] if PER_RUN_LOOPS & used else ["its module calls neither each_run nor each_pair"]
    found += [] if "computed_on" in used else ["it records no provenance=computed_on(device)"]
    found += [] if "progress" in _signature(analysis.compute) else ["its function takes no progress"]
    return found


def _progress_bar(analysis: Analysis, context: dict) -> list[str]:
    if not loads_a_model(analysis):
        return []
    imported = source.imports(source.path_of(module_of(analysis)))
    ours = {("robustkit.progress", "bar"), ("robustkit", "progress"), ("robustkit.progress", None)} & imported
    found = [] if ours else ["its module does not import robustkit.progress's bar"]
    found += [f"its module imports {m}" for m, _ in sorted(imported, key=str) if m.split(".")[0] == "tqdm"]
    return found


def _parameters(analysis: Analysis, context: dict) -> list[str]:
    compute = _signature(analysis.compute)
    found = restated_defaults(analysis.params, analysis.name) + untyped_nones(analysis.params, compute, analysis.name)
    found += second_defaults(analysis.params, compute, analysis.compute)
    # below the entry point too: no function of its module gives a parameter the declared default again
    declared: dict[str, set] = {}
    for param in (*analysis.params, *analysis.options):
        if isinstance(param.default, (int, float, str)):
            declared.setdefault(param.name, set()).add(param.default)
    path = source.path_of(module_of(analysis))
    if path is not None:
        found += [f"{place} again" for place in duplicated_defaults([path], declared, declarations=False)]
    for statistic in analysis.statistics:
        where = f"{analysis.name}.{statistic.name}"
        function = _signature(statistic.function)
        found += restated_defaults(statistic.params, where) + untyped_nones(statistic.params, function, where)
        found += second_defaults(statistic.params, function, statistic.function)
    return found


RULES = (
    Rule(
        "computation",
        "define `def run(store, select=None, *, <each parameter>, <each option>)`: the declaration holds the defaults",
        _computation,
    ),
    Rule(
        "statistics",
        "a statistic declares only its own Params, its function takes them without defaults, and its unit is "
        "'run' or 'disjoint pair' (an independent pair of runs; pairs that share runs are shown, not tested)",
        _statistics,
    ),
    Rule(
        "summary and views", "name functions its module defines (':name' is the analysis's own module)", _functions_load
    ),
    Rule(
        "device",
        "an analysis that loads a model declares options=(DEVICE,) and its function takes device; one that does not, "
        "neither",
        _device,
    ),
    Rule(
        "per-run loop",
        "a model analysis computes through each_run (or each_pair) with provenance=computed_on(device) and takes "
        "progress",
        _per_run_loop,
    ),
    Rule(
        "progress bar",
        "draw progress with `from robustkit.progress import bar` (-q and logs silence it), never tqdm itself",
        _progress_bar,
    ),
    Rule(
        "parameter help",
        "say what a parameter does, not its default (--help prints it; words on it go in default_note); give kind= "
        "to a None default that is not a string; declare each default once",
        _parameters,
    ),
)
