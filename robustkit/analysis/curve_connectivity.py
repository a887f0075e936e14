"""Curved mode connectivity between runs that differ only in their seed (Garipov et al. 2018;
issue #30, item 4): a quadratic Bezier curve between two seeds' optima, its control point trained
on the training loss, and the loss barrier along it next to the straight line's.

For a pair of runs A and B of one configuration (every setting but the seed equal; the tensors
that move are those of :func:`robustkit.analysis.connectivity.pair_ends`: the tensors the runs
train, and frozen ones drawn from each run's seed), the control point theta_C of
:mod:`robustkit.analysis.bezier` is trained as the runs were trained: their training split,
batch size, learning rate, warmup share, weight decay and gradient clipping, for as many steps
as they took (``steps`` None) or ``steps``; batches and draws from ``seed``. Then the loss and
the task's metrics along the curve and along the line (the untrained curve) are evaluated on
``examples`` examples of ``split`` at each t of ``ts``, in eval mode, and each path's barrier is
its maximum minus the mean of its two ends (:func:`robustkit.analysis.bezier.barrier`; the
error 1 - metric for a metric).

**Disjoint pairs.** Each run is in at most one pair: within a configuration the runs are sorted
by seed and paired first with second, third with fourth (an odd one out is left out). Unlike
every pair of seeds (:mod:`robustkit.analysis.connectivity`), disjoint pairs share no run, so
their barriers are independent observations a claim can test.

The curve's training state is kept beside its result in the store's cache
(``.cache/curve-connectivity/<A>-<B>-<key>.state``), so an interrupted analysis resumes where
it stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd

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

# Everything robustkit reads about this analysis (robustkit.analysis.declare); its functions below
# take their defaults from it.
DECLARED = register_analysis(
    Analysis(
        "curve-connectivity",
        "curved mode connectivity: a quadratic Bezier curve trained between two seeds' optima, its barrier against "
        "the line's (Garipov et al. 2018)",
        "For disjoint pairs of runs that differ only in their seed (seeds sorted, paired 1st-2nd, 3rd-4th, ...): the "
        "control point of the quadratic Bezier curve (1-t)^2 A + 2t(1-t) C + t^2 B trained on the training loss (t "
        "drawn uniformly at every step, the runs' own batches, learning rate, schedule and clipping; seeded, "
        "resumable), over the tensors the runs train; loss and metrics along the curve and along the line (the "
        "untrained curve, C the midpoint) on a grid of t.",
        ":run",
        (
            checkpoint_param("checkpoint of both ends"),
            Param(
                "steps",
                None,
                "optimiser steps of the control point",
                default_note="as many as the runs trained",
                kind=int,
            ),
            Param(
                "ts",
                "0:1:11",
                "points t of the curve and the line evaluated (must hold 0 and 1): start:stop:count or a comma list",
            ),
            PAIR_SPLIT,
            PAIR_EXAMPLES,
            Param("seed", 0, "seed of the control point's training (t, dropout) and of the examples"),
        ),
        (DEVICE,),
        summary=":barrier_summary",
        statistics=(
            Statistic(
                "barrier-drop",
                ":barrier_drop",
                "barrier of the line minus barrier of the trained curve, one value per disjoint seed pair (loss "
                "units, or error; positive = the curve is lower)",
                (Param("metric", "loss", "loss, or a metric whose error is taken", check=METRIC_NAME),),
                unit="disjoint pair",
            ),
        ),
        output="the paths (per pair x path x t x metric)",
        order=180,
        views=(":paths_and_barriers",),
        module=__name__,
    )
)


ANALYSIS = DECLARED.name  # its cache folder
VERSION = 1
PATHS = ("line", "curve")
POINT_COLUMNS = ["path", "t", "split", "metric", "value"]
COLUMNS = [*IDENTITY, "run_id_b", "seed_b", "checkpoint", "steps", "examples", *POINT_COLUMNS]
PAIR = ["run_id", "run_id_b"]
BARRIER_COLUMNS = [
    *IDENTITY,
    "run_id_b",
    "seed_b",
    "checkpoint",
    "path",
    "split",
    "metric",
    "barrier",
    "argmax_t",
    "end_a",
    "end_b",
]


def disjoint_pairs(runs: pd.DataFrame) -> list[tuple[pd.Series, pd.Series]]:
    """Pairs of runs of one configuration, each run in at most one (module docstring).

    Parameters
    ----------
    runs : DataFrame
        :func:`robustkit.analysis.select.select_runs` rows.

    Returns
    -------
    list of (Series, Series)
        (lower seed, higher seed), configurations in a stable order.
    """
    from robustkit.analysis.connectivity import seed_groups

    pairs = []
    for ordered in seed_groups(runs):
        pairs += [
            (ordered[i], ordered[i + 1])
            for i in range(0, len(ordered) - 1, 2)
            if ordered[i]["seed"] != ordered[i + 1]["seed"]
        ]
    return pairs


def pair_paths(
    run_a: str | Path,
    run_b: str | Path,
    checkpoint: str,
    steps: int | None,
    ts,
    split: str,
    examples: int | None,
    seed: int,
    device: str | None = None,
    state_dir: str | Path | None = None,
    stop_after: int | None = None,
) -> pd.DataFrame | None:
    """Train the curve between two runs and evaluate it and the line, uncached.

    Returns
    -------
    DataFrame or None
        :data:`POINT_COLUMNS` + ``steps``; None when ``stop_after`` stopped the training first.
    """
    import pandas as pd

    from robustkit.analysis.batches import sampled_batches
    from robustkit.analysis.bezier import place, place_line, train_control_point
    from robustkit.analysis.connectivity import pair_ends
    from robustkit.analysis.landscape import moving_parameters, restore_parameters
    from robustkit.data import batches as data
    from robustkit.models import pretrained as models
    from robustkit.store.run_data import run_splits
    from robustkit.train.evaluate import EVAL_BATCH_SIZE, encode_split, evaluate, resolve_device, to_device

    loaded, start, end = pair_ends(run_a, run_b, checkpoint)
    spec, model = loaded.spec, loaded.model.to(resolve_device(device))
    splits = run_splits(spec, run_a)  # checked against the run's recorded data
    tokenizer = models.load_tokenizer(spec.model)
    encoded = encode_split(splits["train"], loaded.task, tokenizer, spec.max_length, "train")
    collator = data.classification_collator(tokenizer)
    trained = spec.epochs * data.steps_per_epoch(len(encoded), spec.batch_size)
    steps = trained if steps is None else steps
    where = next(model.parameters()).device

    def loss_of(step: int):
        index = data.batch_indices(len(encoded), spec.batch_size, seed, step - 1)
        return model(**to_device(collator([encoded[i] for i in index]), where)).loss

    control = train_control_point(
        model,
        start,
        end,
        loss_of,
        steps,
        spec.lr,
        seed,
        warmup=round(spec.warmup_ratio * steps),
        weight_decay=spec.weight_decay,
        max_grad_norm=spec.max_grad_norm,
        state_dir=state_dir,
        stop_after=stop_after,
    )
    if control is None:
        return None
    batches = sampled_batches(spec, split, examples, seed, EVAL_BATCH_SIZE)
    parameters = moving_parameters(model, start, end)
    on = {
        name: {n: t.to(where) for n, t in tensors.items()}
        for name, tensors in (("a", start), ("c", control), ("b", end))
    }
    original = {n: p.detach().clone() for n, p in parameters.items()}
    rows = []
    try:
        for path in PATHS:
            for t in ts:
                if path == "line":
                    place_line(parameters, on["a"], on["b"], float(t))
                else:
                    place(parameters, on["a"], on["c"], on["b"], float(t))
                rows += [
                    {"path": path, "t": float(t), "split": split, "metric": m, "value": v}
                    for m, v in evaluate(model, batches, loaded.task).items()
                ]
    finally:
        restore_parameters(parameters, original)
    return pd.DataFrame(rows, columns=POINT_COLUMNS).assign(steps=steps)


def run(
    store: str | Path,
    select: dict | list[str] | None = None,
    *,
    checkpoint: str,
    steps: int | None,
    ts: str,
    split: str,
    examples: int | None,
    seed: int,
    device: str | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """The line and the trained curve of every disjoint seed pair of the selected runs, cached per pair.

    Returns
    -------
    DataFrame
        A's identity columns + ``run_id_b, seed_b, checkpoint, steps, examples`` +
        :data:`POINT_COLUMNS`.

    Raises
    ------
    RobustkitError
        ``ts`` without 0 and 1, ``steps`` below 1, or no configuration with two seeds.
    """
    import pandas as pd

    from robustkit.analysis.each_run import each_pair
    from robustkit.analysis.landscape import parse_alphas
    from robustkit.analysis.select import select_runs
    from robustkit.train.evaluate import EVAL_BATCH_SIZE

    grid = parse_alphas(ts)
    if not {0.0, 1.0} <= set(grid.tolist()):
        raise RobustkitError(
            f"the grid ts={ts!r} must hold 0 and 1 (the two runs): the barriers are measured from them"
        )
    if steps is not None and steps < 1:
        raise RobustkitError(f"steps must be at least 1, got {steps}")
    runs = select_runs(store, select)
    pairs = disjoint_pairs(runs)
    if not pairs:
        raise RobustkitError(
            "no pair of selected runs differs only in its seed: select at least two seeds of a configuration"
        )
    params = {
        "version": VERSION,
        "steps": steps,
        "ts": grid.tolist(),
        "split": split,
        "examples": examples,
        "seed": seed,
        "batch_size": EVAL_BATCH_SIZE,
    }
    with progress_bar(total=len(pairs), desc="curve-connectivity", unit="pair", show=progress) as bar:
        frame = each_pair(
            pairs,
            ANALYSIS,
            params,
            checkpoint,
            lambda a, b, path: pair_paths(
                a["path"],
                b["path"],
                checkpoint,
                steps,
                grid,
                split,
                examples,
                seed,
                device,
                state_dir=path.with_suffix(".state"),
            ),
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
    """Each pair's barrier along each path: loss, and error (1 - metric) for every other metric.

    Returns
    -------
    DataFrame
        :data:`BARRIER_COLUMNS`: one row per pair x path x split x metric.
    """
    import pandas as pd

    from robustkit.analysis.bezier import barrier

    rows = []
    keys = [*IDENTITY, "run_id_b", "seed_b", "checkpoint", "path", "split", "metric"]
    for key, points in frame.groupby(keys, sort=False, dropna=False):
        metric = key[-1]
        values = points["value"].to_numpy(float) if metric == "loss" else 1.0 - points["value"].to_numpy(float)
        ts = points["t"].to_numpy(float)
        height, where = barrier(values, ts)
        ends = dict(zip(ts, values))
        rows.append(
            {
                **dict(zip(keys, key)),
                "metric": metric if metric == "loss" else f"{metric} error",
                "barrier": float(height),
                "argmax_t": float(where),
                "end_a": float(ends[0.0]),
                "end_b": float(ends[1.0]),
            }
        )
    return pd.DataFrame(rows, columns=BARRIER_COLUMNS)


def barrier_drops(frame: pd.DataFrame, metric: str) -> pd.DataFrame:
    """The line's barrier minus the curve's, per pair (loss, or ``<metric> error``).

    Returns
    -------
    DataFrame
        A's identity columns + ``run_id_b`` + ``value``.
    """
    table = barriers(frame)
    table = table[table["metric"] == (metric if metric == "loss" else f"{metric} error")]
    if table.empty:
        raise RobustkitError(f"no barrier of {metric!r}; the paths have {sorted(frame['metric'].unique())}")
    wide = table.pivot_table(index=PAIR, columns="path", values="barrier").reset_index()
    wide["value"] = wide["line"] - wide["curve"]
    identity = table.drop_duplicates(PAIR)[[*IDENTITY, "run_id_b"]]
    return identity.merge(wide[[*PAIR, "value"]], on=PAIR)


def paths_and_barriers(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """What the ``curve-connectivity`` figure draws: ``paths`` (as given) and ``barriers``."""
    return {"paths": frame, "barriers": barriers(frame)}


def barrier_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """The barriers of both paths per pair, side by side (``analyze curve-connectivity``)."""
    table = barriers(frame)
    wide = table.pivot_table(
        index=[*PAIR, "method", "seed", "seed_b", "metric"], columns="path", values="barrier"
    ).reset_index()
    wide["line - curve"] = wide["line"] - wide["curve"]
    return wide


def barrier_drop(frame: pd.DataFrame, store: str | Path, metric: str) -> pd.DataFrame:
    """Barrier of the line minus that of the trained Bezier curve, per disjoint seed pair under
    the identity of its lower-seed run (Garipov et al. 2018; ``curve-connectivity`` analysis).

    A pair is an observation of its own: its ``outcome`` is ``ok`` only when both runs' are (else
    the first failed one's), so a claim leaves out a pair with a failed end; ``paired_run_id``
    names run B, so a claim's convergence guard checks both runs.
    """
    import pandas as pd

    from robustkit.analysis.scores import with_outcome

    table = barrier_drops(frame, metric)
    ends = pd.DataFrame({"run_id": pd.unique(pd.concat([table["run_id"], table["run_id_b"]]))})
    outcome = with_outcome(ends, store).set_index("run_id")["outcome"]
    first, second = table["run_id"].map(outcome), table["run_id_b"].map(outcome)
    table = table.assign(outcome=first.where(first != "ok", second))
    # one observation per pair, under run A's identity; run B named for the convergence guard
    return table.rename(columns={"run_id_b": "paired_run_id"})
