"""One number per run (or per run x layer / epoch) from each analysis: what claims are tested on.

A paper's claim compares a statistic between groups of runs ("the dev loss rises more after its
minimum without adapters"). Each function here reduces one analysis to that statistic, one row
per observation, with the run's identity columns, its ``outcome`` (:mod:`robustkit.collapse`) and
``value``; :mod:`robustkit.claims` then groups and tests. Registered by name in
:data:`STATISTICS`, which recipes name in their ``[[claim]]`` tables.

Every statistic reads the cached analyses (nothing is recomputed twice) and marks each run with
the outcome of its score on ``outcome_split`` / ``outcome_checkpoint`` (default: the best
checkpoint on test), so that collapsed runs can be left out of the comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from robustkit.analysis import scores
from robustkit.analysis.select import select_runs
from robustkit.errors import RobustkitError
from robustkit.store.tables import IDENTITY

Statistic = Callable[..., pd.DataFrame]


def score(store: str | Path, run_ids: list[str], split: str = "test", checkpoint: str = "best",
          metric: str | None = None, epoch: int | str | None = None, **_) -> pd.DataFrame:
    """The final score of each run (:func:`robustkit.analysis.scores.outcomes`).

    Parameters
    ----------
    split, checkpoint, metric
        As in :func:`~robustkit.analysis.scores.outcomes`.
    epoch : int or "all", optional
        The validation score at the end of this fine-tuning epoch, or at every epoch end
        (``"all"``: one observation per run x epoch, Han et al. 2021 figures 9-10).

    Returns
    -------
    DataFrame
        Identity columns + ``epoch`` (with ``epoch``), ``value`` (fraction units for accuracy /
        F1), ``outcome``.
    """
    select = {"run_id": run_ids}
    if epoch is None:
        return scores.outcomes(store, select, checkpoint=checkpoint, split=split, metric=metric)
    epochs = None if epoch == "all" else [int(epoch)]
    return scores.epoch_outcomes(store, select, split="validation", metric=metric, epochs=epochs)


def collapsed(store: str | Path, run_ids: list[str], **params) -> pd.DataFrame:
    """1.0 for a collapsed or diverged run, 0.0 otherwise (for failed-run rates)."""
    frame = score(store, run_ids, **params)
    return frame.assign(value=frame["failed"].astype(float), outcome="ok")  # every run counts in a rate


def rsa(store: str | Path, run_ids: list[str], measure: str = "rsa", layer: str = "each", tokens: int = 5000,
        checkpoint: str = "best", **outcome) -> pd.DataFrame:
    """Similarity of each run's representations to its base model's (He et al. 2021 §2.2).

    Parameters
    ----------
    measure : {"rsa", "cka"}
    layer : {"each", "top", "bottom"}
        ``each``: one row per run x layer (column ``layer``); ``top`` / ``bottom``: the mean over
        the top / bottom third of the encoder layers.
    """
    from robustkit.analysis import similarity

    frame = similarity.run(store, {"run_id": run_ids}, tokens=tokens, checkpoint=checkpoint, progress=False)
    frame = frame[frame["measure"] == measure]
    if layer != "each":
        frame = _layer_third(frame, "layer", layer, first=1).groupby(IDENTITY, dropna=False, as_index=False)["value"].mean()
    return _with_outcome(store, run_ids, frame, **outcome)


def gradnorm_slope(store: str | Path, run_ids: list[str], layer: str = "classifier", **outcome) -> pd.DataFrame:
    """Slope of log10 gradient norm over training steps (per 1,000 steps; Han et al. 2021 fig 3).

    Parameters
    ----------
    layer : str
        A logged layer group (``pooler``, ``classifier``, ``embeddings``, ``layer.<i>``) or
        ``top`` / ``bottom`` (mean slope over the top / bottom third of the encoder layers).
        Negative = vanishing gradients.
    """
    from robustkit.analysis import gradnorm

    frame = gradnorm.run(store, {"run_id": run_ids})
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
    identity = frame.drop_duplicates("run_id")[IDENTITY]
    return _with_outcome(store, run_ids, identity.merge(slopes, on="run_id"), **outcome)


def landscape_curvature(store: str | Path, run_ids: list[str], alphas: str = "-2:2:20", split: str = "validation",
                        checkpoint: str = "best", **outcome) -> pd.DataFrame:
    """Curvature of the loss at the tuned point alpha = 1 of theta_0 -> theta_1 (He et al. 2021 §5).

    The second derivative of a quadratic fitted to the 5 grid points nearest alpha = 1 (the
    grid of -2:2:20 does not hold 1 exactly); smaller = flatter minimum. Loss units per alpha^2.
    """
    from robustkit.analysis import landscape

    frame = landscape.run(store, {"run_id": run_ids}, alphas=alphas, splits=(split,), checkpoint=checkpoint, progress=False)
    frame = frame[(frame["metric"] == "loss") & (frame["split"] == split)]
    rows = []
    for run_id, group in frame.groupby("run_id", sort=True):
        near = group.iloc[np.argsort(np.abs(group["alpha"].to_numpy(float) - 1.0))[:5]]
        rows.append({"run_id": run_id, "value": 2 * np.polyfit(near["alpha"].to_numpy(float), near["value"].to_numpy(float), 2)[0]})
    identity = frame.drop_duplicates("run_id")[IDENTITY]
    return _with_outcome(store, run_ids, identity.merge(pd.DataFrame(rows), on="run_id"), **outcome)


def curvature(store: str | Path, run_ids: list[str], checkpoint: str = "last", estimator: str = "top_eigenvalue",
              group: str = "all", examples: int = 32, max_iterations: int = 30, samples: int = 30, seed: int = 0,
              block_eigenvalues: bool = True, **outcome) -> pd.DataFrame:
    """Sharpness of each run's training loss at ``checkpoint``: the top Hessian eigenvalue or the
    Hessian trace over the trained parameters (``group="all"``) or one block (``layer.3``), from
    :func:`robustkit.analysis.curvature.run` (nats per squared parameter unit; smaller = flatter).
    """
    from robustkit.analysis import curvature as analysis

    frame = analysis.run(store, {"run_id": run_ids}, checkpoints=[checkpoint], examples=examples,
                         max_iterations=max_iterations, samples=samples, seed=seed,
                         block_eigenvalues=block_eigenvalues, progress=False)
    frame = frame[(frame["estimator"] == estimator) & (frame["group"] == group)]
    if frame.empty:
        raise RobustkitError(f"no {estimator} of block {group!r} for these runs")
    return _with_outcome(store, run_ids, frame[[*IDENTITY, "value"]], **outcome)


def barrier(store: str | Path, run_ids: list[str], checkpoint: str = "best", metric: str = "loss", alphas: str = "0:1:11",
            split: str = "train", examples: int = 512, seed: int = 0, **outcome) -> pd.DataFrame:
    """Linear mode connectivity barrier of every seed pair among the runs (Frankle et al. 2020):
    max over alpha of the loss (or ``<metric> error``) minus the mean of the two ends, one row per
    pair under the identity of its lower-seed run (:func:`robustkit.analysis.connectivity.run`)."""
    from robustkit.analysis import connectivity

    table = connectivity.barriers(connectivity.run(store, {"run_id": run_ids}, checkpoint=checkpoint, alphas=alphas,
                                                   split=split, examples=examples, seed=seed, progress=False))
    table = table[table["metric"] == (metric if metric == "loss" else f"{metric} error")]
    return _with_outcome(store, run_ids, table[[*IDENTITY, "barrier"]].rename(columns={"barrier": "value"}), **outcome)


def similarity_beyond(store: str | Path, run_ids: list[str], measure: str = "cka-debiased", layer: str = "each",
                      tokens: int = 5000, checkpoint: str = "best", groups: int = 20, resamples: int = 200,
                      **outcome) -> pd.DataFrame:
    """A measure of :mod:`robustkit.analysis.similarity_ci` (``rsa``, ``cka``, ``cka-debiased``,
    ``procrustes``) of each run's layers with the base model's; ``layer`` as in :func:`rsa`."""
    from robustkit.analysis import similarity_ci

    frame = similarity_ci.run(store, {"run_id": run_ids}, tokens=tokens, checkpoint=checkpoint, groups=groups,
                              resamples=resamples, progress=False)
    frame = frame[frame["measure"] == measure]
    if layer != "each":
        frame = _layer_third(frame, "layer", layer, first=1).groupby(IDENTITY, dropna=False, as_index=False)["value"].mean()
    return _with_outcome(store, run_ids, frame[[*IDENTITY, *(["layer"] if layer == "each" else []), "value"]], **outcome)


def attack_success(store: str | Path, run_ids: list[str], n: int = 200, seed: int = 0, convention: str = "openattack",
                   checkpoint: str = "best", **outcome) -> pd.DataFrame:
    """PWWS attack success rate of each run (fraction; Han et al. 2021 §4)."""
    from robustkit.analysis import attack

    summary = attack.summarize(attack.run(store, {"run_id": run_ids}, n=n, seed=seed, checkpoint=checkpoint, progress=False))
    summary = summary[summary["convention"] == convention].rename(columns={"success_rate": "value"})
    return _with_outcome(store, run_ids, summary[[*IDENTITY, "value"]], **outcome)


def _dev_history(store: str | Path, run_ids: list[str]) -> pd.DataFrame:
    from robustkit.analysis import curves

    return curves.run(store, {"run_id": run_ids})


def overfit(store: str | Path, run_ids: list[str], **outcome) -> pd.DataFrame:
    """Rise of the dev loss from its minimum to the end of training (loss units; He et al. §5)."""
    dev = _dev_history(store, run_ids)
    dev = dev[(dev["split"] == "validation") & (dev["metric"] == "loss")].sort_values("step")
    rise = dev.groupby("run_id")["value"].agg(lambda v: v.iloc[-1] - v.min()).rename("value").reset_index()
    return _with_outcome(store, run_ids, dev.drop_duplicates("run_id")[IDENTITY].merge(rise, on="run_id"), **outcome)


def _mean_best(store: str | Path, run_ids: list[str]) -> pd.DataFrame:
    from robustkit.analysis import curves

    return curves.mean_best_runs(_dev_history(store, run_ids))


def best_minus_mean(store: str | Path, run_ids: list[str], **outcome) -> pd.DataFrame:
    """Best minus mean of the main dev metric over all evaluations (He et al. 2021 table 6)."""
    frame = _mean_best(store, run_ids)
    return _with_outcome(store, run_ids, frame[IDENTITY].assign(value=frame["best"] - frame["mean"]), **outcome)


def mean_dev(store: str | Path, run_ids: list[str], **outcome) -> pd.DataFrame:
    """Mean of the main dev metric over all evaluations (He et al. 2021 table 6)."""
    frame = _mean_best(store, run_ids)
    return _with_outcome(store, run_ids, frame[IDENTITY].assign(value=frame["mean"]), **outcome)


def _ablation(store: str | Path, run_ids: list[str], checkpoint: str, metric: str | None) -> pd.DataFrame:
    """The ablation rows of ``metric`` (default: each run's main metric)."""
    from robustkit.analysis import ablation

    frame = ablation.run(store, {"run_id": run_ids}, checkpoint=checkpoint, progress=False)
    main = select_runs(store, {"run_id": run_ids}).set_index("run_id")["main_metric"]
    return frame[frame["metric"] == (frame["run_id"].map(main) if metric is None else metric)]


def ablation_max_single_drop(store: str | Path, run_ids: list[str], checkpoint: str = "best", metric: str | None = None,
                             **outcome) -> pd.DataFrame:
    """Largest relative drop of the dev metric when one layer's adapters are removed (fraction,
    positive = worse; Houlsby et al. 2019 fig 6: "largest 2%"). ``metric``: default the main one."""
    frame = _ablation(store, run_ids, checkpoint, metric)
    single = frame[frame["first"] == frame["last"]]
    drop = single.groupby("run_id")["relative_change"].min().mul(-1).rename("value").reset_index()
    return _with_outcome(store, run_ids, single.drop_duplicates("run_id")[IDENTITY].merge(drop, on="run_id"), **outcome)


def ablation_all_removed_gap(store: str | Path, run_ids: list[str], checkpoint: str = "best", metric: str | None = None,
                             **outcome) -> pd.DataFrame:
    """Dev metric with every adapter removed minus the majority baseline (0 = "down to the
    majority class", Houlsby et al. 2019 fig 6). ``metric``: default the main one."""
    frame = _ablation(store, run_ids, checkpoint, metric)
    runs = select_runs(store, {"run_id": run_ids}).set_index("run_id")
    rows = []
    for run_id, group in frame.groupby("run_id"):
        everything = group[(group["first"] == 0) & (group["last"] == group["last"].max())]
        run = runs.loc[run_id]
        base = scores.majority_baseline(run["task"], metric or run["main_metric"], "validation", scores._none(run.get("data_dir")),
                                           None if pd.isna(run["train_size"]) else int(run["train_size"]), int(run["split_seed"]))
        rows.append({"run_id": run_id, "value": float(everything["value"].iloc[0]) - base})
    return _with_outcome(store, run_ids, frame.drop_duplicates("run_id")[IDENTITY].merge(pd.DataFrame(rows), on="run_id"), **outcome)


def ablation_low_minus_high(store: str | Path, run_ids: list[str], checkpoint: str = "best", metric: str | None = None,
                            **outcome) -> pd.DataFrame:
    """Mean relative drop of the spans inside the lower half of the layers minus that of the spans
    inside the upper half (negative = lower layers matter less, Houlsby et al. 2019 §3.6)."""
    frame = _ablation(store, run_ids, checkpoint, metric)
    rows = []
    for run_id, group in frame.groupby("run_id"):
        half = (group["last"].max() + 1) / 2
        low = -group.loc[group["last"] < half, "relative_change"].mean()
        high = -group.loc[group["first"] >= half, "relative_change"].mean()
        rows.append({"run_id": run_id, "value": low - high})
    return _with_outcome(store, run_ids, frame.drop_duplicates("run_id")[IDENTITY].merge(pd.DataFrame(rows), on="run_id"), **outcome)


STATISTICS: dict[str, Statistic] = {
    "score": score,
    "collapsed": collapsed,
    "rsa": rsa,
    "gradnorm-slope": gradnorm_slope,
    "landscape-curvature": landscape_curvature,
    "curvature": curvature,
    "barrier": barrier,
    "similarity-beyond": similarity_beyond,
    "attack-success": attack_success,
    "overfit": overfit,
    "best-minus-mean": best_minus_mean,
    "mean-dev": mean_dev,
    "ablation-max-single-drop": ablation_max_single_drop,
    "ablation-all-removed-gap": ablation_all_removed_gap,
    "ablation-low-minus-high": ablation_low_minus_high,
}


def compute(name: str, store: str | Path, run_ids: list[str], params: dict | None = None) -> pd.DataFrame:
    """The per-run statistic ``name`` on the runs ``run_ids`` of ``store``.

    Raises
    ------
    RobustkitError
        Unknown statistic (the known ones are listed).
    """
    if name not in STATISTICS:
        raise RobustkitError(f"unknown statistic {name!r}; known: {', '.join(STATISTICS)}")
    return STATISTICS[name](store, run_ids, **(params or {}))


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


def _with_outcome(store: str | Path, run_ids: list[str], frame: pd.DataFrame, outcome_split: str = "test",
                  outcome_checkpoint: str = "best", **unknown) -> pd.DataFrame:
    """``frame`` + ``outcome``: each run's outcome on its score (collapsed runs are not results)."""
    if unknown:
        raise RobustkitError(f"unknown statistic parameter(s): {', '.join(sorted(unknown))}")
    outcomes = scores.outcomes(store, {"run_id": run_ids}, checkpoint=outcome_checkpoint, split=outcome_split)
    # An analysis frame may carry its own outcome (e.g. similarity.run's, for its figure): the
    # claim's outcome split and checkpoint decide here. Merging both gave outcome_x / outcome_y
    # and no ``outcome``, so no run was left out.
    frame = frame.drop(columns=["outcome"], errors="ignore")
    return frame.merge(outcomes[["run_id", "outcome"]], on="run_id", how="left").fillna({"outcome": "ok"})
