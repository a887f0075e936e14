"""Sharpness of a LoRA run's loss in its LoRA parameters and in the merged weight matrices
(Li et al. 2024, "Flat-LoRA: Low-Rank Adaptation over a Flat Loss Landscape", arXiv 2409.14396;
issue #30, item 3).

A LoRA run trains the factors A (r x d_in) and B (d_out x r) of each adapted matrix, which acts as
W = W_0 + s B A (s = alpha / r). Flat-LoRA's point: a minimum that is flat along (A, B) can be
sharp along W, the full weight space the update lives in. Both are measured here at the same
point, on the same fixed batch of training examples (the loss as
:mod:`robustkit.analysis.curvature` takes it: eval mode, mean cross-entropy), with the same
estimators (:mod:`robustkit.measures.hessian`: top eigenvalue by power iteration, trace by
Hutchinson):

- ``space = lora``: the Hessian over every A and B of the run;
- ``space = full``: the update merged into the matrices it adapts (AdapterHub's
  ``merge_adapter``; the LoRA branch is then skipped, so the loss is the same function value),
  the Hessian over those merged matrices W.

The head and everything else are held fixed in both (they are the same parameters in both
spaces). The two Hessians are related by the chain rule: at a point where the gradient
vanishes, H_lora = J^T H_full J with J = dW / d(A, B) (a block of s B for A, of s A for B), so
the LoRA-space curvature is the full-space curvature seen through the scale of the factors;
away from a stationary point a term from the gradient adds to it. The units differ (loss per
squared factor unit vs per squared weight unit): the comparison asks which coordinates the
minimum looks flat in, as Flat-LoRA asks it, and the trace per parameter (``trace /
n_params``) puts the two spaces' dimensions on one footing. Tested on a toy quadratic whose
full-space eigenvalues are known and whose LoRA-space Hessian is J^T H J.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd

from robustkit.analysis.declare import DEVICE, Analysis, Param, Statistic, checkpoint_param
from robustkit.analysis.registry import register_analysis
from robustkit.errors import RobustkitError
from robustkit.progress import bar as progress_bar
from robustkit.store.identity import IDENTITY
from robustkit.train.provenance import computed_on

# Everything robustkit reads about this analysis (robustkit.analysis.declare); its functions below
# take their defaults from it.
DECLARED = register_analysis(
    Analysis(
        "lora-sharpness",
        "sharpness of a LoRA run's training loss in its LoRA parameters and in the merged weight matrices (Li et al. "
        "2024, Flat-LoRA)",
        "For each LoRA-family run, on one fixed batch of training examples: the top Hessian eigenvalue (power "
        "iteration) and trace (Hutchinson) of the loss over its low-rank factors (A and B of every adapted matrix), "
        "and over the same matrices with the update merged (W = W_0 + (alpha / r) B A), the head fixed in both; runs "
        "of other methods are left out.",
        ":run",
        (
            checkpoint_param("the checkpoint measured", default="last"),
            Param("examples", 32, "training examples in the one fixed batch (the same for every run)"),
            Param("max_iterations", 20, "power iteration cap (Hessian-vector products per eigenvalue)"),
            Param("samples", 20, "Hutchinson samples per trace"),
            Param("seed", 0, "seed of the batch, the start vectors and the Rademacher samples"),
        ),
        (DEVICE,),
        summary=":summarize",
        statistics=(
            Statistic(
                "full-over-lora",
                ":log_ratio",
                "log10 of the merged weights' sharpness over the LoRA parameters' (positive = sharper in the full "
                "weights; NaN where either is not positive)",
                (
                    Param(
                        "estimator",
                        "top_eigenvalue",
                        "top_eigenvalue, or trace_per_parameter (the trace over the number of parameters: a mean over "
                        "directions, shown, which cannot test a claim about sharp directions)",
                        choices=("top_eigenvalue", "trace_per_parameter"),
                    ),
                ),
            ),
        ),
        output="the tidy result (per run x space x estimator)",
        order=170,
        views=(":lora_space_view",),
        module=__name__,
    )
)

ANALYSIS = DECLARED.name  # its cache folder
VERSION = 1
SPACES = ("lora", "full")
RESULT_COLUMNS = ["space", "estimator", "value", "spread", "iterations", "converged", "n_params", "examples"]
COLUMNS = [*IDENTITY, "checkpoint", *RESULT_COLUMNS]


def factor_names(model) -> dict[str, list[str]]:
    """The low-rank factors of every adapted matrix: ``{"...query.weight": ["...query.loras.task.lora_A", ...]}``.

    Only matrices with both of LoRA's factors (``lora_A`` and ``lora_B``): AdapterHub keeps an
    (IA)3 scaling as a ``lora_B`` alone and VeRA's as vectors, which are no low-rank
    factorisation, so such runs have none.
    """
    found: dict[str, list[str]] = {}
    for name, _ in model.named_parameters():
        head, marker, tail = name.partition(".loras.")
        if marker and tail.rsplit(".", 1)[-1] in ("lora_A", "lora_B"):
            found.setdefault(f"{head}.weight", []).append(name)
    return {matrix: sorted(names) for matrix, names in found.items() if len(names) == 2}


def two_spaces(
    model, batch: dict, max_iterations: int, samples: int, seed: int, tol: float = 1e-3, loss=None
) -> pd.DataFrame:
    """The curvature of ``model``'s loss on ``batch`` over its LoRA factors, then over the merged matrices.

    The model's adapted matrices are left merged (the model is the caller's to discard).
    ``tol`` is the power iteration's (:func:`robustkit.measures.hessian.top_eigenvalue`), ``loss``
    an optional ``loss(model, inputs)`` in place of ``model(**inputs).loss``
    (:func:`robustkit.analysis.curvature.model_curvature`).

    Returns
    -------
    DataFrame
        :data:`RESULT_COLUMNS` without ``examples``: a row per space x estimator
        (``top_eigenvalue``, ``trace``).

    Raises
    ------
    RobustkitError
        The model has no LoRA factors.
    """
    import pandas as pd

    from robustkit.analysis.curvature import model_curvature
    from robustkit.analysis.weights import merge_low_rank

    factors = factor_names(model)
    if not factors:
        raise RobustkitError("the model has no LoRA factors (lora_A, lora_B)")
    frames = []
    for space in SPACES:
        if space == "full":
            merge_low_rank(model)
        names = [n for group in factors.values() for n in group] if space == "lora" else list(factors)
        frame = model_curvature(
            model,
            names,
            batch,
            grouping="none",
            max_iterations=max_iterations,
            tol=tol,
            samples=samples,
            seed=seed,
            loss=loss,
        )
        frames.append(frame.assign(space=space))
    frame = pd.concat(frames, ignore_index=True)
    return frame[["space", "estimator", "value", "spread", "iterations", "converged", "n_params"]]


def run_sharpness(
    run_dir: str | Path,
    checkpoint: str,
    examples: int,
    max_iterations: int,
    samples: int,
    seed: int,
    device: str | None = None,
) -> pd.DataFrame:
    """:func:`two_spaces` of one run's checkpoint on ``examples`` training examples drawn with ``seed``, uncached."""
    import pandas as pd

    from robustkit.analysis.batches import sampled_batches
    from robustkit.train.run_model import load_run

    loaded = load_run(run_dir, checkpoint, device)
    if not factor_names(loaded.model):
        return pd.DataFrame(columns=RESULT_COLUMNS)
    (batch,) = sampled_batches(loaded.spec, "train", examples, seed, batch_size=examples)
    return two_spaces(loaded.model, batch, max_iterations, samples, seed).assign(examples=examples)


def run(
    store: str | Path,
    select: dict | list[str] | None = None,
    *,
    checkpoint: str,
    examples: int,
    max_iterations: int,
    samples: int,
    seed: int,
    device: str | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Sharpness in both spaces of every selected LoRA run, cached per run.

    Returns
    -------
    DataFrame
        Identity columns + ``checkpoint`` + :data:`RESULT_COLUMNS`. Runs without LoRA factors
        give no rows (a warning names them).

    Raises
    ------
    RobustkitError
        Sizes below 1, or no selected run has LoRA factors.
    """
    from robustkit.analysis.each_run import each_run
    from robustkit.analysis.select import select_runs

    if min(examples, max_iterations, samples) < 1:
        raise RobustkitError("examples, max_iterations and samples must be at least 1")
    runs = select_runs(store, select)
    params = {
        "version": VERSION,
        "examples": examples,
        "max_iterations": max_iterations,
        "samples": samples,
        "seed": seed,
    }
    with progress_bar(total=len(runs), desc="lora-sharpness", unit="run", show=progress) as bar:
        frame = each_run(
            runs,
            ANALYSIS,
            params,
            [checkpoint],
            lambda row: run_sharpness(row["path"], checkpoint, examples, max_iterations, samples, seed, device),
            on_done=bar.update,
            provenance=computed_on(device),
        )
    others = sorted(set(runs["run_id"]) - set(frame.get("run_id", [])))
    if others:
        warnings.warn(f"{len(others)} run(s) have no LoRA factors and are left out: {', '.join(others)}", stacklevel=2)
    if frame.empty:
        raise RobustkitError("no selected run has LoRA factors (lora_A, lora_B): select LoRA runs")
    return frame.assign(checkpoint=checkpoint)[COLUMNS]


def per_parameter(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with ``trace_per_parameter`` rows added (the trace over ``n_params``)."""
    import pandas as pd

    traces = frame[frame["estimator"] == "trace"]
    extra = traces.assign(
        estimator="trace_per_parameter",
        value=traces["value"] / traces["n_params"],
        spread=traces["spread"] / traces["n_params"],
    )
    return pd.concat([frame, extra], ignore_index=True)


def log_ratio(frame: pd.DataFrame, estimator: str) -> pd.DataFrame:
    """Each run's log10(full-space / LoRA-space value of ``estimator``); NaN where either is not positive.

    Returns
    -------
    DataFrame
        Identity columns + ``value``.
    """
    import numpy as np
    import pandas as pd

    rows = per_parameter(frame)
    rows = rows[rows["estimator"] == estimator]
    if rows.empty:
        raise RobustkitError(f"no {estimator} in the frame; estimators: top_eigenvalue, trace, trace_per_parameter")
    wide = rows.pivot_table(index="run_id", columns="space", values="value")
    ratio = [math.log10(f / lo) if f > 0 and lo > 0 else np.nan for f, lo in zip(wide["full"], wide["lora"])]
    values = pd.DataFrame({"run_id": wide.index, "value": ratio})
    return rows.drop_duplicates("run_id")[IDENTITY].merge(values, on="run_id")


def lora_space_view(frame: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """What the ``lora-sharpness`` figure draws: ``values`` (every estimator of both spaces, the
    trace per parameter added) and ``ratios`` (:func:`log_ratio` of the top eigenvalue and of the
    trace per parameter, column ``estimator``)."""
    import pandas as pd

    ratios = [log_ratio(frame, e).assign(estimator=e) for e in ("top_eigenvalue", "trace_per_parameter")]
    return {"values": per_parameter(frame), "ratios": pd.concat(ratios, ignore_index=True)}


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Per run and estimator: the value in each space and log10 of their ratio."""
    import numpy as np

    rows = per_parameter(frame)
    wide = rows.pivot_table(index=["run_id", "estimator"], columns="space", values="value").reset_index()
    wide["log10 full/lora"] = [
        math.log10(f / lo) if f > 0 and lo > 0 else np.nan for f, lo in zip(wide["full"], wide["lora"])
    ]
    identity = frame.drop_duplicates("run_id")[["run_id", "method", "seed"]]
    return identity.merge(wide, on="run_id")
