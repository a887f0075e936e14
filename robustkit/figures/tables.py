"""Results tables rendered as PDF pages: the papers' tables (Han et al. 2021 table 1; He et al.
2021 tables 2, 5 and 6) as tables, cropped to their content by :func:`robustkit.figures.style.save_pdf`.

Every value cell reads ``mean ± std`` over the kept runs, with the runs behind it (``n``) and
``collapsed k/n`` where runs failed (:mod:`robustkit.store.collapse`); a column gives the
majority-class baseline of each row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from matplotlib.figure import Figure

from robustkit import figures
from robustkit.figures.method_style import method_label
from robustkit.params import Param

# The figure, as robustkit.figures reads it from this source (its analysis declares its data and view).
DECLARED = figures.register_figure(
    figures.Figure(
        "table",
        "Han et al. 2021 table 1, He et al. 2021 tables 2 and 5: mean +- std, bootstrap CI, range and failed runs per "
        "group, as a PDF table",
        "scores",
        ":results_table_figure",
        (
            Param(
                "by",
                ["task", "method"],
                "comma-separated columns that define a row (task, method, tsp_step, train_size, adapter_size, lr, ...)",
                kind=list,
            ),
            Param("title", "Results over runs", "table title (the model and task used are appended)"),
        ),
        view="robustkit.analysis.results:results_table",
        score_axis=True,
        order=160,
        module=__name__,
    )
)


SHOWN_STATS = ("n", "mean", "std", "min", "max", "n_runs", "n_collapsed", "n_diverged", "baseline")
HEADER_COLOUR = "#e8e8e8"
FONT_SIZE = 7.5
CELL_PAD_IN = 0.24  # horizontal padding per cell (inches)
ROW_HEIGHT_IN = 0.22
NOTE_WIDTH_IN = 6.0  # notes under narrow tables wrap at this width, not the table's


def summary_table(
    summary: pd.DataFrame,
    by: list[str],
    title: str,
    value_label: str,
    caption: str = "",
    scale: float | None = None,
    include_failed: bool = False,
) -> Figure:
    """One row per group: mean ± std, 95% CI, range, runs kept, collapsed runs, baseline.

    Parameters
    ----------
    summary : DataFrame
        :func:`robustkit.analysis.stability.summarize` output: the ``by`` columns and ``n,
        mean, std, min, max, ci_low, ci_high``; where present ``n_runs, n_collapsed,
        n_diverged`` (:func:`robustkit.store.collapse.failure_rates`) and ``baseline`` (majority
        class, same units as ``mean``). A group whose runs all failed has NaN statistics.
    by : list of str
        Grouping columns, shown first (``method`` shown by its label).
    title, value_label : str
        Table title, and what the numbers are (e.g. "test accuracy (%)").
    caption : str
        Text under the table (tests, notes).
    scale : float, optional
        Factor applied to the values (100 for fractions shown in %); default 100 when every
        mean, min and max is within [-1, 1], else 1.
    include_failed : bool
        Whether the statistics include collapsed / diverged runs (said under the table).
    """
    from robustkit.figures.labels import setting_label

    if summary.empty:
        raise figures.NothingToDraw("nothing to tabulate: the summary is empty")
    if scale is None:
        scale = 100.0 if summary[["mean", "min", "max"]].abs().max().max() <= 1.0 else 1.0
    has_failures = "n_collapsed" in summary
    has_baseline = "baseline" in summary and summary["baseline"].notna().any()
    header = [setting_label(c) for c in by] + [f"mean ± std, {value_label}", "95% CI of the mean", "min – max", "n"]
    header += ["collapsed"] if has_failures else []
    header += ["majority baseline"] if has_baseline else []
    rows = []
    for _, row in summary.iterrows():
        cells = [_cell(row[c], c) for c in by] + _stats(row, scale)
        if has_failures:
            cells.append(_failures(row))
        if has_baseline:
            cells.append(_number(row["baseline"], scale))
        rows.append(cells)
    notes = [caption] if caption else []
    notes.append(_legend_note(include_failed, has_failures))
    return render_table(header, rows, title, notes, numeric_from=len(by))


def results_table_figure(
    summary: pd.DataFrame,
    by: list[str],
    caption: str,
    source: pd.DataFrame,
    title: str = "Results over runs",
    include_failed: bool = False,
) -> Figure:
    """:func:`summary_table` of :func:`robustkit.analysis.results.results_table`'s output:
    the title names the model and task of ``source`` (the runs), values in its metric's units."""
    from robustkit.figures import units
    from robustkit.figures.box_labels import value_label
    from robustkit.figures.labels import paper_title

    metric = str(source["metric"].iloc[0]) if source["metric"].nunique() == 1 else ""
    return summary_table(
        summary,
        by,
        paper_title(title, source),
        value_label(source),
        caption,
        scale=units.scale(metric) if metric else None,
        include_failed=include_failed,
    )


def render_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], title: str, notes: Sequence[str] = (), numeric_from: int = 1
) -> Figure:
    """A table figure sized to its content: bold shaded header, left-aligned label columns,
    the rest centred; the title above and the notes under it.

    Parameters
    ----------
    header : sequence of str
        Column names.
    rows : sequence of sequence of str
        Cell texts, one sequence per row.
    title : str
        Above the table (the figure title).
    notes : sequence of str
        Paragraphs under the table.
    numeric_from : int
        Index of the first value column (the columns before it label the rows).
    """
    import matplotlib.pyplot as plt

    from robustkit.figures import canvas, style

    # drawn into the caller's Axes or Figure (robustkit.figures.canvas), the table fills one panel
    # of it; on its own canvas, the canvas is sized to the table
    fig, ax = canvas.subplots() if canvas.current() is not None else (plt.figure(), None)
    # every column as wide as its widest text (measured) plus padding: nothing cramped, no gap
    widths = [
        max(
            [
                style.text_width_in(fig, str(header[i]), FONT_SIZE, bold=True),
                *(style.text_width_in(fig, str(r[i]), FONT_SIZE) for r in rows),
            ]
        )
        + CELL_PAD_IN
        for i in range(len(header))
    ]
    total = sum(widths)
    if ax is None:
        fig.set_size_inches(total, ROW_HEIGHT_IN * (len(rows) + 1))
        ax = fig.add_axes((0, 0, 1, 1))
    ax.axis("off")
    table = ax.table(
        cellText=[list(r) for r in rows],
        colLabels=list(header),
        colWidths=[w / total for w in widths],
        bbox=(0, 0, 1, 1),
        cellLoc="center",
    )
    table.auto_set_font_size(False)
    table.set_fontsize(FONT_SIZE)
    for (row, column), cell in table.get_celld().items():
        cell.set_edgecolor("#bbbbbb")
        cell.set_linewidth(0.5)
        if row == 0:
            cell.set_text_props(weight="bold")
            cell.set_facecolor(HEADER_COLOUR)
        elif column < numeric_from:
            cell.get_text().set_horizontalalignment("left")
            cell.PAD = 0.3 * CELL_PAD_IN / widths[column]  # PAD is a fraction of the cell's width
    if canvas.current() is None:
        fig._rk_text_width = max(total, NOTE_WIDTH_IN)  # notes and --footer under a narrow table
    style.set_title(fig, title)
    for note in notes:
        style.add_note(fig, note)
    return fig


def _number(x, scale: float) -> str:
    import numpy as np
    import pandas as pd

    if x is None or (isinstance(x, float) and not np.isfinite(x)) or pd.isna(x):
        return "n/a"
    return f"{scale * x:.1f}" if scale != 1 else f"{x:.3g}"


def _stats(row: pd.Series, scale: float) -> list[str]:
    import pandas as pd

    n = int(row["n"]) if pd.notna(row.get("n")) else 0
    if n == 0:
        return ["n/a (no run kept)", "n/a", "n/a", "0"]
    std = row.get("std")
    mean = (
        f"{_number(row['mean'], scale)} ± {_number(std, scale)}"
        if pd.notna(std)
        else f"{_number(row['mean'], scale)} (1 run)"
    )
    ci = (
        f"[{_number(row['ci_low'], scale)}, {_number(row['ci_high'], scale)}]" if pd.notna(row.get("ci_low")) else "n/a"
    )
    return [mean, ci, f"{_number(row['min'], scale)} – {_number(row['max'], scale)}", str(n)]


def _failures(row: pd.Series) -> str:
    """``collapsed k/n`` (+ diverged); ``0/n`` when every run is kept."""
    import pandas as pd

    from robustkit.store import collapse

    n_runs = int(row["n_runs"]) if pd.notna(row.get("n_runs")) else int(row.get("n", 0) or 0)
    text = collapse.counts_label(row, n_runs)
    return text or f"0/{n_runs}"


def _legend_note(include_failed: bool, has_failures: bool) -> str:
    what = (
        "mean ± std: over the runs (seeds) of the row, std with ddof 1; 95% CI: bootstrap (BCa) of the mean; n: "
        "runs used."
    )
    if not has_failures:
        return what
    kept = "included in" if include_failed else "left out of"
    return (
        f"{what} Collapsed / diverged runs (robustkit.store.collapse: stuck at the majority class) are {kept} "
        f"the statistics and counted in 'collapsed'."
    )


def _cell(value, column: str) -> str:
    from robustkit.figures.labels import cell_text

    return method_label(value) if column == "method" else cell_text(value, column)
