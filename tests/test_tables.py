"""The results-table figure: one row per group, fractions shown x 100."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from robustkit.analysis import stability
from robustkit.plots.style import save_pdf
from robustkit.plots.tables import summary_table


def _scores() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [{"task": "rt", "method": m, "tsp_step": t, "value": v, "failed": v <= 0.6}
            for m, centre in (("houlsby", 0.75), ("full", 0.7)) for t in (0, 200)
            for v in centre + 0.05 * rng.standard_normal(4)]
    return pd.DataFrame(rows)


def test_table_rows_and_percent_cells(tmp_path):
    summary = stability.summarize(_scores(), by=["method", "tsp_step"])
    fig = summary_table(summary, ["method", "tsp_step"], "title", "test accuracy (%)", caption="n = 4 runs per row")
    table = fig.axes[0].tables[0]
    cells = {(r, c): cell.get_text().get_text() for (r, c), cell in table.get_celld().items()}
    assert cells[(0, 0)] == "method" and cells[(0, 1)] == "TSP steps"
    first = summary.iloc[0]
    assert cells[(1, 2)] == f"{100 * first['mean']:.1f} +- {100 * first['std']:.1f}"
    assert cells[(1, 5)] == "4" and len({r for r, _ in cells}) == 1 + len(summary)
    assert save_pdf(fig, tmp_path / "t.pdf").read_bytes().startswith(b"%PDF")


def test_empty_summary_is_an_error():
    with pytest.raises(ValueError, match="nothing to tabulate"):
        summary_table(pd.DataFrame(columns=["method", "n", "mean", "std", "min", "max", "n_failed"]), ["method"], "t", "v")
