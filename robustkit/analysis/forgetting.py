"""Learning vs forgetting, and the rank of the weight updates (Biderman et al. 2024, "LoRA
Learns Less and Forgets Less", arXiv 2405.09673; issue #30, item 2).

Per run, two kinds of rows:

**Forgetting** (``measure``: ``mlm_loss_base``, ``mlm_loss_tuned``, ``forgetting``). Biderman
et al. measure forgetting as the loss of the base model's abilities outside the tuning task.
Here: the masked-LM loss (nats per masked token) on held-out English text that no task holds
(WordNet 3.0 glosses, :mod:`robustkit.data.heldout`; ``texts`` of them, masked once with ``seed``),
read from the run's tuned encoder (at ``checkpoint``, with its adapters, prefixes or merged
LoRA) by the pre-trained model's masked-LM head (:mod:`robustkit.analysis.mlm_head`: the
model's own head where it has one, robustkit's TSP head fitted on the frozen pre-trained
encoder otherwise; column ``head`` says which), minus the same loss through the pre-trained
encoder. 0 = nothing of the pre-training task lost; the pre-trained encoder is the model's, not
the run's ``step-0``, so every run of a model is measured from one point. The fitted head is
cached once per model, seed and fitting size under ``<store>/.cache/forgetting/``.

**Update spectrum** (``measure``: ``energy_rank``, ``effective_rank``, ``update_norm``; one row
per layer matrix that changed). The update Delta W = W_tuned - W_0 of every layer matrix
(:mod:`robustkit.analysis.weights`: LoRA-family updates merged, W_0 the run's ``step-0``), its
rank holding 90% of the squared norm (:data:`ENERGY_FRACTION`, Biderman et al.'s "rank needed to
explain 90% of the variance") and Roy and Vetterli's effective rank
(:mod:`robustkit.measures.spectrum`), and its Frobenius norm. A matrix the method left unchanged
(every matrix of an adapter run) has no row.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd

from robustkit.analysis.declare import (
    DEVICE,
    MATRICES,
    RANK_MEASURE,
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
        "forgetting",
        "learning vs forgetting: masked-LM loss on held-out text of the base head over each run's encoder, and the "
        "rank of each weight update (Biderman et al. 2024)",
        "Forgetting: the masked-LM loss (nats per masked token) on held-out English text that is no task's (WordNet "
        "3.0 glosses, masked once with --seed) of the base model's masked-LM head over the run's tuned encoder, minus "
        "the same over the pre-trained encoder; the head is the model's own where its checkpoint has one, else "
        "robustkit's TSP head fitted on the frozen pre-trained encoder (on other glosses). Update spectrum: per layer "
        "weight matrix, the rank holding 90% of the squared norm of W_tuned - W_0 and the effective rank (LoRA-family "
        "updates merged).",
        ":run",
        (
            checkpoint_param("the tuned checkpoint (the start is step-0)", default="last"),
            Param("texts", 1000, "held-out glosses the loss is taken on (the same for every run)"),
            Param(
                "head",
                "auto",
                "masked-LM head: own (the model's pre-trained one), fitted (robustkit's TSP head fitted on the frozen "
                "pre-trained encoder), auto (own where the model has one, else fitted)",
                choices=("auto", "own", "fitted"),
            ),
            Param("head_texts", 10000, "glosses a fitted head is trained on (none of them evaluated)"),
            Param("head_steps", 300, "optimiser steps of a fitted head"),
            Param("seed", 0, "seed of the glosses drawn, their masks and a fitted head"),
        ),
        (DEVICE,),
        summary=":summarize",
        statistics=(
            Statistic(
                "forgetting",
                ":forgetting_statistic",
                "masked-LM loss of the tuned encoder minus the pre-trained one's on held-out text (nats per masked "
                "token; larger = more forgotten)",
            ),
            Statistic(
                "update-rank",
                ":update_ranks",
                "rank of each weight update W_tuned - W_0, averaged over the chosen matrices that changed "
                "(directions; one value per run)",
                (RANK_MEASURE, MATRICES),
            ),
            Statistic(
                "update-rank-ratio",
                ":update_rank_ratio",
                "update-rank over the rank r of a typical LoRA configuration (dimensionless: 10 = ten times as many "
                "directions as a rank-r LoRA update can have; larger = higher rank; Biderman et al. 2024's '10-100X')",
                (
                    RANK_MEASURE,
                    MATRICES,
                    Param(
                        "reference_rank",
                        8,
                        "rank r of the typical LoRA configuration the update's rank is divided by",
                        default_note="the zoo's and Hu et al. 2021's LoRA rank on GLUE, robustkit's lora default",
                    ),
                ),
                ends=True,
                better=None,
                undefined_on_failed="",
            ),
        ),
        output="the tidy result (per run x measure x matrix)",
        order=160,
        views=(":forgetting_view",),
        module=__name__,
    )
)


ANALYSIS = DECLARED.name  # its cache folder
VERSION = 1
ENERGY_FRACTION = 0.9
HEADS = ("auto", "own", "fitted")
RESULT_COLUMNS = ["head", "measure", "layer", "matrix", "kind", "value"]
COLUMNS = [*IDENTITY, "checkpoint", "texts", *RESULT_COLUMNS]
LOSS_MEASURES = ("mlm_loss_base", "mlm_loss_tuned", "forgetting")
RANK_MEASURES = ("energy_rank", "effective_rank")


def update_spectrum(run_dir: str | Path, checkpoint: str) -> list[dict]:
    """The spectrum rows of one run (module docstring), uncached."""
    import numpy as np

    from robustkit.analysis.weights import start_and_end
    from robustkit.measures.spectrum import effective_rank, energy_rank, singular_values

    matrices, start, end = start_and_end(run_dir, checkpoint)
    rows = []
    for name, where in matrices.items():
        update = end[name].double() - start[name].double()
        if not update.any():
            continue
        values = singular_values(update)
        for measure, value in (
            ("energy_rank", energy_rank(values, ENERGY_FRACTION)),
            ("effective_rank", effective_rank(values)),
            ("update_norm", float(np.sqrt((values**2).sum()))),
        ):
            rows.append(
                {
                    "measure": measure,
                    "layer": where.layer,
                    "matrix": where.path,
                    "kind": where.kind,
                    "value": float(value),
                }
            )
    return rows


def masked_lm_losses(
    run_dir: str | Path, checkpoint: str, batches: list[dict], head_tensors: dict | None, device: str | None = None
) -> dict[str, float]:
    """The held-out masked-LM loss through the pre-trained encoder and through the run's, uncached.

    Parameters
    ----------
    batches : list of dict
        :func:`robustkit.analysis.mlm_head.masked_batches` of the held-out texts.
    head_tensors : dict, optional
        A fitted head's tensors (None: the model's own head).

    Returns
    -------
    dict
        ``mlm_loss_base``, ``mlm_loss_tuned``, ``forgetting`` (their difference), nats per masked token.
    """
    from robustkit.analysis import mlm_head
    from robustkit.train.evaluate import resolve_device
    from robustkit.train.run_model import load_run

    where = resolve_device(device)
    run = load_run(run_dir, checkpoint, where)
    pretrained = mlm_head.pretrained_masked_lm(run.spec.model, where)
    head = mlm_head.head_of(pretrained, head_tensors)
    tuned = mlm_head.loss(head, *mlm_head.encoder_states(run.model.base_model, batches))
    base = mlm_head.loss(head, *mlm_head.encoder_states(pretrained.base_model, batches))
    return {"mlm_loss_base": base, "mlm_loss_tuned": tuned, "forgetting": tuned - base}


def fitted_head(
    store: str | Path,
    model_name: str,
    texts: int,
    head_texts: int,
    head_steps: int,
    seed: int,
    device: str | None = None,
) -> dict:
    """robustkit's TSP head for ``model_name`` fitted on glosses ``texts .. texts + head_texts``
    of the seed's permutation (never the evaluated ones), cached in the store."""
    from safetensors.torch import load_file, save_file

    from robustkit.analysis import mlm_head
    from robustkit.analysis.cache import CACHE_DIR
    from robustkit.data import heldout
    from robustkit.models import pretrained as models
    from robustkit.train.evaluate import resolve_device

    key = {
        "version": VERSION,
        "model": model_name,
        "fingerprint": models.fingerprint(models.load_masked_lm(model_name, seed=0)[0]),
        "skip": texts,
        "head_texts": head_texts,
        "head_steps": head_steps,
        "seed": seed,
        "lr": mlm_head.FIT_LR,
        "batch": mlm_head.FIT_BATCH,
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    path = Path(store) / CACHE_DIR / ANALYSIS / f"head-{model_name}-{digest}.safetensors"
    if path.exists():
        return load_file(path)
    tensors = mlm_head.fit_head(
        model_name, heldout.sample(head_texts, seed, skip=texts), head_steps, seed, resolve_device(device)
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    save_file({k: v.contiguous() for k, v in tensors.items()}, partial)
    partial.replace(path)
    return tensors


def run(
    store: str | Path,
    select: dict | list[str] | None = None,
    *,
    checkpoint: str,
    texts: int,
    head: str,
    head_texts: int,
    head_steps: int,
    seed: int,
    device: str | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Forgetting and update spectra of every selected run, cached per run.

    Parameters
    ----------
    checkpoint : str
        The tuned checkpoint (``best`` or ``last``).
    texts : int
        Held-out glosses scored.
    head : {"auto", "own", "fitted"}
        The masked-LM head (:mod:`robustkit.analysis.mlm_head`).
    head_texts, head_steps : int
        Glosses and steps of a fitted head.
    seed : int
        Seed of the glosses drawn, their masks and the fitted head.

    Returns
    -------
    DataFrame
        Identity columns + ``checkpoint, texts`` + :data:`RESULT_COLUMNS` (``layer``, ``matrix``,
        ``kind`` empty on the loss rows).

    Raises
    ------
    RobustkitError
        ``head = "own"`` for a model without one, or sizes below 1.
    """
    import numpy as np
    import pandas as pd

    from robustkit.analysis import mlm_head
    from robustkit.analysis.each_run import each_run
    from robustkit.analysis.select import select_runs
    from robustkit.data import heldout

    if head not in HEADS:
        raise RobustkitError(f"head must be one of {', '.join(HEADS)}, got {head!r}")
    if min(texts, head_texts, head_steps) < 1:
        raise RobustkitError("texts, head_texts and head_steps must be at least 1")
    runs = select_runs(store, select)
    heads, batches = {}, {}
    for model_name in runs["model"].unique():
        own = mlm_head.has_own_head(model_name)
        if head == "own" and not own:
            raise RobustkitError(f"{model_name} has no masked-LM head of its own: use --head fitted (or auto)")
        chosen = "own" if head == "auto" and own else "fitted" if head == "auto" else head
        tensors = (
            None if chosen == "own" else fitted_head(store, model_name, texts, head_texts, head_steps, seed, device)
        )
        heads[model_name] = (chosen, tensors)
        batches[model_name] = mlm_head.masked_batches(heldout.sample(texts, seed), model_name, seed)

    def compute(row: pd.Series) -> pd.DataFrame:
        chosen, tensors = heads[row["model"]]
        losses = masked_lm_losses(row["path"], checkpoint, batches[row["model"]], tensors, device)
        rows = [{"measure": m, "layer": np.nan, "matrix": "", "kind": "", "value": v} for m, v in losses.items()]
        rows += update_spectrum(row["path"], checkpoint)
        return pd.DataFrame(rows, columns=RESULT_COLUMNS[1:]).assign(head=chosen)[RESULT_COLUMNS]

    params = {
        "version": VERSION,
        "texts": texts,
        "seed": seed,
        "max_length": mlm_head.MAX_LENGTH,
        "heads": {m: (c, None if t is None else _digest(t)) for m, (c, t) in heads.items()},
    }
    with progress_bar(total=len(runs), desc="forgetting", unit="run", show=progress) as bar:
        frame = each_run(
            runs, ANALYSIS, params, ["step-0", checkpoint], compute, on_done=bar.update, provenance=computed_on(device)
        )
    return frame.assign(checkpoint=checkpoint, texts=texts)[COLUMNS]


def _digest(tensors: dict) -> str:
    digest = hashlib.sha256()
    for name in sorted(tensors):
        digest.update(name.encode())
        digest.update(tensors[name].numpy().tobytes())
    return digest.hexdigest()[:16]


def update_ranks(frame: pd.DataFrame, rank_measure: str, matrices: str) -> pd.DataFrame:
    """Each run's mean update rank over the chosen matrices that changed.

    Returns
    -------
    DataFrame
        Identity columns + ``value`` (directions); runs that changed none of the matrices are absent.
    """
    from robustkit.analysis.intruders import kinds

    if rank_measure not in RANK_MEASURES:
        raise RobustkitError(f"rank_measure must be one of {', '.join(RANK_MEASURES)}, got {rank_measure!r}")
    rows = frame[frame["measure"] == rank_measure]
    chosen = kinds(matrices, rows)
    if chosen is not None:
        rows = rows[rows["kind"].isin(chosen)]
    mean = rows.groupby("run_id")["value"].mean().rename("value").reset_index()
    return rows.drop_duplicates("run_id")[IDENTITY].merge(mean, on="run_id")


def forgetting_view(
    frame: pd.DataFrame, store: str | Path, checkpoint: str, matrices: str, rank_measure: str, include_failed: bool
) -> dict[str, pd.DataFrame]:
    """What the ``forgetting`` figure draws.

    Returns
    -------
    dict
        ``points``: per run its validation score at ``checkpoint`` (learning), its forgetting
        and its outcome (failed runs dropped unless ``include_failed``); ``ranks``: the update
        rank of every chosen matrix that changed (per run x matrix), with the run's LoRA rank
        ``r`` where it has one; ``run_ranks``: each run's mean of them (:func:`update_ranks`,
        directions), what the update-rank claims test.
    """
    from robustkit.analysis import scores
    from robustkit.analysis.intruders import kinds

    loss = frame[frame["measure"] == "forgetting"][[*IDENTITY, "head", "value"]].rename(columns={"value": "forgetting"})
    learned = scores.outcomes(
        store, {"run_id": list(loss["run_id"])}, checkpoint=checkpoint, split="validation", metric=None
    )
    points = loss.merge(
        learned[["run_id", "value", "metric", "outcome"]].rename(columns={"value": "score"}), on="run_id"
    )
    if not include_failed:
        points = points[points["outcome"] == "ok"]
    ranks = frame[frame["measure"] == rank_measure]
    chosen = kinds(matrices, ranks)
    if chosen is not None:
        ranks = ranks[ranks["kind"].isin(chosen)]
    ranks = ranks[ranks["run_id"].isin(points["run_id"])]
    run_ranks = update_ranks(frame, rank_measure, matrices)
    run_ranks = run_ranks[run_ranks["run_id"].isin(points["run_id"])]
    return {
        "points": points.reset_index(drop=True),
        "ranks": ranks.reset_index(drop=True),
        "run_ranks": run_ranks.reset_index(drop=True),
    }


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Per run: the losses, forgetting, and the mean update ranks over every changed matrix."""
    losses = frame[frame["measure"].isin(LOSS_MEASURES)].pivot_table(index="run_id", columns="measure", values="value")
    ranks = frame[frame["measure"].isin(RANK_MEASURES)].pivot_table(
        index="run_id", columns="measure", values="value", aggfunc="mean"
    )
    identity = frame.drop_duplicates("run_id").set_index("run_id")[["method", "seed", "head"]]
    return (
        identity.join(losses[[m for m in LOSS_MEASURES if m in losses]]).join(ranks.add_prefix("mean ")).reset_index()
    )


# ---------------------------------------------------------------------------------------------
# its statistics (DECLARED.statistics)


def forgetting_statistic(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run's masked-LM loss on held-out text minus the pre-trained encoder's (nats per
    masked token; Biderman et al. 2024's forgetting, ``forgetting`` analysis)."""
    rows = frame[frame["measure"] == "forgetting"]
    return rows[[*IDENTITY, "value"]]


def update_rank_ratio(frame: pd.DataFrame, rank_measure: str, matrices: str, reference_rank: int) -> pd.DataFrame:
    """Each run's mean update rank (:func:`update_ranks`) over ``reference_rank``, the rank r of a
    typical LoRA configuration (Biderman et al. 2024: full fine-tuning's rank "10-100X greater
    than typical LoRA configurations"): dimensionless, 1 = as many directions as a rank-r LoRA
    update has, 10 = ten times as many; a rank-r LoRA update itself is at most 1."""
    if reference_rank < 1:
        raise RobustkitError(f"reference_rank must be a positive rank, got {reference_rank!r}")
    ranks = update_ranks(frame, rank_measure, matrices)
    return ranks.assign(value=ranks["value"] / reference_rank)
