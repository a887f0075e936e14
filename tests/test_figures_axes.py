"""Figures into the caller's Axes (issue #38 item 8): ``figures.draw(..., ax=)`` draws a one-panel
figure into that Axes, seaborn's convention, and ``fig=`` lays a figure of several panels out in
a Figure or SubFigure; the figure's own canvas (what reproduce saves) is unchanged."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
from small_params import small

from robustkit import figures
from robustkit.errors import RobustkitError
from robustkit.figures import FIGURES, FigureError

OTHER = "box-seeds"  # one-panel on the sentence store (one task): drawn beside each figure


def _small(name: str) -> dict:
    return small(FIGURES[name].parameters)


def _figures() -> list:
    """Every registered figure; those whose analysis runs a model (a ``device`` option) are slow."""
    return [
        pytest.param(name, marks=pytest.mark.slow) if "device" in {p.name for p in FIGURES[name].options} else name
        for name in sorted(FIGURES)
    ]


def _drawn(ax) -> int:
    """How many data artists ``ax`` holds (a fresh Axes holds none)."""
    return sum(len(group) for group in (ax.lines, ax.patches, ax.collections, ax.images, ax.tables, ax.texts))


def _frame_or_fail(name: str, store) -> None:
    """Every figure has data on the sentence store (issue #48 item 7: none is skipped for lack of
    it); a figure that has none fails here, naming why."""
    try:
        figures.data(name, store, progress=False, **_small(name))
    except RobustkitError as error:
        pytest.fail(f"{name} has no data on the sentence store: {error}")


@pytest.mark.parametrize("name", _figures())
def test_every_figure_draws_into_the_callers_axes_or_names_fig(name, sentence_runs):
    """Iterates the registry, so a new figure is covered: a one-panel figure lands in ``a1`` of
    ``plt.subplots(1, 2)`` beside another figure in ``a2``, no figure of its own is made and the
    caller's canvas keeps its size; a figure of several panels refuses ``ax=`` in one line that
    names ``fig=``, and draws into one SubFigure of two, leaving the other empty."""
    _frame_or_fail(name, sentence_runs)
    plt.close("all")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9, 3.5))
    size = tuple(fig.get_size_inches())
    try:
        returned = figures.draw(name, sentence_runs, ax=a1, **_small(name))
    except FigureError as error:
        message = str(error)
        assert "fig=" in message and "\n" not in message and name in message, message
        assert _drawn(a1) == 0  # refused before drawing anything
        canvas = plt.figure(figsize=(10, 4))
        left, right = canvas.subfigures(1, 2)
        assert figures.draw(name, sentence_runs, fig=left, **_small(name)) is left
        assert len(left.axes) >= 2 and any(_drawn(ax) for ax in left.axes)
        assert right.axes == [] and plt.get_fignums() == [fig.number, canvas.number]
        assert tuple(canvas.get_size_inches()) == (10, 4)
        plt.close("all")
        return
    assert returned is fig
    assert figures.draw(OTHER, sentence_runs, ax=a2) is fig
    assert _drawn(a1) > 0 and _drawn(a2) > 0
    assert a1.get_title() and a2.get_title()  # each panel says what it is
    assert plt.get_fignums() == [fig.number]  # nothing drawn on a canvas of its own
    assert tuple(fig.get_size_inches()) == size  # the caller's canvas never grows
    fig.savefig(sentence_runs.parent / f"into-{name}.png")  # renders
    plt.close("all")


def test_own_canvas_unchanged_and_arguments_checked(sentence_runs):
    """Without ``ax``/``fig`` the figure composes its own canvas (title, subtitle, footer over
    and under the panels, as reproduce saves it); contradictory arguments are one-line errors."""
    from robustkit.figures.style import figure_texts

    plt.close("all")
    own = figures.draw(OTHER, sentence_runs, subtitle="on bert-tiny", footer="claim: holds")
    texts = figure_texts(own)
    assert "on bert-tiny" in " ".join(texts) and "claim: holds" in " ".join(texts)
    assert own.get_size_inches()[1] > 3.6  # grown to hold header and footer
    fig, (a1, a2) = plt.subplots(1, 2)
    with pytest.raises(FigureError, match="not both"):
        figures.draw(OTHER, sentence_runs, ax=a1, fig=fig)
    with pytest.raises(FigureError, match="own canvas"):
        figures.draw(OTHER, sentence_runs, ax=a1, footer="claim")
    with pytest.raises(FigureError, match="matplotlib Axes"):
        figures.draw(OTHER, sentence_runs, ax="left")
    assert _drawn(a1) == 0
    plt.close("all")
