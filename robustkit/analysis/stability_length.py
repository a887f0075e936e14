"""Seed stability against training length (Chen et al. 2022, "Revisiting Parameter-Efficient
Tuning: Are We Really There Yet?", EMNLP; issue #30, item 5), from the runs' own evaluations.

Every run evaluates its validation split at each fine-tuning epoch end (the ``epoch-scores``
analysis, :func:`robustkit.analysis.scores.epoch_outcomes`), so one set of runs gives the seed
spread of each method after 1, 2, ... epochs of training. Two numbers:

- the standard deviation over seeds per configuration and epoch (:func:`seed_spread_by_epoch`,
  what the figure draws, with each run's distance from the median of the other runs of its
  configuration, :func:`deviations`: a picture, never tested), and
- per **disjoint seed pair** of a configuration (runs sorted by seed, first with second, third
  with fourth), the gap |score A - score B| at the pair's first epoch end minus at its last
  (:func:`pair_gap_drops`): what a claim tests "training longer brings the seeds together" on.
  A pair's ``outcome`` is ``ok`` only where both runs' outcomes at their last epoch end are.

Every evaluation counts, a run at the majority class too. An epoch end is a point of one run
under the whole run's learning-rate schedule, not a separate run trained for that many epochs
as in the paper.

Why disjoint pairs (issue #37), the gap as an estimate of the spread, and the deviation from the
paper: ``docs/analyses.md``, "robustkit/analysis/stability_length.py".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from robustkit.analysis.pooling import setting_columns
from robustkit.store.collapse import OK
from robustkit.store.identity import IDENTITY


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


def pair_gap_drops(frame: pd.DataFrame) -> pd.DataFrame:
    """Per disjoint seed pair of a configuration: its score gap at the first epoch end minus at
    the last (module docstring).

    Parameters
    ----------
    frame : DataFrame
        ``epoch-scores`` rows (identity columns, ``epoch``, ``value``, ``outcome``).

    Returns
    -------
    DataFrame
        One row per pair, under the identity of its lower-seed run A: identity columns +
        ``seed_b`` + ``value`` (|A - B| at the first epoch end both runs have minus at the last
        both have; score units, positive = the two seeds came closer after training longer) +
        ``outcome`` (``ok`` where both runs are ``ok`` at their last epoch end, else the first
        failed one's). A pair with fewer than two common epoch ends gives no row.
    """
    columns = [*IDENTITY, "seed_b", "value", "outcome"]
    runs = frame.drop_duplicates("run_id")
    scores = {
        run_id: group.sort_values("epoch").drop_duplicates("epoch", keep="last").set_index("epoch")
        for run_id, group in frame.groupby("run_id", sort=False)
    }
    rows = []
    for _, group in runs.groupby(_configurations(runs), sort=True):
        ordered = group.sort_values(["seed", "run_id"])
        for (_, a), (_, b) in zip(list(ordered.iterrows())[0::2], list(ordered.iterrows())[1::2]):
            if a["seed"] == b["seed"]:
                continue
            first, second = scores[a["run_id"]], scores[b["run_id"]]
            epochs = first.index.intersection(second.index).sort_values()
            if len(epochs) < 2:
                continue
            gap = (first.loc[epochs, "value"] - second.loc[epochs, "value"]).abs()
            ends = (first.loc[epochs[-1], "outcome"], second.loc[epochs[-1], "outcome"])
            outcome = ends[0] if ends[0] != OK else ends[1]
            rows.append(
                {
                    **a[IDENTITY].to_dict(),
                    "seed_b": b["seed"],
                    "value": float(gap.iloc[0] - gap.iloc[-1]),
                    "outcome": outcome,
                }
            )
    return pd.DataFrame(rows, columns=columns)


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
    grouped = rows.assign(_config=key, _failed=rows["outcome"] != "ok").groupby(
        ["_config", "method", "epoch"], sort=True
    )
    spread = grouped.agg(std=("value", "std"), runs=("run_id", "nunique"), failed=("_failed", "sum")).reset_index()
    return {"spread": spread.drop(columns="_config"), "deviations": rows}
