"""The per-run statistics claims are tested on, each a function of one analysis's frame.

A paper's claim compares a number between groups of runs ("the dev loss rises more after its
minimum without adapters"). Each function here reduces the frame of one analysis (the very frame
its figure drew: :mod:`robustkit.analysis.registry` names each function as a statistic of its
analysis, ``<analysis>.<statistic>``) to that number, one row per observation with the run's
identity columns and ``value``; :mod:`robustkit.claim` adds each run's outcome and tests.

Signature: ``statistic(frame, store=None, **its own parameters) -> DataFrame``. Nothing here
runs an analysis: the frame is given, so a claim reads its figure's cache entry.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from robustkit.analysis import scores
from robustkit.analysis.scores import OUTCOME_ON, with_outcome  # noqa: F401  (kept importable from here)
from robustkit.analysis.select import select_runs
from robustkit.errors import RobustkitError
from robustkit.store.tables import IDENTITY


def score(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run's score (``scores`` analysis; its own outcome column is kept)."""
    return frame


def failed(frame: pd.DataFrame) -> pd.DataFrame:
    """1.0 for a collapsed or diverged run, 0.0 otherwise (for failed-run rates)."""
    return frame.assign(value=frame["failed"].astype(float), outcome="ok")  # every run counts in a rate


def collapsed(frame: pd.DataFrame) -> pd.DataFrame:
    """Whether a run collapsed, in He et al. 2021's sense (§5, figure 4): 1.0 or 0.0 (a rate's ones).

    1.0 for a run that learned and fell back to the majority class (outcome ``collapsed``,
    :mod:`robustkit.collapse`) or diverged, 0.0 for an ``ok`` run; their ``outcome`` is ``ok``:
    every one of them counts in the rate. A run that never left the majority class
    (``not-learned``: too short a budget for its learning rate) says nothing of collapse, either
    way: its ``value`` is NaN and its outcome stays ``not-learned``, so a claim leaves it out and
    counts it apart (the registry's ``undefined_on_failed`` says why).
    """
    from robustkit import collapse as rule

    learned = frame["outcome"] != rule.NOT_LEARNED
    ones = frame["outcome"].isin([rule.COLLAPSED, rule.DIVERGED]).astype(float)
    return frame.assign(value=ones.where(learned), outcome=frame["outcome"].where(~learned, rule.OK))


def epoch_score(frame: pd.DataFrame, epoch: str) -> pd.DataFrame:
    """The validation score at the end of fine-tuning epoch ``epoch`` (``last``: each run's last
    epoch end; ``all``: every epoch end)."""
    if epoch == "all":
        return frame
    if epoch == "last":
        return frame[frame["epoch"] == frame.groupby("run_id")["epoch"].transform("max")]
    return frame[frame["epoch"] == int(epoch)]


def pair_gap_drop(frame: pd.DataFrame) -> pd.DataFrame:
    """How much closer two seeds of a configuration end after training longer (Chen et al. 2022).

    Per disjoint seed pair of a configuration (seeds sorted, paired first with second, third with
    fourth; each run in at most one pair): |score A - score B| at the pair's first epoch end
    minus at its last, in score units (fraction units for accuracy); positive = the pair's
    seeds came together, negative = they drifted apart. One value per pair, a function of its
    two runs' histories alone, so the pairs are independent
    (:func:`robustkit.analysis.stability_length.pair_gap_drops`).
    """
    from robustkit.analysis.stability_length import pair_gap_drops

    return pair_gap_drops(frame)


def epoch_spread(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run's standard deviation of its validation scores over its epoch ends (ddof 1; the
    metric's units). Every evaluation counts, failed ones too: falling back is the instability."""
    spread = frame.groupby("run_id")["value"].std(ddof=1).rename("value").reset_index()
    return frame.drop_duplicates("run_id")[IDENTITY].merge(spread, on="run_id")


def epoch_mean(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run's mean validation score over its epoch ends (the metric's units)."""
    mean = frame.groupby("run_id")["value"].mean().rename("value").reset_index()
    return frame.drop_duplicates("run_id")[IDENTITY].merge(mean, on="run_id")


def rsa(frame: pd.DataFrame, measure: str, layer: str) -> pd.DataFrame:
    """Similarity of each run's representations to its base model's (He et al. 2021 §2.2).

    ``layer``: ``each`` (one row per run x layer), ``top`` / ``bottom`` (the mean over the top /
    bottom third of the encoder layers).
    """
    frame = frame[frame["measure"] == measure].drop(columns=["outcome"], errors="ignore")
    if layer != "each":
        frame = (
            _layer_third(frame, "layer", layer, first=1).groupby(IDENTITY, dropna=False, as_index=False)["value"].mean()
        )
    return frame


def gradnorm_slope(frame: pd.DataFrame, layer: str) -> pd.DataFrame:
    """Slope of log10 gradient norm over training steps (per 1,000 steps; Han et al. 2021 fig 3).

    ``layer``: a logged layer group (``pooler``, ``classifier``, ``embeddings``, ``layer.<i>``)
    or ``top`` / ``bottom`` (mean slope over the top / bottom third of the encoder layers).
    Negative = vanishing gradients.
    """
    if frame.empty:
        raise RobustkitError("no gradient norms were logged for these runs")
    if layer in ("top", "bottom"):
        frame = _layer_third(frame.dropna(subset=["layer_index"]), "layer_index", layer, first=0)
    else:
        frame = frame[frame["layer"] == layer]
    rows = []
    for (run_id, name), group in frame.groupby(["run_id", "layer"], sort=True):
        slope = np.polyfit(group["step"].to_numpy(float) / 1000, np.log10(group["value"].clip(lower=1e-30)), 1)[0]
        rows.append({"run_id": run_id, "layer": name, "value": slope})
    slopes = pd.DataFrame(rows).groupby("run_id", as_index=False)["value"].mean()
    return frame.drop_duplicates("run_id")[IDENTITY].merge(slopes, on="run_id")


def similarity_ci(frame: pd.DataFrame, measure: str, layer: str) -> pd.DataFrame:
    """A measure of the ``similarity-ci`` analysis (``rsa``, ``cka``, ``cka-debiased``,
    ``procrustes``) of each run's layers with the base model's; ``layer`` as in :func:`rsa`."""
    frame = frame[frame["measure"] == measure]
    if layer != "each":
        frame = (
            _layer_third(frame, "layer", layer, first=1).groupby(IDENTITY, dropna=False, as_index=False)["value"].mean()
        )
    return frame[[*IDENTITY, *(["layer"] if layer == "each" else []), "value"]]


def attack_success(frame: pd.DataFrame, convention: str, attacker: str) -> pd.DataFrame:
    """Attack success rate of each run under ``attacker`` (fraction; Han et al. 2021 §4)."""
    from robustkit.analysis import attack

    summary = attack.summarize(frame[frame["attacker"] == attacker])
    summary = summary[summary["convention"] == convention].rename(columns={"success_rate": "value"})
    return summary[[*IDENTITY, "value"]]


def overfit(frame: pd.DataFrame) -> pd.DataFrame:
    """Rise of the dev loss from its minimum to the end of training (loss units; He et al. §5)."""
    dev = frame[(frame["split"] == "validation") & (frame["metric"] == "loss")].sort_values("step")
    rise = dev.groupby("run_id")["value"].agg(lambda v: v.iloc[-1] - v.min()).rename("value").reset_index()
    return dev.drop_duplicates("run_id")[IDENTITY].merge(rise, on="run_id")


def metric_fall(frame: pd.DataFrame) -> pd.DataFrame:
    """Fall of the main dev metric from its best evaluation to the end of training (He et al. 2021
    §5, figure 9: "Accuracy on the dev set w.r.t training steps").

    Per run: the maximum of its main validation metric over all evaluation steps minus its value
    at the last evaluation, in the metric's units (fraction units for accuracy and F1; every
    main metric is higher-is-better). >= 0; 0 = the run ends at its best (still improving or on
    a plateau), positive = it fell from its best by the end: overfitting in the metric. A noisier
    curve also falls further from its best by chance, so between methods the value carries the
    curve's noise too (He et al.'s table 6 best - mean, ``curves.best-minus-mean``, is that).
    """
    dev = frame[(frame["split"] == "validation") & (frame["metric"] == frame["main_metric"])].sort_values(
        "step", kind="stable"
    )
    fall = dev.groupby("run_id")["value"].agg(lambda v: v.max() - v.iloc[-1]).rename("value").reset_index()
    return dev.drop_duplicates("run_id")[IDENTITY].merge(fall, on="run_id")


def _mean_best(frame: pd.DataFrame) -> pd.DataFrame:
    from robustkit.analysis import curves

    return curves.mean_best_runs(frame.drop(columns=["outcome", "baseline"], errors="ignore"))


def best_minus_mean(frame: pd.DataFrame) -> pd.DataFrame:
    """Best minus mean of the main dev metric over all evaluations (He et al. 2021 table 6)."""
    frame = _mean_best(frame)
    return frame[IDENTITY].assign(value=frame["best"] - frame["mean"])


def mean_dev(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean of the main dev metric over all evaluations (He et al. 2021 table 6)."""
    frame = _mean_best(frame)
    return frame[IDENTITY].assign(value=frame["mean"])


def _ablation(frame: pd.DataFrame, store: str | Path, metric: str | None) -> pd.DataFrame:
    """The ablation rows of ``metric`` (default: each run's main metric)."""
    main = select_runs(store, {"run_id": list(frame["run_id"].unique())}).set_index("run_id")["main_metric"]
    return frame[frame["metric"] == (frame["run_id"].map(main) if metric is None else metric)]


def ablation_max_single_drop(frame: pd.DataFrame, store: str | Path, metric: str | None) -> pd.DataFrame:
    """Largest relative drop of the dev metric when one layer's adapters are removed (fraction,
    positive = worse; Houlsby et al. 2019 fig 6: "largest 2%"). ``metric``: default the main one."""
    frame = _ablation(frame, store, metric)
    single = frame[frame["first"] == frame["last"]]
    drop = single.groupby("run_id")["relative_change"].min().mul(-1).rename("value").reset_index()
    return single.drop_duplicates("run_id")[IDENTITY].merge(drop, on="run_id")


def ablation_all_removed_gap(frame: pd.DataFrame, store: str | Path, metric: str | None) -> pd.DataFrame:
    """Dev metric with every adapter removed minus the majority baseline (0 = "down to the
    majority class", Houlsby et al. 2019 fig 6). ``metric``: default the main one."""
    frame = _ablation(frame, store, metric)
    runs = select_runs(store, {"run_id": list(frame["run_id"].unique())}).set_index("run_id")
    rows = []
    for run_id, group in frame.groupby("run_id"):
        everything = group[(group["first"] == 0) & (group["last"] == group["last"].max())]
        run = runs.loc[run_id]
        base = scores.run_baseline(run, metric or run["main_metric"], "validation")
        rows.append({"run_id": run_id, "value": float(everything["value"].iloc[0]) - base})
    return frame.drop_duplicates("run_id")[IDENTITY].merge(pd.DataFrame(rows), on="run_id")


def ablation_low_minus_high(frame: pd.DataFrame, store: str | Path, metric: str | None) -> pd.DataFrame:
    """Mean relative drop of the spans inside the lower half of the layers minus that of the spans
    inside the upper half (negative = lower layers matter less, Houlsby et al. 2019 §3.6)."""
    frame = _ablation(frame, store, metric)
    rows = []
    for run_id, group in frame.groupby("run_id"):
        half = (group["last"].max() + 1) / 2
        low = -group.loc[group["last"] < half, "relative_change"].mean()
        high = -group.loc[group["first"] >= half, "relative_change"].mean()
        rows.append({"run_id": run_id, "value": low - high})
    return frame.drop_duplicates("run_id")[IDENTITY].merge(pd.DataFrame(rows), on="run_id")


def _layer_third(frame: pd.DataFrame, column: str, which: str, first: int) -> pd.DataFrame:
    """Rows of the top or bottom third (rounded up) of the encoder layers, per run.

    ``column`` numbers the encoder layers from ``first`` (1 in the similarity frames, where 0
    is the embeddings; 0 in the gradient-norm frames) to each run's highest index.
    """
    if which not in ("top", "bottom"):
        raise RobustkitError(f"layer must be each, top or bottom, got {which!r}")
    index = pd.to_numeric(frame[column])
    last = index.groupby(frame["run_id"]).transform("max")
    k = np.ceil((last - first + 1) / 3)
    keep = index > last - k if which == "top" else (index >= first) & (index < first + k)
    return frame[keep]
