"""The layout every finished figure shares: its title above the panels, its legend and notes
under them, on a canvas grown to hold them; PDF output.

Layout of a finished figure, top to bottom:

- title (``set_title``), then ``--subtitle`` lines (``add_subtitle``);
- the panels (constrained layout);
- one legend for the whole figure (``legend_below``);
- notes: what error bars and bands are, tests (``add_note``), then ``--footer`` (``add_footer``),
  each wrapped to the figure width without a one-word last line.

The panels keep the size their plot function gave them; each header or footer item added grows
the canvas by its height (and to its width, for a legend wider than the panels) and the panels
are laid out in the rest (the constrained layout's ``rect``). So everything is on the canvas, no
legend or note sits over data, the panels are never squeezed by text, and a notebook's
``fig.savefig("x.png")`` keeps title, legend and footer, as does ``bbox_inches="tight"``
(``save_pdf`` is only a shortcut: folders created, cropped, figure closed). Importing this module
leaves matplotlib's backend alone: figures show in a notebook, and a script without a display
gets matplotlib's own headless default.

What figures share besides the layout has a module each: a method's label and colour
(:mod:`robustkit.figures.method_style`), units (:mod:`robustkit.figures.units`), setting words and
titles (:mod:`robustkit.figures.labels`), panels and lines by setting
(:mod:`robustkit.figures.setting_groups`), the failed-run cross and the baseline
(:mod:`robustkit.figures.marks`).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.legend import Legend
from matplotlib.text import Text
from matplotlib.transforms import ScaledTranslation

from robustkit.figures import canvas
from robustkit.figures.units import PERCENT  # noqa: F401  (documented as style.PERCENT: docs/reference.md)

TITLE_SIZE, SUBTITLE_SIZE, NOTE_SIZE = 10.0, 8.0, 7.0
_GAP_IN = 0.06  # vertical gap between stacked header / footer items (inches)


def set_title(fig: Figure, title: str) -> Text:
    """The figure's title, above the panels (and above any subtitle).

    Drawn into the caller's canvas (:mod:`robustkit.figures.canvas`), the title of its Axes (a
    panel's own title wins) or its SubFigure's: the caller's canvas never grows.
    """
    target = canvas.current()
    if isinstance(target, plt.Axes):
        return target.title if target.get_title() else target.set_title(title, fontsize=TITLE_SIZE)
    if target is not None:
        return target.suptitle(title, fontsize=TITLE_SIZE)
    for old in _stack(fig, "_rk_title"):
        old.remove()
    artist = fig.text(0.5, 1.0, title, ha="center", va="bottom", fontsize=TITLE_SIZE)
    fig._rk_title = [artist]
    _said_once(fig)
    _restack(fig)
    return artist


def add_subtitle(fig: Figure, text: str | None) -> list[Text]:
    """A second title line (e.g. the stand-in note), between the title and the panels; none on
    the caller's canvas (:mod:`robustkit.figures.canvas`)."""
    if not text or canvas.current() is not None:
        return []
    artists = [
        fig.text(
            0.5,
            1.0,
            "\n".join(wrap(fig, part, SUBTITLE_SIZE)),
            ha="center",
            va="bottom",
            fontsize=SUBTITLE_SIZE,
            color="#333333",
        )
        for part in _paragraphs(text)
    ]
    _stack(fig, "_rk_subtitles").extend(artists)
    _said_once(fig)
    _restack(fig)
    return artists


def _said_once(fig: Figure) -> None:
    """Say what was run once: a title ``"<figure> — <model> on <task>"`` (:func:`paper_title`)
    loses its ``— <model> on <task>`` where a subtitle already names them (``"minilm-l6 on rt
    (stand-in for bert-base-uncased on rte)"``)."""
    said = " ".join(t.get_text() for t in _stack(fig, "_rk_subtitles"))
    for title in _stack(fig, "_rk_title"):
        head, dash, rest = title.get_text().partition(" — ")
        # the whole rest, or it less paper_title's extra (", layer-shared adapters", which stays)
        for used in (rest, rest.rsplit(", ", 1)[0]):
            if dash and " on " in used and used in said:
                title.set_text(head + rest[len(used) :])
                break


def legend_below(
    fig: Figure,
    ax: plt.Axes | None,
    handles: Sequence,
    title: str | None = None,
    ncols: int | None = None,
    fontsize: float = 7.0,
) -> Legend:
    """One legend for the figure, attached to ``ax`` (``None``: a figure legend), hung under all
    panels (never over data), on the canvas (the canvas grows to hold it).

    The constrained layout of the panels leaves it out (it would widen one panel's margin,
    :class:`_PanelsLayout`); a tight bounding box includes it. Drawn into the caller's canvas
    (:mod:`robustkit.figures.canvas`), a legend beside the caller's Axes (right of it, never over its
    data; long labels wrapped), or under the panels of
    the caller's Figure (``loc="outside lower center"``: room made where it has a constrained
    layout).
    """
    target = canvas.current()
    if isinstance(target, plt.Axes):  # beside the caller's panel, not over its data (a constrained layout makes room)
        legend = target.legend(
            handles=handles,
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            borderaxespad=0.0,
            title=title,
            title_fontsize=fontsize,
            fontsize=fontsize,
            frameon=False,
        )
        _fit_legend(fig, legend, max(_axes_width_in(target) * 0.6, 1.5), fontsize)
        return legend
    if target is not None:
        return target.legend(
            handles=handles,
            loc="outside lower center",
            ncols=ncols or 2,
            title=title,
            title_fontsize=fontsize,
            fontsize=fontsize,
            frameon=False,
        )
    if ncols is None:
        width = max((len(getattr(h, "get_label", lambda: "")()) for h in handles), default=10)
        ncols = max(1, min(len(handles), int(_panel_size(fig)[0] * 72 / (fontsize * 0.6 * width + 40))))
    owner = fig if ax is None else ax
    while True:  # no wider than the panels: fewer columns until it fits (_fit_legend wraps one)
        legend = owner.legend(
            handles=handles,
            loc="upper center",
            bbox_to_anchor=(0.5, 0.0),
            bbox_transform=fig.transFigure,
            ncols=ncols,
            fontsize=fontsize,
            title=title,
            title_fontsize=fontsize,
            frameon=False,
        )
        if ncols <= 1 or _width_in(fig, legend) <= _panel_size(fig)[0]:
            break
        legend.remove()
        ncols -= 1
    _fit_legend(fig, legend, _panel_size(fig)[0], fontsize)
    footer = _stack(fig, "_rk_footer")
    footer.insert(0, legend)  # the legend comes first, right under the panels
    _restack(fig)
    return legend


def _fit_legend(fig: Figure, legend: Legend, width_in: float, fontsize: float) -> None:
    """Keep a one-column ``legend`` within ``width_in`` inches (the panels' width) by wrapping its
    long labels: a legend wider than its plot widens the canvas and hangs past the panels."""
    excess = _width_in(fig, legend) - width_in
    if excess <= 0:
        return
    renderer = _renderer(fig)
    texts = legend.get_texts()
    widest = max(t.get_window_extent(renderer).width / fig.dpi for t in texts)
    room = max(widest - excess, 1.0)  # the markers and padding keep their width
    for text in texts:
        if text_width_in(fig, text.get_text(), fontsize) > room:
            text.set_text("\n".join(wrap(fig, text.get_text(), fontsize, room)))


def _axes_width_in(ax: plt.Axes) -> float:
    return ax.get_position().width * ax.figure.get_figwidth()


def _width_in(fig: Figure, artist) -> float:
    return artist.get_window_extent(_renderer(fig)).width / fig.dpi


def add_note(
    fig: Figure, text: str | None, fontsize: float = NOTE_SIZE, color: str = "#222222", width_in: float | None = None
) -> list[Text]:
    """Text under the figure (and its legend): each ``\\n``-separated paragraph wrapped to
    ``width_in`` inches (default the figure's width), never leaving a one-word last line. None
    on the caller's canvas (:mod:`robustkit.figures.canvas`): it keeps its size."""
    if not text or canvas.current() is not None:
        return []
    footer = _stack(fig, "_rk_footer")
    artists = [
        fig.text(
            0.0,
            0.0,
            "\n".join(wrap(fig, part, fontsize, width_in)),
            ha="left",
            va="top",
            fontsize=fontsize,
            color=color,
            linespacing=1.25,
        )
        for part in _paragraphs(text)
    ]
    footer.extend(artists)
    _restack(fig)
    return artists


def add_footer(fig: Figure, text: str | None) -> list[Text]:
    """The ``--footer`` text (e.g. the paper's claim and the verdict), last under the figure."""
    return add_note(fig, text, fontsize=NOTE_SIZE + 0.5, color="black")


def decorate(fig: Figure, subtitle: str | None = None, footer: str | None = None) -> Figure:
    """Apply the generic ``--subtitle`` / ``--footer`` of every ``robustkit plot`` verb."""
    add_subtitle(fig, subtitle)
    add_footer(fig, footer)
    return fig


def wrap(fig: Figure, text: str, fontsize: float, width_in: float | None = None) -> list[str]:
    """``text`` as lines no wider than ``width_in`` inches (default: the figure's width), with
    lines of balanced length: the narrowest wrap that needs no more lines than the widest one,
    so the last line is never a lone word (a one-word paragraph stays one word)."""
    text = " ".join(text.split())
    if not text:
        return []
    if width_in is None:  # a figure may set a wider text width than its own (a narrow table)
        width_in = getattr(fig, "_rk_text_width", _panel_size(fig)[0] - 0.1)
    # average character width of this very text at this size, measured (not guessed)
    char_in = text_width_in(fig, text, fontsize) / len(text)
    most = max(8, int(width_in / char_in * 0.97))
    lines = textwrap.wrap(text, most, break_long_words=False, break_on_hyphens=False)
    for narrower in range(most - 1, 7, -1):  # balance: shrink while the line count holds
        trial = textwrap.wrap(text, narrower, break_long_words=False, break_on_hyphens=False)
        if len(trial) > len(lines):
            break
        lines = trial
    if len(lines) > 1 and len(lines[-1].split()) == 1 and len(lines[-2].split()) > 2:
        # a long unbreakable word can still end alone: give it a neighbour from the line above
        head, moved = lines[-2].rsplit(" ", 1)
        lines[-2:] = [head, f"{moved} {lines[-1]}"]
    return lines


def text_width_in(fig: Figure, text: str, fontsize: float, bold: bool = False) -> float:
    """Width of ``text`` in inches at ``fontsize`` points (measured by the renderer)."""
    renderer = _renderer(fig)
    font = FontProperties(size=fontsize, weight="bold" if bold else "normal")
    width, _, _ = renderer.get_text_width_height_descent(text, font, ismath=False)
    return width / fig.dpi


def _paragraphs(text: str) -> list[str]:
    return [part for part in str(text).replace("\\n", "\n").split("\n") if part.strip()]


def _stack(fig: Figure, name: str) -> list:
    if not hasattr(fig, name):
        setattr(fig, name, [])
    return getattr(fig, name)


class _PanelsLayout(ConstrainedLayoutEngine):
    """Constrained layout of the panels that leaves out the legends hung under them: they are out
    of the layout while it runs, and in it for everything else (a tight bounding box keeps them)."""

    def execute(self, fig: Figure):
        hung = [artist for artist in getattr(fig, "_rk_footer", ()) if isinstance(artist, Legend)]
        for legend in hung:
            legend.set_in_layout(False)
        try:
            return super().execute(fig)
        finally:
            for legend in hung:
                legend.set_in_layout(True)


def _panel_size(fig: Figure) -> tuple[float, float]:
    """The panels' own size (inches): the figure's, before a header or footer item grew it; the
    panels' positions too where no layout engine places them (a table)."""
    if not hasattr(fig, "_rk_panels"):
        fig._rk_panels = tuple(fig.get_size_inches())
        engine = fig.get_layout_engine()
        if isinstance(engine, ConstrainedLayoutEngine) and not isinstance(engine, _PanelsLayout):
            settings = {k: v for k, v in engine.get().items() if k in ("h_pad", "w_pad", "hspace", "wspace")}
            fig.set_layout_engine(_PanelsLayout(**settings))
        elif engine is None:
            fig._rk_positions = {ax: ax.get_position().bounds for ax in fig.axes}
    return fig._rk_panels


def _renderer(fig: Figure):
    """A renderer to measure text with, whatever canvas the backend gave the figure."""
    get = getattr(fig.canvas, "get_renderer", None)
    return get() if get is not None else fig._get_renderer()


def _restack(fig: Figure) -> None:
    """Grow the canvas to hold the header items (above the panels) and the footer items (under
    them), stacked by their measured heights (inches), and place the panels in between."""
    renderer = _renderer(fig)
    panel_w, panel_h = _panel_size(fig)
    header = [*reversed(_stack(fig, "_rk_subtitles")), *_stack(fig, "_rk_title")]  # upwards: subtitles, then title
    footer = _stack(fig, "_rk_footer")

    def size(artist) -> tuple[float, float]:
        box = artist.get_window_extent(renderer)
        return box.width / fig.dpi, box.height / fig.dpi

    sizes = {id(a): size(a) for a in (*header, *footer)}
    up = sum(sizes[id(a)][1] + _GAP_IN for a in header) + (_GAP_IN if header else 0)
    down = sum(sizes[id(a)][1] + _GAP_IN for a in footer) + (_GAP_IN if footer else 0)
    notes_x = 0.05  # inches: notes start a little in from the left edge
    width = max(
        [panel_w, *(sizes[id(a)][0] + (2 * notes_x if not isinstance(a, Legend) else 0.1) for a in (*header, *footer))]
    )
    height = panel_h + up + down
    fig.set_size_inches(width, height, forward=False)
    # the panels centred on a canvas that text made wider
    left, bottom, top = 0.5 * (width - panel_w) / width, down / height, (down + panel_h) / height
    engine = fig.get_layout_engine()
    if isinstance(engine, ConstrainedLayoutEngine):
        engine.set(rect=(left, bottom, panel_w / width, panel_h / height))
    for ax, (x, y, w, h) in getattr(fig, "_rk_positions", {}).items():  # panels placed by their plot function
        ax.set_position(
            (left + x * panel_w / width, bottom + y * panel_h / height, w * panel_w / width, h * panel_h / height)
        )
    offset = _GAP_IN
    for artist in header:
        artist.set_position((0.5, top))
        artist.set_transform(fig.transFigure + ScaledTranslation(0, offset, fig.dpi_scale_trans))
        offset += sizes[id(artist)][1] + _GAP_IN
    offset = _GAP_IN
    for artist in footer:
        shift = ScaledTranslation(0, -offset, fig.dpi_scale_trans)
        if isinstance(artist, Legend):
            artist.set_bbox_to_anchor((0.5, bottom), transform=fig.transFigure + shift)
        else:
            artist.set_position((0.0, bottom))
            artist.set_transform(fig.transFigure + ScaledTranslation(notes_x, -offset, fig.dpi_scale_trans))
        offset += sizes[id(artist)][1] + _GAP_IN


def figure_texts(fig: Figure) -> list[str]:
    """Every text of ``fig`` (figure texts, axes texts and titles, legends), for tests and checks."""
    texts = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        texts += [t.get_text() for t in ax.texts] + [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        if ax.get_legend() is not None:
            texts += [t.get_text() for t in ax.get_legend().get_texts()]
        texts += [t.get_text() for table in ax.tables for t in (c.get_text() for c in table.get_celld().values())]
    texts += [t.get_text() for legend in fig.legends for t in legend.get_texts()]
    return texts


def save_pdf(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as a PDF (folders created), cropped to its content, and close it (what
    ``robustkit plot`` and ``reproduce`` do; in a notebook, ``fig.savefig`` keeps as much).

    Cropping (tight bounding box) leaves no empty margin around tables.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="pdf", bbox_inches="tight", pad_inches=0.06)
    plt.close(fig)
    return path
