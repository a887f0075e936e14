"""The figure registry: every figure is one object (analysis, plot, typed parameters) that the
plot verbs, reproduce and notebooks share."""

from __future__ import annotations

import inspect

import pytest

from robustkit import figures
from robustkit.analysis.registry import Analysis, load
from robustkit.figures import FIGURES, Figure, FigureError
from robustkit.params import Param


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_every_parameter_reaches_the_analysis_the_view_or_the_plot(name):
    """Parameters are routed by name: one that no function takes would be silently dropped. The
    analysis's come from its registry entry (never redeclared here); the figure's own reach its
    view or its plot."""
    figure = FIGURES[name]
    compute = load(figure.source().compute)
    assert {"store", "select"} <= set(inspect.signature(compute).parameters), name
    assert {p.name for p in figure.source().params} <= set(inspect.signature(compute).parameters), name
    taken = set(inspect.signature(load(figure.plot)).parameters)
    if figure.view:
        assert figure.view.startswith("robustkit.analysis."), name  # the computing step is analysis
        taken |= set(inspect.signature(load(figure.view)).parameters)
    assert not {p.name for p in figure.params} - taken, name
    for param in figure.parameters:  # defaults are valid values of their own parameter
        assert param.coerce(param.default) == param.default or param.default is None


def test_parameters_are_checked_and_typed():
    figure = FIGURES["rsa"]
    assert figure.resolve(tokens="50", measure="cka")["tokens"] == 50
    with pytest.raises(FigureError, match=r"has no parameter\(s\) \['colour'\]"):
        figure.resolve(colour="red")
    with pytest.raises(FigureError, match="must be one of"):
        figure.resolve(measure="euclid")
    with pytest.raises(FigureError, match="expected an integer"):
        figure.resolve(tokens=2.5)
    assert FIGURES["landscape"].resolve(splits="train, validation")["splits"] == ["train", "validation"]
    assert FIGURES["box-seeds"].resolve()["include_failed"] is False  # score figures have it
    with pytest.raises(FigureError, match="unknown figure 'nope'"):
        figures.get("nope")


def test_a_new_figure_is_one_registration(tmp_path, monkeypatch):
    """Register an analysis and a figure from a notebook: named by import path, parameters routed."""
    import sys
    import types

    import matplotlib.pyplot as plt
    import pandas as pd

    from robustkit.analysis import registry

    module = types.ModuleType("toy_figure")
    module.analysis = lambda store, select, *, rows: pd.DataFrame({"x": range(rows), "store": str(store)})

    def plot(frame, colour="k"):
        fig, ax = plt.subplots()
        ax.plot(frame["x"], color=colour)
        return fig

    module.plot = plot
    monkeypatch.setitem(sys.modules, "toy_figure", module)
    monkeypatch.setattr(figures, "FIGURES", dict(FIGURES))
    monkeypatch.setattr(registry, "ANALYSES", dict(registry.ANALYSES))
    registry.register(Analysis("toy", "a toy", "rows of x", "toy_figure:analysis", (Param("rows", 2, "rows"),)))
    figures.register(Figure("toy", "a toy", "toy", "toy_figure:plot", (Param("colour", "k", "line colour"),)))
    assert len(figures.data("toy", tmp_path, rows=3)) == 3
    fig = figures.draw("toy", tmp_path, subtitle="on nothing", colour="r", rows=4)
    assert len(fig.axes[0].lines[0].get_xdata()) == 4 and fig.axes[0].lines[0].get_color() == "r"
    with pytest.raises(FigureError, match="registered twice"):
        figures.register(figures.get("toy"))
    with pytest.raises(FigureError, match=r"\['rows'\] are not its own parameters"):
        figures.register(Figure("toy-2", "a toy", "toy", "toy_figure:plot", (Param("rows", 5, "rows again"),)))
    with pytest.raises(FigureError, match=r"has no parameter\(s\) \['colur'\]"):
        figures.draw("toy", tmp_path, colur="r")
    plt.close("all")


def test_the_plot_verbs_are_the_registry():
    from robustkit.cli import build_parser

    parser = build_parser()
    plot = next(a for a in parser._subparsers._group_actions[0].choices.items() if a[0] == "plot")[1]
    verbs = plot._subparsers._group_actions[0].choices
    assert set(verbs) == set(FIGURES)
    args = parser.parse_args(
        ["plot", "landscape", "runs", "-o", "x.pdf", "--alphas=-1:1:5", "--splits", "train,validation"]
    )
    assert (args.alphas, args.splits) == ("-1:1:5", ["train", "validation"])
    assert FIGURES["landscape"].resolve(alphas=args.alphas, splits=args.splits)["splits"] == ["train", "validation"]
