"""The results-table figure: one row per group, fractions shown x 100, "mean ± std", n and
"collapsed k/n" per row, the majority baseline; and `robustkit plot table` on a store."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from robustkit.analysis import stability
from robustkit.figures.style import figure_texts, save_pdf
from robustkit.figures.tables import summary_table
from robustkit.store import collapse


def _scores() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [
        {"task": "rt", "method": m, "tsp_step": t, "value": v, "baseline": 0.53}
        for m, centre in (("houlsby", 0.75), ("full", 0.7))
        for t in (0, 200)
        for v in centre + 0.05 * rng.standard_normal(4)
    ]
    frame = pd.DataFrame(rows)
    frame.loc[0, "value"] = 0.52  # houlsby, TSP 0: one run below the majority baseline
    return frame


def _cells(fig) -> dict[tuple[int, int], str]:
    table = fig.axes[0].tables[0]
    return {(r, c): cell.get_text().get_text() for (r, c), cell in table.get_celld().items()}


def test_table_rows_and_percent_cells(tmp_path):
    frame = _scores()
    summary = stability.summarize(frame, by=["method", "tsp_step"], n_resamples=999)
    summary = summary.merge(
        frame.groupby(["method", "tsp_step"])["baseline"].mean().reset_index(), on=["method", "tsp_step"]
    )
    fig = summary_table(summary, ["method", "tsp_step"], "title", "test accuracy (%)", caption="n = 4 runs per row")
    cells = _cells(fig)
    assert cells[(0, 0)] == "method" and cells[(0, 1)] == "TSP steps" and cells[(0, 5)] == "n"
    assert cells[(0, 6)] == "collapsed" and cells[(0, 7)] == "majority baseline"
    rows = {(cells[(r, 0)], cells[(r, 1)]): [cells[(r, c)] for c in range(8)] for r in range(1, 5)}
    houlsby = rows[("with adapters (Houlsby)", "0")]
    kept = frame.loc[(frame.method == "houlsby") & (frame.tsp_step == 0), "value"].iloc[1:]
    assert houlsby[2] == f"{100 * kept.mean():.1f} ± {100 * kept.std(ddof=1):.1f}"  # the collapsed run left out
    assert houlsby[5] == "3" and houlsby[6] == "collapsed 1/4" and houlsby[7] == "53.0"
    assert rows[("without adapters (full fine-tuning)", "200")][6] == "0/4"
    assert len({r for r, _ in cells}) == 1 + len(summary)
    assert "title" in figure_texts(fig) and any("n = 4 runs per row" in t for t in figure_texts(fig))
    assert save_pdf(fig, tmp_path / "t.pdf").read_bytes().startswith(b"%PDF")


def test_a_group_whose_runs_all_failed_keeps_its_row():
    frame = pd.DataFrame(
        {"method": ["full"] * 3 + ["houlsby"] * 3, "value": [0.5, 0.51, 0.52, 0.7, 0.72, 0.71], "baseline": 0.53}
    )
    summary = stability.summarize(frame, by=["method"], n_resamples=99)
    cells = _cells(summary_table(summary, ["method"], "t", "test accuracy (%)"))
    full = [cells[(1, c)] for c in range(6)]
    assert full[1] == "n/a (no run kept)" and full[4] == "0" and full[5] == "collapsed 3/3"


def test_table_is_cropped_to_its_content(tmp_path):
    summary = stability.summarize(_scores(), by=["method"], n_resamples=99, pooled=["tsp_step"])
    fig = summary_table(summary, ["method"], "t", "test accuracy (%)")
    widths = sum(cell.get_width() for (r, _), cell in fig.axes[0].tables[0].get_celld().items() if r == 0)
    assert widths == pytest.approx(1.0)  # the columns fill the figure: no empty margin
    assert fig.get_figwidth() < 8


def test_empty_summary_is_an_error():
    with pytest.raises(ValueError, match="nothing to tabulate"):
        summary_table(
            pd.DataFrame(columns=["method", "n", "mean", "std", "min", "max", "n_failed"]), ["method"], "t", "v"
        )


def test_plot_table_command_on_a_store(tiny_store, tmp_path, monkeypatch):
    from robustkit.cli import main
    from robustkit.figures import FIGURES, tables

    shown = {}
    original = tables.summary_table

    def spy(summary, *args, **kwargs):
        shown["summary"] = summary
        return original(summary, *args, **kwargs)

    monkeypatch.setattr(tables, "summary_table", spy)
    out = tmp_path / "table.pdf"
    assert (
        main(
            [
                "plot",
                "table",
                str(tiny_store),
                "--by",
                "method",
                "-o",
                str(out),
                "--subtitle",
                "tiny stand-in",
                "--footer",
                "Claim: x.\\nVerdict: inconclusive.",
            ]
        )
        == 0
    )
    assert out.read_bytes().startswith(b"%PDF")
    summary = shown["summary"]
    assert set(summary["method"]) == {"houlsby", "full"} and (summary["n_runs"] == 1).all()
    assert set(collapse.FAILURE_COLUMNS) - {"n_ok"} <= set(summary.columns) and "baseline" in summary
    assert all(FIGURES[name].score_axis for name in ("table", "mean-best", "tradeoff-aggregate"))
