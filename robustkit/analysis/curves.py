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

from pathlib import Path

import pandas as pd

from robustkit.analysis.select import select_runs
from robustkit.store import IDENTITY, load_history

COLUMNS = [*IDENTITY, "main_metric", "step", "epoch", "split", "metric", "value"]
# What identifies a configuration: everything but the seed (and the run id, which hashes it).
GROUP = [c for c in IDENTITY if c not in ("run_id", "seed")]


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
    runs = select_runs(store, select)
    history = load_history(store)
    if history.empty:
        return pd.DataFrame(columns=COLUMNS)
    dev = history[(history["split"] == "validation") & history["run_id"].isin(runs["run_id"])]
    dev = dev.merge(runs[["run_id", "main_metric"]], on="run_id", how="left")
    return dev[COLUMNS].sort_values(["run_id", "step", "metric"], kind="stable").reset_index(drop=True)


def mean_best_runs(frame: pd.DataFrame) -> pd.DataFrame:
    """Per run: mean and best of its main dev metric over all evaluation steps.

    Parameters
    ----------
    frame : DataFrame
        Output of :func:`run` (needs ``main_metric``; only ``split == "validation"`` rows count).

    Returns
    -------
    DataFrame
        Identity columns + ``metric`` (the main metric), ``mean`` and ``best`` (maximum: every
        main metric is higher-is-better) over the run's evaluation steps, ``n_evals``.
    """
    if "main_metric" not in frame:
        raise ValueError("the frame has no main_metric column: pass robustkit.analysis.curves.run output")
    dev = frame[(frame["split"] == "validation") & (frame["metric"] == frame["main_metric"])]
    stats = dev.groupby("run_id", sort=True)["value"].agg(mean="mean", best="max", n_evals="size").reset_index()
    labels = dev.drop_duplicates("run_id")[[*IDENTITY, "main_metric"]].rename(columns={"main_metric": "metric"})
    return labels.merge(stats, on="run_id").sort_values("run_id").reset_index(drop=True)


def mean_best(frame: pd.DataFrame) -> pd.DataFrame:
    """He et al. 2021 table 6: mean and best dev result over evaluation steps, over seeds.

    Per run, the main dev metric is averaged (``mean``) and maximised (``best``) over all its
    evaluation steps (:func:`mean_best_runs`); per configuration (every identity column but
    ``run_id`` and ``seed``: task, method, tsp_step, model, lr, ...), each of the two is then
    averaged over the runs (seeds), with their sample standard deviation.

    Parameters
    ----------
    frame : DataFrame
        Output of :func:`run`.

    Returns
    -------
    DataFrame
        Long form: :data:`GROUP` columns + ``metric`` (the main metric), ``statistic``
        (``mean`` or ``best`` over evaluation steps), ``value`` (mean over runs), ``std``
        (over runs, ddof 1; NaN for a single run), ``n_runs``.
    """
    per_run = mean_best_runs(frame)
    long = per_run.melt(
        id_vars=[*GROUP, "metric", "run_id"], value_vars=["mean", "best"], var_name="statistic", value_name="per_run"
    )
    # dropna=False: identity columns are NaN where they do not apply (adapter_size of full runs)
    grouped = long.groupby([*GROUP, "metric", "statistic"], dropna=False, sort=True)["per_run"]
    out = grouped.agg(value="mean", std="std", n_runs="size").reset_index()
    out["statistic"] = pd.Categorical(out["statistic"], ["mean", "best"])
    order = ["task", "method", "tsp_step", "statistic"]
    return out.sort_values(order, kind="stable").reset_index(drop=True).astype({"statistic": str})
