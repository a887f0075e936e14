"""The analysis registry is the one home of an analysis: its parameters (each default declared
once), its statistics, its `analyze` verb; figures and claims read the same entry and the same
cache entry."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from robustkit import figures
from robustkit.analysis import registry
from robustkit.analysis.registry import ANALYSES, AnalysisError, load
from robustkit.checks.defaults import duplicated_defaults
from robustkit.params import Param

LIBRARY = Path(registry.__file__).resolve().parents[1]


def _declared_defaults() -> dict[str, set]:
    """Parameter name -> the defaults declared for it in the registries."""
    found: dict[str, set] = {}
    params = [p for a in ANALYSES.values() for p in (*a.params, *(q for s in a.statistics for q in s.params))]
    params += [p for f in figures.FIGURES.values() for p in f.params]
    for param in params:
        if param.default is not None and not isinstance(param.default, (bool, list)):
            found.setdefault(param.name, set()).add(param.default)
    return found


def repeated_in_signatures() -> list[str]:
    """``function name=value`` for each function a registry names (computation, statistic, view,
    plot) whose signature repeats the default of an analysis's or a statistic's parameter it
    receives (a figure's own, plot-only parameters are the figure's business)."""
    places = []

    def check(path: str, params) -> None:
        signature = inspect.signature(load(path)).parameters
        for param in params:
            given = signature.get(param.name)
            if (
                given is not None
                and given.default is not inspect.Parameter.empty
                and given.default == param.default
                and param.default is not None
            ):
                places.append(f"{path} {param.name}={param.default!r}")

    for analysis in ANALYSES.values():
        check(analysis.compute, analysis.params)
        for statistic in analysis.statistics:
            check(statistic.function, statistic.params)
    for figure in figures.FIGURES.values():
        for path in filter(None, (figure.view, figure.plot)):
            check(path, figure.analysis_parameters)
    return places


def test_every_default_of_an_analysis_parameter_appears_once():
    """A default lives in its registry entry only: no function the registries call repeats it in
    its signature, and the analyze, plot and claim paths (the CLI, figures, claims, reproduce) hold
    no second copy as a flag default or a Param (the issue found tokens=5000 in five places and
    the alpha grid in four)."""
    declared = _declared_defaults()
    assert declared["tokens"] == {5000} and "-2:2:20" in declared["alphas"]
    assert repeated_in_signatures() == []
    # the claim path (settle's and the simulation's seeds are their own, not an analysis's)
    claim_path = {"spec", "rules", "tally", "reproduce", "recipes"}
    claims = [path for path in sorted((LIBRARY / "claims").glob("*.py")) if path.stem in claim_path]
    paths = [*sorted((LIBRARY / "cli").glob("*.py")), *claims]
    assert duplicated_defaults(paths, declared) == []


def test_the_scan_finds_a_repeated_default(tmp_path):
    """The scan can fail: a signature, a flag and a Param that repeat a registered default."""
    (tmp_path / "bad.py").write_text(
        "def run(store, select=None, tokens=5000, seed=0):\n    pass\n"
        "parser.add_argument('--alphas', default='-2:2:20')\n"
        "X = Param('examples', 512, 'again')\n"
    )
    declared = {"tokens": {5000}, "alphas": {"-2:2:20"}, "examples": {512, 256}}
    places = duplicated_defaults([tmp_path / "bad.py"], declared)
    assert places == ["bad.py:1 tokens=5000", "bad.py:3 alphas='-2:2:20'", "bad.py:4 examples=512"]


def test_analyze_verbs_are_generated_from_the_registry():
    from robustkit.cli import build_parser

    parser = build_parser()
    analyze = parser._subparsers._group_actions[0].choices["analyze"]
    verbs = analyze._subparsers._group_actions[0].choices
    assert set(verbs) == set(ANALYSES)
    args = parser.parse_args(
        ["analyze", "landscape", "runs", "--alphas=-1:1:5", "--splits", "train,validation", "--device", "cpu"]
    )
    # parsed as the parameters declare them (a list parameter's comma list is a list)
    assert (args.alphas, args.splits, args.device) == ("-1:1:5", ["train", "validation"], "cpu")
    defaults = parser.parse_args(["analyze", "rsa", "runs"])
    assert defaults.tokens == registry.get("rsa").resolve()["tokens"]  # the flag's default is the registry's
    flags = parser.parse_args(["analyze", "curvature", "runs", "--no-block-eigenvalues"])
    assert flags.block_eigenvalues is False


def test_unknown_parameters_are_errors_everywhere(tiny_store):
    rsa = registry.get("rsa")
    with pytest.raises(
        AnalysisError, match=r"analysis 'rsa' has no parameter\(s\) \['tokenz'\]; it has: checkpoint, seed, tokens"
    ):
        rsa.run(tiny_store, tokenz=5)
    with pytest.raises(AnalysisError, match="unknown analysis 'rsb'; known analyses: scores"):
        registry.get("rsb")
    with pytest.raises(AnalysisError, match=r"statistic gradnorm.slope has no parameter\(s\) \['layers'\]"):
        registry.per_run("gradnorm.slope", tiny_store, layers="top")
    with pytest.raises(figures.FigureError, match=r"figure 'rsa' has no parameter\(s\) \['colour'\]"):
        figures.draw("rsa", tiny_store, colour="red")


def test_a_claim_and_its_figure_share_one_cache_entry(tiny_store, monkeypatch):
    """The claim reads the frame its figure drew: the figure's analysis parameters, so no second
    computation and no second cache file."""
    import matplotlib.pyplot as plt

    from robustkit.analysis import landscape
    from robustkit.verdicts import tally
    from robustkit.verdicts.recipes import Recipe
    from robustkit.verdicts.spec import Claim, ClaimError

    params = {"alphas": "-1:1:3", "checkpoint": "last"}
    calls = []
    original = landscape.landscape_run
    monkeypatch.setattr(landscape, "landscape_run", lambda *a, **k: calls.append(a) or original(*a, **k))
    plt.close(figures.draw("landscape", tiny_store, **params))
    cache = sorted((tiny_store / ".cache" / "landscape").iterdir())
    computed = len(calls)
    assert computed == 2 and len(cache) >= 2  # houlsby and full

    claim = Claim.from_table(
        {
            "id": "flat",
            "says": "flatter",
            "statistic": "landscape.curvature",
            "params": {"split": "validation"},
            "compare": "location",
            "a": "houlsby",
            "b": "full",
            "direction": "less",
        },
        "test",
    )
    recipe = Recipe(
        "toy/landscape",
        "t",
        "landscape",
        "t.pdf",
        {"demo": {"base": {}, "grids": [{}], "params": {}}},
        params=params,
        claims=(claim,),
    )
    analysis, values, own = tally.parameters(claim, recipe.figure, recipe.figure_params("demo"))
    assert values == figures.get("landscape").analysis_values(figures.get("landscape").resolve(**params)) and own == {
        "split": "validation"
    }
    run_ids = sorted(p.name for p in tiny_store.iterdir() if not p.name.startswith("."))
    observations = tally.observations(claim, recipe.figure, recipe.figure_params("demo"), tiny_store, run_ids)
    assert len(observations) == 2 and len(calls) == computed  # nothing computed again
    assert sorted((tiny_store / ".cache" / "landscape").iterdir()) == cache  # no second cache entry

    # a claim that sets its figure's analysis parameters is refused: it would judge another frame
    other = Claim.from_table(
        {
            **{
                "id": "flat",
                "says": "flatter",
                "statistic": "landscape.curvature",
                "compare": "location",
                "a": "houlsby",
                "b": "full",
                "direction": "less",
            },
            "params": {"alphas": "-2:2:20"},
        },
        "test",
    )
    with pytest.raises(ClaimError, match=r"sets \['alphas'\], parameters of its figure's analysis 'landscape'"):
        tally.parameters(other, "landscape", params)


def test_param_types_and_choices():
    param = Param("attackers", ["pwws"], "who", kind=list, choices=("pwws", "deepwordbug"))
    assert param.coerce("pwws, deepwordbug") == ["pwws", "deepwordbug"]
    with pytest.raises(Exception, match="must be one of"):
        param.coerce("pwws,textfooler")


def test_negative_values_are_joined_for_the_registered_parameters_that_take_them():
    """The flags whose value may start with '-' come from the registries' parameters (a grid, a
    number with no minimum), not from a list: a counted parameter never is one."""
    from robustkit.cli.analyze import join_negative_values, negative_value_options

    flags = negative_value_options()
    assert {"--alphas", "--grid", "--ts"} <= flags
    assert not {"--seed", "--tokens", "--split", "--block-eigenvalues"} & flags
    argv = ["analyze", "surface", "runs", "--grid", "-1:1:3", "--seed", "-1", "--select", "task=rt"]
    assert join_negative_values(argv) == [
        "analyze",
        "surface",
        "runs",
        "--grid=-1:1:3",
        "--seed",
        "-1",
        "--select",
        "task=rt",
    ]


DECLARING = sorted(
    name
    for name, analysis in ANALYSES.items()
    if analysis.module is not None and analysis.module.startswith("robustkit.analysis.")
)


def _registered_by_import(package: str, table: dict) -> dict[str, str]:
    """name -> module of what each module of ``package`` registers in ``table`` once imported."""
    import importlib
    import pkgutil

    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        importlib.import_module(f"{package}.{info.name}")
    return {name: entry.module for name, entry in table.items() if entry.module.startswith(package + ".")}


def test_the_builtin_table_names_the_module_of_every_registered_analysis():
    """The registry imports the modules :data:`BUILTIN` names (no module is read as text): it
    must hold every analysis a module of the package registers, at that module, and nothing
    else; one missing line would drop an analysis from the CLI."""
    assert _registered_by_import("robustkit.analysis", ANALYSES) == registry.BUILTIN, "run python tools/docs_tables.py"
    assert {"intruders", "forgetting", "lora-sharpness", "curve-connectivity", "rsa", "attack"} <= set(DECLARING)


def test_the_builtin_table_names_the_module_of_every_registered_figure():
    assert _registered_by_import("robustkit.figures", figures.FIGURES) == figures.BUILTIN, (
        "run python tools/docs_tables.py"
    )


@pytest.mark.parametrize("name", DECLARING)
def test_a_registered_analysis_is_its_module_s(name):
    """What is registered is the object the module's ``register_analysis`` call returned (so
    the module's defaults are the registry's), its functions in that module."""
    import importlib

    analysis = ANALYSES[name]
    declared = importlib.import_module(analysis.module).DECLARED  # one analysis, or a module's few
    assert analysis in (declared if isinstance(declared, tuple) else (declared,))
    assert load(analysis.compute).__module__ == analysis.module


def test_registering_is_explicit_and_a_name_is_taken_once(monkeypatch):
    """An Analysis object registers nothing by itself; ``register_analysis`` does, and a second
    module registering the same name is refused (its own module again replaces it: a reload)."""
    monkeypatch.setattr(registry, "ANALYSES", dict(ANALYSES))
    made = registry.Analysis("zz-made", "h", "d", ":run", module="zz_one")
    assert "zz-made" not in registry.ANALYSES
    assert registry.register_analysis(made) is made and registry.ANALYSES["zz-made"] is made
    again = registry.Analysis("zz-made", "h2", "d", ":run", module="zz_one")
    assert registry.register_analysis(again) is again and registry.ANALYSES["zz-made"] is again
    with pytest.raises(AnalysisError, match="registered twice"):
        registry.register_analysis(registry.Analysis("zz-made", "h", "d", ":run", module="zz_two"))


def test_importing_the_registries_imports_no_heavy_library():
    """Registration imports each analysis and plot module: they import torch, pandas and
    matplotlib inside their functions, so that --help and the check stay light."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys, robustkit.figures, robustkit.analysis.registry; "
        "print(json.dumps([m for m in ('torch', 'pandas', 'matplotlib', 'scipy', 'transformers', 'numpy') "
        "if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_every_analyze_and_plot_verb_formats_its_help():
    """A '%' in a declared help (``90%``) is text, not an argparse placeholder: every generated
    verb's --help formats (``plot forgetting --help`` crashed)."""
    import argparse

    from robustkit.cli import build_parser

    def verbs(parser):
        return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices

    for verb in ("analyze", "plot"):
        for name, parser in verbs(verbs(build_parser())[verb]).items():
            assert name in parser.format_help()


FIGURES_DECLARING = sorted(n for n, f in figures.FIGURES.items() if f.module is not None)


def test_every_figure_and_analysis_of_robustkit_is_registered_by_its_module():
    assert {"intruders", "forgetting", "lora-sharpness", "curve-connectivity", "attack-vs-tsp", "attack-boxes"} <= set(
        FIGURES_DECLARING
    )
    assert all(f.module is not None for f in figures.FIGURES.values() if f.plot.startswith("robustkit."))
    assert all(a.module is not None for a in ANALYSES.values() if a.compute.startswith("robustkit."))


@pytest.mark.parametrize("name", FIGURES_DECLARING)
def test_a_registered_figure_is_its_plot_module_s(name):
    import importlib

    figure = figures.FIGURES[name]
    declared = importlib.import_module(figure.module).DECLARED
    assert figure in (declared if isinstance(declared, tuple) else (declared,))
    assert load(figure.plot).__module__ == figure.module


def test_a_figure_draws_a_view_its_analysis_declares():
    """Views are declared next to their analysis's computation: every figure's view is one of its
    analysis's, and a figure naming another is refused when it is registered."""
    for figure in figures.FIGURES.values():
        assert figure.view is None or figure.view in figure.source().views, figure.name
    stray = figures.Figure(
        "stray", "h", "landscape", "robustkit.figures.landscape:x", view="robustkit.analysis.curves:x"
    )
    with pytest.raises(figures.FigureError, match="is not one its analysis 'landscape' declares"):
        figures.register(stray)
    assert "stray" not in figures.FIGURES
