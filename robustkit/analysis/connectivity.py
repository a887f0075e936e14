"""Linear mode connectivity between runs that differ only in their seed (Frankle et al. 2020,
"Linear mode connectivity and the lottery ticket hypothesis"; issue #16, item 2).

For two runs A and B of one configuration, trained from different seeds (head initialisation,
batch order, dropout), the loss along the straight line between their checkpoints::

    f(alpha) = L((1 - alpha) theta_A + alpha theta_B),   alpha in [0, 1]

and its *barrier*: the highest point of the line above the mean of its ends,
``max_alpha f(alpha) - (f(0) + f(1)) / 2`` (Frankle et al.'s instability, there with the test
error; here with the loss, and the error as ``1 - metric`` for the task's main metric). A barrier
near 0 means the two seeds ended in one linearly connected basin; the box over every pair of
seeds of a method says how reliably the method's solutions share one.

Which tensors move: the ones the runs train, as in :mod:`robustkit.analysis.landscape`. For an
adapter method both ends share the frozen pretrained base, so the line runs through the adapters,
LayerNorms and head only and the barrier is well defined. A frozen tensor that the pretrained
checkpoint lacks is initialised from each run's seed (bert-tiny has no pooler weights): it is
part of each run's model, differs between the two, and moves along the line with the trained
tensors, so the line still joins exactly the two runs' models. Full fine-tuning and adapter runs are
never interpolated with each other: they are different parameterisations (an adapter run has
modules a full run lacks and keeps the base weights a full run moves), so the points between
them are neither method's model (half-scaled adapters on a half-moved base) and a "barrier"
would measure that mismatch, not the loss geometry either method finds. Pairs are therefore
formed only inside one configuration: every run setting but the seed equal
(:func:`robustkit.analysis.pooling.setting_columns`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    import torch

    from robustkit.train.run_model import LoadedRun

from robustkit.analysis.declare import (
    DEVICE,
    METRIC_NAME,
    PAIR_EXAMPLES,
    PAIR_SPLIT,
    Analysis,
    Param,
    Statistic,
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
        "connectivity",
        "linear mode connectivity: loss between two seeds of a configuration and its barrier (Frankle et al. 2020)",
        "For every pair of selected runs that differ only in their seed: loss and metrics along (1 - alpha) theta_A + "
        "alpha theta_B over the tensors they train (adapter runs share the frozen base), and the barrier max - mean "
        "of the ends; prints the barriers.",
        ":run",
        (
            checkpoint_param("checkpoint of both ends"),
            Param(
                "alphas",
                "0:1:11",
                "interpolation coefficients (must hold 0 and 1): start:stop:count or a comma list",
            ),
            PAIR_SPLIT,
            PAIR_EXAMPLES,
            Param("seed", 0, "seed of the examples"),
        ),
        (DEVICE,),
        summary=":barrier_summary",
        statistics=(
            Statistic(
                "barrier",
                ":barrier",
                "max over alpha of the loss (or '<metric> error') minus the mean of the two ends, one row per seed "
                "pair",
                (Param("metric", "loss", "loss, or a metric whose error is taken", check=METRIC_NAME),),
                independent=False,
            ),
        ),
        output="the lines (per pair x alpha x metric)",
        order=120,
        views=(":lines_and_barriers",),
        module=__name__,
    )
)
ANALYSIS = DECLARED.name  # its cache folder
POINT_COLUMNS = ["alpha", "split", "metric", "value"]
COLUMNS = [*IDENTITY, "run_id_b", "seed_b", "checkpoint", "examples", *POINT_COLUMNS]
BARRIER_COLUMNS = [
    *IDENTITY,
    "run_id_b",
    "seed_b",
    "checkpoint",
    "split",
    "metric",
    "barrier",
    "argmax_alpha",
    "end_a",
    "end_b",
]


def seed_pairs(runs: pd.DataFrame) -> list[tuple[pd.Series, pd.Series]]:
    """Every pair of runs whose settings are equal but for the seed (seed of A < seed of B).

    Parameters
    ----------
    runs : DataFrame
        :func:`robustkit.analysis.select.select_runs` rows.

    Returns
    -------
    list of (Series, Series)
        Pairs in a stable order (configuration, then seeds).
    """
    pairs = []
    for ordered in seed_groups(runs):
        pairs += [(a, b) for a, b in itertools.combinations(ordered, 2) if a["seed"] != b["seed"]]
    return pairs


def seed_groups(runs: pd.DataFrame) -> list[list[pd.Series]]:
    """The runs of each configuration (settings equal but for the seed), each ordered by seed and
    run id, configurations in a stable order: what seed pairs are drawn from."""
    import pandas as pd

    from robustkit.analysis.pooling import setting_columns

    settings = setting_columns(runs)
    key = runs[settings].map(str).agg("|".join, axis=1) if settings else pd.Series("", index=runs.index)
    return [
        [row for _, row in group.sort_values(["seed", "run_id"]).iterrows()]
        for _, group in runs.assign(_key=key).groupby("_key", sort=True)
    ]


def pair_line(
    run_a: str | Path,
    run_b: str | Path,
    checkpoint: str = DECLARED.default("checkpoint"),
    alphas: str | Sequence[float] = DECLARED.default("alphas"),
    split: str = DECLARED.default("split"),
    examples: int | None = DECLARED.default("examples"),
    seed: int = DECLARED.default("seed"),
    device: str | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Loss and metrics along (1 - alpha) theta_A + alpha theta_B, uncached.

    Raises
    ------
    RobustkitError
        The runs differ in a setting other than the seed.

    Returns
    -------
    DataFrame
        ``alpha, split, metric, value`` (:func:`robustkit.analysis.landscape.interpolate`).
    """
    import numpy as np

    from robustkit.analysis.batches import sampled_batches
    from robustkit.analysis.landscape import interpolate, parse_alphas
    from robustkit.train.evaluate import EVAL_BATCH_SIZE, resolve_device

    loaded_a, theta_a, theta_b = pair_ends(run_a, run_b, checkpoint)
    loaded_a.model.to(resolve_device(device))
    grid = parse_alphas(alphas) if isinstance(alphas, str) else np.asarray(alphas, float)
    batches = sampled_batches(loaded_a.spec, split, examples, seed, EVAL_BATCH_SIZE)
    return interpolate(loaded_a.model, theta_a, theta_b, grid, {split: batches}, loaded_a.task, progress=progress)


def pair_ends(run_a: str | Path, run_b: str | Path, checkpoint: str) -> tuple[LoadedRun, dict, dict]:
    """Run A loaded at ``checkpoint`` (on the CPU) and the tensors of both ends that differ.

    Returns
    -------
    loaded_a : LoadedRun
        Its model is the one that moves between the ends.
    theta_a, theta_b : dict of str to Tensor
        The tensors the runs train, and the frozen ones initialised from each run's seed
        (:func:`seed_dependent_frozen`), at both ends.

    Raises
    ------
    RobustkitError
        The runs differ in a setting other than the seed.
    """
    from robustkit.store.run_data import run_spec
    from robustkit.train.run_model import load_run

    run_a, run_b = Path(run_a), Path(run_b)
    spec_a, spec_b = run_spec(run_a), run_spec(run_b)
    differ = sorted(k for k, v in spec_a.to_dict().items() if k != "seed" and spec_b.to_dict().get(k) != v)
    if differ:
        raise RobustkitError(
            f"{run_a.name} and {run_b.name} differ in {', '.join(differ)}, not only in their seed: "
            "only runs of one configuration are interpolated"
        )
    # both on the CPU: their frozen tensors are compared there, and only A's model moves along the line
    loaded_b = load_run(run_b, checkpoint, "cpu", spec=spec_b)
    loaded_a = load_run(run_a, checkpoint, "cpu", spec=spec_a)
    model_a, model_b = loaded_a.model, loaded_b.model
    theta_a, theta_b = dict(loaded_a.tensors), dict(loaded_b.tensors)
    for name in seed_dependent_frozen(model_a, model_b, set(theta_a) | set(theta_b)):
        theta_a[name] = dict(model_a.named_parameters())[name].detach().clone()
        theta_b[name] = dict(model_b.named_parameters())[name].detach().clone()
    return loaded_a, theta_a, theta_b


def seed_dependent_frozen(model_a: torch.nn.Module, model_b: torch.nn.Module, moving: set[str]) -> list[str]:
    """Tensors that neither checkpoint holds but that differ between the two runs' models.

    The frozen pretrained base is the same in both; what differs is initialised from the seed
    where the pretrained checkpoint has no weights (a pooler), and must move along the line.
    """
    import torch

    b = dict(model_b.named_parameters())
    return [
        name
        for name, parameter in model_a.named_parameters()
        if name not in moving and not torch.equal(parameter.detach().cpu(), b[name].detach().cpu())
    ]


def run(
    store: str | Path,
    select: dict | list[str] | None = None,
    *,
    checkpoint: str,
    alphas: str,
    split: str,
    examples: int | None,
    seed: int,
    device: str | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """The interpolation line of every seed pair of the selected runs, cached per pair.

    Parameters
    ----------
    store : path
        Run store.
    select : dict or list of str, optional
        Run filters; pairs are formed inside each configuration (:func:`seed_pairs`).
    checkpoint : str
        The checkpoint of both ends: ``best`` (default) or ``last``.
    alphas : str
        Grid spec (:func:`robustkit.analysis.landscape.parse_alphas`); default ``0:1:11``.
    split : str
        Split the loss is taken on; ``train`` (default) as Frankle et al. report train and
        test instability alike.
    examples : int, optional
        Examples of the split drawn with ``seed`` (default 512; None: all).

    Returns
    -------
    DataFrame
        A's identity columns + ``run_id_b, seed_b, checkpoint, examples, alpha, split, metric,
        value``. Cached under ``<store>/.cache/connectivity/<A>-<B>-<key>.parquet``, the key
        hashing both checkpoints' sha256 and the parameters.

    Raises
    ------
    RobustkitError
        No configuration of the selection has two seeds.
    """
    import pandas as pd

    from robustkit.analysis.each_run import each_pair
    from robustkit.analysis.landscape import parse_alphas
    from robustkit.analysis.select import select_runs
    from robustkit.train.evaluate import EVAL_BATCH_SIZE

    grid = parse_alphas(alphas)
    if not {0.0, 1.0} <= set(grid.tolist()):
        raise RobustkitError(
            f"the alpha grid {alphas!r} must hold 0 and 1 (the two runs): the barrier is measured from them"
        )
    runs = select_runs(store, select)
    pairs = seed_pairs(runs)
    if not pairs:
        raise RobustkitError(
            "no pair of selected runs differs only in its seed: select at least two seeds of a configuration"
        )
    params = {
        "version": VERSION,
        "alphas": grid.tolist(),
        "split": split,
        "examples": examples,
        "seed": seed,
        "batch_size": EVAL_BATCH_SIZE,
    }
    with progress_bar(total=len(pairs), desc="connectivity", unit="pair", show=progress) as bar:
        frame = each_pair(
            pairs,
            ANALYSIS,
            params,
            checkpoint,
            lambda a, b, _: pair_line(a["path"], b["path"], checkpoint, grid, split, examples, seed, device),
            computed_on(device),
            on_done=bar.update,
        )
    if frame.empty:  # every pair has a damaged run (warned)
        return pd.DataFrame(columns=COLUMNS)
    frame = frame.assign(checkpoint=checkpoint)
    counts = runs.set_index("run_id")["n_train" if split == "train" else f"n_{split}"]
    frame["examples"] = examples if examples is not None else frame["run_id"].map(counts)
    return frame[COLUMNS]


def barriers(frame: pd.DataFrame) -> pd.DataFrame:
    """The barrier of each pair's line: loss, and error for every other metric.

    Parameters
    ----------
    frame : DataFrame
        :func:`run` output.

    Returns
    -------
    DataFrame
        One row per pair x split x metric: A's identity columns, ``run_id_b, seed_b,
        checkpoint, split, metric`` (``loss``, or ``<metric> error``: 1 - the metric),
        ``barrier`` (max over alpha minus the mean of the two ends; >= 0 up to the grid,
        since the ends are on the grid), ``argmax_alpha`` (where the maximum is), ``end_a``,
        ``end_b`` (the values at alpha 0 and 1).
    """
    import numpy as np
    import pandas as pd

    rows = []
    keys = [*IDENTITY, "run_id_b", "seed_b", "checkpoint", "split", "metric"]
    for key, line in frame.groupby(keys, sort=False, dropna=False):
        line = line.sort_values("alpha")
        metric = key[-1]
        values = line["value"].to_numpy(float) if metric == "loss" else 1.0 - line["value"].to_numpy(float)
        alphas = line["alpha"].to_numpy(float)
        ends = [values[np.argmin(np.abs(alphas - end))] for end in (0.0, 1.0)]
        top = int(np.nanargmax(values)) if np.isfinite(values).any() else 0
        rows.append(
            {
                **dict(zip(keys, key)),
                "metric": metric if metric == "loss" else f"{metric} error",
                "barrier": float(values[top] - (ends[0] + ends[1]) / 2),
                "argmax_alpha": float(alphas[top]),
                "end_a": float(ends[0]),
                "end_b": float(ends[1]),
            }
        )
    return pd.DataFrame(rows, columns=BARRIER_COLUMNS)


def lines_and_barriers(lines: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The lines of :func:`run` and their :func:`barriers`, as the ``connectivity`` figure draws them.

    Returns
    -------
    dict
        ``lines`` (as given) and ``barriers`` (:func:`barriers` of them).
    """
    return {"lines": lines, "barriers": barriers(lines)}


def barrier_summary(lines: pd.DataFrame) -> pd.DataFrame:
    """The barriers of :func:`run`'s lines, the columns a person reads (``analyze connectivity``)."""
    table = barriers(lines)
    return table[
        [
            c
            for c in (
                "run_id",
                "method",
                "seed",
                "run_id_b",
                "seed_b",
                "split",
                "metric",
                "barrier",
                "argmax_alpha",
                "end_a",
                "end_b",
            )
            if c in table
        ]
    ]


# ---------------------------------------------------------------------------------------------
# its statistics (DECLARED.statistics)


def barrier(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Linear mode connectivity barrier of every seed pair among the runs (Frankle et al. 2020):
    max over alpha of the loss (or ``<metric> error``) minus the mean of the two ends, one row per
    pair under the identity of its lower-seed run (the ``connectivity`` analysis's lines)."""
    table = barriers(frame)
    table = table[table["metric"] == (metric if metric == "loss" else f"{metric} error")]
    return table[[*IDENTITY, "barrier"]].rename(columns={"barrier": "value"})
