"""2-D loss surface around a checkpoint along two filter-normalised random directions
(Li et al. 2018, "Visualizing the loss landscape of neural nets", §4; issue #16, item 2)::

    f(a, b) = L(theta* + a d1 + b d2),   a, b in [-1, 1]

with theta* a run's checkpoint (``best`` by default) and d1, d2 two Gaussian directions, each
*filter-normalised*: every filter of a direction is rescaled to the norm of the same filter of
theta*, so that a step of 1 moves each filter by its own size and surfaces of differently
scaled networks compare. A filter is a slice along the first dimension of a tensor of 2 or more
dimensions: an output unit (row) of a linear layer, an output channel of a convolution, a token
row of an embedding. One-dimensional tensors (biases, LayerNorm gains and shifts) get a zero
direction, Li et al.'s default (``ignore='biasbn'`` in their code); ``ignore="none"`` sets them
to the tensor itself, as their code does then.

Only the tensors a run trains move (what its checkpoint holds): every parameter for full
fine-tuning; the adapters, LayerNorms and head for an adapter run, whose frozen base stays where
it is, as in :mod:`robustkit.analysis.landscape`. Each point is computed fresh from theta* and
the directions, and the model's tensors are copied back bit for bit afterwards.

The directions are drawn on the CPU from ``seed`` (the same numbers on any device) in the
order of the parameter names, so a run's surface is reproducible; they are not
orthogonalised: two Gaussian directions in thousands of dimensions are nearly orthogonal
(Li et al. §4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import numpy as np

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    import torch

    from robustkit.data import tasks

from robustkit.analysis.declare import (
    DEVICE,
    EXAMPLES,
    LOSS_SPLIT,
    Analysis,
    Param,
    checkpoint_param,
)
from robustkit.analysis.registry import register_analysis
from robustkit.errors import RobustkitError
from robustkit.progress import bar as progress_bar
from robustkit.store.identity import IDENTITY
from robustkit.train.provenance import computed_on

VERSION = 1

# Everything robustkit reads about this analysis (robustkit.analysis.declare); the functions below
# take their defaults from it.
DECLARED = register_analysis(
    Analysis(
        "surface",
        "2-D loss surface around a checkpoint along two filter-normalised random directions (Li et al. 2018)",
        "Loss and metrics at theta* + a d1 + b d2 on a grid, d1 and d2 Gaussian directions with every row of every "
        "weight matrix rescaled to that row's norm in theta* (biases and LayerNorms fixed), over the tensors each run "
        "trains; prints min/median/max loss per run.",
        ":run",
        (
            checkpoint_param("the centre theta*", ("best", "last", "step-0")),
            Param(
                "grid",
                "-1:1:11",
                "coefficients of each direction: start:stop:count or a comma list",
                default_note="121 points",
            ),
            Param("split", "train", LOSS_SPLIT, choices=("train", "validation", "test"), default_note="Li et al.'s"),
            Param("examples", 256, EXAMPLES),
            Param("seed", 0, "seed of the two directions and of the examples"),
        ),
        (DEVICE,),
        summary=":loss_range",
        output="the tidy grid (per run x a x b x metric)",
        order=110,
        module=__name__,
    )
)
ANALYSIS = DECLARED.name  # its cache folder
IGNORE = ("biasbn", "none")
POINT_COLUMNS = ["a", "b", "split", "metric", "value"]
COLUMNS = [*IDENTITY, "checkpoint", "examples", *POINT_COLUMNS]


def filter_normalized_direction(
    weights: Mapping[str, torch.Tensor],
    generator: torch.Generator,
    ignore: str = "biasbn",
) -> dict[str, torch.Tensor]:
    """A Gaussian direction with each filter rescaled to the norm of the weights' filter.

    Parameters
    ----------
    weights : mapping of str to Tensor
        The point the direction starts from (name -> tensor); the direction has the same keys
        and shapes, and is drawn in sorted name order.
    generator : torch.Generator
        A CPU generator (seeded by the caller).
    ignore : {"biasbn", "none"}
        ``biasbn``: 1-D tensors get a zero direction (Li et al.'s default); ``none``: they get
        the tensor itself (their code's choice when nothing is ignored).

    Returns
    -------
    dict of str to Tensor
        For every filter i (slice ``[i]`` of a tensor of >= 2 dimensions):
        ``||d[i]|| = ||w[i]||``; a filter of zero weights gets a zero direction.
    """
    import torch

    if ignore not in IGNORE:
        raise RobustkitError(f"ignore must be one of {IGNORE}, got {ignore!r}")
    direction = {}
    for name in sorted(weights):
        w = weights[name].detach().to("cpu", torch.float32)
        d = torch.randn(w.shape, generator=generator, dtype=torch.float32)
        if w.dim() <= 1:
            d = torch.zeros_like(w) if ignore == "biasbn" else w.clone()
        else:
            d_norms = d.flatten(1).norm(dim=1)
            w_norms = w.flatten(1).norm(dim=1)
            # Li et al. divide by ||d_i|| + 1e-10; a Gaussian row is never that small, so the
            # epsilon only matters for an all-zero weight row, which then stays put
            d = d * (w_norms / (d_norms + 1e-10)).view(-1, *([1] * (w.dim() - 1)))
        direction[name] = d.to(weights[name].dtype)
    return direction


def surface(
    model: torch.nn.Module,
    center: Mapping[str, torch.Tensor],
    directions: tuple[Mapping[str, torch.Tensor], Mapping[str, torch.Tensor]],
    a_values: Sequence[float] | np.ndarray,
    b_values: Sequence[float] | np.ndarray,
    batches: Mapping[str, list[dict]] | list[dict],
    task: str | tasks.Task,
    progress: bool = False,
) -> pd.DataFrame:
    """Loss and metrics of ``model`` at center + a d1 + b d2 for every (a, b) of the grid.

    Parameters
    ----------
    model : nn.Module
        A classification model; the parameters named in ``center`` are changed meanwhile and
        restored bit for bit afterwards (its train/eval mode too).
    center : mapping of str to Tensor
        theta*, the tensors that move.
    directions : (mapping, mapping)
        d1 and d2, with ``center``'s names and shapes.
    a_values, b_values : sequence of float, shapes (n_a,), (n_b,)
        Coefficients of d1 and d2 (0, 0 = the checkpoint itself).
    batches : dict of str to list of dict, or list of dict
        Split -> batches (a bare list is the ``train`` split).
    task : str or Task

    Returns
    -------
    DataFrame
        One row per a x b x split x metric: ``a, b, split, metric, value`` (``loss``: mean
        cross-entropy per example in nats, or MSE; or a task metric).
    """
    import pandas as pd
    import torch

    from robustkit.analysis.landscape import moving_parameters, restore_parameters
    from robustkit.data import tasks
    from robustkit.train.evaluate import evaluate

    task = tasks.get_task(task)
    d1, d2 = directions
    parameters = moving_parameters(model, dict(center), dict(d1))
    moving_parameters(model, dict(center), dict(d2))  # same names and shapes for the second one
    devices = {n: (p.device, p.dtype) for n, p in parameters.items()}
    start = {n: center[n].to(*devices[n]) for n in parameters}
    first = {n: d1[n].to(*devices[n]) for n in parameters}
    second = {n: d2[n].to(*devices[n]) for n in parameters}
    by_split = dict(batches) if isinstance(batches, Mapping) else {"train": batches}
    original = {n: p.detach().clone() for n, p in parameters.items()}
    was_training = model.training
    points = [(float(a), float(b)) for a in a_values for b in b_values]
    rows = []
    try:
        for a, b in progress_bar(points, desc="surface", show=progress, leave=False, unit="point"):
            with torch.no_grad():
                for name, parameter in parameters.items():
                    parameter.copy_(start[name] + a * first[name] + b * second[name])
            for split, split_batches in by_split.items():
                rows += [
                    {"a": a, "b": b, "split": split, "metric": m, "value": v}
                    for m, v in evaluate(model, split_batches, task).items()
                ]
    finally:
        restore_parameters(parameters, original)
        model.train(was_training)
    return pd.DataFrame(rows, columns=POINT_COLUMNS)


def surface_run(
    run_dir: str | Path,
    checkpoint: str = DECLARED.default("checkpoint"),
    grid: str = DECLARED.default("grid"),
    split: str = DECLARED.default("split"),
    examples: int | None = DECLARED.default("examples"),
    seed: int = DECLARED.default("seed"),
    ignore: str = "biasbn",
    device: str | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """:func:`surface` of one run around ``checkpoint``, uncached.

    The two directions come from ``seed`` (d1 then d2 from one generator), the examples from
    :func:`robustkit.analysis.batches.sampled_batches` with the same seed.
    """
    import torch

    from robustkit.analysis.batches import sampled_batches
    from robustkit.analysis.landscape import parse_alphas
    from robustkit.train.evaluate import EVAL_BATCH_SIZE
    from robustkit.train.run_model import load_run

    run = load_run(run_dir, checkpoint, device)
    center = run.tensors
    generator = torch.Generator().manual_seed(seed)
    directions = (
        filter_normalized_direction(center, generator, ignore),
        filter_normalized_direction(center, generator, ignore),
    )
    values = parse_alphas(grid)
    batches = sampled_batches(run.spec, split, examples, seed, EVAL_BATCH_SIZE)
    return surface(run.model, center, directions, values, values, {split: batches}, run.task, progress)


def run(
    store: str | Path,
    select: dict | list[str] | None = None,
    *,
    checkpoint: str,
    grid: str,
    split: str,
    examples: int | None,
    seed: int,
    ignore: str = "biasbn",
    device: str | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """The 2-D loss surface of every selected run around ``checkpoint``, cached per run.

    Parameters
    ----------
    store : path
        Run store.
    select : dict or list of str, optional
        Run filters; complete fine-tuning runs only.
    checkpoint : str
        theta*: ``best`` (default), ``last`` or ``step-0``.
    grid : str
        Coefficients of each direction, ``start:stop:count`` or a comma list
        (:func:`robustkit.analysis.landscape.parse_alphas`); default ``-1:1:11`` (121 points).
    split : str
        Split the loss is taken on: ``train`` (Li et al.'s) by default.
    examples : int, optional
        Examples of the split drawn with ``seed`` (default 256; None: all of them).
    seed : int
        Seed of the directions and of the examples.
    ignore : {"biasbn", "none"}
        What 1-D tensors do (:func:`filter_normalized_direction`).

    Returns
    -------
    DataFrame
        Identity columns + ``checkpoint, examples, a, b, split, metric, value``. Cached under
        ``<store>/.cache/surface/`` by the checkpoint's sha256 and the parameters.
    """
    from robustkit.analysis.each_run import each_run
    from robustkit.analysis.landscape import parse_alphas
    from robustkit.analysis.select import select_runs
    from robustkit.data import tasks
    from robustkit.train.evaluate import EVAL_BATCH_SIZE

    values = parse_alphas(grid)
    if split not in tasks.SPLITS:
        raise RobustkitError(f"unknown split {split!r}; known: {', '.join(tasks.SPLITS)}")
    if ignore not in IGNORE:
        raise RobustkitError(f"ignore must be one of {IGNORE}, got {ignore!r}")
    params = {
        "version": VERSION,
        "grid": values.tolist(),
        "split": split,
        "examples": examples,
        "seed": seed,
        "ignore": ignore,
        "batch_size": EVAL_BATCH_SIZE,
    }
    runs = select_runs(store, select)
    with progress_bar(total=len(runs), desc="surface", unit="run", show=progress) as bar:
        frame = each_run(
            runs,
            ANALYSIS,
            params,
            [checkpoint],
            lambda row: surface_run(row["path"], checkpoint, grid, split, examples, seed, ignore, device),
            on_done=bar.update,
            provenance=computed_on(device),
        )
    counts = runs.set_index("run_id")["n_train" if split == "train" else f"n_{split}"] if examples is None else None
    frame = frame.assign(checkpoint=checkpoint, examples=examples if counts is None else frame["run_id"].map(counts))
    return frame[COLUMNS]


def loss_range(frame: pd.DataFrame) -> pd.DataFrame:
    """Minimum, median and maximum loss over each run's grid (what ``analyze surface`` prints)."""
    loss = frame[frame["metric"] == "loss"]
    return loss.groupby(["run_id", "method", "seed"])["value"].agg(["min", "median", "max"]).reset_index()
