"""Layer-span adapter ablation (Houlsby et al. 2019, section 3.6, figure 6 left/centre).

For every span of encoder layers ``first..last`` (``first <= last``, 0-based), the trained
adapters of those layers become the identity (AdapterHub's per-layer skipping; prompt tuning is
refused), nothing is re-trained, the trained LayerNorms and head stay, and the model is
re-evaluated on the dev set.

Two implementations with identical results:

- :func:`naive_spans`: one full :func:`robustkit.train.evaluate.evaluate` per span (the
  reference);
- :func:`fast_spans`: the prefix states once per batch, then per span only its ablated layers
  and the suffix: ``L + L(L+1)(L+2)/6`` layer evaluations per batch instead of
  ``L + L * L(L+1)/2`` (62 vs 132 for L = 6).

Both return the counts they measured in ``frame.attrs["layer_evaluations"]`` and the unablated
model's values in ``frame.attrs["full"]``. :func:`run` skips full fine-tuning runs with a
warning naming them and raises :class:`RobustkitError` when no adapter run is left.

Which methods can be ablated and how the fast path equals the naive one:
``docs/analyses.md``, "robustkit/analysis/ablation.py".
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd
    import torch
    from torch import nn

    from robustkit.data import tasks
    from robustkit.train.evaluate import MetricAccumulator

from robustkit.analysis.declare import DEVICE, METRIC, Analysis, Statistic, checkpoint_param
from robustkit.analysis.no_grad import no_grad
from robustkit.analysis.notes import AnalysisNote
from robustkit.analysis.registry import register_analysis
from robustkit.errors import RobustkitError
from robustkit.methods import ADAPTER_NAME, get_method
from robustkit.progress import bar as progress_bar
from robustkit.store.identity import IDENTITY
from robustkit.train.provenance import computed_on

# Everything robustkit reads about this analysis (robustkit.analysis.declare); the functions below
# take their defaults from it.
DECLARED = register_analysis(
    Analysis(
        "ablation",
        "remove the adapters of every layer span i..j and re-evaluate (Houlsby et al. 2019, figure 6)",
        "For each adapter run and every span of layers i..j, skip those layers' adapters (nothing re-trained) and "
        "evaluate on the dev set; reports each metric and its relative change vs the fully adapted model. Full "
        "fine-tuning runs are skipped with a warning.",
        ":run",
        (checkpoint_param("checkpoint ablated"),),
        (DEVICE,),
        statistics=(
            Statistic(
                "single-drop",
                ":single_drop",
                "relative drop of the dev metric when one layer's adapters are removed, per run and layer (1..L, the "
                "encoder layer; fraction, positive = worse)",
                (METRIC,),
            ),
            Statistic(
                "all-removed-gap",
                ":all_removed_gap",
                "dev metric with every adapter removed minus the majority baseline (0 = down to the majority class)",
                (METRIC,),
            ),
            Statistic(
                "low-minus-high",
                ":low_minus_high",
                "mean relative drop of the spans in the lower half of the layers minus the upper half's (negative = "
                "lower layers matter less)",
                (METRIC,),
            ),
        ),
        output="the tidy result (per run x span x metric)",
        order=70,
        views=(":ablation_heatmap",),
        module=__name__,
    )
)


ANALYSIS = "ablation"
SPAN_COLUMNS = ["first", "last", "metric", "value"]
COLUMNS = [*IDENTITY, "checkpoint", *SPAN_COLUMNS, "relative_change"]
_VERSION = 1  # bump when the computation changes, so old cache files are not reused


# ---------------------------------------------------------------------------------------------
# shared helpers


def spans(n_layers: int) -> list[tuple[int, int]]:
    """Every (first, last) with 0 <= first <= last < n_layers, row-major: L(L+1)/2 spans."""
    return [(i, j) for i in range(n_layers) for j in range(i, n_layers)]


def expected_layer_evaluations(n_layers: int, n_batches: int = 1) -> dict[str, int]:
    """Analytic layer-evaluation counts of :func:`naive_spans` and :func:`fast_spans`.

    Both include the L evaluations of the unablated reference pass, per batch.
    """
    L = n_layers
    return {
        "naive": n_batches * (L + L * L * (L + 1) // 2),
        "fast": n_batches * (L + L * (L + 1) * (L + 2) // 6),
    }


def encoder_layers(model: nn.Module) -> list[nn.Module]:
    """The layers AdapterHub numbers for ``skip_layers``, lowest first, through its own accessor
    (``iter_layers``) for every architecture it supports: ``bert.encoder.layer``,
    ``distilbert.transformer.layer``, ``deberta.encoder.layer``, ... ALBERT's layers share
    weights: it has one module per distinct layer (``num_hidden_groups`` x ``inner_group_num``),
    which AdapterHub skips in every pass that calls it.

    Raises
    ------
    RobustkitError
        The model has no AdapterHub adapters (a full fine-tuning run).
    """
    from robustkit.methods.model_parts import describe

    iter_layers = getattr(model, "iter_layers", None)
    if iter_layers is None:
        raise RobustkitError(
            f"{describe(model)} has no AdapterHub layers: nothing to ablate by layer (is it a full fine-tuning run?)"
        )
    return [layer for _, layer in iter_layers()]


def _check_adapters(model: nn.Module) -> None:
    """Raise :class:`RobustkitError` unless the model holds :data:`ADAPTER_NAME` and all of it
    lives in encoder layers (prompt tuning's prompt sits before them: it cannot be removed per
    layer, alone or in a union)."""
    from robustkit.methods.model_parts import describe

    config = getattr(model, "adapters_config", None)
    if config is None or ADAPTER_NAME not in config.adapters:
        raise RobustkitError(f"the model has no adapter {ADAPTER_NAME!r} to ablate (is it a full fine-tuning run?)")
    from adapters import PromptTuningConfig

    adapter_config = config.get(ADAPTER_NAME)
    for part in getattr(adapter_config, "configs", None) or (adapter_config,):
        if isinstance(part, PromptTuningConfig):
            raise RobustkitError(
                f"{describe(model)}: its adapter includes prompt tuning, whose prompt is prepended to the input "
                "embeddings, not held by an encoder layer: it cannot be ablated by layer"
            )


@contextmanager
def _restored_adapters(model: nn.Module) -> Iterator[None]:
    """Restore the active adapter setup and skipped layers (and train/eval mode) on exit."""
    setup, skip, training = model.adapters_config.active_setup, model.adapters_config.skip_layers, model.training
    try:
        yield
    finally:
        model.set_active_adapters(setup, skip_layers=skip)
        model.train(training)


def _skip(model: nn.Module, layers: Sequence[int] | None) -> None:
    """Skip the adapters of ``layers`` (None or empty: every adapter active)."""
    model.set_active_adapters(ADAPTER_NAME, skip_layers=list(layers) if layers else None)


@contextmanager
def _counting(layers: Sequence[nn.Module]) -> Iterator[list[int]]:
    """Count encoder-layer forward calls: the yielded list's one element."""
    count = [0]

    def hook(*_):
        count[0] += 1

    handles = [layer.register_forward_hook(hook) for layer in layers]
    try:
        yield count
    finally:
        for handle in handles:
            handle.remove()


def _frame(results: dict[tuple[int, int], dict[str, float]], full: dict[str, float], counts: int) -> pd.DataFrame:
    import pandas as pd

    rows = [
        {"first": i, "last": j, "metric": m, "value": float(v)}
        for (i, j), values in results.items()
        for m, v in values.items()
    ]
    frame = pd.DataFrame(rows, columns=SPAN_COLUMNS)
    frame.attrs["full"] = {m: float(v) for m, v in full.items()}
    frame.attrs["layer_evaluations"] = int(counts)
    return frame


# ---------------------------------------------------------------------------------------------
# naive: one evaluation per span


@no_grad
def naive_spans(model: nn.Module, batches: list[dict], task: str | tasks.Task) -> pd.DataFrame:
    """Loss and metrics with the adapters of each span of layers skipped, one evaluation each.

    Parameters
    ----------
    model : nn.Module
        An AdapterHub-adapted classification model holding adapter :data:`ADAPTER_NAME`.
    batches : list of dict
        Dev batches from :func:`robustkit.train.evaluate.split_batches`.
    task : str or Task
        Decides the loss and the metrics.

    Returns
    -------
    DataFrame, shape (L(L+1)/2 * n_metrics, 4)
        ``first, last, metric, value`` (loss: mean per example, nats or MSE). ``attrs["full"]``:
        the unablated values; ``attrs["layer_evaluations"]``: encoder-layer calls made.
    """
    from robustkit.data import tasks
    from robustkit.train.evaluate import evaluate

    task = tasks.get_task(task)
    _check_adapters(model)
    layers = encoder_layers(model)
    results = {}
    with _restored_adapters(model), _counting(layers) as count:
        _skip(model, None)
        full = evaluate(model, batches, task)
        for i, j in spans(len(layers)):
            _skip(model, range(i, j + 1))
            results[(i, j)] = evaluate(model, batches, task)
    return _frame(results, full, count[0])


# ---------------------------------------------------------------------------------------------
# fast: prefix cache + one layer per extension


def _head(model: nn.Module, sequence: torch.Tensor) -> torch.Tensor:
    """Logits from the last layer's output, as the model's forward computes them.

    BERT: pooler (tanh of the [CLS] projection) -> dropout -> classifier; RoBERTa-style models
    have no pooler and a classifier that reads the sequence itself; DeBERTa's pooler is the
    head's own (``model.pooler``); DistilBERT: [CLS] -> pre_classifier -> ReLU -> dropout ->
    classifier. :func:`_fast_applies` checks the result against the model's own logits.
    """
    import torch

    if model.config.model_type == "distilbert":
        return model.classifier(model.dropout(torch.relu(model.pre_classifier(sequence[:, 0]))))
    pooler = getattr(model.base_model, "pooler", None)
    if pooler is None:
        pooler = getattr(model, "pooler", None)
    features = pooler(sequence) if pooler is not None else sequence
    dropout = getattr(model, "dropout", None)
    return model.classifier(dropout(features) if dropout is not None else features)


def _loss(model: nn.Module, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The loss ``*ForSequenceClassification.forward`` uses (its problem type)."""
    from torch import nn

    n = model.config.num_labels
    problem = model.config.problem_type or ("regression" if n == 1 else "single_label_classification")
    if problem == "regression":
        return (
            nn.functional.mse_loss(logits.squeeze(), labels.squeeze())
            if n == 1
            else nn.functional.mse_loss(logits, labels)
        )
    if problem == "single_label_classification":
        return nn.functional.cross_entropy(logits.view(-1, n), labels.view(-1))
    raise RobustkitError(f"ablation does not support problem type {problem!r}")


def _layer_output(output) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def _prefix(
    model: nn.Module, layers: Sequence[nn.Module], inputs: dict
) -> tuple[list[torch.Tensor], tuple, dict, object]:
    """One ordinary forward with every adapter active.

    Returns
    -------
    states : list of Tensor, L + 1 of shape (batch, seq, hidden)
        ``states[k]`` is the input of layer k (``states[0]`` the embedding output,
        ``states[L]`` the last layer's output).
    args, kwargs
        What the model's forward passed layer 0 besides the hidden states (the extended
        attention mask, head mask, ...): reused for every layer call, as the encoder does.
    output
        The model's output (loss, logits) for the unablated reference.
    """
    states: list[torch.Tensor] = []
    captured: dict = {}

    def before(module, args, kwargs):
        captured["args"], captured["kwargs"] = args[1:], dict(kwargs)
        states.append(args[0])

    def after(module, args, output):
        states.append(_layer_output(output))

    handles = [layers[0].register_forward_pre_hook(before, with_kwargs=True)]
    handles += [layer.register_forward_hook(after) for layer in layers]
    try:
        output = model(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    return states, captured["args"], captured["kwargs"], output


def _batch_spans(
    model, layers, inputs: dict, task: tasks.Task, accumulators: dict, reference: MetricAccumulator
) -> None:
    """Add one batch's results of every span (and of the unablated model) to the accumulators."""
    import torch
    from adapters.context import ForwardContext

    _skip(model, None)
    states, args, kwargs, output = _prefix(model, layers, inputs)
    labels = inputs["labels"]
    reference.add(output.loss, output.logits, labels)
    L = len(layers)

    def layer(k: int, hidden: torch.Tensor, adapters: bool) -> torch.Tensor:
        # skipping is read from adapters_config at each adapter call, so toggling it per layer
        # is exactly what a whole forward with skip_layers=[..k..] does in layer k
        _skip(model, None if adapters else [k])
        return _layer_output(layers[k](hidden, *args, **kwargs))

    # a ForwardContext like the one the model's forward opens (prefix masks, gating caches...)
    with ForwardContext(model, **inputs):
        for i in range(L):
            ablated = states[i]
            for j in range(i, L):
                ablated = layer(j, ablated, adapters=False)
                hidden = ablated
                for k in range(j + 1, L):
                    hidden = layer(k, hidden, adapters=True)
                logits = _head(model, hidden)
                accumulators[(i, j)].add(_loss(model, logits, labels), logits, labels)
    _skip(model, None)


@no_grad
def _fast_applies(model: nn.Module, layers: Sequence[nn.Module], inputs: dict) -> bool:
    """Whether :func:`fast_spans`' replay (each layer once, in order, then :func:`_head`) gives
    the model's own logits (checked on one batch, outside the layer-call count). Not so for ALBERT
    (one shared layer called L times) nor where the encoder does more than call its layers,
    which :func:`naive_spans` evaluates instead."""
    import torch
    from adapters.context import ForwardContext

    if len(layers) != model.config.num_hidden_layers:
        return False
    with _restored_adapters(model):
        _skip(model, None)
        model.eval()
        try:
            states, args, kwargs, output = _prefix(model, layers, inputs)
            # the replay itself: each layer on the previous one's output, with layer 0's arguments
            # (an encoder that does more between layers, as DeBERTa-v2's conv, fails here)
            with ForwardContext(model, **inputs):
                hidden = states[0]
                for layer in layers:
                    hidden = _layer_output(layer(hidden, *args, **kwargs))
            logits = _head(model, hidden)
        except (AttributeError, TypeError, RuntimeError, IndexError, KeyError, ValueError):
            return False
    return (
        len(states) == len(layers) + 1
        and logits.shape == output.logits.shape
        and torch.allclose(logits, output.logits, rtol=1e-4, atol=1e-5)
    )


@no_grad
def fast_spans(model: nn.Module, batches: list[dict], task: str | tasks.Task, progress: bool = False) -> pd.DataFrame:
    """:func:`naive_spans`, reusing work across spans (same values, same columns and attrs);
    :func:`naive_spans` itself where the replay does not reproduce the model (:func:`_fast_applies`).

    Per batch: the adapted prefix states once, then for each first ablated layer i the ablated
    states extended one layer at a time, and for each last ablated layer j only layers
    j+1..L-1 with adapters, then the head. L + L(L+1)(L+2)/6 layer calls per batch instead of
    L + L^2(L+1)/2.

    Parameters
    ----------
    model : nn.Module
        An AdapterHub-adapted BERT-style classification model holding :data:`ADAPTER_NAME`.
    batches : list of dict
        Dev batches from :func:`robustkit.train.evaluate.split_batches`.
    task : str or Task
        Decides the metrics (the loss is the model's own).

    Returns
    -------
    DataFrame, shape (L(L+1)/2 * n_metrics, 4)
        ``first, last, metric, value``; ``attrs["full"]`` and ``attrs["layer_evaluations"]``
        as in :func:`naive_spans`.
    """
    from robustkit.data import tasks
    from robustkit.train.evaluate import MetricAccumulator, model_inputs

    task = tasks.get_task(task)
    _check_adapters(model)
    layers = encoder_layers(model)
    model.eval()
    device = next(model.parameters()).device
    if batches and not _fast_applies(model, layers, model_inputs(batches[0], device)):
        return naive_spans(model, batches, task)
    # each span reduced exactly as evaluate() reduces a whole model (one shared reduction)
    accumulators = {span: MetricAccumulator(task) for span in spans(len(layers))}
    reference = MetricAccumulator(task)
    with _restored_adapters(model), _counting(layers) as count:
        model.eval()
        for batch in progress_bar(batches, desc="ablation", show=progress, leave=False, unit="batch"):
            _batch_spans(model, layers, model_inputs(batch, device), task, accumulators, reference)
    results = {span: acc.result() for span, acc in accumulators.items()}
    return _frame(results, reference.result(), count[0])


# ---------------------------------------------------------------------------------------------
# runs of a store


def relative_change(frame: pd.DataFrame, full: dict[str, float]) -> pd.Series:
    """value / unablated value - 1 per row (unitless; -0.1 is a 10% drop)."""
    reference = frame["metric"].map(full).astype(float)
    return frame["value"] / reference - 1.0


def ablation_run(
    run_dir: str | Path, checkpoint: str, progress: bool = True, device: str | None = None
) -> pd.DataFrame:
    """:func:`fast_spans` of one adapter run's ``checkpoint`` on its dev set, uncached.

    Returns
    -------
    DataFrame
        ``first, last, metric, value, relative_change``.
    """
    from robustkit.train.evaluate import split_batches
    from robustkit.train.run_model import load_run

    run = load_run(run_dir, checkpoint, device)
    batches = split_batches(run.spec, ["validation"], run.run_dir)["validation"]
    frame = fast_spans(run.model, batches, run.task, progress=progress)
    return frame.assign(relative_change=relative_change(frame, frame.attrs["full"]))


def _layer_ablation(run: pd.Series) -> bool:
    """Whether a run's method can be ablated by layer: :attr:`Method.layer_ablation`, and for the
    generic ``adapterhub`` method, a config string without prompt tuning."""
    method = get_method(run["method"])
    if method.layer_ablation:
        return True
    if method.name == "adapterhub":
        config = run.get(method.column("config"))
        return isinstance(config, str) and "prompt_tuning" not in config
    return False


def _adapter_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs whose method AdapterHub can switch off per layer (:attr:`Method.layer_ablation`);
    the others (full fine-tuning, prompt tuning, ...) are dropped with a warning naming them."""
    uses = runs.apply(_layer_ablation, axis=1).astype(bool) if len(runs) else runs["method"].astype(bool)
    if not uses.all():
        names = ", ".join(
            f"{r} ({m})" for r, m in zip(runs.loc[~uses, "run_id"].astype(str), runs.loc[~uses, "method"])
        )
        warnings.warn(
            f"skipping runs without per-layer adapters (nothing to ablate): {names}", AnalysisNote, stacklevel=3
        )
    if not uses.any():
        raise RobustkitError(
            f"no adapter run among the selected runs ({', '.join(runs['run_id'].astype(str))}): layer ablation needs "
            "adapters; select e.g. method=houlsby"
        )
    return runs[uses]


def run(
    store: str | Path,
    select: dict | list[str] | None = None,
    *,
    checkpoint: str,
    progress: bool = True,
    device: str | None = None,
) -> pd.DataFrame:
    """The layer-span ablation of every selected adapter run, cached per run.

    Parameters
    ----------
    store : path
        Run store.
    select : dict or list of str, optional
        Run filters (``["method=houlsby"]``); full fine-tuning runs are skipped with a warning.
    checkpoint : str
        The tuned state to ablate: ``best`` (default) or ``last``.
    device : str, optional
        Where to evaluate (default: the GPU if there is one); not part of the cache key.

    Returns
    -------
    DataFrame
        Identity columns + ``checkpoint, first, last, metric, value, relative_change``: one row
        per span (0-based layers, ``first <= last``) and metric; ``relative_change`` is
        value / unablated value - 1 (unitless). Cached under ``<store>/.cache/ablation/``.

    Raises
    ------
    RobustkitError
        No adapter run in the selection.
    """
    from robustkit.analysis.each_run import each_run
    from robustkit.analysis.select import select_runs
    from robustkit.train.evaluate import EVAL_BATCH_SIZE

    params = {"checkpoint": checkpoint, "split": "validation", "batch_size": EVAL_BATCH_SIZE, "version": _VERSION}
    frame = each_run(
        _adapter_runs(select_runs(store, select)),
        ANALYSIS,
        params,
        [checkpoint],
        lambda row: ablation_run(row["path"], checkpoint, progress, device),
        provenance=computed_on(device),
    )
    return frame.assign(checkpoint=checkpoint)[COLUMNS]


# ---------------------------------------------------------------------------------------------
# the ablation figure's view


def main_metric(frame: pd.DataFrame) -> str:
    """The metric the ablation figure shows by default: the task's main metric (one task in
    ``frame``), else ``loss``."""
    from robustkit.data import tasks

    names = frame["task"].unique() if "task" in frame else []
    if len(names) != 1:
        return "loss"
    if str(names[0]) in tasks.TASKS:
        return tasks.TASKS[str(names[0])].main_metric
    # the user's own data (whose task this process may not know): its main metric is
    # accuracy, or Spearman's correlation for regression (robustkit.data.user_data)
    return "spearman" if "spearman" in set(frame["metric"]) else "accuracy"


def ablation_heatmap(frame: pd.DataFrame, metric: str | None = None) -> dict:
    """The ablation figure's data (Houlsby et al. 2019 figure 6 left/centre): the mean relative
    change per ablated span over the runs of each panel, for
    :func:`robustkit.figures.ablation.ablation_heatmap`.

    Parameters
    ----------
    frame : DataFrame
        :func:`run` output (``first, last, metric, relative_change`` + identity columns).
    metric : str, optional
        Metric shown; default :func:`main_metric` (the task's main metric, else ``loss``).

    Returns
    -------
    dict
        The plot's keyword arguments: ``frame`` (the rows of ``metric``), ``metric``,
        ``panels`` (the columns that make a panel: ``task`` and every run setting that varies
        within a task, :func:`robustkit.analysis.pooling.mixed_settings`; empty without a
        ``task`` column) and ``cells`` (``panels`` columns + ``first, last, relative_change``:
        the mean over the panel's runs of each span's relative change, in %).

    Raises
    ------
    ValueError
        No row of ``metric``.
    """
    from robustkit.analysis.pooling import mixed_settings

    metric = metric or main_metric(frame)
    data = frame[frame["metric"] == metric]
    if data.empty:
        raise ValueError(f"no rows with metric {metric!r}; the frame has {sorted(frame['metric'].unique())}")
    panels = ["task", *mixed_settings(data, ["task"])] if "task" in data else []
    cells = (
        data.groupby([*panels, "first", "last"], dropna=False, sort=True)["relative_change"].mean() * 100.0
    ).reset_index()
    return {"frame": data, "metric": metric, "panels": panels, "cells": cells}


# ---------------------------------------------------------------------------------------------
# its statistics (DECLARED.statistics)


def _ablation(frame: pd.DataFrame, store: str | Path, metric: str | None) -> pd.DataFrame:
    """The ablation rows of ``metric`` (default: each run's main metric)."""
    from robustkit.analysis.select import select_runs

    main = select_runs(store, {"run_id": list(frame["run_id"].unique())}).set_index("run_id")["main_metric"]
    return frame[frame["metric"] == (frame["run_id"].map(main) if metric is None else metric)]


def single_drop(frame: pd.DataFrame, store: str | Path, metric: str | None) -> pd.DataFrame:
    """Relative drop of the dev metric when one layer's adapters are removed, one row per run and
    ``layer`` (fraction, positive = worse; Houlsby et al. 2019 fig 6's diagonal). ``metric``:
    default the main one.

    ``layer`` is the encoder layer, 1..L, numbered as the other per-layer statistics number layer
    outputs (0 is the embeddings, which hold no adapter; figure 6 and this frame's ``first`` and
    ``last`` count from 0). Each layer is its own observation, never the largest of a run's
    layers: the largest of L noisy drops lies above the largest true drop (on 1,066 examples by
    about a point), so a claim on it contradicted a true "every layer's drop is small" (issue #55).
    A claim about every layer takes the layers as cells (``within = ["layer"]``, quantifier
    ``each``).
    """
    frame = _ablation(frame, store, metric)
    single = frame[frame["first"] == frame["last"]]
    return single[IDENTITY].assign(layer=single["first"].astype(int) + 1, value=-single["relative_change"])


def all_removed_gap(frame: pd.DataFrame, store: str | Path, metric: str | None) -> pd.DataFrame:
    """Dev metric with every adapter removed minus the majority baseline (0 = "down to the
    majority class", Houlsby et al. 2019 fig 6). ``metric``: default the main one."""
    import pandas as pd

    from robustkit.analysis import scores
    from robustkit.analysis.select import select_runs

    frame = _ablation(frame, store, metric)
    runs = select_runs(store, {"run_id": list(frame["run_id"].unique())}).set_index("run_id")
    rows = []
    for run_id, group in frame.groupby("run_id"):
        everything = group[(group["first"] == 0) & (group["last"] == group["last"].max())]
        run = runs.loc[run_id]
        base = scores.run_baseline(run, metric or run["main_metric"], "validation")
        rows.append({"run_id": run_id, "value": float(everything["value"].iloc[0]) - base})
    return frame.drop_duplicates("run_id")[IDENTITY].merge(pd.DataFrame(rows), on="run_id")


def low_minus_high(frame: pd.DataFrame, store: str | Path, metric: str | None) -> pd.DataFrame:
    """Mean relative drop of the spans inside the lower half of the layers minus that of the spans
    inside the upper half (negative = lower layers matter less, Houlsby et al. 2019 §3.6)."""
    import pandas as pd

    frame = _ablation(frame, store, metric)
    rows = []
    for run_id, group in frame.groupby("run_id"):
        half = (group["last"].max() + 1) / 2
        low = -group.loc[group["last"] < half, "relative_change"].mean()
        high = -group.loc[group["first"] >= half, "relative_change"].mean()
        rows.append({"run_id": run_id, "value": low - high})
    return frame.drop_duplicates("run_id")[IDENTITY].merge(pd.DataFrame(rows), on="run_id")
