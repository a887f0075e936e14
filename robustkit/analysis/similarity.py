"""How far tuning moves each layer's representations from the base model (He et al. 2021 §2.2,
figures 2 and 7): RSA and linear CKA, per layer, of each selected run vs its pretrained base.

For each (model, task) of the selection, one token sample (:func:`sample_tokens`) and one pass
of the base model; then, per run, one pass of the run's checkpoint and the per-layer
similarities. Each run's result is cached (``<store>/.cache/similarity/``), keyed by the
checkpoint's sha256, the parameters and the sample's digest: a second call reads parquet files
only, and neither the base model nor a run model is loaded.

A value the measures cannot compute honestly (:mod:`robustkit.measures`: a layer whose
representations hold a NaN or an infinity, e.g. a diverged checkpoint's, or have no variation)
is NaN in the frame, never a number, and :func:`run` warns naming the runs and layers;
:func:`summarize` counts such runs apart (``n_nan``) instead of averaging them in.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    from torch import Tensor

    from robustkit.analysis.representations import TokenSample

from robustkit.analysis import scores
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
from robustkit.progress import bar as progress_bar
from robustkit.store.identity import IDENTITY
from robustkit.train.provenance import computed_on

# Everything robustkit reads about this analysis (robustkit.analysis.declare); the functions below
# take their defaults from it.
DECLARED = register_analysis(
    Analysis(
        "rsa",
        "RSA and linear CKA per layer, base model vs each tuned run (He et al. 2021, section 2.2)",
        "Representations of the same sampled dev tokens at every layer (embeddings + each encoder layer) of the base "
        "model and each selected run; RSA (Pearson r of the cosine-similarity matrices' upper triangles) and linear "
        "CKA per layer.",
        ":run",
        (TOKENS, Param("seed", 0, "seed of the token sample"), SIMILARITY_CHECKPOINT),
        (DEVICE,),
        summary=":summarize",
        statistics=(
            Statistic(
                "similarity",
                ":rsa",
                "similarity of each layer's representations to the base model's (1 = the same)",
                (Param("measure", "rsa", "rsa or cka", choices=("rsa", "cka")), LAYER),
            ),
        ),
        output="the tidy result (per run x layer x measure)",
        order=50,
        module=__name__,
    )
)


ANALYSIS = "similarity"
# bump when the computation changes: it is part of the cache key. 2: non-finite representations
# give NaN (version 1 cached them as 1.0) and CKA of a constant side is NaN.
VERSION = 2
MEASURES = ("rsa", "cka")


def _measures() -> dict[str, Callable[[Tensor, Tensor], Tensor]]:
    """Each of :data:`MEASURES` as a function of two layers' representations (torch, imported here)."""
    from robustkit.measures.cka import cka_layers
    from robustkit.measures.rsa import DEFAULT_CHUNK, rsa_layers

    return {"rsa": lambda a, b: rsa_layers(a, b, chunk=DEFAULT_CHUNK), "cka": cka_layers}


COLUMNS = [*IDENTITY, "checkpoint", "tokens", "layer", "measure", "value"]


def run(
    store: str | Path,
    select: dict | list[str] | None = None,
    *,
    tokens: int,
    seed: int,
    checkpoint: str,
    max_length: int | None = None,
    split: str = "validation",
    batch_size: int = 64,
    device: str | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """RSA and linear CKA of every selected run's representations with its base model's.

    Parameters
    ----------
    store : path
        Run store.
    select : dict or list of str, optional
        Run filters, e.g. ``["task=rt"]``.
    tokens : int
        Tokens sampled from the dev set (He et al.: 5000); the same for every run of a task.
    seed : int
        Seed of the token sample.
    checkpoint : str
        Checkpoint of each run compared with the base (``best``, ``last``, ``step-0``).
    max_length : int, optional
        Truncation length of the dev inputs, the same for the base and every run of a task;
        default the smallest ``max_length`` those runs trained at (:func:`analysis_length`).
    split : str
        Split the tokens come from (``validation`` = the task's dev set).
    batch_size : int
        Examples per forward pass.
    device : str, optional
        Where forward passes and similarities run (``cuda``...; default: the GPU if there is
        one); not part of the cache key.

    Returns
    -------
    DataFrame
        One row per run x layer x measure: identity columns, ``checkpoint``, ``tokens``,
        ``layer`` (0 = embeddings, 1..L = encoder layers), ``measure`` (``rsa``, ``cka``),
        ``value`` (1 = the base's representational geometry unchanged; NaN where either
        model's representations at that layer are non-finite or constant, with a warning),
        ``outcome`` of the run at ``checkpoint`` on its test split (``ok``, ``collapsed``,
        ``diverged``: :func:`robustkit.analysis.scores.with_outcomes`), which figures and
        claims leave out.
    """
    import pandas as pd

    from robustkit.analysis.representations import analysis_length
    from robustkit.analysis.select import select_runs
    from robustkit.train.evaluate import resolve_device

    device = resolve_device(device)  # the GPU if there is one, as every analysis's default
    runs = select_runs(store, select)
    settings = {"tokens": tokens, "seed": seed, "max_length": max_length, "split": split}
    frames = []
    with progress_bar(total=len(runs), desc="similarity", unit="run", show=progress) as bar:
        for _, group in runs.groupby(["model", "task", _data_dir(runs)], sort=True, dropna=False):
            length = analysis_length(group["max_length"]) if max_length is None else max_length
            frames.extend(_group(group, {**settings, "max_length": length}, checkpoint, batch_size, device, bar))
    frame = pd.concat(frames, ignore_index=True)[COLUMNS]
    _warn_nan(frame)
    return scores.with_outcomes(frame, store, checkpoint)


def _warn_nan(frame: pd.DataFrame) -> None:
    """Say which runs and layers have no value: NaN is a finding about the run, not a gap."""
    missing = frame[frame["value"].isna()]
    if missing.empty:
        return
    where = "; ".join(
        f"{run_id} ({', '.join(sorted(group['measure'].unique()))} at layers "
        f"{', '.join(map(str, sorted(group['layer'].unique())))})"
        for run_id, group in missing.groupby("run_id", sort=True)
    )
    warnings.warn(
        f"similarity is NaN for {missing['run_id'].nunique()} run(s), their representations being non-finite "
        f"(a diverged checkpoint?) or constant: {where}",
        AnalysisNote,
        stacklevel=3,
    )


def _group(group: pd.DataFrame, settings: dict, checkpoint: str, batch_size: int, device, bar) -> list[pd.DataFrame]:
    """Results of the runs of one (model, task): one token sample, one base pass at most."""
    from robustkit.analysis.each_run import each_run
    from robustkit.analysis.representations import sample_tokens

    sample = sample_tokens(
        group.iloc[0]["path"], settings["tokens"], settings["seed"], settings["max_length"], settings["split"]
    )
    # The sample's digest covers the dev data and the tokenizer; the checkpoint's sha256 (in
    # the cache key) covers the run and, through its base fingerprint, the base model.
    params = {
        "version": VERSION,
        **settings,
        "sample": sample.digest,
        "measures": sorted(MEASURES),
        "base": "pretrained",
    }
    base = _Lazy(lambda: base_representations(sample, batch_size, device))
    frame = each_run(
        group,
        ANALYSIS,
        params,
        [checkpoint],
        lambda row: compare(base(), run_representations(row["path"], checkpoint, sample, batch_size, device), device),
        on_done=bar.update,
        provenance=computed_on(device),
    )
    return [frame.assign(checkpoint=checkpoint, tokens=len(sample))]


def _data_dir(runs: pd.DataFrame) -> pd.Series:
    """GLUE data folder of each run (None: the hub or an embedded task), as a group key."""
    import pandas as pd

    column = runs["data_dir"] if "data_dir" in runs.columns else pd.Series(None, index=runs.index)
    return column.astype(object).where(column.notna(), "").rename("data_dir")


class _Lazy:
    """Compute a value on first use only (the base pass is skipped when every run is cached)."""

    def __init__(self, compute: Callable[[], Tensor]) -> None:
        self._compute, self._value = compute, None

    def __call__(self) -> Tensor:
        if self._value is None:
            self._value = self._compute()
        return self._value


def base_representations(sample: TokenSample, batch_size: int = 64, device: str | None = None) -> Tensor:
    """(n_layers + 1, n, d) representations of the pretrained model at the sampled tokens."""
    from robustkit.analysis.representations import load_base, representations

    return representations(load_base(sample.model, sample.task), sample, batch_size, device)


def run_representations(
    run_dir: str | Path, checkpoint: str, sample: TokenSample, batch_size: int = 64, device: str | None = None
) -> Tensor:
    """(n_layers + 1, n, d) representations of a run's checkpoint at the sampled tokens."""
    from robustkit.analysis.representations import representations
    from robustkit.train.run_model import load_run

    return representations(load_run(run_dir, checkpoint, "cpu").model, sample, batch_size, device)


def compare(base: Tensor, tuned: Tensor, device: str | None = None) -> pd.DataFrame:
    """Every measure per layer between two (n_layers + 1, n, d) stacks.

    Parameters
    ----------
    base, tuned : Tensor, shape (n_layers + 1, n, d)
    device : str, optional
        Where the similarities are computed (default: where ``base`` is).

    Returns
    -------
    DataFrame
        ``layer, measure, value``.
    """
    import pandas as pd

    if base.shape[:2] != tuned.shape[:2]:
        raise ValueError(
            f"base and tuned representations differ in layers or tokens: {tuple(base.shape)} vs {tuple(tuned.shape)}"
        )
    if device is not None:
        base, tuned = base.to(device), tuned.to(device)
    frames = [
        pd.DataFrame({"layer": range(base.shape[0]), "measure": name, "value": measure(base, tuned).numpy()})
        for name, measure in _measures().items()
    ]
    return pd.concat(frames, ignore_index=True)


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean, standard deviation and run count over seeds, per config x layer x measure.

    Returns
    -------
    DataFrame
        The non-seed identity columns present, ``checkpoint, tokens, layer, measure, mean, std,
        runs`` (runs with a value, in the mean and std) and ``n_nan`` (runs whose value is NaN:
        non-finite or constant representations; counted here, never averaged in).
    """
    keys = [c for c in [*IDENTITY, "checkpoint", "tokens"] if c not in ("run_id", "seed") and c in frame.columns]
    keys += ["layer", "measure"]
    grouped = frame.assign(nan=frame["value"].isna()).groupby(keys, dropna=False)
    stats = grouped.agg(mean=("value", "mean"), std=("value", "std"), runs=("value", "count"), n_nan=("nan", "sum"))
    return stats.reset_index().astype({"n_nan": int})


# ---------------------------------------------------------------------------------------------
# its statistics (DECLARED.statistics)


def rsa(frame: pd.DataFrame, measure: str, layer: str) -> pd.DataFrame:
    """Similarity of each run's representations to its base model's (He et al. 2021 §2.2).

    ``layer``: ``each`` (one row per run x layer), ``top`` / ``bottom`` (the mean over the top /
    bottom third of the encoder layers).
    """
    from robustkit.analysis.layers import REPRESENTATIONS, encoder_third

    frame = frame[frame["measure"] == measure].drop(columns=["outcome"], errors="ignore")
    if layer != "each":
        frame = (
            encoder_third(frame, REPRESENTATIONS, layer).groupby(IDENTITY, dropna=False, as_index=False)["value"].mean()
        )
    return frame
