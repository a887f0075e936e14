"""Parameter/performance trade-off (Houlsby et al. 2019 section 3.4, figures 3 and 4) and the
adapter init-scale sweep (section 3.6, figure 6 right): one row per run x split, no model needed.

Everything comes from the runs' manifests: how many parameters each run trained (counted when
it was built; a shared adapter once), how many the model has without adapters, and the task's
main metric at the best checkpoint (selected on validation) on the validation and test splits.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from robustkit.analysis.select import select_runs
from robustkit.methods import HOULSBY_INIT_STD
from robustkit.store import IDENTITY, read_manifest

METHOD_COLUMNS = ["top_k", "adapter_init_std", "adapter_sharing"]
COLUMNS = [
    *IDENTITY, *METHOD_COLUMNS, "init_std", "trainable_params", "base_params", "trainable_fraction",
    "checkpoint", "split", "metric", "value",
]
SPLITS = ("validation", "test")
# Defaults of the method columns in runs stored before those settings existed.
_METHOD_DEFAULTS = {"top_k": None, "adapter_init_std": None, "adapter_sharing": "none"}


def table(store: str | Path, select: dict | list[str] | None = None, checkpoint: str = "best") -> pd.DataFrame:
    """Trained parameters and main metric of every selected complete run.

    Parameters
    ----------
    store : path
        A run store.
    select : dict or list of str, optional
        Run filters (see :func:`robustkit.analysis.select.select_runs`).
    checkpoint : str
        Whose metrics: ``best`` (the validation-selected checkpoint, Houlsby et al.'s choice) or
        ``last``.

    Returns
    -------
    DataFrame
        One row per run x split (``validation``, ``test``; a split the run did not evaluate
        is left out). Columns: identity columns, ``top_k, adapter_init_std, adapter_sharing``,
        ``init_std`` (the adapters' effective init std: ``adapter_init_std``, or 1e-2 for a
        ``houlsby`` run with AdapterHub's init, which draws from the same distribution; NaN
        without adapters of that init), ``trainable_params`` (count), ``base_params`` (count of
        the model without adapters: encoder, pooler and head), ``trainable_fraction``
        (trainable_params / base_params, dimensionless), ``checkpoint, split, metric`` (the
        task's main metric) and ``value``.
    """
    runs = select_runs(store, select)
    frames = [_run_rows(run, checkpoint) for _, run in runs.iterrows()]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    return frame[COLUMNS]


def _run_rows(run: pd.Series, checkpoint: str) -> pd.DataFrame:
    """A run's rows: one per split that has the main metric at ``checkpoint``."""
    manifest = read_manifest(Path(run["path"]))
    trainable = manifest.get("trainable", {})
    count = trainable.get("count")
    base = _base_params(trainable)
    row = {column: run.get(column) for column in IDENTITY}
    row.update({c: _value_or(run.get(c), default) for c, default in _METHOD_DEFAULTS.items()})
    if row["top_k"] is not None:
        row["top_k"] = int(row["top_k"])  # a float when other runs of the table have none
    row.update(
        init_std=effective_init_std(row["method"], row["adapter_init_std"]),
        trainable_params=count,
        base_params=base,
        trainable_fraction=count / base if count is not None and base else np.nan,
        checkpoint=checkpoint,
        metric=manifest.get("main_metric"),
    )
    final = manifest.get("final", {}).get(checkpoint, {})
    rows = [{**row, "split": split, "value": final[split][row["metric"]]}
            for split in SPLITS if row["metric"] in final.get(split, {})]
    return pd.DataFrame(rows, columns=COLUMNS)


def _base_params(trainable: dict) -> int | None:
    """Parameters of the model without its adapters (``total`` counts the adapters too)."""
    total = trainable.get("total")
    if total is None:
        return None
    return total - sum(trainable.get("adapter_modules", {}).values())


def _value_or(value, default):
    """``value`` unless it is missing (None or NaN: a run stored before the column existed)."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return default
    return value


def effective_init_std(method: str, adapter_init_std: float | None) -> float:
    """The std the run's adapter weights were drawn with; NaN when it is not a Houlsby init."""
    if method != "houlsby":
        return np.nan
    return HOULSBY_INIT_STD if adapter_init_std is None else float(adapter_init_std)


def summarize(frame: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean, std (ddof 1; 0 for one run) and number of runs of ``value`` per group.

    Parameters
    ----------
    frame : DataFrame
        :func:`table` output (one split).
    by : list of str
        Grouping columns; missing values (e.g. ``top_k`` of a houlsby run) form their own group.

    Returns
    -------
    DataFrame
        ``by`` + ``trainable_params`` (mean; equal over seeds), ``value`` (mean), ``std``
        and ``n``.
    """
    grouped = frame.groupby(by, dropna=False)
    out = grouped.agg(trainable_params=("trainable_params", "mean"), value=("value", "mean"),
                      std=("value", "std"), n=("value", "size")).reset_index()
    out["std"] = out["std"].fillna(0.0)
    return out
