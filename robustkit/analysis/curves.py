"""Learning curves and overfitting, from the runs' training history.

- He et al. 2021, figures 5 and 9: dev loss and dev accuracy against training steps, fine-tuning
  vs adapters; table 6: the mean and the best dev result over all evaluation steps (a small gap
  between them = a run that stays good along training instead of peaking once).
- Han et al. 2021, figures 1 and 13: dev score against fine-tuning steps, one curve per number
  of task-specific pretraining (TSP) steps.

Everything comes from ``history.parquet`` (evaluations every ``eval_every`` steps and at each
epoch end), so nothing is recomputed and no cache is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd

from robustkit.analysis.declare import Analysis, Statistic
from robustkit.analysis.registry import register_analysis
from robustkit.store.identity import IDENTITY

# Everything robustkit reads about this analysis (robustkit.analysis.declare); the functions below
# take their defaults from it.
DECLARED = register_analysis(
    Analysis(
        "curves",
        "dev loss and metric vs step; mean and best dev metric (He et al. 2021, table 6)",
        "Validation history of each run with its outcome at the end of training; prints the mean and best dev main "
        "metric over all evaluation steps, mean +- std over seeds.",
        ":with_run_outcomes",
        summary=":mean_best",
        statistics=(
            Statistic(
                "overfit",
                ":overfit",
                "rise of the dev loss from its minimum to the end of training (loss units; He et al. 2021 §5)",
                schedule=True,
            ),
            Statistic(
                "metric-fall",
                ":metric_fall",
                "best of the main dev metric over all evaluations minus its value at the last one (metric units, "
                "fraction for accuracy; "
                ">= 0, positive = fell from its best by the end of training: overfitting in the metric; He et al. "
                "2021 §5, figure 9)",
                ends=True,
                better=None,
                undefined_on_failed="",
                schedule=True,
            ),
            Statistic(
                "best-minus-mean",
                ":best_minus_mean",
                "best minus mean of the main dev metric over all evaluations (He et al. 2021 table 6)",
                schedule=True,
            ),
            Statistic(
                "mean-dev",
                ":mean_dev",
                "mean of the main dev metric over all evaluations (He et al. 2021 table 6)",
                schedule=True,
                better="higher",
            ),
        ),
        output="the learning curves",
        order=30,
        views=(
            ":dev_curves",
            ":curves_by_tsp",
            ":mean_best",
        ),
        module=__name__,
    )
)


COLUMNS = [*IDENTITY, "main_metric", "step", "epoch", "split", "metric", "value"]
# What identifies a configuration: every run setting but the seed (and the run id, which hashes it).
GROUP = [c for c in IDENTITY if c not in ("run_id", "seed")]
# Run-level columns added by with_outcomes.
OUTCOME_COLUMNS = ["outcome", "baseline"]


def run(store: str | Path, select: dict | list[str] | None = None) -> pd.DataFrame:
    """Dev-set learning curves of the selected runs: the validation rows of their history.

    Parameters
    ----------
    store : path
        Run store.
    select : dict or list of str, optional
        Run filters (``["task=rte", "method=full"]``); complete fine-tuning runs only.

    Returns
    -------
    DataFrame
        One row per run x evaluation step x metric: identity columns + ``main_metric`` (the
        task's reporting metric, e.g. ``accuracy``), ``step`` (optimisation steps done),
        ``epoch`` (step / steps per epoch), ``split`` (``validation``), ``metric`` (``loss``,
        mean cross-entropy in nats, or a task metric) and ``value``.
    """
    import pandas as pd

    from robustkit.analysis.select import select_runs
    from robustkit.store.tables import load_history

    runs = select_runs(store, select)
    history = load_history(store)
    if history.empty:
        return pd.DataFrame(columns=COLUMNS)
    dev = history[(history["split"] == "validation") & history["run_id"].isin(runs["run_id"])]
    dev = dev.merge(runs[["run_id", "main_metric"]], on="run_id", how="left")
    return dev[COLUMNS].sort_values(["run_id", "step", "metric"], kind="stable").reset_index(drop=True)


def with_outcomes(frame: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """Learning curves + each run's outcome at the end of training and its majority baseline.

    Parameters
    ----------
    frame : DataFrame
        :func:`run` output.
    scores : DataFrame
        One row per run: :func:`robustkit.analysis.scores.outcomes` output for the scored
        split of the curves (``split="validation"``, ``checkpoint="last"``: how the run ended)
        and the main metric (``run_id, value, baseline``, ``outcome`` where known).

    Returns
    -------
    DataFrame
        ``frame`` + ``outcome`` (the run's outcome, on every row of the run; ``ok`` for runs
        not in ``scores``) and ``baseline`` (majority-class baseline of the main metric on the
        validation split, same units as ``value``; NaN if unknown).
    """
    import numpy as np

    from robustkit.store import collapse

    scores = collapse.marked(scores)
    if "baseline" not in scores:
        scores = scores.assign(baseline=np.nan)
    runs = scores.drop_duplicates("run_id").set_index("run_id")
    out = frame.drop(columns=[c for c in OUTCOME_COLUMNS if c in frame])
    return out.assign(
        outcome=out["run_id"].map(runs["outcome"]).fillna(collapse.OK), baseline=out["run_id"].map(runs["baseline"])
    )


def with_run_outcomes(store: str | Path, select: dict | list[str] | None = None) -> pd.DataFrame:
    """:func:`run` + each run's outcome at the end of training on validation and the majority
    baseline (:func:`with_outcomes`), when the store can say; else the unmarked curves (with a
    warning naming why)."""
    import warnings

    from robustkit.analysis import scores
    from robustkit.errors import RobustkitError

    frame = run(store, select)
    try:
        scores = scores.outcomes(store, select, checkpoint="last", split="validation", metric=None)
    except RobustkitError as error:
        warnings.warn(f"learning curves drawn without run outcomes: {error}", stacklevel=2)
        return frame
    return with_outcomes(frame, scores)


def mean_curves(frame: pd.DataFrame, by: Sequence[str], include_failed: bool = False) -> pd.DataFrame:
    """Mean and spread over runs of each learning curve, at each evaluation step.

    Parameters
    ----------
    frame : DataFrame
        :func:`run` (or :func:`with_outcomes`) output, usually one metric.
    by : sequence of str
        What defines one curve (e.g. ``["task", "method", "metric"]``); runs of one curve must
        share their evaluation steps (same configuration, other seeds).
    include_failed : bool
        Average collapsed / diverged runs (``outcome``) in too.

    Returns
    -------
    DataFrame
        ``by`` + ``step`` + ``mean``, ``std`` (ddof 1, over runs; NaN for one run), ``min``,
        ``max``, ``n`` (runs averaged at that step), ``n_runs`` (runs of the curve, failed ones
        included), ``n_collapsed``, ``n_diverged``. Units are those of ``value``.
    """
    from robustkit.store import collapse

    by = list(by)
    kept = collapse.kept(frame, include_failed)
    stats = (
        kept.groupby([*by, "step"], dropna=False, sort=True)["value"]
        .agg(mean="mean", std="std", min="min", max="max", n="size")
        .reset_index()
    )
    runs = frame.drop_duplicates([*by, "run_id"])
    counts = collapse.failure_rates(runs, by).drop(columns=["n_ok", "failed_rate"])
    return stats.merge(counts, on=by, how="left")


def mean_best_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """Per run: mean and best of its main dev metric over all evaluation steps.

    Parameters
    ----------
    frame : DataFrame
        Output of :func:`run` (needs ``main_metric``; only ``split == "validation"`` rows count).

    Returns
    -------
    DataFrame
        Identity columns + ``metric`` (the main metric), (``outcome``, ``baseline`` when the
        frame has them, see :func:`with_outcomes`), ``mean`` and ``best`` (maximum: every main
        metric is higher-is-better) over the run's evaluation steps, ``n_evals``.
    """
    if "main_metric" not in frame:
        raise ValueError("the frame has no main_metric column: pass robustkit.analysis.curves.run output")
    dev = frame[(frame["split"] == "validation") & (frame["metric"] == frame["main_metric"])]
    stats = dev.groupby("run_id", sort=True)["value"].agg(mean="mean", best="max", n_evals="size").reset_index()
    extra = [c for c in OUTCOME_COLUMNS if c in dev]
    identity = [c for c in IDENTITY if c in dev]  # synthetic frames may carry fewer settings
    labels = dev.drop_duplicates("run_id")[[*identity, "main_metric", *extra]].rename(columns={"main_metric": "metric"})
    return labels.merge(stats, on="run_id").sort_values("run_id").reset_index(drop=True)


def mean_best(frame: pd.DataFrame, include_failed: bool = False) -> pd.DataFrame:
    """He et al. 2021 table 6: mean and best dev result over evaluation steps, over seeds.

    Per run, the main dev metric is averaged (``mean``) and maximised (``best``) over all its
    evaluation steps (:func:`mean_best_runs`); per configuration (every run setting but the
    seed: task, method, tsp_step, model, lr, ...), each of the two is then averaged over the
    runs (seeds), with their sample standard deviation. Runs whose outcome (:func:`with_outcomes`)
    is collapsed or diverged are counted, not averaged in, unless ``include_failed``.

    Parameters
    ----------
    frame : DataFrame
        Output of :func:`run` or :func:`with_outcomes`.
    include_failed : bool
        Average collapsed / diverged runs in too.

    Returns
    -------
    DataFrame
        Long form: :data:`GROUP` columns + ``metric`` (the main metric), ``statistic``
        (``mean`` or ``best`` over evaluation steps), ``value`` (mean over the kept runs; NaN
        when none is kept), ``std`` (over them, ddof 1; NaN for a single run), ``n`` (runs
        kept), ``n_runs`` (every run), ``n_collapsed``, ``n_diverged`` and ``baseline``
        (majority-class baseline of the metric on the dev set; NaN if unknown).
    """
    import numpy as np
    import pandas as pd

    from robustkit.store import collapse

    per_run = mean_best_runs(frame)
    if "outcome" not in per_run:
        per_run = per_run.assign(outcome=collapse.OK)
    if "baseline" not in per_run:
        per_run = per_run.assign(baseline=np.nan)
    group = [c for c in GROUP if c in per_run]
    long = per_run.melt(
        id_vars=[*group, "metric", "run_id", "outcome", "baseline"],
        value_vars=["mean", "best"],
        var_name="statistic",
        value_name="per_run",
    )
    keys = [*group, "metric", "statistic"]
    # dropna=False: identity columns are NaN where they do not apply (adapter_size of full runs)
    everything = long.groupby(keys, dropna=False, sort=True).agg(baseline=("baseline", "mean"))
    kept = collapse.kept(long, include_failed).groupby(keys, dropna=False, sort=True)["per_run"]
    out = everything.join(kept.agg(value="mean", std="std", n="size"), how="left").reset_index()
    out["n"] = out["n"].fillna(0).astype(int)
    counts = collapse.failure_rates(long, keys).drop(columns=["n_ok", "failed_rate"])
    out = out.merge(counts, on=keys, how="left")
    out["statistic"] = pd.Categorical(out["statistic"], ["mean", "best"])
    order = ["task", "method", "tsp_step", "statistic"]
    columns = [*keys, "value", "std", "n", "n_runs", "n_collapsed", "n_diverged", "baseline"]
    return out.sort_values(order, kind="stable").reset_index(drop=True).astype({"statistic": str})[columns]


# ---------------------------------------------------------------------------------------------
# the curves figures' views: the lines the plots draw (robustkit.figures.curves)


def validation_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The validation rows of :func:`run` (or :func:`with_outcomes`) output, with ``outcome``
    (``ok`` where unknown) and ``baseline`` (NaN where unknown).

    Raises
    ------
    ValueError
        No validation row.
    """
    import numpy as np

    from robustkit.store import collapse

    data = frame[frame["split"] == "validation"]
    if data.empty:
        raise ValueError("no validation rows to plot")
    if "outcome" not in data:
        data = data.assign(outcome=collapse.OK)
    if "baseline" not in data:
        data = data.assign(baseline=np.nan)
    return data


def dev_curves(frame: pd.DataFrame, tsp_step: int | None = None, include_failed: bool = False) -> dict:
    """He et al. 2021 figures 5 and 9's lines: per task (and setting that varies within a
    method), method and metric, the mean over the runs (seeds) at each evaluation step
    (:func:`mean_curves`), for :func:`robustkit.figures.curves.dev_curves`.

    Parameters
    ----------
    frame : DataFrame
        :func:`run` output, optionally with ``outcome`` and ``baseline`` (:func:`with_outcomes`).
    tsp_step : int, optional
        Which runs to show by their TSP steps; default the smallest in the frame (0 = no TSP,
        as in He et al.), so runs from different starting points are never averaged together.
    include_failed : bool
        Average runs that ended collapsed / diverged in too.

    Returns
    -------
    dict
        The plot's keyword arguments: ``frame`` (:func:`validation_rows` of ``tsp_step``),
        ``lines`` (:func:`mean_curves` by ``task``, the settings that vary within a task and
        method (:func:`robustkit.analysis.pooling.mixed_settings`), ``method`` and ``metric``;
        units of ``value``), ``tsp_step`` and ``include_failed``.

    Raises
    ------
    ValueError
        No validation row, or none of ``tsp_step``.
    """
    from robustkit.analysis.pooling import mixed_settings

    data = validation_rows(frame)
    tsp_step = int(data["tsp_step"].min()) if tsp_step is None else tsp_step
    data = data[data["tsp_step"] == tsp_step]
    if data.empty:
        raise ValueError(f"no runs with tsp_step {tsp_step}")
    facets = list(mixed_settings(data, ["task", "method"]))
    lines = mean_curves(data, ["task", *facets, "method", "metric"], include_failed)
    return {"frame": data, "lines": lines, "tsp_step": tsp_step, "include_failed": include_failed}


def curves_by_tsp(frame: pd.DataFrame, metric: str | None = None, include_failed: bool = False) -> dict:
    """Han et al. 2021 figures 1 and 13's lines: per task (and setting that varies within a
    method and TSP step), method, TSP step and metric, the mean over the runs (seeds) at each
    evaluation step (:func:`mean_curves`), for :func:`robustkit.figures.curves.curves_by_tsp`.

    Parameters
    ----------
    frame : DataFrame
        :func:`run` output (``outcome`` / ``baseline`` optional).
    metric : str, optional
        Metric the plot shows; default each task's main metric (every metric's lines are given).
    include_failed : bool
        Average runs that ended collapsed / diverged in too.

    Returns
    -------
    dict
        The plot's keyword arguments: ``frame`` (:func:`validation_rows`), ``lines``
        (:func:`mean_curves` by ``task``, the settings that vary within a task, method and TSP
        step, ``method``, ``tsp_step`` and ``metric``; units of ``value``), ``metric`` and
        ``include_failed``.
    """
    from robustkit.analysis.pooling import mixed_settings

    data = validation_rows(frame)
    facets = list(mixed_settings(data, ["task", "method", "tsp_step"]))
    lines = mean_curves(data, ["task", *facets, "method", "tsp_step", "metric"], include_failed)
    return {"frame": data, "lines": lines, "metric": metric, "include_failed": include_failed}


# ---------------------------------------------------------------------------------------------
# its statistics (DECLARED.statistics)


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
    return mean_best_runs(frame.drop(columns=["outcome", "baseline"], errors="ignore"))


def best_minus_mean(frame: pd.DataFrame) -> pd.DataFrame:
    """Best minus mean of the main dev metric over all evaluations (He et al. 2021 table 6)."""
    frame = _mean_best(frame)
    return frame[IDENTITY].assign(value=frame["best"] - frame["mean"])


def mean_dev(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean of the main dev metric over all evaluations (He et al. 2021 table 6)."""
    frame = _mean_best(frame)
    return frame[IDENTITY].assign(value=frame["mean"])
