"""Results tables rendered as PDF pages: the papers' tables (Han et al. 2021 table 1; He et al.
2021 tables 2 and 5) from :func:`robustkit.analysis.stability.summarize` output."""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from robustkit.plots.style import method_label, plt

SHOWN_STATS = ("n", "mean", "std", "min", "max", "n_failed")


def summary_table(summary: pd.DataFrame, by: list[str], title: str, value_label: str, caption: str = "") -> Figure:
    """One row per group: mean +- std (x 100 when the values are fractions), range, runs, failed.

    Parameters
    ----------
    summary : DataFrame
        :func:`robustkit.analysis.stability.summarize` output: the ``by`` columns and ``n, mean,
        std, min, max, n_failed, ci_low, ci_high``.
    by : list of str
        Grouping columns, shown first (``method`` shown by its label).
    title, value_label : str
        Table title, and what the numbers are (e.g. "test accuracy (%)").
    caption : str
        Text under the table (tests, notes).
    """
    if summary.empty:
        raise ValueError("nothing to tabulate: the summary is empty")
    scale = 100.0 if summary[["mean", "min", "max"]].abs().max().max() <= 1.0 else 1.0
    header = [_column_label(c) for c in by] + [f"mean +- std ({value_label})", "95% CI", "min .. max", "runs", "failed"]
    rows = [[_cell(row[c], c) for c in by] + _stats(row, scale) for _, row in summary.iterrows()]
    fig, ax = plt.subplots(figsize=(1.3 * len(header) + 1.0, 0.3 * len(rows) + 1.2), constrained_layout=True)
    ax.axis("off")
    table = ax.table(cellText=rows, colLabels=header, loc="upper center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    table.scale(1.0, 1.25)
    table.auto_set_column_width(list(range(len(header))))
    for (row, _), cell in table.get_celld().items():
        if row == 0:
            cell.set_text_props(weight="bold")
    ax.set_title(title, fontsize=9)
    if caption:
        fig.text(0.01, 0.01, caption, fontsize=6, va="bottom", wrap=True)
    return fig


def _stats(row: pd.Series, scale: float) -> list[str]:
    def number(x) -> str:
        return "n/a" if pd.isna(x) else f"{scale * x:.1f}" if scale != 1 else f"{x:.3g}"

    return [
        f"{number(row['mean'])} +- {number(row['std'])}",
        f"[{number(row['ci_low'])}, {number(row['ci_high'])}]",
        f"{number(row['min'])} .. {number(row['max'])}",
        str(int(row["n"])),
        "n/a" if pd.isna(row["n_failed"]) else str(int(row["n_failed"])),
    ]


def _cell(value, column: str) -> str:
    if column == "method":
        return method_label(value)
    if pd.isna(value):
        return "all" if column == "train_size" else "-"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _column_label(column: str) -> str:
    return {"tsp_step": "TSP steps", "train_size": "training examples", "adapter_size": "adapter size m", "lr": "learning rate"}.get(column, column)
