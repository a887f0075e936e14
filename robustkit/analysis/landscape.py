"""Loss landscape along the tuning direction (He et al. 2021, section 5, figure 6).

Following Hao et al. (2019), the loss is evaluated on the straight line through the weights
before and after tuning::

    f(alpha) = L(theta_0 + alpha * (theta_1 - theta_0)),   alpha in [-2, 2], 20 points,

with theta_0 the run's ``step-0`` checkpoint and theta_1 its ``best`` (or ``last``) checkpoint.
The line is drawn over exactly what the checkpoints hold: every parameter for full fine-tuning,
the trained ones (adapters, LayerNorms, head) for adapter runs, whose frozen base stays where it
is. A factorised update is the exception (issue #55): LoRA's W = W_0 + s B A moves along the line
in the weights it acts as, W_0 + s B_0 A_0 + alpha (s B_1 A_1 - s B_0 A_0) (:func:`merged_update`),
not in its factors, whose line (A and B each interpolated) would be a quadratic path in weight
space (alpha^2 B_1 A_1 from B_0 = 0) and makes the curve steep away from alpha = 1 by
construction. A flat, wide minimum of the curve is what He et al. read as a flatter minimum; the
curvature statistic takes it at the curve's lowest grid point, in loss per squared weight
distance (alpha times the update's norm, ``update_norm``), so that methods whose updates differ
in size are compared on one scale (:func:`landscape_curvature`).

Each point is computed fresh from the two saved tensors (``torch.lerp``, exact at alpha 0 and
1), never by stepping the weights in place, so rounding does not accumulate along the grid and
the model's own tensors are copied back bit for bit at the end.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import numpy as np

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    import torch

    from robustkit.data import tasks

from robustkit.analysis.declare import DEVICE, FLAT, Analysis, Param, Statistic, checkpoint_param
from robustkit.analysis.no_grad import no_grad
from robustkit.analysis.registry import register_analysis
from robustkit.errors import RobustkitError, StoreError
from robustkit.progress import bar as progress_bar
from robustkit.progress import doing
from robustkit.specs.limits import MAX_GRID_POINTS
from robustkit.store.identity import IDENTITY
from robustkit.train.provenance import computed_on

POINT_COLUMNS = ["alpha", "split", "metric", "value"]
COLUMNS = [*IDENTITY, "checkpoint", *POINT_COLUMNS, "update_norm"]
VERSION = 2  # 2: factorised updates interpolated merged, and the update's norm recorded (issue #55)

# Everything robustkit reads about this analysis (robustkit.analysis.declare); the functions below
# take their defaults from it.
DECLARED = register_analysis(
    Analysis(
        "landscape",
        "loss along theta_0 + alpha (theta_1 - theta_0) (He et al. 2021, section 5)",
        "Linear interpolation between each run's step-0 and best (or last) checkpoints, over the parameters the run "
        "trains (a LoRA update merged into the matrices it adapts, so that the line is straight in weight space); "
        "evaluated fresh at every alpha, the model restored exactly afterwards.",
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
                "second derivative of a quadratic fitted to the 5 grid points nearest the curve's lowest point, along "
                "the weight distance alpha * ||theta_1 - theta_0|| (loss per squared weight unit; smaller = flatter)",
                (
                    Param("split", "validation", "split of the loss", choices=("validation", "train")),
                    Param(
                        "at",
                        "minimum",
                        "where on the curve: minimum (its lowest grid point, He et al.'s 'minimas') or theta1 (alpha = "
                        "1)",
                        choices=("minimum", "theta1"),
                    ),
                    Param(
                        "per",
                        "distance",
                        "distance (alpha scaled by the update's norm: loss per squared weight unit) or alpha (loss per "
                        "alpha^2, the figure's axis)",
                        choices=("distance", "alpha"),
                    ),
                ),
                undefined_on_failed=FLAT,
            ),
        ),
        order=80,
        views=(":landscape_lines",),
        module=__name__,
    )
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
    import numpy as np

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
    import numpy as np

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
    import numpy as np

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
    import pandas as pd

    from robustkit.data import tasks
    from robustkit.train.evaluate import evaluate

    task = tasks.get_task(task)
    by_split = dict(batches) if isinstance(batches, Mapping) else {"validation": batches}
    parameters = moving_parameters(model, theta0, theta1)
    start = {n: theta0[n].to(device=p.device, dtype=p.dtype) for n, p in parameters.items()}
    end = {n: theta1[n].to(device=p.device, dtype=p.dtype) for n, p in parameters.items()}
    original = {n: p.detach().clone() for n, p in parameters.items()}
    was_training = model.training
    rows = []
    try:
        for k, alpha in enumerate(
            progress_bar([float(a) for a in alphas], desc="landscape", show=progress, leave=False, unit="alpha")
        ):
            doing(f"alpha {k + 1} of {len(alphas)}")  # what a redirected log's heartbeat line names
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


@no_grad
def merged_update(
    model: torch.nn.Module, theta0: dict[str, torch.Tensor], theta1: dict[str, torch.Tensor]
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """theta0 and theta1 with each LoRA update merged into the matrix it adapts, and ``model`` merged.

    For every adapted matrix whose factors (``lora_A``, ``lora_B``;
    :func:`robustkit.analysis.lora_space.factor_names`) both ends hold, the factors are replaced
    by the matrix they act as, W_0 + s B A (AdapterHub's own composition, ``lora.com``) at each
    end, and the model's LoRA update is merged (its branch then skipped: the model computes with
    the matrix alone). :func:`interpolate` on the result moves W along a straight line,
    W_0 + s B_0 A_0 + alpha (s B_1 A_1 - s B_0 A_0), where interpolating the factors gives the
    quadratic path s (B_0 + alpha dB)(A_0 + alpha dA). Other parameters are returned as they are.

    Parameters
    ----------
    model : nn.Module
        The run's model with theta1's factors loaded (as :func:`robustkit.train.run_model.load_run`
        gives it); merged in place, the caller's to discard or to keep merged.
    theta0, theta1 : dict of str to Tensor
        The two ends (parameter name -> tensor).

    Returns
    -------
    theta0, theta1 : dict of str to Tensor
        New dicts: the factors' names gone, the adapted matrices' names (``...query.weight``)
        added, shape d_out x d_in, on the model's device; unchanged copies for a model without
        LoRA factors.

    Raises
    ------
    RobustkitError
        A DoRA or gated LoRA update, whose merged matrix is not W_0 + s B A.
    """
    import torch

    from robustkit.analysis.lora_space import factor_names
    from robustkit.analysis.weights import merge_low_rank

    start, end = dict(theta0), dict(theta1)
    factors = {m: names for m, names in factor_names(model).items() if set(names) <= set(theta0) & set(theta1)}
    if not factors:
        return start, end
    for matrix, names in factors.items():
        layer = model.get_submodule(matrix.rsplit(".", 1)[0])
        a_name, b_name = (next(n for n in names if n.endswith(f".lora_{x}")) for x in "AB")
        lora = layer.loras[a_name.partition(".loras.")[2].split(".")[0]]
        if lora.use_dora or lora.use_gating:
            raise RobustkitError(f"{matrix}: a DoRA or gated LoRA update is not W_0 + s B A; it cannot be merged here")
        base = layer.weight.detach()
        held = lora.lora_A.detach().clone(), lora.lora_B.detach().clone()
        for theta, ends in ((theta0, start), (theta1, end)):
            with torch.no_grad():  # each end's factors in the layer, composed as AdapterHub merges them
                lora.lora_A.copy_(theta[a_name]), lora.lora_B.copy_(theta[b_name])
                ends[matrix] = _adapted_weight(layer, lora, base).detach().clone()
            del ends[a_name], ends[b_name]
        with torch.no_grad():
            lora.lora_A.copy_(held[0]), lora.lora_B.copy_(held[1])
    merge_low_rank(model)
    return start, end


def _unmergeable(model) -> bool:
    """Whether any LoRA layer of ``model`` is DoRA or gated (no W_0 + s B A to merge)."""
    from adapters.methods.lora import LoRALayer

    return any(
        lora.use_dora or lora.use_gating
        for module in model.modules()
        if isinstance(module, LoRALayer)
        for lora in module.loras.values()
    )


def _adapted_weight(layer, lora, base: torch.Tensor) -> torch.Tensor:
    """The matrix ``layer`` computes with ``lora``'s current factors merged, d_out x d_in, by
    AdapterHub's own composition: a fused attention layer (``LoRAMergedLinear``: DeBERTa's,
    GPT-2's) pads its per-head update into the fused matrix, a plain one adds ``s B A``."""
    if hasattr(layer, "_compute_adapted_weight"):
        name = next(key for key, value in layer.loras.items() if value is lora)
        return layer._compute_adapted_weight(name, lora)
    return lora.com(base, layer.maybe_t(lora.delta_w))


def update_norm(theta0: dict[str, torch.Tensor], theta1: dict[str, torch.Tensor]) -> float:
    """||theta1 - theta0||: the Euclidean norm of the update over every tensor the two ends hold
    (weight units; float64 sums, so that millions of squares do not lose precision)."""
    return math.sqrt(sum(float(((theta1[n].double() - theta0[n].double()) ** 2).sum()) for n in theta0))


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


@no_grad
def _place(parameters: dict, start: dict, end: dict, alpha: float) -> None:
    # lerp is start + alpha (end - start), computed from the saved endpoints each time (and
    # exact at alpha 0 and 1: torch switches to end - (1 - alpha)(end - start) for |alpha| >= .5)
    import torch

    for name, parameter in parameters.items():
        parameter.copy_(torch.lerp(start[name], end[name], alpha))


@no_grad
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
    """:func:`interpolate` between one run's ``step-0`` and ``checkpoint``, uncached; a LoRA
    update merged into its matrices first (:func:`merged_update`). A DoRA or gated LoRA update has
    no merged matrix (DoRA rescales each column by a trained magnitude, a gate depends on the
    input): such a run moves along its own parameters, as every other method does.

    Returns
    -------
    DataFrame
        ``alpha, split, metric, value`` (see :func:`interpolate`) and ``update_norm``
        (:func:`update_norm` of the two ends interpolated, weight units).
    """
    from robustkit.train.evaluate import split_batches
    from robustkit.train.run_model import load_run

    run = load_run(run_dir, checkpoint, device)
    ends = run.checkpoint_tensors("step-0"), run.tensors
    thetas = ends if _unmergeable(run.model) else merged_update(run.model, *ends)
    batches = split_batches(run.spec, splits, run.run_dir)
    frame = interpolate(run.model, *thetas, _as_grid(alphas), batches, run.task, progress=progress)
    return frame.assign(update_norm=update_norm(*thetas))


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
        (``loss`` or a task metric), ``value``, ``update_norm`` (||theta_1 - theta_0||), and the
        run's ``outcome`` at ``checkpoint`` (:func:`robustkit.analysis.scores.with_outcomes`). Cached under
        ``<store>/.cache/landscape/`` by the sha256 of both checkpoints and the parameters.
    """
    from robustkit.analysis import scores
    from robustkit.analysis.each_run import each_run
    from robustkit.analysis.select import select_runs
    from robustkit.train.evaluate import EVAL_BATCH_SIZE

    grid = _as_grid(alphas)
    splits = _checked_splits(splits)
    params = {
        "version": VERSION,
        "alphas": grid.tolist(),
        "splits": list(splits),
        "checkpoint": checkpoint,
        "batch_size": EVAL_BATCH_SIZE,
    }
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
    from robustkit.data import tasks

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
    from robustkit.store import collapse

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


def landscape_curvature(frame: pd.DataFrame, split: str, at: str, per: str) -> pd.DataFrame:
    """Curvature of the loss along theta_0 -> theta_1 at the curve's minimum (He et al. 2021 §5).

    He et al. read "the minimas of adapter-based tuning are more wide and flat" off the curves:
    the width and flatness of the curve around its lowest point, which for full fine-tuning need
    not be alpha = 1 (the end of training sits on a slope where the dev loss rose after its best).
    So (``at = "minimum"``, the declared default) the second derivative of a quadratic fitted to
    the 5 grid points nearest the lowest grid point of the run's curve (``at = "theta1"``: nearest
    alpha = 1, the -2:2:20 grid holding no 1 exactly); ``numpy.polyfit`` does the fit. In alpha units it measures the
    curvature per squared fraction of each run's own update, and an update ten times longer
    shows a curve a hundred times sharper on the same landscape; ``per = "distance"`` (declared
    default) divides by ||theta_1 - theta_0||^2 (the frame's ``update_norm``): the curvature along the
    line per squared weight unit, one scale for every method. Smaller = flatter.

    Returns
    -------
    DataFrame
        Identity columns + ``value`` (nats per alpha^2, or per squared weight unit).

    Raises
    ------
    RobustkitError
        ``per = "distance"`` on a frame without ``update_norm`` (computed before version 2).
    """
    import numpy as np
    import pandas as pd

    frame = frame[(frame["metric"] == "loss") & (frame["split"] == split)]
    if per == "distance" and "update_norm" not in frame:
        raise RobustkitError("the landscape frame has no update_norm (an old cache): recompute it, or per = alpha")
    rows = []
    for run_id, group in frame.groupby("run_id", sort=True):
        alphas, losses = group["alpha"].to_numpy(float), group["value"].to_numpy(float)
        centre = alphas[np.nanargmin(losses)] if at == "minimum" else 1.0
        near = np.argsort(np.abs(alphas - centre), kind="stable")[:5]
        value = 2 * np.polyfit(alphas[near], losses[near], 2)[0]
        if per == "distance":
            value = value / float(group["update_norm"].iloc[0]) ** 2
        rows.append({"run_id": run_id, "value": value})
    return frame.drop_duplicates("run_id")[IDENTITY].merge(pd.DataFrame(rows, columns=["run_id", "value"]), on="run_id")
