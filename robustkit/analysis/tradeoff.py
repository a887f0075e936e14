"""Parameter/performance trade-off (Houlsby et al. 2019 section 3.4, figures 3 and 4) and the
adapter init-scale sweep (section 3.6, figure 6 right): one row per run x split, no model needed.

Everything comes from the runs' manifests: how many parameters each run trained (counted when
it was built; a shared adapter once), how many the model has without adapters, and a task
metric at the best checkpoint (selected on validation) on the validation and test splits. Each
row also carries the majority-class baseline of that metric on that split and the run's
outcome (:mod:`robustkit.store.collapse`): collapsed and diverged runs are counted, never averaged in.

- :func:`table`: one row per run x split.
- :func:`select_best`: per point of a curve (method x size), the runs of the learning rate (and
  epoch budget) with the best mean validation score, as Houlsby et al. do ("For each task and
  algorithm, the best model is selected for each point along the curve").
- :func:`summarize`: mean, std, s.e.m. and failure counts per group.
- :func:`aggregate`: figure 3's cross-task aggregate: each point's score minus full
  fine-tuning's on the same task, then its 20th / 50th / 80th percentiles across tasks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd

from robustkit.analysis.declare import METRIC_NAME, Analysis, Param, checkpoint_param
from robustkit.analysis.registry import register_analysis
from robustkit.errors import RobustkitError
from robustkit.methods import HOULSBY_INIT_STD
from robustkit.methods.registry import METHODS, spec_fields
from robustkit.specs.spec import SPEC_DEFAULTS, RunSpec
from robustkit.store.identity import IDENTITY

# Everything robustkit reads about this analysis (robustkit.analysis.declare); the functions below
# take their defaults from it.
DECLARED = register_analysis(
    Analysis(
        "tradeoff",
        "trained parameters vs main metric per run (Houlsby et al. 2019 section 3.4)",
        "From the manifests (no model is loaded): each selected run's trainable parameters, its share of the model's "
        "parameters and its main metric at the chosen checkpoint on validation and test; prints the mean +- std over "
        "seeds per method setting.",
        ":table",
        (
            checkpoint_param("checkpoint whose metrics are used: best (selected on validation) or last"),
            Param(
                "metric",
                None,
                "metric shown (Houlsby et al. plot accuracy for CoLA too)",
                default_note="each task's main metric",
                check=METRIC_NAME,
            ),
        ),
        summary=":settings_summary",
        output="the tidy per-run table",
        order=90,
        views=(
            ":tradeoff_points",
            ":aggregated",
            ":init_std_points",
        ),
        module=__name__,
    )
)


# The methods' options that are run-spec fields (the other options are IDENTITY columns).
METHOD_COLUMNS = list(spec_fields())
# Every other run setting, so that runs of different settings are never pooled unseen
# (method_options are in IDENTITY, one column per option).
SETTING_COLUMNS = [
    f.name
    for f in dataclasses.fields(RunSpec)
    if f.name not in (*IDENTITY, *METHOD_COLUMNS, "data_dir", "method_options")
]
COLUMNS = list(
    dict.fromkeys(
        [  # IDENTITY may already hold every run setting
            *IDENTITY,
            *METHOD_COLUMNS,
            *SETTING_COLUMNS,
            "init_std",
            "trainable_params",
            "base_params",
            "trainable_fraction",
            "checkpoint",
            "split",
            "metric",
            "value",
            "baseline",
            "n_eval",
            "top_class_share",
            "outcome",
            "failed",
        ]
    )
)
SPLITS = ("validation", "test")
# Defaults of the method columns in runs stored before those settings existed.
_METHOD_DEFAULTS = {column: SPEC_DEFAULTS[column] for column in METHOD_COLUMNS}
# Settings Houlsby et al. sweep and select the best of, per point of a curve.
SWEEP = ("lr", "epochs")
# Methods drawn as curves, the column that orders their points, and its symbol in figures (m, k, r).
POINT_COLUMN = {name: method.point_column for name, method in METHODS.items() if method.point_column}
POINT_SYMBOL = {method.point_column: method.point_symbol for method in METHODS.values() if method.point_column}
AGGREGATE_METHODS = ("houlsby", "adapterhub-houlsby", "topk")
PERCENTILES = (20, 50, 80)
SUMMARY_COLUMNS = [
    "trainable_params",
    "base_params",
    "value",
    "std",
    "sem",
    "n",
    "n_runs",
    "n_not_learned",
    "n_collapsed",
    "n_undecided",
    "n_diverged",
    "failed_rate",
    "baseline",
]


def table(
    store: str | Path, select: dict | list[str] | None = None, *, checkpoint: str, metric: str | None
) -> pd.DataFrame:
    """Trained parameters, a metric and the outcome of every selected complete run.

    Parameters
    ----------
    store : path
        A run store.
    select : dict or list of str, optional
        Run filters (see :func:`robustkit.analysis.select.select_runs`).
    checkpoint : str
        Whose metrics: ``best`` (the validation-selected checkpoint, Houlsby et al.'s choice) or
        ``last``.
    metric : str, optional
        Metric reported (``accuracy`` for CoLA as Houlsby et al. plot); default each run's
        task's main metric.

    Returns
    -------
    DataFrame
        One row per run x split (``validation``, ``test``; a split the run did not evaluate
        is left out). Columns: identity columns, ``top_k, adapter_init_std, adapter_sharing``,
        every other run setting (:data:`SETTING_COLUMNS`), ``init_std`` (the adapters'
        effective init std: ``adapter_init_std``, or 1e-2 for a ``houlsby`` run with
        AdapterHub's init, which draws from the same distribution; NaN without adapters of
        that init), ``trainable_params`` (count), ``base_params`` (count of the model without
        adapters: encoder, pooler and head), ``trainable_fraction`` (trainable_params /
        base_params, dimensionless), ``checkpoint, split, metric`` and ``value`` (fraction for
        accuracy / F1), ``baseline`` (the metric of always predicting the majority training
        class on that split; NaN when the data cannot be read), ``n_eval`` (examples scored;
        NaN if unknown), ``top_class_share`` (share of the run's most predicted class, where
        recorded), ``outcome`` (``ok`` / ``not-learned`` / ``collapsed`` / ``diverged``) and
        ``failed`` (bool).
    """
    import pandas as pd

    from robustkit.analysis.scores import ever_learned
    from robustkit.analysis.select import select_runs
    from robustkit.store import collapse

    runs = select_runs(store, select)
    frames = [_run_rows(run, checkpoint, metric) for _, run in runs.iterrows()]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    if not len(frame):
        return frame.assign(outcome=None, failed=None)[COLUMNS]
    # the run's status too: a diverged run is diverged whatever its kept checkpoints score
    learned = ever_learned(store, runs)  # a run that never left the majority class is not-learned
    frame = frame.assign(
        status=frame["run_id"].map(runs.set_index("run_id")["status"]), ever_learned=frame["run_id"].map(learned)
    )
    return collapse.mark(frame)[COLUMNS]


def _run_rows(run: pd.Series, checkpoint: str, metric: str | None) -> pd.DataFrame:
    """A run's rows: one per split that has the metric at ``checkpoint``."""
    import numpy as np
    import pandas as pd

    from robustkit.analysis.scores import majority_baseline
    from robustkit.store.manifest import read_manifest

    manifest = read_manifest(Path(run["path"]))
    trainable = manifest.get("trainable", {})
    spec = manifest.get("spec", {})
    count = trainable.get("count")
    base = _base_params(trainable)
    row = {column: run.get(column) for column in IDENTITY}
    row.update({c: _value_or(run.get(c, spec.get(c)), default) for c, default in _METHOD_DEFAULTS.items()})
    defaults = RunSpec()
    row.update({c: _value_or(spec.get(c, run.get(c)), getattr(defaults, c, None)) for c in SETTING_COLUMNS})
    if row["top_k"] is not None:
        row["top_k"] = int(row["top_k"])  # a float when other runs of the table have none
    row.update(
        init_std=effective_init_std(row["method"], row["adapter_init_std"]),
        trainable_params=count,
        base_params=base,
        trainable_fraction=count / base if count is not None and base else np.nan,
        checkpoint=checkpoint,
        metric=metric or manifest.get("main_metric"),
    )
    final = manifest.get("final", {}).get(checkpoint, {})
    rows = []
    for split in SPLITS:
        scores = final.get(split, {})
        if row["metric"] not in scores:
            continue
        data = (spec.get("data_dir"), _int_or_none(row.get("train_size")), int(spec.get("split_seed") or 0))
        baseline = majority_baseline(str(row["task"]), str(row["metric"]), split, *data)
        n_eval = (manifest.get("splits") or {}).get(split)  # recorded at training (newer runs)
        if n_eval is None and np.isfinite(baseline):
            n_eval = _split_size(str(row["task"]), split, *data)
        rows.append(
            {
                **row,
                "split": split,
                "value": scores[row["metric"]],
                "baseline": baseline,
                "n_eval": np.nan if n_eval is None else float(n_eval),
                "top_class_share": scores.get("top_class_share", np.nan),
            }
        )
    return pd.DataFrame(rows, columns=[c for c in COLUMNS if c not in ("outcome", "failed")])


@lru_cache(maxsize=64)
def _split_size(task: str, split: str, data_dir: str | None, train_size: int | None, split_seed: int) -> float:
    """Examples in ``split`` (the collapse rule's noise band needs it); NaN if unreadable."""
    import numpy as np

    from robustkit.data import tasks

    try:
        return float(
            len(tasks.load_splits(task, data_dir=data_dir, train_size=train_size, split_seed=split_seed)[split])
        )
    except (RobustkitError, OSError, ValueError, KeyError):
        return np.nan


def _int_or_none(value) -> int | None:
    import numpy as np

    return None if value is None or (isinstance(value, float) and np.isnan(value)) else int(value)


def _base_params(trainable: dict) -> int | None:
    """Parameters of the model without what the method added (``total`` counts it too); runs
    stored before ``added`` was recorded had bottleneck adapters at most."""
    total = trainable.get("total")
    if total is None:
        return None
    added = trainable.get("added")
    return total - (added if added is not None else sum(trainable.get("adapter_modules", {}).values()))


def _value_or(value, default):
    """``value`` unless it is missing (None or NaN: a run stored before the column existed)."""
    import numpy as np

    if value is None or (isinstance(value, float) and np.isnan(value)):
        return default
    return value


def effective_init_std(method: str, adapter_init_std: float | None) -> float:
    """The std the run's adapter weights were drawn with; NaN when it is not a Houlsby init."""
    import numpy as np

    if method != "houlsby":
        return np.nan
    return HOULSBY_INIT_STD if adapter_init_std is None else float(adapter_init_std)


# ---------------------------------------------------------------------------------------------
# points of the trade-off curves


def with_points(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` + ``series`` (method, plus its sharing mode when not ``none``) and ``point``
    (the method's curve option: adapter size m, top k, LoRA's r, ...: what orders a run along
    its curve, :data:`POINT_COLUMN`; NaN for one-point methods)."""
    import numpy as np
    import pandas as pd

    sharing = (
        frame["adapter_sharing"].fillna("none") if "adapter_sharing" in frame else pd.Series("none", index=frame.index)
    )
    series = np.where(
        sharing == "none",
        frame["method"].astype(str),
        frame["method"].astype(str) + ", shared per " + sharing.astype(str),
    )
    point = pd.Series(np.nan, index=frame.index, dtype=float)
    for method, column in POINT_COLUMN.items():
        if column in frame:  # frames of other methods may lack the column
            rows = (frame["method"] == method) & frame[column].notna()
            point[rows] = frame.loc[rows, column].astype(float)
    return frame.assign(series=series, point=point)


def select_best(
    frame: pd.DataFrame,
    select_on: str = "validation",
    include_failed: bool = False,
    keys: Sequence[str] = ("task", "model", "series", "point"),
) -> pd.DataFrame:
    """The runs of the best learning rate (and epoch budget) per point of each curve.

    Houlsby et al. 2019, figure 3: "For each task and algorithm, the best model is selected for
    each point along the curve". Per group of ``keys`` (task, curve, point), each configuration
    of the swept settings (:data:`SWEEP`: ``lr``, ``epochs``) is scored by the mean ``select_on``
    score of its kept runs (``ok`` ones unless ``include_failed``); the best configuration's
    runs are returned, on every split. A point whose every configuration failed keeps the one
    with the best mean over all its runs, so that its failures are still shown.

    Parameters
    ----------
    frame : DataFrame
        :func:`table` output (``series`` / ``point`` are added if missing, see
        :func:`with_points`).
    select_on : str
        Split the configuration is selected on (``validation``; never the split reported,
        unless both are validation as in Houlsby et al.'s GLUE figures).
    include_failed : bool
        Score configurations with collapsed / diverged runs too.
    keys : sequence of str
        What defines one point.

    Returns
    -------
    DataFrame
        The rows of ``frame`` (all splits) of the selected configurations, + ``series``,
        ``point``, ``n_configs`` (configurations compared at that point).

    Raises
    ------
    robustkit.analysis.pooling.PoolingError
        Runs of one configuration differ in a setting other than the seed (named).
    """
    from robustkit.analysis.pooling import check_pooling
    from robustkit.store import collapse

    data = frame if "series" in frame else with_points(frame)
    keys = [k for k in keys if k in data]
    columns = [*keys, *(c for c in SWEEP if c in data)]
    # a configuration pools seeds only: runs of one point differing in another setting stop here
    check_pooling(data, columns, what="select the best configuration per point")
    scored = data[data["split"] == select_on]
    kept = collapse.kept(scored, include_failed).groupby(columns, dropna=False)["value"].mean().rename("_kept")
    every = scored.groupby(columns, dropna=False)["value"].mean().rename("_all")
    # merge, not index look-ups: merge matches missing keys (point of full, epochs unset) as equal
    configs = (
        data[columns]
        .drop_duplicates()
        .merge(kept.reset_index(), on=columns, how="left")
        .merge(every.reset_index(), on=columns, how="left")
    )
    configs["n_configs"] = configs.groupby(keys, dropna=False)[keys[0]].transform("size")
    # kept runs' mean first; a point whose every configuration failed: the best mean of all runs
    configs = configs.sort_values(["_kept", "_all"], ascending=False, na_position="last", kind="stable")
    best = configs.groupby(keys, dropna=False, sort=False).head(1).drop(columns=["_kept", "_all"])
    return data.merge(best, on=columns, how="inner")


def summarize(frame: pd.DataFrame, by: list[str], include_failed: bool = False) -> pd.DataFrame:
    """Mean, std, s.e.m. and failure counts of ``value`` per group.

    Parameters
    ----------
    frame : DataFrame
        :func:`table` output (one split). Without an ``outcome`` column every row counts as
        ``ok``.
    by : list of str
        Grouping columns; missing values (e.g. ``top_k`` of a houlsby run) form their own group.
    include_failed : bool
        Average collapsed / diverged runs in too.

    Returns
    -------
    DataFrame
        ``by`` + ``trainable_params`` and ``base_params`` (means; equal over seeds),
        ``value`` (mean of the kept runs; NaN when none is kept), ``std`` (ddof 1; 0 for one
        run), ``sem`` (std / sqrt(n), the paper's error bars), ``n`` (runs kept), ``n_runs``,
        ``n_collapsed``, ``n_diverged``, ``failed_rate`` (a fraction) and ``baseline`` (mean
        majority-class baseline; NaN if unknown).
    """
    import numpy as np

    from robustkit.store import collapse

    data = frame if "outcome" in frame else frame.assign(outcome=collapse.OK)
    if "baseline" not in data:
        data = data.assign(baseline=np.nan)
    kept = collapse.kept(data, include_failed)
    everything = data.groupby(by, dropna=False, sort=True).agg(
        trainable_params=("trainable_params", "mean"),
        base_params=("base_params", "mean"),
        baseline=("baseline", "mean"),
    )
    stats = kept.groupby(by, dropna=False, sort=True)["value"].agg(value="mean", std="std", n="size")
    out = everything.join(stats, how="left").reset_index()
    out["n"] = out["n"].fillna(0).astype(int)
    out[["value", "std"]] = out[["value", "std"]].astype(float)
    out["std"] = out["std"].where(out["n"] != 1, 0.0)
    out["sem"] = out["std"] / np.sqrt(out["n"].where(out["n"] > 0))
    failures = collapse.failure_rates(data, by).drop(columns="n_ok")
    out = out.merge(failures, on=by, how="left")
    return out[[*by, *SUMMARY_COLUMNS]]


def aggregate(
    frame: pd.DataFrame,
    split: str = "validation",
    select_on: str = "validation",
    percentiles: Sequence[float] = PERCENTILES,
    include_failed: bool = False,
    methods: Sequence[str] = AGGREGATE_METHODS,
) -> pd.DataFrame:
    """Houlsby et al. 2019 figure 3: the trade-off aggregated across tasks.

    Per task and point of a curve (method x adapter size or top k), the best configuration over
    the swept settings (:func:`select_best`, on ``select_on``); its mean ``split`` score over
    the kept runs minus the mean score of full fine-tuning (itself the best configuration) on
    the same task ("To remove the intra-task variance in scores, we normalize the scores for
    each model and task by subtracting the performance of full fine-tuning"); then, per point,
    the percentiles of these differences across tasks.

    Parameters
    ----------
    frame : DataFrame
        :func:`table` output over several tasks, with ``full`` runs on each.
    split, select_on : str
        Split reported and split the configurations are selected on.
    percentiles : sequence of float
        Percentiles across tasks, in [0, 100] (``numpy.percentile``, linear interpolation).
    include_failed : bool
        Average collapsed / diverged runs in.
    methods : sequence of str
        Curves aggregated (adapters and top-k, as in the paper's figure).

    Returns
    -------
    DataFrame
        Long form, one row per curve x point x percentile: ``series``, ``method``,
        ``adapter_sharing``, ``point``, ``trainable_params`` (median across tasks, count),
        ``n_tasks`` (tasks with a kept score at the point and a full fine-tuning score),
        ``n_runs``, ``n_collapsed``, ``n_diverged`` (summed over tasks, selected
        configurations), ``percentile`` and ``value`` (score minus full fine-tuning, metric
        units: a fraction for accuracy), ``baseline`` (median across tasks of the majority
        baseline minus full fine-tuning, same units).

    Raises
    ------
    RobustkitError
        No task has both a full fine-tuning score (failed runs have none unless included) and a point of ``methods``.
    """
    import numpy as np
    import pandas as pd

    data = with_points(frame[frame["method"].isin([*methods, "full"])])
    if "adapter_init_std" in data:  # the init-std sweep is another figure
        data = data[data["adapter_init_std"].isna()]
    selected = select_best(data, select_on, include_failed)
    keys = ["task", "series", "method", "adapter_sharing", "point"]
    stats = summarize(selected[selected["split"] == split], keys, include_failed)
    full = stats[stats["method"] == "full"].groupby("task")["value"].max()  # one config per task after selection
    curves = stats[(stats["method"] != "full") & stats["task"].isin(full.dropna().index)]
    if curves.empty:  # before the arithmetic: an empty task column is a string column (pandas 3)
        raise RobustkitError(
            f"no task has both full fine-tuning and a {'/'.join(methods)} point on {split} "
            "(failed runs have no score unless failed runs are included)"
        )
    reference = curves["task"].map(full).astype(float)
    curves = curves.assign(normalised=curves["value"] - reference, normalised_baseline=curves["baseline"] - reference)
    rows = []
    for (series, method, sharing, point), group in curves.groupby(keys[1:], dropna=False, sort=True):
        values = group["normalised"].dropna().to_numpy(float)
        base = {
            "series": series,
            "method": method,
            "adapter_sharing": sharing,
            "point": point,
            "trainable_params": float(group["trainable_params"].median()),
            "n_tasks": len(values),
            "n_runs": int(group["n_runs"].sum()),
            "n_collapsed": int(group["n_collapsed"].sum()),
            "n_diverged": int(group["n_diverged"].sum()),
            "baseline": float(group["normalised_baseline"].median())
            if group["normalised_baseline"].notna().any()
            else np.nan,
        }
        found = np.percentile(values, list(percentiles)) if len(values) else np.full(len(percentiles), np.nan)
        rows += [{**base, "percentile": float(q), "value": float(v)} for q, v in zip(percentiles, found)]
    return pd.DataFrame(
        rows,
        columns=[
            "series",
            "method",
            "adapter_sharing",
            "point",
            "trainable_params",
            "n_tasks",
            "n_runs",
            "n_collapsed",
            "n_diverged",
            "percentile",
            "value",
            "baseline",
        ],
    )


def aggregated(frame: pd.DataFrame, split: str, include_failed: bool = False) -> dict[str, pd.DataFrame]:
    """Houlsby et al. 2019 figure 3's data from the runs' :func:`table`.

    Returns
    -------
    dict
        ``aggregate``: :func:`aggregate` of :func:`table`; ``source``: the table's rows of
        ``split`` (the runs behind it, which name the model and tasks).
    """
    return {
        "aggregate": aggregate(frame, split=split, include_failed=include_failed),
        "source": frame[frame["split"] == split],
    }


SETTINGS_KEYS = ["task", "split", "method", "adapter_size", "top_k", "adapter_sharing", "init_std"]


def settings_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """:func:`summarize` per task, split and method setting (what ``analyze tradeoff`` prints),
    split further by every other setting that varies inside one of them (lr, max_grad_norm,
    ...: :func:`robustkit.analysis.pooling.split_columns`, the check the figures make), so that a
    row's mean never pools runs of different settings."""
    from robustkit.analysis.pooling import split_columns

    return summarize(frame, split_columns(frame, SETTINGS_KEYS))


# ---------------------------------------------------------------------------------------------
# the figures' views: what robustkit.figures.tradeoff and robustkit.figures.init_std draw

POINT_KEYS = ["task", "series", "method", "adapter_sharing", "point"]
INIT_STD_KEYS = ["task", "adapter_size", "adapter_sharing", "init_std"]


def tradeoff_points(
    frame: pd.DataFrame, split: str = "validation", include_failed: bool = False, select_on: str = "validation"
) -> dict:
    """Houlsby et al. 2019 figure 4's points: the best configuration per point, then its mean.

    Runs with a non-default ``adapter_init_std`` belong to the init-std figure
    (:func:`init_std_points`) and are left out (counted).

    Parameters
    ----------
    frame : DataFrame
        :func:`table` output.
    split : str
        Split shown (``validation``, Houlsby et al.'s, or ``test``).
    include_failed : bool
        Select on and average collapsed / diverged runs too.
    select_on : str
        Split on which the best learning rate (and epoch budget) of each point is chosen
        (:func:`select_best`).

    Returns
    -------
    dict
        The keyword arguments of :func:`robustkit.figures.tradeoff.tradeoff_figure`: ``shown``
        (the selected runs' rows of ``split``, one per run, with ``series``, ``point`` and
        ``outcome``), ``stats`` (:func:`summarize` of them per :data:`POINT_KEYS`: ``value``
        mean, ``sem`` = std / sqrt(n), counts; metric units), ``n_configs`` (most
        configurations compared at a point; 1: no sweep) and ``n_left_out`` (runs with another
        adapter init std).

    Raises
    ------
    ValueError
        No row of ``split``, or every run has a non-default init std.
    """
    from robustkit.store import collapse

    data = frame[frame["split"] == split]
    if data.empty:
        raise ValueError(f"no rows for split {split!r}; the frame has {sorted(frame['split'].unique())}")
    usable = frame[frame["split"].isin({split, select_on})]
    left_out = usable[usable["adapter_init_std"].notna()]
    usable = usable[usable["adapter_init_std"].isna()]
    if usable[usable["split"] == split].empty:
        raise ValueError("every run has a non-default adapter_init_std: plot them with the init-std figure")
    selected = select_best(with_points(usable), select_on, include_failed)
    shown = collapse.marked(selected[selected["split"] == split])
    return {
        "shown": shown,
        "stats": summarize(shown, POINT_KEYS, include_failed),
        "n_configs": int(selected["n_configs"].max()) if len(selected) else 1,
        "n_left_out": int(left_out["run_id"].nunique()) if len(left_out) else 0,
    }


def init_std_points(
    frame: pd.DataFrame, split: str = "validation", include_failed: bool = False, select_on: str = "validation"
) -> dict:
    """Houlsby et al. 2019 figure 6 (right)'s points: per task, adapter size and init std, the
    best learning rate's runs (:func:`select_best` on ``select_on``) and their mean.

    Parameters
    ----------
    frame : DataFrame
        :func:`table` output; only rows with an ``init_std`` (``houlsby`` runs) are used.
    split, include_failed, select_on
        As in :func:`tradeoff_points`.

    Returns
    -------
    dict
        The keyword arguments of :func:`robustkit.figures.init_std.init_std_figure`: ``shown``
        (the selected runs' rows of ``split``, with ``outcome``), ``stats`` (:func:`summarize`
        per :data:`INIT_STD_KEYS`) and ``n_configs`` (most learning rates compared at a point).

    Raises
    ------
    ValueError
        No houlsby row of ``split``.
    """
    from robustkit.store import collapse

    data = frame[frame["split"].isin({split, select_on}) & frame["init_std"].notna()]
    if data[data["split"] == split].empty:
        raise ValueError(f"no houlsby rows for split {split!r}: the init-std figure needs adapter runs")
    selected = select_best(
        with_points(data), select_on, include_failed, keys=("task", "model", "series", "point", "init_std")
    )
    shown = collapse.marked(selected[selected["split"] == split])
    return {
        "shown": shown,
        "stats": summarize(shown, INIT_STD_KEYS, include_failed),
        "n_configs": int(selected["n_configs"].max()) if len(selected) else 1,
    }
