"""Intruder dimensions per weight matrix of each run (Shuttleworth et al. 2024; issue #30, item 1).

For every layer matrix of a run (:mod:`robustkit.analysis.weights`: low-rank updates merged),
the top ``top_k`` left singular vectors of the tuned matrix, each with its largest |cosine|
with the singular vectors of the matrix the run started from
(:func:`robustkit.measures.intruders.max_cosines`). A count of intruder dimensions at a
threshold epsilon is a statistic of this frame (:func:`count`), so one cached frame answers
every epsilon.

Runs whose method leaves every matrix as it was (adapters, prefix tuning) have no update to
measure: they give no rows, with a warning. A matrix the method did not touch (LoRA's key when it
adapts query and value) is kept with ``changed`` False: its singular vectors are the start's,
so its cosines are 1 up to rounding and it counts no intruder (up to near-equal singular values,
whose vectors the decomposition may mix).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd

from robustkit.analysis.declare import (
    DEVICE,
    INTRUDER_EPSILON,
    MATRICES,
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
        "intruders",
        "intruder dimensions: top singular vectors of each tuned weight matrix vs the start's (Shuttleworth et al. "
        "2024)",
        "Per layer weight matrix of each run (LoRA-family updates merged into the matrix), the top-k left singular "
        "vectors of the matrix at the checkpoint, each with its largest |cosine| with the singular vectors of the "
        "matrix at step-0; prints each run's intruder count at a few thresholds. Runs whose method changes no weight "
        "matrix (adapters, prefix tuning) have nothing to measure.",
        ":run",
        (
            checkpoint_param("the tuned checkpoint (the start is step-0)", default="last"),
            Param(
                "top_k",
                10,
                "top singular vectors of each tuned matrix compared",
                default_note="Shuttleworth et al. 2024",
            ),
        ),
        (DEVICE,),
        summary=":summarize",
        statistics=(
            Statistic(
                "count",
                ":count",
                "number of intruder dimensions of a run: top singular vectors whose largest |cosine| with the start's "
                "is below epsilon, summed over the chosen matrices of every layer",
                (INTRUDER_EPSILON, MATRICES),
            ),
        ),
        output="the tidy result (per run x matrix x rank)",
        order=150,
        views=(":intruder_view",),
        module=__name__,
    )
)


ANALYSIS = DECLARED.name  # its cache folder
VERSION = 1
RESULT_COLUMNS = ["layer", "matrix", "kind", "changed", "rank", "singular_value", "max_cosine"]
COLUMNS = [*IDENTITY, "checkpoint", *RESULT_COLUMNS]
# The thresholds the figure draws counts at: Shuttleworth et al. plot the count against epsilon.
EPSILON_GRID = tuple(round(0.05 * k, 2) for k in range(1, 20))  # 0.05, 0.10, ..., 0.95


def run_intruders(run_dir: str | Path, checkpoint: str, top_k: int, device: str | None = None) -> pd.DataFrame:
    """The top-k singular vectors' largest |cosine| with the start, per layer matrix of one run, uncached.

    The matrices are loaded on the CPU; their decompositions run on ``device`` (default: the GPU
    if there is one), in float64 either way.

    Returns
    -------
    DataFrame
        :data:`RESULT_COLUMNS`: one row per matrix x rank (1 = the largest singular value);
        empty when no matrix changed.
    """
    import pandas as pd

    from robustkit.analysis.weights import start_and_end
    from robustkit.measures.intruders import max_cosines
    from robustkit.train.evaluate import resolve_device

    where_to = resolve_device(device)
    matrices, start, end = start_and_end(run_dir, checkpoint)
    rows = []
    changed = {name: not bool((end[name] == start[name]).all()) for name in matrices}
    if not any(changed.values()):
        return pd.DataFrame(columns=RESULT_COLUMNS)
    for name, where in matrices.items():
        values, cosines = max_cosines(end[name].to(where_to), start[name].to(where_to), min(top_k, *end[name].shape))
        rows += [
            {
                "layer": where.layer,
                "matrix": where.path,
                "kind": where.kind,
                "changed": changed[name],
                "rank": j + 1,
                "singular_value": float(s),
                "max_cosine": float(c),
            }
            for j, (s, c) in enumerate(zip(values, cosines))
        ]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def run(
    store: str | Path,
    select: dict | list[str] | None = None,
    *,
    checkpoint: str,
    top_k: int,
    device: str | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Intruder cosines of every selected run, cached per run (:func:`run_intruders`).

    Parameters
    ----------
    checkpoint : str
        The tuned checkpoint (``best`` or ``last``); the start is the run's ``step-0``.
    top_k : int
        Top singular vectors compared per matrix (Shuttleworth et al.: 10).
    device : str, optional
        Where the decompositions run (``cpu``, ``cuda``; default: the GPU if there is one); how a
        result is computed, recorded with it, never in its cache key.

    Returns
    -------
    DataFrame
        Identity columns + ``checkpoint`` + :data:`RESULT_COLUMNS`.

    Raises
    ------
    RobustkitError
        ``top_k`` below 1, or no selected run changed a weight matrix.
    """
    from robustkit.analysis.each_run import each_run
    from robustkit.analysis.select import select_runs

    if top_k < 1:
        raise RobustkitError(f"top_k must be at least 1, got {top_k}")
    runs = select_runs(store, select)
    with progress_bar(total=len(runs), desc="intruders", unit="run", show=progress) as bar:
        frame = each_run(
            runs,
            ANALYSIS,
            {"version": VERSION, "top_k": top_k},
            ["step-0", checkpoint],
            lambda row: run_intruders(row["path"], checkpoint, top_k, device),
            on_done=bar.update,
            provenance=computed_on(device),
        )
    unchanged = sorted(set(runs["run_id"]) - set(frame.get("run_id", [])))
    if unchanged:
        warnings.warn(
            f"{len(unchanged)} run(s) changed no weight matrix (their method adds modules instead): "
            f"no intruder dimensions to measure for {', '.join(unchanged)}",
            stacklevel=2,
        )
    if frame.empty:
        raise RobustkitError(
            "no selected run changed a weight matrix: intruder dimensions need full fine-tuning or a LoRA-family method"
        )
    return frame.assign(checkpoint=checkpoint)[COLUMNS]


def kinds(matrices: str, frame: pd.DataFrame | None = None) -> tuple[str, ...] | None:
    """``"q,v"`` -> ``("q", "v")``; ``"all"`` -> None (every matrix).

    With ``frame`` (rows with a ``kind`` column), a kind none of its rows has is an error naming
    the kinds it has: a misspelt ``--matrices`` would otherwise select nothing, silently. The
    kinds depend on the runs' architecture (:data:`robustkit.analysis.weights.MATRIX_KINDS`), so
    they are checked against the rows, not a fixed list.
    """
    chosen = None if matrices == "all" else tuple(m.strip() for m in matrices.split(",") if m.strip())
    if chosen is not None and frame is not None and not frame.empty:
        unknown = sorted(set(chosen) - set(frame["kind"]))
        if unknown:
            raise RobustkitError(
                f"no matrices of kind {unknown}; the runs' matrices are {', '.join(sorted(frame['kind'].unique()))}, "
                "or all"
            )
    return chosen


def counts(frame: pd.DataFrame, epsilons, matrices: str) -> pd.DataFrame:
    """Each run's number of intruder dimensions at each epsilon, over the chosen matrices.

    Parameters
    ----------
    frame : DataFrame
        :func:`run` output.
    epsilons : sequence of float
        Thresholds.
    matrices : str
        Comma-separated kinds (``q,v``) or ``all``.

    Returns
    -------
    DataFrame
        Identity columns + ``epsilon`` + ``value`` (the count summed over the chosen matrices of
        every layer).
    """
    import pandas as pd

    from robustkit.measures.intruders import intruder_count

    chosen = kinds(matrices, frame)
    if chosen is not None:
        frame = frame[frame["kind"].isin(chosen)]
    rows = []
    for run_id, runs in frame.groupby("run_id", sort=False):
        for epsilon in epsilons:
            rows.append(
                {"run_id": run_id, "epsilon": float(epsilon), "value": intruder_count(runs["max_cosine"], epsilon)}
            )
    identity = frame.drop_duplicates("run_id")[IDENTITY]
    return identity.merge(pd.DataFrame(rows, columns=["run_id", "epsilon", "value"]), on="run_id")


def count(frame: pd.DataFrame, epsilon: float, matrices: str) -> pd.DataFrame:
    """The statistic: each run's intruder count at ``epsilon`` over the chosen matrices."""
    return counts(frame, [epsilon], matrices).drop(columns="epsilon")


def intruder_view(frame: pd.DataFrame, matrices: str) -> dict[str, pd.DataFrame]:
    """What the ``intruders`` figure draws.

    Returns
    -------
    dict
        ``counts``: :func:`counts` over :data:`EPSILON_GRID`; ``cosines``: the chosen matrices'
        rows (each singular vector's largest |cosine| by rank).
    """
    chosen = kinds(matrices, frame)
    shown = frame if chosen is None else frame[frame["kind"].isin(chosen)]
    return {"counts": counts(frame, EPSILON_GRID, matrices), "cosines": shown.reset_index(drop=True)}


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run's intruder count over every changed matrix at a few thresholds (``analyze intruders``).

    Returns
    -------
    DataFrame
        ``run_id, method, seed, matrices`` (changed ones) and one column ``epsilon=<e>`` per
        threshold of 0.1, 0.3, 0.5, 0.7, 0.9.
    """
    changed = frame[frame["changed"]]
    table = counts(changed, (0.1, 0.3, 0.5, 0.7, 0.9), "all")
    wide = table.pivot(index="run_id", columns="epsilon", values="value").rename(columns=lambda e: f"epsilon={e:g}")
    matrices = changed.drop_duplicates(["run_id", "layer", "matrix"]).groupby("run_id").size().rename("matrices")
    identity = changed.drop_duplicates("run_id").set_index("run_id")[["method", "seed"]]
    return identity.join(matrices).join(wide).reset_index()
