"""Task metrics: accuracy, F1, macro-F1, Matthews correlation, Pearson and Spearman correlations,
and the majority-class baseline of a task's main metric.

Each :class:`robustkit.data.tasks.Task` names its metrics and its main (reporting) metric;
:func:`compute_metrics` computes them from predictions. Degenerate inputs (a constant
prediction) give 0.0 for the correlation-type metrics, as GLUE's scorers do.

The classification metrics are scikit-learn's (``accuracy_score``, binary ``f1_score`` of class
1, its ``average="macro"`` form for more than two classes, ``matthews_corrcoef``, the multiclass
form of Gorodkin 2004): on 3,000 random label / prediction pairs (2-3 classes, 1-59 examples,
constant predictions among them) accuracy, F1 and MCC gave the very floats of the hand-written
formulas they replace. They cost about 1-5 ms a call, against 0.02-0.2 ms by hand, and ~0.6 s to
import once per process: nothing beside an evaluation's forward passes. The correlations are SciPy's.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import stats

from robustkit.data.tasks import Task, get_task
from robustkit.errors import RobustkitError


def accuracy(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Fraction of predictions equal to the label."""
    from sklearn.metrics import accuracy_score

    return float(accuracy_score(labels, predictions))


def f1_score(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Binary F1 of the positive class 1: 2 TP / (2 TP + FP + FN); 0.0 when that is 0 / 0."""
    from sklearn.metrics import f1_score as f1

    return float(f1(labels, predictions, pos_label=1, average="binary", zero_division=0))


def macro_f1(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Macro-F1: the unweighted mean over classes of each class's one-vs-rest F1, so a minority
    class counts as much as the majority (reported for more than two classes, where accuracy
    rewards predicting the majority). Classes are those among ``labels`` or ``predictions``
    (scikit-learn's rule); a class's F1 is 0.0 when it is 0 / 0."""
    from sklearn.metrics import f1_score as f1

    return float(f1(labels, predictions, average="macro", zero_division=0))


def matthews_corrcoef(predictions: np.ndarray, labels: np.ndarray) -> float:
    """Matthews correlation (Gorodkin's multiclass form; the usual MCC for two classes); 0.0 when
    a side is constant.

    With C the confusion matrix, t its row sums (true counts), p its column sums (predicted
    counts), c its trace and s its total: (c s - t.p) / sqrt((s^2 - p.p)(s^2 - t.t)).
    """
    from sklearn.metrics import matthews_corrcoef as mcc

    with warnings.catch_warnings():  # one class on both sides (a collapsed run on a tiny split): 0.0, said elsewhere
        warnings.filterwarnings("ignore", message="A single label was found", category=UserWarning)
        return float(mcc(labels, predictions))


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


METRICS = {
    "accuracy": accuracy,
    "f1": f1_score,
    "macro_f1": macro_f1,
    "mcc": matthews_corrcoef,
    "pearson": pearson,
    "spearman": spearman,
}
# What a run records per split: its task's metrics and the evaluation loss.
RECORDED = (*METRICS, "loss")


class MetricError(RobustkitError):
    """A metric name robustkit never records."""


def check_name(name: str) -> None:
    """Raise :class:`MetricError` unless ``name`` is a metric runs record (:data:`RECORDED`): a
    misspelt ``--metric`` is refused at once, not after an analysis finds no rows for it."""
    if name not in RECORDED:
        raise MetricError(f"unknown metric {name!r}; runs record {', '.join(RECORDED)}")


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
    return majority_scores(task, labels, eval_labels)[task.main_metric]


def majority_scores(task: str | Task, labels: np.ndarray, eval_labels: np.ndarray | None = None) -> dict[str, float]:
    """Every metric of always predicting the most frequent label of ``labels`` (arguments as
    :func:`majority_baseline`), ``{metric: value}``."""
    task = get_task(task)
    labels = np.asarray(labels).reshape(-1)
    target = labels if eval_labels is None else np.asarray(eval_labels).reshape(-1)
    if task.is_regression:
        constant = labels.mean()
    else:
        constant = np.bincount(labels.astype(np.int64), minlength=task.num_labels).argmax()
    return compute_metrics(task, np.full(target.shape, constant), target)
