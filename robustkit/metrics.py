"""Task metrics: accuracy, F1, Matthews correlation, Pearson and Spearman correlations, and the
majority-class baseline of a task's main metric.

Each :class:`robustkit.tasks.Task` names its metrics and its main (reporting) metric;
:func:`compute_metrics` computes them from predictions. Degenerate inputs (a constant
prediction) give 0.0 for the correlation-type metrics, as GLUE's scorers do.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from robustkit.tasks import Task, get_task

def accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of predictions equal to the label."""
    return float(np.mean(predictions == labels))


def f1_score(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Binary F1 of the positive class 1: 2 TP / (2 TP + FP + FN); 0.0 when that is 0 / 0."""
    tp = np.sum((predictions == 1) & (labels == 1))
    fp = np.sum((predictions == 1) & (labels != 1))
    fn = np.sum((predictions != 1) & (labels == 1))
    denominator = 2 * tp + fp + fn
    return float(2 * tp / denominator) if denominator else 0.0


def matthews_corrcoef(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Matthews correlation (Gorodkin's multiclass form; the usual MCC for two classes).

    With C the confusion matrix, t its row sums (true counts), p its column sums (predicted
    counts), c its trace and s its total: (c s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)); 0.0 when
    a side is constant (denominator 0), as in scikit-learn.
    """
    classes, codes = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    true, pred = codes[: len(labels)], codes[len(labels) :]
    confusion = np.zeros((len(classes), len(classes)), dtype=np.float64)
    np.add.at(confusion, (true, pred), 1.0)
    t, p = confusion.sum(axis=1), confusion.sum(axis=0)
    c, s = np.trace(confusion), confusion.sum()
    denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
    return float((c * s - t @ p) / denominator) if denominator else 0.0


def pearson(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Pearson correlation; 0.0 when either side is constant (e.g. a collapsed regressor)."""
    if np.ptp(predictions) == 0 or np.ptp(labels) == 0:
        return 0.0
    return float(stats.pearsonr(predictions, labels).statistic)


def spearman(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Spearman rank correlation; 0.0 when either side is constant."""
    if np.ptp(predictions) == 0 or np.ptp(labels) == 0:
        return 0.0
    return float(stats.spearmanr(predictions, labels).statistic)


METRICS = {"accuracy": accuracy, "f1": f1_score, "mcc": matthews_corrcoef, "pearson": pearson, "spearman": spearman}


def compute_metrics(task: str | Task, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Every metric of a task.

    Parameters
    ----------
    task : str or Task
    predictions : numpy.ndarray, shape (n,)
        Class ids, or real-valued scores for regression (``stsb``).
    labels : numpy.ndarray, shape (n,)

    Returns
    -------
    dict of str to float
        ``{metric: value}`` for each of ``task.metrics``.
    """
    task = get_task(task)
    predictions, labels = np.asarray(predictions).reshape(-1), np.asarray(labels).reshape(-1)
    if predictions.shape != labels.shape or len(labels) == 0:
        raise ValueError(f"need as many predictions as labels (> 0), got {predictions.shape} and {labels.shape}")
    return {name: METRICS[name](predictions, labels) for name in task.metrics}


def majority_baseline(task: str | Task, labels: np.ndarray, eval_labels: np.ndarray | None = None) -> float:
    """Main metric of always predicting the most frequent label of ``labels``.

    Parameters
    ----------
    task : str or Task
    labels : numpy.ndarray, shape (n,)
        Training labels, which define the constant prediction (ties: the smallest label id;
        regression: their mean, whose correlations are 0 by convention).
    eval_labels : numpy.ndarray, shape (m,), optional
        Labels the constant prediction is scored on; default ``labels``.

    Returns
    -------
    float
        The value of ``task.main_metric``; a run scoring no better has failed.
    """
    task = get_task(task)
    labels = np.asarray(labels).reshape(-1)
    target = labels if eval_labels is None else np.asarray(eval_labels).reshape(-1)
    if task.is_regression:
        constant = labels.mean()
    else:
        constant = np.bincount(labels.astype(np.int64), minlength=task.num_labels).argmax()
    return compute_metrics(task, np.full(target.shape, constant), target)[task.main_metric]
