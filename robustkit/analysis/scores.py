"""Each run's score, read back from the store, with its outcome (ok / collapsed / diverged).

:func:`outcomes` gives one score per run (a checkpoint's metric on a split, from the manifest's
final metrics or an epoch's evaluation in ``history.parquet``), :func:`epoch_outcomes` one per
run x fine-tuning epoch; both add the majority-class baseline and the run's outcome
(:mod:`robustkit.store.collapse`). Nothing is recomputed and no cache is needed, except the majority
baseline, which reads each task's labels once per process. Statistics over these scores are in
:mod:`robustkit.analysis.stability`.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd

from robustkit.analysis.declare import (
    METRIC,
    NEVER_LEARNED,
    Analysis,
    Param,
    Statistic,
    checkpoint_param,
)
from robustkit.analysis.registry import register_analysis
from robustkit.errors import RobustkitError
from robustkit.store.identity import IDENTITY

# Everything robustkit reads about this module's two analyses (robustkit.analysis.declare): the
# final scores and the scores at every epoch end, both read from the manifests and logs.
DECLARED = (
    register_analysis(
        Analysis(
            "scores",
            "each run's final score and outcome (ok / collapsed / diverged) on a split",
            "From the manifests (no model is loaded): each selected run's metric at the chosen checkpoint and split, "
            "and "
            "its outcome (robustkit.store.collapse).",
            ":outcomes",
            (
                Param("split", "test", "split scored", choices=("test", "validation")),
                checkpoint_param("best: best validation main metric; last: end of training"),
                METRIC,
            ),
            statistics=(
                Statistic("score", ":score", "the run's score (fraction units for accuracy / F1)", better="higher"),
                Statistic(
                    "failed",
                    ":failed",
                    "1 for a collapsed or diverged run, 0 otherwise (failure rates: every run counts)",
                ),
                Statistic(
                    "collapsed",
                    ":collapsed",
                    "1 for a run that learned and fell back to the majority class (collapsed) or diverged, 0 for an ok "
                    "run "
                    "(a rate's ones, unitless; He et al. 2021 §5's collapse); a run that never left the majority class "
                    "is "
                    "left out",
                    ends=True,
                    better=None,
                    undefined_on_failed=NEVER_LEARNED,
                ),
            ),
            output="the per-run scores",
            order=10,
            views=(
                "robustkit.analysis.boxes:box_seeds",
                "robustkit.analysis.boxes:box_tsp",
                "robustkit.analysis.boxes:box_lr",
                "robustkit.analysis.boxes:train_size",
                "robustkit.analysis.results:results_table",
            ),
            module=__name__,
        )
    ),
    register_analysis(
        Analysis(
            "epoch-scores",
            "each run's validation score at every fine-tuning epoch end (Han et al. 2021 figures 9-10)",
            "The validation main metric (or --metric) at the end of each fine-tuning epoch of each selected run, with "
            "the "
            "run's outcome.",
            ":epoch_outcomes",
            (METRIC,),
            statistics=(
                Statistic(
                    "score",
                    ":epoch_score",
                    "the validation score at the end of one epoch (one observation per run), or at every epoch end "
                    "('all': one per run x epoch)",
                    (
                        Param(
                            "epoch",
                            "all",
                            "an epoch number, last (each run's last epoch end), or all (one observation per run x "
                            "epoch)",
                        ),
                    ),
                    better="higher",
                    schedule=True,
                ),
                Statistic(
                    "spread",
                    ":epoch_spread",
                    "standard deviation of a run's validation scores over its epoch ends (ddof 1; one value per run: "
                    "training-time instability)",
                    schedule=True,
                ),
                Statistic(
                    "mean",
                    ":epoch_mean",
                    "mean of a run's validation scores over its epoch ends (one value per run)",
                    better="higher",
                    schedule=True,
                ),
                Statistic(
                    "pair-gap-drop",
                    ":pair_gap_drop",
                    "|score A - score B| of a disjoint seed pair of one configuration at its first epoch end minus at "
                    "its last (score units, fraction for accuracy; positive = the two seeds came closer after training "
                    "longer); one value per pair, from its two runs alone",
                    unit="disjoint pair",
                    ends=False,
                    better=None,
                    undefined_on_failed="",
                    schedule=True,
                ),
            ),
            output="the per-run x epoch scores",
            order=20,
            views=(
                "robustkit.analysis.boxes:box_tsp_epochs",
                "robustkit.analysis.stability_length:seed_spread_by_epoch",
            ),
            module=__name__,
        )
    ),
)


_SCORED = ["value", "baseline", "n_eval", "top_class_share", "outcome", "failed"]
OUTCOME_COLUMNS = [
    *IDENTITY,
    "checkpoint",
    "split",
    "metric",
    *_SCORED[:-2],
    "eval_loss",
    "ever_learned",
    *_SCORED[-2:],
]
EPOCH_COLUMNS = [*IDENTITY, "epoch", "step", "split", "metric", *_SCORED]


def outcomes(
    store: str | Path,
    select: dict | list[str] | None = None,
    *,
    checkpoint: str,
    split: str | None,
    metric: str | None,
    epoch: int | None = None,
    baseline: float | Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """One row per selected run: its final score and whether it failed.

    Parameters
    ----------
    store : path
        Run store.
    select : dict or list of str, optional
        Run filters (``["task=rte", "method=houlsby,full"]``); complete fine-tuning runs only.
    checkpoint : {"best", "last"}
        ``best``: the checkpoint of the best validation main metric (so its ``validation``
        score is optimistically biased: use ``test`` to compare); ``last``: the end of training.
    split : {"test", "validation"}, optional
        Split the score was measured on; default ``test``, or ``validation`` with ``epoch``.
    metric : str, optional
        Metric name (``accuracy``, ``f1``, ``mcc``, ``loss``, ...); default each run's task's
        main metric.
    epoch : int, optional
        Instead of a checkpoint, the validation score at the end of this fine-tuning epoch
        (from the history; see :func:`epoch_outcomes`). ``checkpoint`` is then ignored.
    baseline : float or mapping of task to float, optional
        Majority-class baseline to use instead of computing it from the task's labels.

    Returns
    -------
    DataFrame
        One row per run: identity columns (``run_id, model, task, method, seed, tsp_step, lr,
        train_size, adapter_size``) + ``checkpoint, split, metric`` + ``value`` (the metric, as
        a fraction for accuracy / F1, e.g. 0.71) + ``baseline`` (the same metric of always
        predicting the majority training label; NaN for ``loss`` or when the data cannot be
        read) + ``failed`` (nullable bool: ``value <= baseline``, NA without a baseline).

    Raises
    ------
    RobustkitError
        No complete run matches ``select``, or no selected run has the requested score.
    """
    import numpy as np
    import pandas as pd

    from robustkit.analysis.select import select_runs

    if epoch is not None:
        return epoch_outcomes(
            store, select, split=split or "validation", metric=metric, epochs=[epoch], baseline=baseline
        )
    split = split or "test"
    runs = select_runs(store, select)
    names = runs["main_metric"] if metric is None else pd.Series(metric, index=runs.index)
    columns = [f"{checkpoint}/{split}/{name}" for name in names]
    values = [run.get(column, np.nan) for column, (_, run) in zip(columns, runs.iterrows())]

    def final(name: str) -> pd.Series:
        return pd.to_numeric(runs.get(f"{checkpoint}/{split}/{name}", pd.Series(np.nan, index=runs.index)))

    frame = runs[IDENTITY].assign(
        checkpoint=checkpoint,
        split=split,
        metric=names.to_numpy(),
        value=pd.to_numeric(values),
        n_eval=runs.get(f"n_{split}", np.nan),
        top_class_share=final("top_class_share"),
        eval_loss=final("loss"),
        status=runs["status"],
    )  # status: diverged runs
    frame = frame.dropna(subset=["value"])
    frame = frame.assign(
        ever_learned=frame["run_id"].map(ever_learned(store, runs[runs["run_id"].isin(frame["run_id"])]))
    )
    if frame.empty:
        raise RobustkitError(
            f"no run selected by {select or 'the selection'} in {str(store)!r} has a final "
            f"{checkpoint}/{split}/{metric or '<main metric>'} score"
        )
    frame = _with_baseline(frame, runs, baseline)
    return (
        frame[OUTCOME_COLUMNS].sort_values(["task", "method", "tsp_step", "seed"], kind="stable").reset_index(drop=True)
    )


OUTCOME_ON = ("test", "best")  # split and checkpoint whose score decides a run's outcome in a claim


def with_outcomes(frame: pd.DataFrame, store: str | Path, checkpoint: str, split: str = OUTCOME_ON[0]) -> pd.DataFrame:
    """``frame`` (rows with a ``run_id``) + each run's ``outcome`` on ``split`` at ``checkpoint``
    (:mod:`robustkit.store.collapse`; ``ok`` for a checkpoint with no score, such as ``step-0``).

    A run stuck at the majority class (or diverged) is no result: what a figure computes from
    it (its robustness, its representations' drift) is left out of means and claims, and
    counted as such.
    """
    from robustkit.store import collapse

    if checkpoint not in ("best", "last") or frame.empty:
        return frame.assign(outcome=collapse.OK)
    runs = outcomes(store, {"run_id": list(frame["run_id"].unique())}, checkpoint=checkpoint, split=split, metric=None)
    return frame.merge(runs[["run_id", "outcome"]], on="run_id", how="left").fillna({"outcome": collapse.OK})


def epoch_outcomes(
    store: str | Path,
    select: dict | list[str] | None = None,
    *,
    split: str = "validation",
    metric: str | None,
    epochs: Sequence[int] | None = None,
    baseline: float | Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """One row per selected run x fine-tuning epoch: the score at the end of each epoch.

    Han et al. 2021 figures 9 and 10 (TSP steps x fine-tuning epochs). The history holds the
    evaluations made during training, which are on the validation split only.

    Parameters
    ----------
    store, select, metric, baseline
        As in :func:`outcomes`.
    split : {"validation"}
        Split of the evaluations (the only one evaluated during training).
    epochs : sequence of int, optional
        Epoch ends to keep (1 = end of the first epoch); default every one.

    Returns
    -------
    DataFrame
        Identity columns + ``epoch`` (int, >= 1), ``step`` (optimiser updates done), ``split,
        metric, value, baseline, failed`` as in :func:`outcomes`.

    Raises
    ------
    RobustkitError
        No complete run matches, or none has such evaluations.
    """
    import numpy as np

    from robustkit.analysis.select import select_runs
    from robustkit.store.tables import load_history

    runs = select_runs(store, select)
    history = load_history(store)
    if not history.empty:
        # status: a diverged run's epoch-end evaluations before it diverged are no result either
        extra = runs[["run_id", "main_metric", "status"]].assign(
            n_eval=runs.get(f"n_{split}", np.nan), top_class_share=np.nan
        )
        history = history.merge(extra, on="run_id", how="inner")
        wanted = history["main_metric"] if metric is None else metric
        history = history[(history["split"] == split) & (history["metric"] == wanted)]
        # epoch = step / steps per epoch: epoch ends are the whole numbers
        history = history[np.isclose(history["epoch"], history["epoch"].round()) & (history["epoch"] >= 1)]
        history = history.assign(epoch=history["epoch"].round().astype(int))
        if epochs is not None:
            history = history[history["epoch"].isin(list(epochs))]
    if history.empty:
        raise RobustkitError(
            f"no run selected by {select or 'the selection'} in {str(store)!r} has {split} "
            f"{metric or '<main metric>'} evaluations at epoch ends {list(epochs) if epochs else ''}".rstrip()
            + (" (only the validation split is evaluated during training)" if split != "validation" else "")
        )
    frame = _with_baseline(history, runs, baseline)
    order = ["task", "method", "tsp_step", "seed", "epoch"]
    return frame[EPOCH_COLUMNS].sort_values(order, kind="stable").reset_index(drop=True)


def ever_learned(store: str | Path, runs: pd.DataFrame) -> pd.Series:
    """run_id -> whether the run left the majority class at any validation evaluation of its
    training (its main metric significantly above the baseline, :func:`robustkit.store.collapse.above_baseline`);
    NA where the history or the baseline is unknown. A collapsed run that never did is
    ``not-learned`` (:mod:`robustkit.store.collapse`)."""
    import numpy as np
    import pandas as pd

    from robustkit.store import collapse
    from robustkit.store.tables import load_history

    found = pd.Series(pd.NA, index=runs["run_id"], dtype="boolean")
    if "ever_learned" in runs:  # recorded by training
        recorded = runs.set_index("run_id")["ever_learned"]
        recorded = recorded[recorded.map(lambda v: isinstance(v, (bool, np.bool_)))]
        found[recorded.index] = recorded.astype(bool)
        runs = runs[~runs["run_id"].isin(recorded.index)]
    history = load_history(store) if len(runs) else pd.DataFrame()
    if history.empty:
        return found
    main = runs.set_index("run_id")["main_metric"]
    history = history[(history["split"] == "validation") & (history["metric"] == history["run_id"].map(main))]
    values = dict(tuple(history.groupby("run_id")["value"]))
    for _, run in runs.iterrows():
        base = run_baseline(run, run["main_metric"], "validation")
        if run["run_id"] in values and np.isfinite(base):
            n = _none(run.get("n_validation"))
            found[run["run_id"]] = any(
                collapse.above_baseline(v, base, run["main_metric"], n) if n else v > base
                for v in values[run["run_id"]].to_numpy(float)
            )
    return found


def run_baseline(run: pd.Series, metric: str, split: str) -> float:
    """:func:`majority_baseline` of ``metric`` on ``split`` with a run's data settings (its row
    of :func:`robustkit.analysis.select.select_runs`: task, data_dir, train_size, split_seed).

    The baseline the run's manifest recorded when it was scored (``baseline/<split>/<metric>``)
    where there is one: never one recomputed from data edited since."""
    recorded = _none(run.get(f"baseline/{split}/{metric}"))
    if recorded is not None:
        return float(recorded)
    if isinstance(run.get("data_changed"), str):  # nothing recorded, and the data read now is other data
        return float("nan")
    train_size = _none(run.get("train_size"))
    return majority_baseline(
        run["task"],
        metric,
        split,
        _none(run.get("data_dir")),
        None if train_size is None else int(train_size),
        int(_none(run.get("split_seed")) or 0),
    )


def _with_baseline(
    frame: pd.DataFrame, runs: pd.DataFrame, baseline: float | Mapping[str, float] | None
) -> pd.DataFrame:
    """``frame`` + ``baseline``, ``outcome`` and ``failed`` (:func:`robustkit.store.collapse.mark`);
    data settings come from each run's row of ``runs``."""
    from robustkit.store import collapse

    keys = frame[["run_id", "task", "metric", "split"]].drop_duplicates()
    settings = runs.set_index("run_id")
    values = []
    for run_id, task, metric, split in keys.itertuples(index=False):
        if baseline is not None:
            values.append(float(baseline[task] if isinstance(baseline, Mapping) else baseline))
            continue
        values.append(run_baseline(settings.loc[run_id], metric, split))
    frame = frame.merge(keys.assign(baseline=values), on=["run_id", "task", "metric", "split"], how="left")
    return collapse.mark(frame)


def _none(value):
    """NaN / None from a DataFrame cell -> None; numbers stay numbers."""
    import numpy as np

    return None if value is None or (isinstance(value, float) and np.isnan(value)) else value


@lru_cache(maxsize=64)
def majority_baseline(
    task: str, metric: str, split: str, data_dir: str | None, train_size: int | None, split_seed: int
) -> float:
    """``metric`` on ``split`` of always predicting the majority training label (cached).

    Returns
    -------
    float
        NaN for ``loss`` (no meaningful constant baseline) or when the data cannot be loaded
        (a warning says why): the run's outcome then rests on the class-share and finiteness
        rules of :mod:`robustkit.store.collapse` alone.
    """
    import numpy as np

    # here, not at the top: loading data imports datasets (half a second), which `robustkit stats`
    # on a store whose manifests record their baselines never needs (issue #57)
    from robustkit.data import metrics, tasks

    spec = tasks.get_task(task, data_dir)  # data_dir: a task of the user's own data is read from it
    if metric not in spec.metrics:
        return float("nan")
    try:
        splits = tasks.load_splits(spec, data_dir=data_dir, train_size=train_size, split_seed=split_seed)
    except (RobustkitError, OSError, ValueError) as error:  # e.g. offline hub, moved data folder
        warnings.warn(f"no majority baseline for {task} {split}: {error}", stacklevel=2)
        return float("nan")
    # the task with ``metric`` as its main metric, so majority_baseline reports that metric
    scored = dataclasses.replace(spec, main_metric=metric)
    return float(
        metrics.majority_baseline(scored, np.asarray(splits["train"]["label"]), np.asarray(splits[split]["label"]))
    )


def with_outcome(frame: pd.DataFrame, store: str | Path) -> pd.DataFrame:
    """``frame`` + ``outcome``: each run's outcome on its score (collapsed runs are not results).

    A statistic of the score analyses keeps the outcome of its own split and checkpoint; every
    other statistic gets each run's outcome on its test score at the best checkpoint
    (:data:`OUTCOME_ON`).
    """
    if "outcome" in frame:
        return frame
    split, checkpoint = OUTCOME_ON
    scored = outcomes(
        store, {"run_id": list(frame["run_id"].unique())}, checkpoint=checkpoint, split=split, metric=None
    )
    return frame.merge(scored[["run_id", "outcome"]], on="run_id", how="left").fillna({"outcome": "ok"})


# ---------------------------------------------------------------------------------------------
# their statistics (DECLARED's)


def score(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run's score (``scores`` analysis; its own outcome column is kept)."""
    return frame


def failed(frame: pd.DataFrame) -> pd.DataFrame:
    """1.0 for a collapsed or diverged run, 0.0 otherwise (for failed-run rates)."""
    return frame.assign(value=frame["failed"].astype(float), outcome="ok")  # every run counts in a rate


def collapsed(frame: pd.DataFrame) -> pd.DataFrame:
    """Whether a run collapsed, in He et al. 2021's sense (§5, figure 4): 1.0 or 0.0 (a rate's ones).

    1.0 for a run that learned and fell back to the majority class (outcome ``collapsed``,
    :mod:`robustkit.store.collapse`) or diverged, 0.0 for an ``ok`` run; their ``outcome`` is ``ok``:
    every one of them counts in the rate. A run that never left the majority class
    (``not-learned``: too short a budget for its learning rate) says nothing of collapse, either
    way: its ``value`` is NaN and its outcome stays ``not-learned``, so a claim leaves it out and
    counts it apart (the registry's ``undefined_on_failed`` says why).
    """
    from robustkit.store import collapse as rule

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
