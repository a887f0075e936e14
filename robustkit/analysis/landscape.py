"""Loss landscape along the tuning direction (He et al. 2021, section 5, figure 6).

Following Hao et al. (2019), the loss is evaluated on the straight line through the weights
before and after tuning::

    f(alpha) = L(theta_0 + alpha * (theta_1 - theta_0)),   alpha in [-2, 2], 20 points,

with theta_0 the run's ``step-0`` checkpoint and theta_1 its ``best`` (or ``last``) checkpoint.
The line is drawn over exactly what the checkpoints hold: every parameter for full fine-tuning,
the trained ones (adapters, LayerNorms, head) for adapter runs, whose frozen base stays where it
is. A flat, wide curve around alpha = 1 is what He et al. read as a flatter minimum.

Each point is computed fresh from the two saved tensors (``torch.lerp``, exact at alpha 0 and
1), never by stepping the weights in place, so rounding does not accumulate along the grid and
the model's own tensors are copied back bit for bit at the end.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from robustkit.analysis import scores
from robustkit.analysis.declare import DEVICE, FLAT, Analysis, Param, Statistic, checkpoint_param
from robustkit.analysis.each_run import each_run
from robustkit.analysis.select import select_runs
from robustkit.data import tasks
from robustkit.errors import RobustkitError, StoreError
from robustkit.progress import bar as progress_bar
from robustkit.specs.limits import MAX_GRID_POINTS
from robustkit.store.tables import IDENTITY
from robustkit.train.evaluate import EVAL_BATCH_SIZE, evaluate, split_batches
from robustkit.train.provenance import computed_on
from robustkit.train.run_model import load_run

POINT_COLUMNS = ["alpha", "split", "metric", "value"]
COLUMNS = [*IDENTITY, "checkpoint", *POINT_COLUMNS]

# Everything robustkit reads about this analysis (robustkit.analysis.declare); the functions below
# take their defaults from it.
DECLARED = Analysis(
    "landscape",
    "loss along theta_0 + alpha (theta_1 - theta_0) (He et al. 2021, section 5)",
    "Linear interpolation between each run's step-0 and best (or last) checkpoints, over the parameters the run "
    "trains; evaluated fresh at every alpha, the model restored exactly afterwards.",
    ":run",
    (
        Param(
            "alphas",
            "-2:2:20",
            "interpolation coefficients: start:stop:count (both ends included) or a comma list",
            default_note="He et al. 2021",
        ),
        Param(
            "splits",
            ["validation"],
            "comma-separated splits to evaluate on (validation, train)",
            kind=list,
        ),
        checkpoint_param("theta_1 (theta_0 is step-0)"),
    ),
    (DEVICE,),
    statistics=(
        Statistic(
            "curvature",
            ":landscape_curvature",
            "second derivative of a quadratic fitted to the 5 grid points nearest alpha = 1 (loss per alpha^2; "
            "smaller = flatter)",
            (Param("split", "validation", "split of the loss", choices=("validation", "train")),),
            undefined_on_failed=FLAT,
        ),
    ),
    order=80,
    views=(":landscape_lines",),
    module=__name__,
)
ANALYSIS = DECLARED.name  # its cache folder
_DECIMALS = 12  # grid values are rounded so that e.g. -2:2:21 holds exactly 0.0 and 1.0


# ---------------------------------------------------------------------------------------------
# the grid


def parse_alphas(spec: str) -> np.ndarray:
    """The interpolation coefficients of a grid spec.

    Parameters
    ----------
    spec : str
        ``start:stop:count``: ``count`` evenly spaced values from ``start`` to ``stop``, both
        included (``-2:2:20`` is He et al.'s grid; note it holds neither 0 nor 1, while
        ``-2:2:21`` holds both), or a comma-separated list (``0,0.5,1``).

    Returns
    -------
    ndarray, shape (count,)
        float64 coefficients, rounded to 12 decimals.

    Raises
    ------
    RobustkitError
        A spec of another form, non-numbers, ``count < 2``, ``stop <= start`` or non-finite
        values; the message names the spec.
    """
    text = str(spec).strip()
    try:
        values = _grid(text) if ":" in text else np.array([float(v) for v in text.split(",")])
        if len(values) > MAX_GRID_POINTS:
            raise ValueError(f"{len(values):,} points, more than {MAX_GRID_POINTS:,} (each is an evaluation pass)")
    except ValueError as error:
        raise RobustkitError(
            f"bad alpha grid {spec!r}: {error}; expected start:stop:count (e.g. -2:2:20) "
            "or a comma-separated list (e.g. 0,0.5,1)"
        ) from None
    if not np.isfinite(values).all():
        raise RobustkitError(f"bad alpha grid {spec!r}: values must be finite")
    return np.round(values, _DECIMALS) + 0.0  # + 0.0 turns -0.0 into 0.0


def _grid(text: str) -> np.ndarray:
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(f"{len(parts)} fields")
    start, stop, count = float(parts[0]), float(parts[1]), int(parts[2])
    if count > MAX_GRID_POINTS:  # checked before linspace allocates it
        raise ValueError(f"count {count} is more than {MAX_GRID_POINTS:,} points (each is an evaluation pass)")
    if not (math.isfinite(start) and math.isfinite(stop)):
        raise ValueError("start and stop must be finite")
    if count < 2:
        raise ValueError(f"count must be at least 2, got {count}")
    if not stop > start:
        raise ValueError(f"stop ({stop:g}) must be greater than start ({start:g})")
    return np.linspace(start, stop, count)


def _as_grid(alphas: str | Sequence[float] | np.ndarray) -> np.ndarray:
    if isinstance(alphas, str):
        return parse_alphas(alphas)
    grid = np.asarray(alphas, dtype=float).ravel()
    if grid.size == 0 or not np.isfinite(grid).all():
        raise RobustkitError(f"alphas must be a non-empty list of finite numbers, got {alphas!r}")
    if grid.size > MAX_GRID_POINTS:
        raise RobustkitError(f"{grid.size:,} alphas are more than {MAX_GRID_POINTS:,} (each is an evaluation pass)")
    return grid


# ---------------------------------------------------------------------------------------------
# one model


def interpolate(
    model: torch.nn.Module,
    theta0: dict[str, torch.Tensor],
    theta1: dict[str, torch.Tensor],
    alphas: Sequence[float] | np.ndarray,
    batches: Mapping[str, list[dict]] | list[dict],
    task: str | tasks.Task,
    progress: bool = False,
) -> pd.DataFrame:
    """Loss and metrics of ``model`` with its parameters set to theta0 + alpha (theta1 - theta0).

    Only the parameters named in ``theta0`` move; every other parameter keeps its value. After
    the last alpha, or an exception, the moved parameters get their original tensors back bit
    for bit, and the model its train/eval mode.

    Parameters
    ----------
    model : nn.Module
        A classification model (on any device); its parameters are changed in place meanwhile.
    theta0, theta1 : dict of str to Tensor
        The same parameter names, each with the model's shape (e.g. the tensors of the run's
        ``step-0`` and ``best`` checkpoints).
    alphas : sequence of float, shape (n_alpha,)
        Interpolation coefficients (0 = theta0, 1 = theta1).
    batches : dict of str to list of dict, or list of dict
        Split name -> batches from :func:`robustkit.train.evaluate.split_batches`; a bare list is the
        ``validation`` split.
    task : str or Task
        Decides the loss (cross-entropy or MSE) and the metrics.

    Returns
    -------
    DataFrame
        One row per alpha x split x metric: ``alpha, split, metric, value`` (``metric`` is
        ``loss``, the mean loss per example in nats for classification, or a task metric).

    Raises
    ------
    StoreError
        theta0 and theta1 name different parameters, or parameters the model lacks or with
        other shapes.
    """
    task = tasks.get_task(task)
    by_split = dict(batches) if isinstance(batches, Mapping) else {"validation": batches}
    parameters = moving_parameters(model, theta0, theta1)
    start = {n: theta0[n].to(device=p.device, dtype=p.dtype) for n, p in parameters.items()}
    end = {n: theta1[n].to(device=p.device, dtype=p.dtype) for n, p in parameters.items()}
    original = {n: p.detach().clone() for n, p in parameters.items()}
    was_training = model.training
    rows = []
    try:
        for alpha in progress_bar(
            [float(a) for a in alphas], desc="landscape", show=progress, leave=False, unit="alpha"
        ):
            _place(parameters, start, end, alpha)
            for split, batches in by_split.items():
                rows += [
                    {"alpha": alpha, "split": split, "metric": m, "value": v}
                    for m, v in evaluate(model, batches, task).items()
                ]
    finally:
        restore_parameters(parameters, original)
        model.train(was_training)
    return pd.DataFrame(rows, columns=POINT_COLUMNS)


def moving_parameters(model, theta0: dict, theta1: dict) -> dict[str, torch.nn.Parameter]:
    """The model's parameters named by theta0/theta1, after checking names and shapes agree."""
    if set(theta0) != set(theta1):
        only = sorted(set(theta0) ^ set(theta1))
        raise StoreError(f"theta0 and theta1 hold different parameters, e.g. {only[:3]}")
    parameters = dict(model.named_parameters())
    unknown = sorted(set(theta0) - set(parameters))
    if unknown:
        raise StoreError(f"the model has no parameters {unknown[:3]} (of {len(unknown)} unknown)")
    for name, start in theta0.items():
        shapes = (tuple(start.shape), tuple(theta1[name].shape), tuple(parameters[name].shape))
        if len(set(shapes)) > 1:
            raise StoreError(
                f"{name}: shapes {shapes[0]} (theta0), {shapes[1]} (theta1) and {shapes[2]} (model) differ"
            )
    return {name: parameters[name] for name in sorted(theta0)}


@torch.no_grad()
def _place(parameters: dict, start: dict, end: dict, alpha: float) -> None:
    # lerp is start + alpha (end - start), computed from the saved endpoints each time (and
    # exact at alpha 0 and 1: torch switches to end - (1 - alpha)(end - start) for |alpha| >= .5)
    for name, parameter in parameters.items():
        parameter.copy_(torch.lerp(start[name], end[name], alpha))


@torch.no_grad()
def restore_parameters(parameters: dict, original: dict) -> None:
    """Copy the saved tensors back (bit for bit) into the parameters that moved."""
    for name, parameter in parameters.items():
        parameter.copy_(original[name])


# ---------------------------------------------------------------------------------------------
# runs of a store


def landscape_run(
    run_dir: str | Path,
    alphas: str | Sequence[float] | np.ndarray = DECLARED.default("alphas"),
    splits: Sequence[str] = tuple(DECLARED.default("splits")),
    checkpoint: str = DECLARED.default("checkpoint"),
    progress: bool = True,
    device: str | None = None,
) -> pd.DataFrame:
    """:func:`interpolate` between one run's ``step-0`` and ``checkpoint``, uncached.

    Returns
    -------
    DataFrame
        ``alpha, split, metric, value`` (see :func:`interpolate`).
    """
    run = load_run(run_dir, checkpoint, device)
    thetas = [run.checkpoint_tensors("step-0"), run.tensors]
    batches = split_batches(run.spec, splits, run.run_dir)
    return interpolate(run.model, *thetas, _as_grid(alphas), batches, run.task, progress=progress)


def run(
    store: str | Path,
    select: dict | list[str] | None = None,
    *,
    alphas: str | Sequence[float] | np.ndarray,
    splits: Sequence[str],
    checkpoint: str,
    progress: bool = True,
    device: str | None = None,
) -> pd.DataFrame:
    """The loss landscape of every selected run, cached per run.

    Parameters
    ----------
    store : path
        Run store.
    select : dict or list of str, optional
        Run filters (``["task=rt"]``); complete fine-tuning runs only.
    alphas : str or sequence of float
        Grid spec for :func:`parse_alphas` (default ``-2:2:20``, He et al.'s) or the values.
    splits : sequence of str
        Any of ``train``, ``validation`` (the dev set), ``test``.
    checkpoint : str
        theta_1: ``best`` (default) or ``last``; theta_0 is always ``step-0``.
    device : str, optional
        Where to evaluate (default: the GPU if there is one); not part of the cache key.

    Returns
    -------
    DataFrame
        Identity columns + ``checkpoint`` (theta_1's name), ``alpha``, ``split``, ``metric``
        (``loss`` or a task metric), ``value``, and the run's ``outcome`` at ``checkpoint``
        (:func:`robustkit.analysis.scores.with_outcomes`). Cached under
        ``<store>/.cache/landscape/`` by the sha256 of both checkpoints and the parameters.
    """
    grid = _as_grid(alphas)
    splits = _checked_splits(splits)
    params = {"alphas": grid.tolist(), "splits": list(splits), "checkpoint": checkpoint, "batch_size": EVAL_BATCH_SIZE}
    frame = each_run(
        select_runs(store, select),
        ANALYSIS,
        params,
        ["step-0", checkpoint],
        lambda row: landscape_run(row["path"], grid, splits, checkpoint, progress, device),
        provenance=computed_on(device),
    )
    return scores.with_outcomes(frame.assign(checkpoint=checkpoint)[COLUMNS], store, checkpoint)


def _checked_splits(splits: Sequence[str]) -> tuple[str, ...]:
    splits = (splits,) if isinstance(splits, str) else tuple(splits)
    bad = [s for s in splits if s not in tasks.SPLITS]
    if not splits or bad:
        raise RobustkitError(f"bad split(s) {bad or list(splits)}: choose from {', '.join(tasks.SPLITS)}")
    return splits


# ---------------------------------------------------------------------------------------------
# the landscape figure's view


def landscape_lines(frame: pd.DataFrame, metric: str = "loss", split: str = "validation") -> dict:
    """He et al. 2021 figure 6's lines: per task, method and TSP step, the mean and std of
    ``metric`` over the runs (seeds) at each alpha, collapsed and diverged runs left out and
    counted, for :func:`robustkit.figures.landscape.landscape_curves`.

    Parameters
    ----------
    frame : DataFrame
        :func:`run` output (identity columns + ``checkpoint, alpha, split, metric, value``,
        ``outcome`` where known).
    metric, split : str
        The rows shown (default: the dev loss).

    Returns
    -------
    dict
        The plot's keyword arguments: ``frame`` (the rows of ``metric`` and ``split``),
        ``lines`` (``task, method, tsp_step, alpha, mean, std``: over the kept runs, ddof 1, in
        the units of ``value``), ``runs`` (per ``task, method, tsp_step``: ``n_runs``, ``n_ok``
        (the runs averaged), ``n_collapsed``, ``n_diverged``), ``metric`` and ``split``.

    Raises
    ------
    ValueError
        No row of ``split`` and ``metric``.
    """
    from robustkit.train import collapse

    data = frame[(frame["metric"] == metric) & (frame["split"] == split)]
    if data.empty:
        have = sorted(set(zip(frame["split"], frame["metric"])))
        raise ValueError(f"no rows with split {split!r} and metric {metric!r}; the frame has {have}")
    keys = ["task", "method", "tsp_step"]
    lines = collapse.kept(data).groupby([*keys, "alpha"], sort=True)["value"].agg(["mean", "std"]).reset_index()
    runs = collapse.failure_rates(data.drop_duplicates([*keys, "run_id"]), keys).drop(columns="failed_rate")
    return {"frame": data, "lines": lines, "runs": runs, "metric": metric, "split": split}


# ---------------------------------------------------------------------------------------------
# its statistics (DECLARED.statistics)


def landscape_curvature(frame: pd.DataFrame, split: str) -> pd.DataFrame:
    """Curvature of the loss at the tuned point alpha = 1 of theta_0 -> theta_1 (He et al. 2021 §5).

    The second derivative of a quadratic fitted to the 5 grid points nearest alpha = 1 (the
    grid of -2:2:20 does not hold 1 exactly); smaller = flatter minimum. Loss units per alpha^2.
    """
    frame = frame[(frame["metric"] == "loss") & (frame["split"] == split)]
    rows = []
    for run_id, group in frame.groupby("run_id", sort=True):
        near = group.iloc[np.argsort(np.abs(group["alpha"].to_numpy(float) - 1.0))[:5]]
        rows.append(
            {
                "run_id": run_id,
                "value": 2 * np.polyfit(near["alpha"].to_numpy(float), near["value"].to_numpy(float), 2)[0],
            }
        )
    return frame.drop_duplicates("run_id")[IDENTITY].merge(pd.DataFrame(rows, columns=["run_id", "value"]), on="run_id")
