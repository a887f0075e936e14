"""Where a plot draws: a canvas of its own, or the caller's Axes or Figure (seaborn's ``ax=``).

A plot function asks this module for its panels (:func:`subplots`, the signature of
``plt.subplots``; :func:`new_figure`, one panel) instead of ``plt.subplots``. Outside :func:`into` it gets exactly what
``plt.subplots`` gives: a new figure that :mod:`robustkit.figures.style` grows to hold the title,
legend and notes. Inside ``into(ax)`` a one-panel plot draws into that Axes and a plot of several
panels is refused (:class:`CanvasError`, naming ``fig=``); inside ``into(fig)`` (a Figure or a
SubFigure) the panels are laid out in it. Drawn into, the caller's canvas keeps its size:
the title goes on the Axes (a panel's own title wins) or the SubFigure, the legend beside the
panel (right of it, off the data), and the notes under the figure (the tests, what bars and bands are) are left to the
figure's own canvas (``figures.draw`` without ``ax``/``fig``), as seaborn's axes-level
functions leave the figure to their caller.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import FigureBase

from robustkit.errors import RobustkitError

_TARGET: ContextVar[Axes | FigureBase | None] = ContextVar("robustkit_canvas_target", default=None)


class CanvasError(RobustkitError):
    """A plot of several panels asked to draw into one Axes."""


@contextmanager
def into(target: Axes | FigureBase | None) -> Iterator[None]:
    """Plots drawn inside the block draw into ``target`` (``None``: a canvas of their own).

    Parameters
    ----------
    target : matplotlib Axes, Figure or SubFigure, or None
        Where the panels go.
    """
    check(target)
    token = _TARGET.set(target)
    try:
        yield
    finally:
        _TARGET.reset(token)


def check(target: object) -> None:
    """Raise :class:`CanvasError` unless ``target`` is None, a matplotlib Axes, Figure or SubFigure."""
    if target is not None and not isinstance(target, (Axes, FigureBase)):
        raise CanvasError(f"expected a matplotlib Axes (ax=) or Figure/SubFigure (fig=), got {type(target).__name__}")


def current() -> Axes | FigureBase | None:
    """The caller's Axes or Figure being drawn into, or None when a plot makes its own canvas."""
    return _TARGET.get()


def subplots(
    nrows: int = 1,
    ncols: int = 1,
    *,
    squeeze: bool = True,
    figsize=None,
    constrained_layout=None,
    layout=None,
    **kwargs,
):
    """``plt.subplots(nrows, ncols, ...)``, or the same grid in the caller's canvas (:func:`into`).

    Parameters
    ----------
    nrows, ncols : int
        The grid of panels.
    squeeze : bool
        As in ``plt.subplots``: a single Axes or a 1-D array where a dimension is 1.
    figsize, constrained_layout, layout
        The own canvas's size and layout; ignored when drawing into the caller's (it keeps its own).
    **kwargs
        ``sharex``, ``sharey``, ``gridspec_kw``, ``subplot_kw`` as in ``plt.subplots``.

    Returns
    -------
    fig : matplotlib Figure or SubFigure
        The own canvas, the Axes' figure, or the caller's Figure.
    axes : Axes or ndarray of Axes, shape (nrows, ncols) or squeezed

    Raises
    ------
    CanvasError
        More than one panel asked of a single Axes.
    """
    target = _TARGET.get()
    if target is None:
        own = {"figsize": figsize, "constrained_layout": constrained_layout, "layout": layout}
        return plt.subplots(nrows, ncols, squeeze=squeeze, **{k: v for k, v in own.items() if v is not None}, **kwargs)
    if isinstance(target, Axes):
        if nrows * ncols != 1:
            raise CanvasError(
                f"draws {nrows} x {ncols} panels, which one Axes cannot hold: pass fig= "
                "(a matplotlib Figure or SubFigure, e.g. fig.subfigures()) instead of ax="
            )
        return target.figure, (target if squeeze else np.array([[target]], dtype=object))
    return target, target.subplots(nrows, ncols, squeeze=squeeze, **kwargs)


def new_figure(width: float = 5.0, height: float = 3.6) -> tuple[FigureBase, Axes]:
    """One panel of ``width`` x ``height`` inches, constrained layout (:func:`subplots`).

    Returns
    -------
    fig : matplotlib Figure or SubFigure
    ax : Axes
    """
    fig, ax = subplots(figsize=(width, height), constrained_layout=True)
    return fig, ax
