"""The results table's statistics (Han et al. 2021 table 1, He et al. 2021 tables 2, 5, 7).

One row per group of runs: mean +- std, bootstrap CI and range of the kept runs, the failed
(collapsed or diverged) runs counted, the majority baseline, and the methods compared within
each row's other settings. Settings that vary inside a requested row become row columns
(:func:`robustkit.analysis.pooling.split_columns`): runs are never pooled silently.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from robustkit.analysis import stability
from robustkit.analysis.pooling import split_columns
from robustkit.store.collapse import marked


def results_table(frame: pd.DataFrame, by: Sequence[str], include_failed: bool = False) -> dict:
    """Statistics per row of the runs' scores.

    Parameters
    ----------
    frame : DataFrame
        One row per run: the ``scores`` analysis (:func:`robustkit.analysis.scores.outcomes`).
    by : sequence of str
        Columns that define a row (``task, method, tsp_step, train_size, ...``).
    include_failed : bool
        Keep collapsed and diverged runs in the statistics and tests.

    Returns
    -------
    dict
        ``summary``: one row per group (:func:`robustkit.analysis.stability.summarize` + the
        mean ``baseline``), sorted by ``by``; ``by``: the row columns (``by`` + any setting
        that varies inside a row); ``caption``: the tests between methods within each row's
        other columns (:func:`robustkit.analysis.stability.caption`); ``source``: one row per
        run (the scores the statistics come from).
    """
    frame = marked(frame)
    by = split_columns(frame, [c.strip() for c in by])
    within = [c for c in by if c != "method"] or None
    tests = stability.compare(frame, by="method", within=within, include_failed=include_failed)
    summary = stability.summarize(frame, by=by, include_failed=include_failed)
    if "baseline" in frame:
        summary = summary.merge(frame.groupby(by, dropna=False)["baseline"].mean().reset_index(), on=by, how="left")
    return {
        "summary": summary.sort_values(by),
        "by": by,
        "caption": stability.caption(summary, tests, group="row"),
        "source": frame,
    }
