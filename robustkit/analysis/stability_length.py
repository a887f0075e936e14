"""Seed stability against training length (Chen et al. 2022, "Revisiting Parameter-Efficient
Tuning: Are We Really There Yet?", EMNLP; issue #30, item 5), from the runs' own evaluations.

Every run evaluates its validation split at each fine-tuning epoch end (the ``epoch-scores``
analysis, :func:`robustkit.analysis.scores.epoch_outcomes`), so one set of runs gives the seed
spread of each method after 1, 2, ... epochs of training. Two numbers:

- the standard deviation over seeds per configuration and epoch (:func:`seed_spread_by_epoch`,
  what the figure draws), and
- per run, its distance |score - median| from the median of the *other* runs of its
  configuration at an epoch end, at the first epoch end minus at its last (:func:`deviation_drops`:
  one number per run, so a claim can test "training longer brings the seeds together" with the
  run as the unit). Leave-one-out, unlike Brown-Forsythe's deviations: with the run's own score in
  the median, the median run is at distance 0 by construction, so with an odd number of seeds the
  run that is the median after the first epoch could only get closer by a negative amount.

Every evaluation counts, a run at the majority class too: a seed that has not learned yet (or
never does) is the instability Chen et al. count over seeds. Each run's ``outcome`` in
:func:`deviation_drops` is its outcome at its last epoch end.

Deviation from the paper: an epoch end here is a point of one run under the learning-rate
schedule of the whole run (linear decay to zero at its last step), not a separate run trained
for that many epochs, as the paper's lengths are (as Han et al. 2021's figures 9-10 at
``han2021/fig9-10``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from robustkit.analysis.pooling import setting_columns
from robustkit.store.tables import IDENTITY


def _configurations(frame: pd.DataFrame) -> pd.Series:
    """Each row's configuration: every run setting but the seed, as one text key."""
    settings = setting_columns(frame)
    return frame[settings].map(str).agg("|".join, axis=1) if settings else pd.Series("", index=frame.index)


def deviations(frame: pd.DataFrame) -> pd.DataFrame:
    """Each evaluation's |score - median of the other runs of its configuration at that epoch end|.

    Parameters
    ----------
    frame : DataFrame
        ``epoch-scores`` rows (identity columns, ``epoch``, ``value``, ``outcome``).

    Returns
    -------
    DataFrame
        ``frame`` + ``median`` (of the others; NaN for a run alone) + ``deviation`` (score units).
    """
    key = _configurations(frame)
    others = pd.Series(np.nan, index=frame.index)
    for _, cell in frame.groupby([key, frame["epoch"]]):
        values = cell["value"].to_numpy(float)
        for position, index in enumerate(cell.index):
            rest = np.delete(values, position)
            others[index] = np.median(rest) if len(rest) else np.nan
    return frame.assign(median=others, deviation=(frame["value"] - others).abs())


def deviation_drops(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run's deviation at its first epoch end minus at its last (module docstring).

    Returns
    -------
    DataFrame
        Identity columns + ``value`` + ``outcome`` (the run's at its last epoch end).
    """
    rows = deviations(frame).sort_values("epoch")
    first = rows.groupby("run_id").first()
    last = rows.groupby("run_id").last()
    drop = (first["deviation"] - last["deviation"]).rename("value")
    table = last[["outcome"]].join(drop).reset_index()
    return rows.drop_duplicates("run_id")[IDENTITY].merge(table, on="run_id")


def seed_spread_by_epoch(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """What the ``stability-length`` figure draws.

    Returns
    -------
    dict
        ``spread``: per method and epoch end, the standard deviation over seeds (ddof 1),
        ``runs`` and ``failed`` (evaluations not ``ok``); ``deviations``: :func:`deviations`.
    """
    rows = deviations(frame)
    key = _configurations(rows)
    grouped = rows.assign(_config=key, _failed=rows["outcome"] != "ok").groupby(["_config", "method", "epoch"], sort=True)
    spread = grouped.agg(std=("value", "std"), runs=("run_id", "nunique"), failed=("_failed", "sum")).reset_index()
    return {"spread": spread.drop(columns="_config"), "deviations": rows}
