"""Curvature of the training loss at a run's checkpoints: the top Hessian eigenvalue and the
Hessian trace, for the whole trained set and per layer or per module (issue #16, item 1).

"Sharper" and "flatter" minima (Keskar et al. 2017; He et al. 2021 §5) become two numbers per
checkpoint, as PyHessian (Yao et al. 2020) reports them, both from Hessian-vector products
(:mod:`robustkit.measures.hessian`):

- the loss: mean cross-entropy (nats; MSE for regression) in eval mode on one fixed batch of
  ``examples`` training examples (:func:`robustkit.analysis.batches.sampled_batches`);
- the parameters: the ones the run trains, so a full run's Hessian and an adapter run's are
  over different parameter sets;
- the blocks: ``layer`` (:func:`robustkit.methods.model_parts.layer_groups`) or ``module``; a
  block's numbers are those of the diagonal block H_BB (only that block moving);
- the checkpoints: ``step-0``, ``best``, ``last`` and ``tsp`` (the TSP checkpoint under its own
  masked-LM loss; runs with ``tsp_step`` 0 give no rows).

Attention runs through PyTorch's "math" scaled-dot-product kernel here: the fused CPU and flash
kernels have no second derivative.

What is measured, exactly: ``docs/analyses.md``, "robustkit/analysis/curvature.py".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    import torch

from robustkit.analysis.declare import DEVICE, FLAT, Analysis, Param, Statistic, checkpoint_param
from robustkit.analysis.registry import register_analysis
from robustkit.errors import RobustkitError
from robustkit.models.layer_names import layer_group
from robustkit.progress import bar as progress_bar
from robustkit.progress import doing
from robustkit.store.identity import IDENTITY
from robustkit.train.provenance import computed_on

# part of the cache key: bump when the computation changes. 2: the largest eigenvalue (a shifted
# second power iteration where the largest-magnitude one is negative), not the largest magnitude;
# 3: converged judged on that eigenvalue and its residual (robustkit.measures.hessian._power)
VERSION = 3
CHECKPOINTS = ("step-0", "best", "last", "tsp")
GROUPINGS = ("layer", "module", "none")
ESTIMATORS = ("top_eigenvalue", "trace")
SPREAD_KINDS = {"top_eigenvalue": "residual ||Hv - lambda v||", "trace": "standard error"}
RESULT_COLUMNS = [
    "scope",
    "group",
    "estimator",
    "value",
    "spread",
    "spread_kind",
    "iterations",
    "converged",
    "n_params",
    "examples",
]
COLUMNS = [*IDENTITY, "checkpoint", *RESULT_COLUMNS]

# Everything robustkit reads about this analysis (robustkit.analysis.declare); the functions below
# take their defaults from it.
DECLARED = register_analysis(
    Analysis(
        "curvature",
        "top Hessian eigenvalue and trace of the training loss, whole trained set and per layer/module",
        "Hessian-vector products over the parameters each run trains (adapters, LayerNorms and head for adapter runs; "
        "everything for full fine-tuning) on one fixed batch of training examples: the top eigenvalue by power "
        "iteration (with its residual bound and iteration count) and the trace by Hutchinson (with its standard "
        "error), for the whole set and each block; prints mean +- std over seeds.",
        ":run",
        (
            Param(
                "checkpoints",
                ["step-0", "best", "last"],
                "comma-separated checkpoints: step-0 (theta_0; a TSP run's start for tsp_step > 0), best, last, tsp "
                "(the masked-LM loss at the TSP checkpoint, runs with tsp_step > 0)",
                kind=list,
            ),
            Param(
                "examples",
                32,
                "training examples in the one fixed batch the loss is taken on (the same for every run)",
            ),
            Param(
                "grouping",
                "layer",
                "blocks besides the whole set: layer (as the gradient norms group them), module (each module's own "
                "tensors), none",
                choices=("layer", "module", "none"),
            ),
            Param("max_iterations", 30, "power iteration cap (Hessian-vector products per eigenvalue)"),
            Param("tol", 1e-3, "power iteration stops at this relative change"),
            Param("samples", 30, "Hutchinson samples for the traces (every block's from the same ones)"),
            Param("seed", 0, "seed of the batch, the start vectors and the Rademacher samples"),
            Param(
                "block_eigenvalues",
                True,
                "a power iteration per layer block besides the whole set's (the costly part: one per block); off "
                "(--no-block-eigenvalues): per-layer traces only",
                kind=bool,
            ),
        ),
        (
            DEVICE,
            Param(
                "micro_batch",
                None,
                "run each Hessian-vector product in parts of this many examples, one part's graph in memory at a time "
                "(the same numbers up to rounding; slower)",
                default_note="the whole batch",
                kind=int,
                minimum=1,
            ),
        ),
        summary=":summarize",
        statistics=(
            Statistic(
                "sharpness",
                ":sharpness",
                "top Hessian eigenvalue or Hessian trace at one checkpoint, over the trained set or one block (nats "
                "per squared parameter unit; smaller = flatter)",
                (
                    checkpoint_param("checkpoint", ("step-0", "best", "last", "tsp"), default="last"),
                    Param(
                        "estimator", "top_eigenvalue", "top_eigenvalue or trace", choices=("top_eigenvalue", "trace")
                    ),
                    Param("group", "all", "all (the whole trained set) or a block (layer.3)"),
                ),
                undefined_on_failed=FLAT,
            ),
        ),
        output="the tidy result (per run x checkpoint x block x estimator)",
        order=100,
        module=__name__,
    )
)
ANALYSIS = DECLARED.name  # its cache folder


def blocks(
    names: Sequence[str], grouping: str = DECLARED.default("grouping"), layer_of: Mapping[str, str] | None = None
) -> dict[str, list[int]]:
    """Parameter indices of each block.

    Parameters
    ----------
    names : sequence of str
        Parameter names, in the order of the parameters handed to the Hessian.
    grouping : {"layer", "module", "none"}
        ``layer``: the parameter's layer group (``layer_of``, else :func:`robustkit.models.layer_names.layer_group`
        from the name alone); ``module``: the name without its last part (the owning module);
        ``none``: no blocks.
    layer_of : mapping of str to str, optional
        Parameter name -> layer group, from the model's structure
        (:func:`robustkit.methods.model_parts.layer_groups`: any encoder architecture, a method's
        own modules under their layer, as the gradient norms group them).

    Returns
    -------
    dict of str to list of int
        Block name -> indices into ``names``, blocks in order of first appearance.
    """
    if grouping not in GROUPINGS:
        raise RobustkitError(f"unknown grouping {grouping!r}; choose from {', '.join(GROUPINGS)}")
    if grouping == "none":
        return {}
    layer_of = layer_of or {}
    key = (
        (lambda name: layer_of.get(name) or layer_group(name))
        if grouping == "layer"
        else (lambda name: name.rsplit(".", 1)[0])
    )
    groups: dict[str, list[int]] = {}
    for index, name in enumerate(names):
        groups.setdefault(key(name), []).append(index)
    return groups


def micro_batches(batch: Mapping[str, torch.Tensor], size: int) -> list[tuple[float, dict[str, torch.Tensor]]]:
    """One batch as consecutive micro-batches of ``size`` examples, each with its share of the
    loss, so that the batch's mean loss is sum_k w_k (mean loss of part k).

    Parameters
    ----------
    batch : mapping of str to Tensor
        Model inputs with ``labels``; every tensor has the examples along dim 0 (shape
        (n, ...)). Padding is kept as it is, so each example is computed exactly as in the
        whole batch.
    size : int
        Examples per part (the last part may hold fewer).

    Returns
    -------
    list of (float, dict)
        (w_k, part_k): w_k is the part's loss terms over the batch's (integer labels: the
        entries other than -100, the examples of a classifier or the masked tokens of a
        masked-LM batch; float labels: every entry). Parts without a loss term are left out.
    """
    import torch

    if size < 1:
        raise RobustkitError(f"micro_batch must be at least 1, got {size}")
    labels = batch["labels"]
    terms = (labels != -100) if not labels.is_floating_point() else torch.ones_like(labels, dtype=torch.bool)
    total = int(terms.sum())
    if total == 0:
        raise RobustkitError("the batch has no loss terms (every label is -100)")
    parts = []
    for start in range(0, labels.shape[0], size):
        count = int(terms[start : start + size].sum())
        if count:
            parts.append((count / total, {k: v[start : start + size] for k, v in batch.items()}))
    return parts


def model_curvature(
    model: torch.nn.Module,
    names: Sequence[str],
    batch: dict[str, torch.Tensor],
    grouping: str = DECLARED.default("grouping"),
    max_iterations: int = DECLARED.default("max_iterations"),
    tol: float = DECLARED.default("tol"),
    samples: int = DECLARED.default("samples"),
    seed: int = DECLARED.default("seed"),
    block_eigenvalues: bool = DECLARED.default("block_eigenvalues"),
    progress: bool = False,
    loss: Callable[[torch.nn.Module, dict], torch.Tensor] | None = None,
    micro_batch: int | None = None,
) -> pd.DataFrame:
    """Top eigenvalue and trace of the Hessian of ``model``'s loss on ``batch``, over ``names``.

    Parameters
    ----------
    model : nn.Module
        A sequence-classification model; it runs where its parameters are, in eval mode.
    names : sequence of str
        The parameters the Hessian is over (e.g. the run's trained ones); the others are held
        fixed (``requires_grad`` is switched on for ``names`` only, and restored afterwards).
    batch : dict of str to Tensor
        Model inputs with ``labels``: the loss is ``model(**batch).loss``.
    grouping : {"layer", "module", "none"}
        Blocks reported besides the whole set (:func:`blocks`).
    max_iterations, tol : int, float
        Power iteration cap and relative tolerance (:func:`robustkit.measures.hessian.top_eigenvalue`).
    samples : int
        Hutchinson samples (every block's trace comes from the same ones).
    seed : int
        Seed of the start vectors and Rademacher samples.
    block_eigenvalues : bool
        Also run a power iteration per block (one per block: the costly part with many blocks).
    loss : callable, optional
        ``loss(model, inputs) -> Tensor``; default ``model(**inputs).loss``.
    micro_batch : int, optional
        Examples per part: each Hessian-vector product runs the batch in parts of this size
        (:func:`micro_batches`), holding one part's graph at a time instead of the whole
        batch's (less memory, rebuilt at every product: more time). The same numbers up to
        float rounding. Default: the whole batch, its graph built once.

    Returns
    -------
    DataFrame
        One row per scope x group x estimator: ``scope`` (``all`` or the grouping), ``group``
        (``all``, ``layer.3``, a module name), ``estimator`` (``top_eigenvalue``: the largest
        eigenvalue, :func:`robustkit.measures.hessian.top_eigenvalue`; ``trace``),
        ``value`` (loss units per squared parameter unit), ``spread`` (eigenvalue: the residual
        ||Hv - lambda v||, a bound on the distance to an eigenvalue; trace: the standard
        error), ``spread_kind``, ``iterations`` (Hessian-vector products, both power
        iterations together where a shifted second one ran; or samples),
        ``converged`` (eigenvalue: relative change below ``tol``; trace: always true),
        ``n_params`` (scalars in the block), ``examples``.
    """
    import pandas as pd
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from robustkit.measures.hessian import HessianVectorProduct, hutchinson_trace, top_eigenvalue
    from robustkit.methods.model_parts import layer_groups
    from robustkit.train.evaluate import model_inputs

    named = dict(model.named_parameters())
    missing = [n for n in names if n not in named]
    if missing:
        raise RobustkitError(f"the model has no parameters {missing[:3]}")
    names = [n for n in named if n in set(names)]  # the model's order
    parameters = [named[n] for n in names]
    device = parameters[0].device
    inputs = model_inputs(batch, device)
    examples = int(inputs["labels"].shape[0])
    grad_state = {n: p.requires_grad for n, p in named.items()}
    was_training = model.training
    groups = blocks(names, grouping, layer_groups(model))
    rows = []
    try:
        for name, parameter in named.items():
            parameter.requires_grad_(name in set(names))
        model.eval()
        with sdpa_kernel(SDPBackend.MATH):
            loss_of = (lambda part: model(**part).loss) if loss is None else (lambda part: loss(model, part))
            if micro_batch is None:
                hvp = HessianVectorProduct(lambda: loss_of(inputs), parameters)
            else:
                hvp = HessianVectorProduct(
                    [(weight, lambda part=part: loss_of(part)) for weight, part in micro_batches(inputs, micro_batch)],
                    parameters,
                )
            targets = {"all": None, **(groups if block_eigenvalues else {})}
            for k, (group, block) in enumerate(
                progress_bar(targets.items(), desc="top eigenvalue", show=progress, leave=False)
            ):
                doing(f"top eigenvalue of {group} ({k + 1} of {len(targets)})")  # named by a heartbeat line
                estimate = top_eigenvalue(hvp, block, max_iterations, tol, seed)
                rows.append(
                    _row(
                        "all" if block is None else grouping,
                        group,
                        "top_eigenvalue",
                        estimate.value,
                        estimate.residual,
                        estimate.iterations,
                        estimate.converged,
                        _count(parameters, block),
                        examples,
                    )
                )
            doing(f"Hutchinson traces ({samples} samples)")
            for group, estimate in hutchinson_trace(hvp, groups, samples, seed).items():
                rows.append(
                    _row(
                        "all" if group == "all" else grouping,
                        group,
                        "trace",
                        estimate.value,
                        estimate.std_error,
                        estimate.samples,
                        True,
                        _count(parameters, groups.get(group)),
                        examples,
                    )
                )
    finally:
        for name, parameter in named.items():
            parameter.requires_grad_(grad_state[name])
        model.train(was_training)
    order = {"all": 0, **{g: i + 1 for i, g in enumerate(groups)}}
    frame = pd.DataFrame(rows, columns=RESULT_COLUMNS)
    return frame.sort_values(
        ["estimator", "group"], key=lambda c: c.map(order) if c.name == "group" else c, kind="stable"
    ).reset_index(drop=True)


def _row(scope, group, estimator, value, spread, iterations, converged, n_params, examples) -> dict:
    return {
        "scope": scope,
        "group": group,
        "estimator": estimator,
        "value": float(value),
        "spread": float(spread),
        "spread_kind": SPREAD_KINDS[estimator],
        "iterations": int(iterations),
        "converged": bool(converged),
        "n_params": int(n_params),
        "examples": int(examples),
    }


def _count(parameters: list[torch.Tensor], block: Sequence[int] | None) -> int:
    chosen = parameters if block is None else [parameters[i] for i in block]
    return sum(p.numel() for p in chosen)


def curvature_run(
    run_dir: str | Path,
    checkpoint: str = "best",
    examples: int = DECLARED.default("examples"),
    grouping: str = DECLARED.default("grouping"),
    max_iterations: int = DECLARED.default("max_iterations"),
    tol: float = DECLARED.default("tol"),
    samples: int = DECLARED.default("samples"),
    seed: int = DECLARED.default("seed"),
    block_eigenvalues: bool = DECLARED.default("block_eigenvalues"),
    device: str | None = None,
    progress: bool = False,
    micro_batch: int | None = None,
) -> pd.DataFrame:
    """:func:`model_curvature` of one run's checkpoint over the parameters it trains, uncached.

    The batch is ``examples`` training examples drawn with ``seed``
    (:func:`robustkit.analysis.batches.sampled_batches`), as one batch.
    """
    from robustkit.analysis.batches import sampled_batches
    from robustkit.train.run_model import load_run

    run = load_run(run_dir, checkpoint, device)
    (batch,) = sampled_batches(run.spec, "train", examples, seed, batch_size=examples)
    return model_curvature(
        run.model,
        run.trainable,
        batch,
        grouping,
        max_iterations,
        tol,
        samples,
        seed,
        block_eigenvalues,
        progress,
        micro_batch=micro_batch,
    )


def tsp_curvature_run(
    run_dir: str | Path,
    examples: int = DECLARED.default("examples"),
    grouping: str = DECLARED.default("grouping"),
    max_iterations: int = DECLARED.default("max_iterations"),
    tol: float = DECLARED.default("tol"),
    samples: int = DECLARED.default("samples"),
    seed: int = DECLARED.default("seed"),
    block_eigenvalues: bool = DECLARED.default("block_eigenvalues"),
    device: str | None = None,
    progress: bool = False,
    micro_batch: int | None = None,
) -> pd.DataFrame:
    """:func:`model_curvature` of the masked-LM loss at the TSP checkpoint a run starts from, uncached.

    The model is the TSP run's masked-LM model at ``tsp-<tsp_step>``, the parameters those the TSP
    run trains, the batch ``examples`` of the run's training texts (drawn with ``seed``) masked
    as TSP masks them (BERT's 15 %, from ``torch.manual_seed(seed)``), the loss
    :func:`robustkit.models.masked_lm.masked_lm_loss`.
    """
    import numpy as np
    import torch

    from robustkit.data import batches as data
    from robustkit.models import pretrained as models
    from robustkit.models.masked_lm import masked_lm_loss
    from robustkit.store.checkpoints import load_checkpoint
    from robustkit.store.run_data import run_spec, run_splits, run_task
    from robustkit.train.evaluate import resolve_device
    from robustkit.train.run_model import build_masked_lm, load_tensors

    run_dir = Path(run_dir)
    spec = run_spec(run_dir)  # its data as the run recorded it
    tsp_dir = tsp_run_dir(run_dir)
    tsp_spec = spec.tsp_spec()
    model, names, fingerprint, _ = build_masked_lm(tsp_spec)
    name = f"tsp-{spec.tsp_step}"
    tensors, metadata = load_checkpoint(tsp_dir, name)
    load_tensors(model, tensors, metadata, fingerprint, f"{tsp_dir.name}/{name}")
    model.to(resolve_device(device))
    splits = run_splits(spec, run_dir)  # checked against the run's recorded data
    texts = data.split_texts(splits["train"], run_task(spec, run_dir).text_fields)
    if not 1 <= examples <= len(texts):
        raise RobustkitError(f"cannot sample {examples} examples: the train split of {spec.task!r} has {len(texts)}")
    rows = sorted(np.random.default_rng(seed).choice(len(texts), examples, replace=False).tolist())
    tokenizer = models.load_tokenizer(spec.model)
    features = data.encode([texts[i] for i in rows], tokenizer, tsp_spec.max_length)
    torch.manual_seed(seed)  # the collator masks from the global RNG
    batch = dict(data.masked_lm_collator(tokenizer, tsp_spec.mlm_probability)(features))
    return model_curvature(
        model,
        names,
        batch,
        grouping,
        max_iterations,
        tol,
        samples,
        seed,
        block_eigenvalues,
        progress,
        loss=masked_lm_loss,
        micro_batch=micro_batch,
    )


def tsp_run_dir(run_dir: Path) -> Path:
    """The folder of the TSP run a fine-tuning run started from (its manifest's ``tsp_run``)."""
    from robustkit.store.manifest import read_manifest

    tsp = read_manifest(run_dir).get("tsp_run")
    if not tsp:
        raise RobustkitError(f"{run_dir.name} has no TSP run (tsp_step 0)")
    return run_dir.parent / tsp


def run(
    store: str | Path,
    select: dict | list[str] | None = None,
    *,
    checkpoints: Sequence[str],
    examples: int,
    grouping: str,
    max_iterations: int,
    tol: float,
    samples: int,
    seed: int,
    block_eigenvalues: bool,
    device: str | None = None,
    progress: bool = True,
    micro_batch: int | None = None,
) -> pd.DataFrame:
    """Curvature of every selected run at each of ``checkpoints``, cached per run and checkpoint.

    Parameters
    ----------
    store : path
        Run store.
    select : dict or list of str, optional
        Run filters (``["task=rt"]``); complete fine-tuning runs only.
    checkpoints : sequence of str
        Any of ``step-0``, ``best``, ``last``, ``tsp`` (the masked-LM loss at the run's TSP
        checkpoint; runs with ``tsp_step`` 0 give no ``tsp`` rows).
    examples : int
        Training examples in the fixed batch (default 32).
    grouping : {"layer", "module", "none"}
        Blocks reported besides the whole trained set (:func:`blocks`).
    max_iterations, tol, samples, seed, block_eigenvalues
        As in :func:`model_curvature`.
    device : str, optional
        Where the products run (default: the GPU if there is one); not part of the cache key.
    micro_batch : int, optional
        Examples per part of each product (:func:`model_curvature`): memory, not the result
        (beyond float rounding), so not part of the cache key either.

    Returns
    -------
    DataFrame
        Identity columns + ``checkpoint`` + the columns of :func:`model_curvature`. Cached
        under ``<store>/.cache/curvature/`` by the checkpoint's sha256 and the parameters.
    """
    import pandas as pd

    from robustkit.analysis.each_run import each_run
    from robustkit.analysis.select import select_runs

    checkpoints = _checked(checkpoints)
    if grouping not in GROUPINGS:
        raise RobustkitError(f"unknown grouping {grouping!r}; choose from {', '.join(GROUPINGS)}")
    if (
        examples < 1
        or max_iterations < 1
        or samples < 1
        or not tol > 0
        or (micro_batch is not None and micro_batch < 1)
    ):
        raise RobustkitError("examples, max_iterations, samples and micro_batch must be at least 1 and tol positive")
    params = {
        "version": VERSION,
        "examples": examples,
        "grouping": grouping,
        "max_iterations": max_iterations,
        "tol": tol,
        "samples": samples,
        "seed": seed,
        "block_eigenvalues": block_eigenvalues,
        "split": "train",
    }
    runs = select_runs(store, select)
    options = {
        "examples": examples,
        "grouping": grouping,
        "max_iterations": max_iterations,
        "tol": tol,
        "samples": samples,
        "seed": seed,
        "block_eigenvalues": block_eigenvalues,
        "device": device,
        "micro_batch": micro_batch,
    }
    frames = []
    with progress_bar(total=len(runs) * len(checkpoints), desc="curvature", unit="checkpoint", show=progress) as bar:
        for checkpoint in checkpoints:
            if checkpoint == "tsp":
                frames += _tsp_frames(runs, params, options, bar)
                continue
            frame = each_run(
                runs,
                ANALYSIS,
                params,
                [checkpoint],
                lambda row: curvature_run(row["path"], checkpoint, **options),
                on_done=bar.update,
                provenance=computed_on(device),
            )
            frames.append(frame.assign(checkpoint=checkpoint))
    frames = [f for f in frames if not f.empty]
    if not frames:
        raise RobustkitError("no curvature to compute: checkpoint 'tsp' needs runs with tsp_step > 0")
    return pd.concat(frames, ignore_index=True)[COLUMNS]


def _tsp_frames(runs: pd.DataFrame, params: dict, options: dict, bar) -> list[pd.DataFrame]:
    """The ``tsp`` rows, one run at a time: the cache key adds the TSP checkpoint's files."""
    from robustkit.analysis.each_run import each_run
    from robustkit.store.manifest import read_manifest

    frames = []
    for index in range(len(runs)):
        row = runs.iloc[[index]]
        if int(row["tsp_step"].iloc[0]) == 0:
            bar.update()
            continue
        run_dir = Path(row["path"].iloc[0])
        files = read_manifest(tsp_run_dir(run_dir))["checkpoints"][f"tsp-{int(row['tsp_step'].iloc[0])}"]["files"]
        frame = each_run(
            row,
            ANALYSIS,
            {**params, "loss": "masked-lm", "tsp_files": files},
            ["step-0"],
            lambda r: tsp_curvature_run(r["path"], **options),
            on_done=bar.update,
            provenance=computed_on(options["device"]),
        )
        frames.append(frame.assign(checkpoint="tsp"))
    return frames


def _checked(checkpoints: Sequence[str] | str) -> list[str]:
    checkpoints = [checkpoints] if isinstance(checkpoints, str) else list(checkpoints)
    bad = [c for c in checkpoints if c not in CHECKPOINTS]
    if not checkpoints or bad:
        raise RobustkitError(f"bad checkpoint(s) {bad or checkpoints}: choose from {', '.join(CHECKPOINTS)}")
    return checkpoints


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean, std and run count over seeds per method x checkpoint x group x estimator.

    Returns
    -------
    DataFrame
        ``task, method`` and every setting that varies inside one of them
        (:func:`robustkit.analysis.pooling.split_columns`), ``checkpoint, scope, group, estimator, mean,
        std, runs, not_converged`` (eigenvalue estimates that hit the iteration cap).
    """
    from robustkit.analysis.pooling import split_columns

    # every setting that varies inside a task and method (lr, max_grad_norm, ...): never pooled
    keys = split_columns(frame, [c for c in ("task", "method") if c in frame])
    keys += ["checkpoint", "scope", "group", "estimator"]
    grouped = frame.assign(_nc=~frame["converged"].astype(bool)).groupby(keys, dropna=False, sort=False)
    return grouped.agg(
        mean=("value", "mean"), std=("value", "std"), runs=("value", "count"), not_converged=("_nc", "sum")
    ).reset_index()


# ---------------------------------------------------------------------------------------------
# its statistics (DECLARED.statistics)


def sharpness(frame: pd.DataFrame, checkpoint: str, estimator: str, group: str) -> pd.DataFrame:
    """Sharpness of each run's training loss at ``checkpoint``: the top Hessian eigenvalue or the
    Hessian trace over the trained parameters (``group="all"``) or one block (``layer.3``), from
    the ``curvature`` analysis (nats per squared parameter unit; smaller = flatter)."""
    frame = frame[(frame["checkpoint"] == checkpoint) & (frame["estimator"] == estimator) & (frame["group"] == group)]
    if frame.empty:
        raise RobustkitError(f"no {estimator} of block {group!r} at {checkpoint} for these runs")
    return frame[[*IDENTITY, "value"]]
