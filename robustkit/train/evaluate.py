"""Evaluation: a model's loss and metrics on a split, the one reduction every caller shares.

Training (validation during tuning, the final test pass), the loss landscape
(:mod:`robustkit.analysis.landscape`) and the adapter ablation
(:mod:`robustkit.analysis.ablation`) all score a model the same way:

- :func:`split_batches` / :func:`encode_split` + :func:`eval_batches`: a split's examples,
  tokenised and padded as the training loop does it, sorted by length to pad less;
- :class:`MetricAccumulator`: per-batch losses and predictions reduced to the mean loss per
  example and the task's metrics (and, on request, the share of the most predicted class);
- :func:`evaluate`: both, for a model's ordinary forward.

So a loss computed by an analysis equals the one in the run's history, by construction.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from robustkit.data import batches as data
from robustkit.data import tasks
from robustkit.data.metrics import compute_metrics, majority_baseline, majority_scores
from robustkit.models import pretrained as models
from robustkit.specs.spec import RunSpec
from robustkit.store import collapse
from robustkit.store.run_data import run_splits, run_task

EVAL_BATCH_SIZE = 64
NON_MODEL_KEYS = ("order",)  # batch entries that are bookkeeping, not model inputs


# ---------------------------------------------------------------------------------------------
# devices


def resolve_device(device: str | None = None) -> torch.device:
    """``device`` if given, else the GPU when there is one, else the CPU."""
    if device in (None, "auto"):
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """Every tensor of ``batch`` on ``device`` (a new dict; the batch itself is unchanged)."""
    return {k: v.to(device) for k, v in batch.items()}


def model_inputs(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """The entries of an evaluation batch the model takes (``labels`` included), on ``device``."""
    return to_device({k: v for k, v in batch.items() if k not in NON_MODEL_KEYS}, device)


# ---------------------------------------------------------------------------------------------
# batches


def eval_batches(features: data.Features, batch_size: int, collator) -> list[dict[str, torch.Tensor]]:
    """A split in padded batches, sorted by length first to pad less.

    Parameters
    ----------
    features : list of dict
        Encoded examples (:func:`robustkit.data.batches.encode_labelled`, or unlabelled ones).
    batch_size : int
        Examples per batch (the last one may be smaller).
    collator : callable
        Pads a list of features into a batch (:func:`robustkit.data.batches.classification_collator`).

    Returns
    -------
    list of dict of str to Tensor
        Each batch also holds ``order`` (LongTensor, shape (batch,)): the row in ``features``
        of each of its examples.
    """
    order = sorted(range(len(features)), key=lambda i: len(features[i]["input_ids"]))
    batches = []
    for start in range(0, len(order), batch_size):
        chosen = order[start : start + batch_size]
        batch = collator([features[i] for i in chosen])
        batch["order"] = torch.tensor(chosen)
        batches.append(batch)
    return batches


def encode_split(split, task: tasks.Task, tokenizer, max_length: int, name: str | None = None) -> data.Features:
    """A labelled split's examples tokenised (truncated at ``max_length``), with their labels;
    ``name`` (``train``, ``validation``, ...) names the split in the truncation note."""
    texts = data.split_texts(split, task.text_fields)
    where = f"the {name} split of {task.name!r}" if name else f"a split of {task.name!r}"
    return data.encode_labelled(texts, split["label"], tokenizer, max_length, where)


def split_batches(spec: RunSpec, splits: Sequence[str], run_dir: str | Path | None = None) -> dict[str, list[dict]]:
    """A run's evaluation batches of each split, built as its training built them.

    Same splits (``train_size``, ``split_seed``, ``data_dir``), tokenizer, ``max_length``,
    collator and batch size (:data:`EVAL_BATCH_SIZE`) as the training loop, so a loss computed
    from them equals the one in the run's history.

    Returns
    -------
    dict of str to list of dict
        Split name -> batches (:func:`eval_batches`).
    """
    spec = spec.resolved()
    task = run_task(spec, run_dir)
    loaded = run_splits(
        spec, run_dir
    )  # the run's data, checked against its recorded fingerprint (run_dir names a changed file)
    tokenizer = models.load_tokenizer(spec.model)
    collator = data.classification_collator(tokenizer)
    return {
        split: eval_batches(
            encode_split(loaded[split], task, tokenizer, spec.max_length, split), EVAL_BATCH_SIZE, collator
        )
        for split in splits
    }


# ---------------------------------------------------------------------------------------------
# metrics


class MetricAccumulator:
    """Per-batch losses and predictions of one model on one split, reduced to its metrics.

    The one reduction of every evaluation: the mean loss is per example (each batch's mean
    loss weighted by its size), the metrics are computed once over the whole split.

    Parameters
    ----------
    task : Task
        Decides how logits become predictions (argmax, or the value for regression) and the
        metrics.
    """

    def __init__(self, task: tasks.Task) -> None:
        self.task = task
        self.loss_sum = 0.0
        self.predictions: list[torch.Tensor] = []
        self.labels: list[torch.Tensor] = []

    def add(self, loss: torch.Tensor | float, logits: torch.Tensor, labels: torch.Tensor) -> None:
        """One batch.

        Parameters
        ----------
        loss : Tensor or float
            The batch's mean loss (cross-entropy in nats, or MSE for regression).
        logits : Tensor, shape (batch, num_labels)
        labels : Tensor, shape (batch,)
        """
        self.loss_sum += float(loss) * len(labels)
        predicted = logits.squeeze(-1) if self.task.num_labels == 1 else logits.argmax(-1)
        self.predictions.append(predicted.detach().cpu())
        self.labels.append(labels.detach().cpu())

    def result(self, shares: bool = False) -> dict[str, float]:
        """``loss`` (mean per example) and each metric of the task over every batch added.

        Parameters
        ----------
        shares : bool
            Also ``top_class_share`` (classification only): the share of the predictions in
            the most predicted class (:func:`robustkit.store.collapse.top_class_share`).
        """
        predicted = torch.cat(self.predictions).numpy()
        labels = torch.cat(self.labels).numpy()
        metrics = {"loss": self.loss_sum / len(labels), **compute_metrics(self.task, predicted, labels)}
        if shares and not self.task.is_regression:
            metrics["top_class_share"] = collapse.top_class_share(predicted)
        return metrics


@torch.inference_mode()
def evaluate(
    model: torch.nn.Module, batches: list[dict], task: str | tasks.Task, shares: bool = False
) -> dict[str, float]:
    """Mean loss and the task's metrics of ``model`` over pre-collated batches.

    The model is put in eval mode (no dropout) and left there.

    Parameters
    ----------
    model : nn.Module
        A sequence-classification model; it runs where its parameters are.
    batches : list of dict
        From :func:`eval_batches` or :func:`split_batches` (with ``labels``).
    task : str or Task
    shares : bool
        Also return ``top_class_share`` (see :meth:`MetricAccumulator.result`), which tells a
        run stuck at one class (:mod:`robustkit.store.collapse`).

    Returns
    -------
    dict of str to float
        ``loss`` (mean cross-entropy per example in nats, or MSE for regression) and each
        metric of the task (fractions for accuracy / F1). A model with non-finite outputs gets
        a non-finite loss (its argmax predictions still score), which
        :func:`robustkit.store.collapse.outcome` reads as diverged.
    """
    task = tasks.get_task(task)
    model.eval()
    device = next(model.parameters()).device
    accumulator = MetricAccumulator(task)
    for batch in batches:
        output = model(**model_inputs(batch, device))
        accumulator.add(output.loss, output.logits, batch["labels"])
    return accumulator.result(shares)


def split_baselines(task: str | tasks.Task, splits) -> dict:
    """What a run's manifest records of its scored splits (``baselines``): each split's size and
    every metric of always predicting the majority training label on it, so that later tables
    judge the run against the data it was scored on, never against data read again.

    Returns
    -------
    dict
        ``{split: {"n": int, metric: float, ...}}`` for ``validation`` and ``test``.
    """
    task = tasks.get_task(task)
    train_labels = np.asarray(splits["train"]["label"])
    recorded = {}
    for split in ("validation", "test"):
        if split in splits:
            labels = np.asarray(splits[split]["label"])
            recorded[split] = {"n": int(len(labels))}
            recorded[split].update({m: float(v) for m, v in majority_scores(task, train_labels, labels).items()})
    return recorded


def final_outcomes(task: str | tasks.Task, splits, final: dict) -> dict:
    """The outcome of each checkpoint on each scored split (:mod:`robustkit.store.collapse`): the main
    metric against the majority baseline of the training labels.

    Parameters
    ----------
    splits : mapping of str to Dataset
        The run's ``train`` split and every split scored in ``final`` (with ``label``).
    final : dict
        ``{checkpoint: {split: {metric: value}}}``, as a manifest's ``final``.

    Returns
    -------
    dict
        ``{checkpoint: {split: "ok" | "collapsed" | "diverged"}}``.
    """
    task = tasks.get_task(task)
    metric = task.main_metric
    train_labels = splits["train"]["label"]
    result = {}
    for name, scored in final.items():
        result[name] = {}
        for split, metrics in scored.items():
            labels = splits[split]["label"]
            baseline = majority_baseline(task, train_labels, labels)
            result[name][split] = collapse.outcome(
                metrics.get(metric, float("nan")),
                baseline,
                metric,
                len(labels),
                metrics.get("top_class_share"),
                loss=metrics.get("loss"),
            )
    return result
