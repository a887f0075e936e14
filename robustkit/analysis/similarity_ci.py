"""Representation similarity beyond the papers (issue #16, item 3): RSA, linear CKA, debiased
linear CKA and the orthogonal Procrustes distance of each layer of a run with its base model, side
by side, each with a confidence interval from a bootstrap over the token sample.

The same tokens and representations as :mod:`robustkit.analysis.similarity` (He et al. 2021
§2.2): one sample of dev tokens per (model, task), one pass of the base model, one pass of each
run's checkpoint. Per layer, :func:`robustkit.measures.half_sampling.intervals` gives each
measure's value on the whole sample and its basic half-sampling interval (random halves of G
random groups of tokens: no token is ever paired with its own copy, which a with-replacement
bootstrap would do to these pairwise measures). The halves depend only on the sample and the
seed, so every run of a task is resampled on the same halves.

Measures (:mod:`robustkit.measures`):

- ``rsa``: Pearson r of the cosine-similarity matrices (He et al.'s);
- ``cka``: linear CKA (Kornblith et al. 2019), biased upwards when d is not small next to n;
- ``cka-debiased``: linear CKA with the unbiased HSIC estimator (Song et al. 2012; Nguyen et
  al. 2021);
- ``procrustes``: orthogonal Procrustes distance (Ding et al. 2021), 0 = equal up to rotation
  and scale, 2 at most (a distance: small = similar, unlike the other three).
"""

from __future__ import annotations

import warnings
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from torch import Tensor

    from robustkit.analysis.representations import TokenSample

from robustkit.analysis.declare import (
    DEVICE,
    LAYER,
    SIMILARITY_CHECKPOINT,
    TOKENS,
    Analysis,
    Param,
    Statistic,
)
from robustkit.analysis.notes import AnalysisNote
from robustkit.analysis.registry import register_analysis
from robustkit.errors import RobustkitError
from robustkit.progress import bar as progress_bar
from robustkit.store.identity import IDENTITY
from robustkit.train.provenance import computed_on

ANALYSIS = "similarity-ci"
VERSION = 1
RESULT_COLUMNS = ["layer", "measure", "value", "ci_low", "ci_high", "resamples"]
COLUMNS = [*IDENTITY, "checkpoint", "tokens", "groups", "confidence", *RESULT_COLUMNS]

# Everything robustkit reads about this analysis (robustkit.analysis.declare); the functions below
# take their defaults from it.
DECLARED = register_analysis(
    Analysis(
        "similarity-ci",
        "RSA, linear CKA, debiased CKA and Procrustes distance per layer vs the base model, each with a "
        "token-bootstrap interval",
        "The representations of 'analyze rsa' (the same sampled dev tokens, base model vs each run), four measures "
        "per layer, and for each a basic bootstrap interval from random halves of random token groups (no token "
        "paired with its own copy).",
        ":run",
        (
            TOKENS,
            Param("seed", 0, "seed of the token sample, its groups and the resampled halves"),
            SIMILARITY_CHECKPOINT,
            Param("groups", 20, "random token groups of the half-sampling bootstrap (even, >= 4)"),
            Param("resamples", 200, "random halves per layer"),
            Param("confidence", 0.95, "level of the intervals"),
        ),
        (DEVICE,),
        summary=":summarize",
        statistics=(
            Statistic(
                "similarity",
                ":similarity",
                "a measure of each layer's representations vs the base model's",
                (
                    Param(
                        "measure",
                        "cka-debiased",
                        "rsa, cka, cka-debiased or procrustes",
                        choices=("rsa", "cka", "cka-debiased", "procrustes"),
                    ),
                    LAYER,
                ),
            ),
        ),
        output="the tidy result (per run x layer x measure)",
        order=60,
        module=__name__,
    )
)


def compare(
    base: Tensor,
    tuned: Tensor,
    groups: int = DECLARED.default("groups"),
    resamples: int = DECLARED.default("resamples"),
    confidence: float = DECLARED.default("confidence"),
    seed: int = DECLARED.default("seed"),
) -> pd.DataFrame:
    """Every measure per layer between two (n_layers + 1, n, d) stacks, with its interval.

    Returns
    -------
    DataFrame
        ``layer, measure, value, ci_low, ci_high, resamples`` (resamples with a finite value).
    """
    import pandas as pd

    from robustkit.measures.half_sampling import intervals

    if base.shape[:2] != tuned.shape[:2]:
        raise ValueError(
            f"base and tuned representations differ in layers or tokens: {tuple(base.shape)} vs {tuple(tuned.shape)}"
        )
    rows = []
    for layer in range(base.shape[0]):
        for measure, interval in intervals(
            base[layer], tuned[layer], None, groups, resamples, confidence, seed
        ).items():
            rows.append(
                {
                    "layer": layer,
                    "measure": measure,
                    "value": interval.value,
                    "ci_low": interval.low,
                    "ci_high": interval.high,
                    "resamples": interval.resamples,
                }
            )
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def run(
    store: str | Path,
    select: dict | list[str] | None = None,
    *,
    tokens: int,
    seed: int,
    checkpoint: str,
    groups: int,
    resamples: int,
    confidence: float,
    max_length: int | None = None,
    split: str = "validation",
    batch_size: int = 64,
    device: str | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """The four measures per layer of every selected run vs its base model, with intervals.

    Parameters
    ----------
    store : path
        Run store.
    select : dict or list of str, optional
        Run filters.
    tokens, seed, checkpoint, max_length, split, batch_size, device
        As in :func:`robustkit.analysis.similarity.run` (``seed`` also seeds the groups and
        the halves).
    groups : int
        G, the random groups of tokens (even, >= 4); default 20.
    resamples : int
        Random halves per layer; default 200.
    confidence : float
        Level of the intervals; default 0.95.

    Returns
    -------
    DataFrame
        One row per run x layer x measure: identity columns, ``checkpoint, tokens, groups,
        confidence, layer`` (0 = embeddings), ``measure`` (``rsa``, ``cka``, ``cka-debiased``,
        ``procrustes``), ``value`` (whole sample), ``ci_low, ci_high`` (basic interval),
        ``resamples``. Cached under ``<store>/.cache/similarity-ci/``.
    """
    import pandas as pd

    from robustkit.analysis.each_run import each_run
    from robustkit.analysis.representations import analysis_length, sample_tokens
    from robustkit.analysis.select import select_runs
    from robustkit.analysis.similarity import base_representations
    from robustkit.train.evaluate import resolve_device

    if groups < 4 or groups % 2 or resamples < 2 or not 0 < confidence < 1:
        raise RobustkitError(
            f"need an even groups >= 4 (got {groups}), resamples >= 2 (got {resamples}) and "
            f"a confidence in (0, 1) (got {confidence})"
        )
    device = resolve_device(device)  # the GPU if there is one, as every analysis's default
    runs = select_runs(store, select)
    data_dir = runs["data_dir"].astype(object).where(runs["data_dir"].notna(), "") if "data_dir" in runs else ""
    frames = []
    with progress_bar(total=len(runs), desc="similarity-ci", unit="run", show=progress) as bar:
        for _, group in runs.assign(_data=data_dir).groupby(["model", "task", "_data"], sort=True, dropna=False):
            length = analysis_length(group["max_length"]) if max_length is None else max_length
            sample = sample_tokens(group.iloc[0]["path"], tokens, seed, length, split)
            params = {
                "version": VERSION,
                "tokens": tokens,
                "seed": seed,
                "max_length": length,
                "split": split,
                "sample": sample.digest,
                "groups": groups,
                "resamples": resamples,
                "confidence": confidence,
            }
            base = cache(lambda sample=sample: base_representations(sample, batch_size, device))
            frame = each_run(
                group.drop(columns="_data"),
                ANALYSIS,
                params,
                [checkpoint],
                lambda row: _one(
                    base(), row, checkpoint, sample, groups, resamples, confidence, seed, batch_size, device
                ),
                on_done=bar.update,
                provenance=computed_on(device),
            )
            frames.append(frame.assign(checkpoint=checkpoint, tokens=len(sample), groups=groups, confidence=confidence))
    frame = pd.concat(frames, ignore_index=True)[COLUMNS]
    if frame["value"].isna().any():
        missing = sorted(frame.loc[frame["value"].isna(), "run_id"].unique())
        warnings.warn(
            f"similarity is NaN for {len(missing)} run(s) (non-finite or constant representations): "
            f"{', '.join(missing)}",
            AnalysisNote,
            stacklevel=2,
        )
    return frame


def _one(
    base: Tensor,
    row,
    checkpoint: str,
    sample: TokenSample,
    groups: int,
    resamples: int,
    confidence: float,
    seed: int,
    batch_size: int,
    device,
) -> pd.DataFrame:
    from robustkit.analysis.similarity import run_representations

    tuned = run_representations(row["path"], checkpoint, sample, batch_size, device)
    return compare(base, tuned, groups, resamples, confidence, seed)


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run's value and interval per layer and measure, the columns a person reads."""
    return frame[
        [c for c in ("run_id", "method", "seed", "layer", "measure", "value", "ci_low", "ci_high") if c in frame]
    ]


# ---------------------------------------------------------------------------------------------
# its statistics (DECLARED.statistics)


def similarity(frame: pd.DataFrame, measure: str, layer: str) -> pd.DataFrame:
    """A measure of the ``similarity-ci`` analysis (``rsa``, ``cka``, ``cka-debiased``,
    ``procrustes``) of each run's layers with the base model's; ``layer`` as in :func:`rsa`."""
    from robustkit.analysis.layers import REPRESENTATIONS, encoder_third

    frame = frame[frame["measure"] == measure]
    if layer != "each":
        frame = (
            encoder_third(frame, REPRESENTATIONS, layer).groupby(IDENTITY, dropna=False, as_index=False)["value"].mean()
        )
    return frame[[*IDENTITY, *(["layer"] if layer == "each" else []), "value"]]
