"""Collapsed and diverged runs: the one definition every table, figure, test and claim uses.

A fine-tuning run can end without having learned the task; the papers count such runs apart
(He et al. 2021, section 5; Mosbach et al. 2021's failed-run rate), and so does robustkit. A
run's **outcome** on a scored split is one of

- ``diverged``: training stopped at a non-finite loss, gradient norm or weights, or its score
  (or its loss) on the scored split is not a finite number;
- ``not-learned``: stuck at the majority class and never left it at any validation evaluation
  of its training (``ever_learned`` False): under-trained, not unstable;
- ``collapsed``: stuck at the majority class after having left it (or history unknown): the most
  frequent predicted class has a share >= ``max_class_share`` (0.95), or the score is below
  ``baseline + delta - z * se(baseline + delta)`` (``delta``: ``learned_margin``, 0.1; ``z``:
  ``noise_z``, 2; ``se``: the metric's standard error on the ``n`` scored examples);
- ``undecided``: neither significantly above the baseline nor significantly below ``baseline +
  delta`` (:func:`undecided`): the scored split is too small to tell a failed run from one that
  learned, so the run is no result (never ``ok``: a truly collapsed run on a small test set is
  undecided 70-77% of the time at n <= 64, issue #55), and is counted apart;
- ``ok``: anything else (significantly above the baseline: learned).

:func:`evaluation_floor` is the smallest ``n`` at which every run is decided. Figures and tables
leave runs that are not ``ok`` out of means, spreads and tests by default and report
``collapsed k/n`` (:func:`failure_rates`); :func:`label` and :data:`FAILED_WORDS` are the one
vocabulary, and :func:`with_history` makes a collapsed run that never learned ``not-learned``.

**MCC** (issue #55): the null standard error ``1 / sqrt(n)`` made the MCC branch call a run
that learned exactly ``delta`` collapsed 2.6-2.8% of the time at n = 24-128 when its errors
fall evenly on both classes, and up to 5.4% when its predictions lean to the labels' majority
class (the sample MCC's spread at 0.1 grows with skewed margins: 1.19 / sqrt(n) at an 85%
majority class predicted 90% of the time), against the stated 2.28%; its learned side erred up
to 6.5% at n < 40. The rule now uses the conservative ``se = 1.28 / sqrt(n)``
(:data:`MCC_SE_FACTOR`), the smallest multiple of ``1 / sqrt(n)`` (steps of 0.01) at which both
sides' exact error rates (every table of a binary split with fixed labels enumerated,
``tools/simulate_collapse_rule.py --mcc``) are at most ``alpha`` at every n from 32 to 1,000
over the nuisances stated there (labels' majority share 0.5-0.85, predicted top-class share at
most 0.9: above it the share rule decides); asymptotically the spread is at most 1.20 / sqrt(n).
A normal approximation cannot hold at fewer than :data:`MCC_MIN_N` (32) examples (a few of the
minority class: MCC takes a handful of values), so MCC decides no run there: ``undecided``
unless the share rule calls it collapsed. Pearson and Spearman keep ``1 / sqrt(n)``.

The standard error of each metric, the rule's error rates (``tools/simulate_collapse_rule.py``)
and the cases without ``n`` or a baseline: ``docs/verdicts.md``, "robustkit/store/collapse.py".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from robustkit.store.schema import COLLAPSED, DIVERGED, NOT_LEARNED, OK, UNDECIDED, with_history
from robustkit.store.schema import OUTCOMES as OUTCOMES  # the vocabulary, as collapse.OUTCOMES

CORRELATIONS = {"mcc", "pearson", "spearman"}
FAILURE_COLUMNS = ["n_runs", "n_ok", "n_not_learned", "n_collapsed", "n_undecided", "n_diverged", "failed_rate"]
# The outcomes that are no result, as a heading names them: "not-learned, collapsed, undecided or diverged".
FAILED_WORDS = f"{NOT_LEARNED}, {COLLAPSED}, {UNDECIDED} or {DIVERGED}"
# MCC's standard error on n examples is taken as MCC_SE_FACTOR / sqrt(n) (module docstring: the
# smallest factor at which both sides of the rule hold their level, exactly, over the stated
# nuisances; CollapseRule.mcc_se_factor), and MCC decides no run on fewer than MCC_MIN_N examples.
MCC_SE_FACTOR = 1.28
MCC_MIN_N = 32


@dataclass(frozen=True)
class CollapseRule:
    """Thresholds of the collapse rule (see the module docstring).

    Attributes
    ----------
    max_class_share : float
        A run predicting one class for at least this share of the scored examples is collapsed.
    noise_z : float
        How many standard errors above the majority baseline a score must be to count as learned
        (and below ``baseline + learned_margin`` to count as collapsed).
    learned_margin : float
        How far above the majority baseline a run that learned scores, in the metric's units.
    mcc_se_factor : float
        MCC's standard error on ``n`` examples is taken as ``mcc_se_factor / sqrt(n)``
        (:data:`MCC_SE_FACTOR`; 1.0 is the null standard error the rule used before issue #55).
    """

    max_class_share: float = 0.95
    noise_z: float = 2.0
    learned_margin: float = 0.1
    mcc_se_factor: float = MCC_SE_FACTOR


DEFAULT_RULE = CollapseRule()


def noise_band(metric: str, baseline: float, n: int | float | None, rule: CollapseRule = DEFAULT_RULE) -> float:
    """How far above the majority baseline a score must be to count as learned (metric units).

    Parameters
    ----------
    metric : str
        ``accuracy``, ``f1``, ``mcc``, ``pearson`` or ``spearman`` (other metrics: 0).
    baseline : float
        The metric of always predicting the majority training class on the scored split.
    n : int, optional
        Scored examples; None or NaN gives 0 (only ``value <= baseline`` then counts).

    Returns
    -------
    float
        ``z * se`` (fraction units, e.g. 0.031 for accuracy with q = 0.57 and n = 1000).
    """
    if n is None or not np.isfinite(n) or n <= 0 or baseline is None or not np.isfinite(baseline):
        return 0.0
    return rule.noise_z * _standard_error(metric, baseline, n, rule)


def _standard_error(metric: str, value: float, n: float, rule: CollapseRule = DEFAULT_RULE) -> float:
    """Standard error of ``metric`` around ``value`` on ``n`` examples (0 for other metrics)."""
    if metric == "accuracy":
        value = min(max(value, 0.0), 1.0)
        return math.sqrt(value * (1 - value) / n)
    if metric == "f1":
        return 0.5 / math.sqrt(n)
    if metric == "mcc":
        return rule.mcc_se_factor / math.sqrt(n)  # conservative: see the module docstring
    if metric in CORRELATIONS:
        return 1 / math.sqrt(n)
    return 0.0


def _judged(metric: str, baseline, n, value: float = 0.0) -> bool:
    if value is None or not np.isfinite(value):
        return False
    known = n is not None and np.isfinite(n) and n > 0 and baseline is not None and np.isfinite(baseline)
    return bool(known) and (metric == "accuracy" or metric == "f1" or metric in CORRELATIONS)


def _too_few(metric: str, n: float) -> bool:
    """Whether ``n`` scored examples are too few for the score to decide anything (MCC below
    :data:`MCC_MIN_N`): neither side of the rule is then significant."""
    return metric == "mcc" and n < MCC_MIN_N


def _alpha(rule: CollapseRule) -> float:
    """The one-sided level of ``noise_z`` (0.0228 at 2)."""
    return 0.5 * math.erfc(rule.noise_z / math.sqrt(2))


def above_baseline(value: float, baseline: float, metric: str, n: float, rule: CollapseRule = DEFAULT_RULE) -> bool:
    """Whether ``value`` is significantly above ``baseline`` (the learned side of the rule).
    Accuracy: the exact binomial test, P(X >= k | n, baseline) <= alpha; other metrics: beyond
    :func:`noise_band`. False where ``n`` or the baseline is unknown."""
    if not _judged(metric, baseline, n, value) or _too_few(metric, n):
        return False
    if metric == "accuracy":
        return bool(_accuracy_sides(np.array([round(value * n)]), int(n), baseline, rule)[0][0])
    return value > baseline + noise_band(metric, baseline, n, rule)


def below_learned(value: float, baseline: float, metric: str, n: float, rule: CollapseRule = DEFAULT_RULE) -> bool:
    """Whether ``value`` is significantly below ``baseline + learned_margin`` (the collapse side of
    the rule). Accuracy: the exact binomial test, P(X <= k | n, baseline + margin) <= alpha;
    other metrics: ``z`` standard errors below. False where ``n`` or the baseline is unknown."""
    if not _judged(metric, baseline, n, value) or _too_few(metric, n):
        return False
    learned = baseline + rule.learned_margin
    if metric == "accuracy":
        return bool(_accuracy_sides(np.array([round(value * n)]), int(n), baseline, rule)[1][0])
    return value < learned - rule.noise_z * _standard_error(metric, learned, n, rule)


def _accuracy_sides(counts: np.ndarray, n: int, baseline: float, rule: CollapseRule) -> tuple[np.ndarray, np.ndarray]:
    """The two exact binomial tests of the rule for accuracy, for correct counts ``counts`` of
    ``n`` (shape (k,)): (significantly above the baseline, significantly below baseline + margin).
    The one place :func:`above_baseline`, :func:`below_learned` and :func:`evaluation_floor` read."""
    from scipy.stats import binom

    alpha = _alpha(rule)
    above = binom.sf(counts - 1, n, min(max(baseline, 0.0), 1.0)) <= alpha
    learned = baseline + rule.learned_margin
    if learned > 1:  # no run can score the margin above so high a baseline: at or below it failed
        return above, counts / n <= baseline
    return above, binom.cdf(counts, n, learned) <= alpha


def undecided(
    value: float,
    baseline: float | None,
    metric: str,
    n: float | None,
    top_class_share: float | None = None,
    rule: CollapseRule = DEFAULT_RULE,
) -> bool:
    """Whether a run's outcome is ``undecided``: its evaluation set is too small to tell, its score
    neither significantly above the baseline nor significantly below ``baseline + margin``."""
    return outcome(value, baseline, metric, n, top_class_share, rule) == UNDECIDED


def ever_learned(scores, baseline: float | None, metric: str, n: float | None, rule: CollapseRule = DEFAULT_RULE):
    """Whether any of a run's validation ``scores`` (its evaluations during training) is
    significantly above the majority ``baseline`` (:func:`above_baseline`; above it where ``n``
    is unknown); None where the baseline is unknown or the metric not judged.

    Parameters
    ----------
    scores : array-like of float, shape (n_evaluations,)
    """
    if baseline is None or not np.isfinite(baseline) or not _judged(metric, baseline, 1):
        return None
    values = [float(v) for v in scores if np.isfinite(v)]
    if not _judged(metric, baseline, n):
        return any(v > baseline for v in values)
    return any(above_baseline(v, baseline, metric, n, rule) for v in values)


def evaluation_floor(baseline: float, metric: str = "accuracy", rule: CollapseRule = DEFAULT_RULE) -> int:
    """The smallest number of scored examples at which every run is decided (the two sides of
    the rule meet): below it some runs are :func:`undecided`.

    Returns
    -------
    int
        E.g. 392 for accuracy with a 50% majority class, 2,622 for MCC; 0 for metrics the rule does
        not judge.
    """
    if not _judged(metric, baseline, 1):
        return 0
    learned = baseline + rule.learned_margin
    spread = _standard_error(metric, baseline, 1, rule) + _standard_error(metric, learned, 1, rule)  # per sqrt(n)
    approximate = math.ceil((rule.noise_z * spread / rule.learned_margin) ** 2)
    if metric != "accuracy":
        return max(approximate, MCC_MIN_N) if metric == "mcc" else approximate
    # exact tests: the smallest n from which every count k is decided, searched near the approximation
    for n in range(max(1, approximate // 2), 4 * approximate + 50):
        above, below = _accuracy_sides(np.arange(n + 1), n, baseline, rule)
        if (above | below).all():
            return n
    return approximate


def outcome(
    value: float,
    baseline: float | None = None,
    metric: str = "accuracy",
    n: int | float | None = None,
    top_class_share: float | None = None,
    rule: CollapseRule = DEFAULT_RULE,
    loss: float | None = None,
) -> str:
    """The outcome of one run on one scored split: ``ok``, ``collapsed``, ``undecided`` or ``diverged``.

    Parameters
    ----------
    value : float
        The run's score (fraction units for accuracy and F1).
    baseline : float, optional
        Majority-class baseline of the same metric on the same split (NaN / None: unknown).
    metric : str
        Metric name, which sets the noise band (:func:`noise_band`).
    n : int, optional
        Number of scored examples.
    top_class_share : float, optional
        Share of the run's predictions in its most frequent predicted class (NaN / None:
        unknown, e.g. runs trained before it was recorded).
    loss : float, optional
        The run's mean loss on the scored split (None: unknown); NaN or inf means diverged.
    """
    if value is None or not np.isfinite(value) or (loss is not None and not np.isfinite(loss)):
        return DIVERGED
    if top_class_share is not None and np.isfinite(top_class_share) and top_class_share >= rule.max_class_share:
        return COLLAPSED
    if baseline is None or not np.isfinite(baseline):
        return OK
    if not _judged(metric, baseline, n):  # n unknown: only a score at or below the baseline counts
        return COLLAPSED if value <= baseline else OK
    if above_baseline(value, baseline, metric, n, rule):
        return OK  # significantly above the baseline: learned
    return COLLAPSED if below_learned(value, baseline, metric, n, rule) else UNDECIDED


def recorded_outcomes(manifest: dict, rule: CollapseRule = DEFAULT_RULE) -> dict:
    """A manifest's ``outcome`` as the rule words it now: ``{checkpoint: {split: word}}``.

    Training records each word when the run ends; a run stored before ``undecided`` existed was
    recorded ``ok``, and one stored before issue #55 was judged with MCC's old standard error.
    Each recorded word but ``diverged`` (a fact of training) is judged again from the manifest's
    own ``final`` score of its ``main_metric``, ``top_class_share`` and loss, and its
    ``baselines`` (the majority baseline and ``n`` of the split), as training judges it
    (:func:`robustkit.train.evaluate.final_outcomes`); a word whose score or baseline the
    manifest lacks stays as recorded.
    """
    metric = manifest.get("main_metric")
    final, baselines = manifest.get("final") or {}, manifest.get("baselines") or {}
    words = {}
    for checkpoint, splits in (manifest.get("outcome") or {}).items():
        words[checkpoint] = {}
        for split, word in splits.items():
            scores, base = (final.get(checkpoint) or {}).get(split) or {}, baselines.get(split) or {}
            known = metric in scores and base.get(metric) is not None and base.get("n") is not None
            words[checkpoint][split] = (
                outcome(
                    _float(scores[metric]),
                    _float(base[metric]),
                    metric,
                    _float(base["n"]),
                    _float(scores.get("top_class_share")),
                    rule,
                    None if scores.get("loss") is None else _float(scores["loss"]),
                )
                if known and word != DIVERGED
                else word
            )
    return words


def mark(frame: pd.DataFrame, rule: CollapseRule = DEFAULT_RULE) -> pd.DataFrame:
    """``frame`` + ``outcome`` and ``failed`` (outcome is not ``ok``), one row per observation.

    Parameters
    ----------
    frame : DataFrame
        Needs ``value``; uses ``baseline``, ``metric``, ``n_eval``, ``top_class_share`` and
        ``eval_loss`` where present (a NaN ``eval_loss`` is a diverged run: leave the column out
        where the loss is unknown), ``ever_learned`` (False: a collapsed run that never left the
        majority class is ``not-learned``), and ``status`` (the run's, :func:`robustkit.store.load_runs`):
        a row of a run whose status is ``diverged`` is diverged whatever its score.

    Returns
    -------
    DataFrame
        A copy with ``outcome`` (str, one of :data:`OUTCOMES`), ``failed`` (bool: not ``ok``, so
        ``undecided`` runs too) and ``undecided`` (bool: the outcome is ``undecided``).
    """

    def column(name, default=np.nan):
        return frame[name] if name in frame else [default] * len(frame)

    outcomes = [
        DIVERGED
        if status == DIVERGED  # stopped by training: its kept checkpoints are no result
        else outcome(_float(v), _float(b), str(m), _float(n), _float(s), rule, None if loss is None else _float(loss))
        for v, b, m, n, s, loss, status in zip(
            column("value"),
            column("baseline"),
            column("metric", "accuracy"),
            column("n_eval"),
            column("top_class_share"),
            column("eval_loss", None),
            column("status", None),
        )
    ]
    outcomes = [with_history(o, e) for o, e in zip(outcomes, column("ever_learned", None))]
    marked = frame.assign(outcome=outcomes)
    return marked.assign(failed=marked["outcome"] != OK, undecided=marked["outcome"] == UNDECIDED)


def marked(frame: pd.DataFrame, rule: CollapseRule = DEFAULT_RULE) -> pd.DataFrame:
    """``frame`` with ``outcome`` and ``failed``: its own ``outcome``, else :func:`mark` when the
    frame has a ``value`` and a ``baseline``, else every row ``ok`` (nothing to judge it by)."""
    if "outcome" in frame:
        return frame
    if "value" in frame and "baseline" in frame:
        return mark(frame, rule)
    return frame.assign(outcome=OK, failed=False)


def kept(frame: pd.DataFrame, include_failed: bool = False) -> pd.DataFrame:
    """The rows that enter means, spreads and tests: ``ok`` ones, or all with ``include_failed``.

    A frame without an ``outcome`` column is returned as it is.
    """
    if include_failed or "outcome" not in frame:
        return frame
    return frame[frame["outcome"] == OK]


def failure_rates(frame: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Failed-run counts per group (Mosbach et al. 2021): one row per group of ``by``.

    Returns
    -------
    DataFrame
        ``by`` columns + ``n_runs`` (observations), ``n_ok``, ``n_not_learned``, ``n_collapsed``,
        ``n_undecided``, ``n_diverged``, ``failed_rate`` ((n_runs - n_ok) / n_runs, a fraction:
        every run that is no result, undecided ones included).
    """
    by = list(by)
    rows = []
    groups = frame.groupby(by, dropna=False, sort=True) if by else [((), frame)]
    for key, group in groups:
        counts = group["outcome"].value_counts() if "outcome" in group else pd.Series({OK: len(group)})
        n_collapsed, n_diverged = int(counts.get(COLLAPSED, 0)), int(counts.get(DIVERGED, 0))
        n_not_learned, n_undecided = int(counts.get(NOT_LEARNED, 0)), int(counts.get(UNDECIDED, 0))
        rows.append(
            {
                **dict(zip(by, key if isinstance(key, tuple) else (key,))),
                "n_runs": len(group),
                "n_ok": int(counts.get(OK, 0)),
                "n_not_learned": n_not_learned,
                "n_collapsed": n_collapsed,
                "n_undecided": n_undecided,
                "n_diverged": n_diverged,
                "failed_rate": (len(group) - int(counts.get(OK, 0))) / len(group),
            }
        )
    return pd.DataFrame(rows, columns=[*by, *FAILURE_COLUMNS])


def label(n_collapsed: int, n_runs: int, n_diverged: int = 0, n_not_learned: int = 0, n_undecided: int = 0) -> str:
    """``"not-learned 1/5, collapsed 2/5"`` (+ ``", undecided 1/5"``, ``", diverged 1/5"``) for a
    cell or a box, in the words of :data:`OUTCOMES`; empty when every run is ok."""
    parts = [f"{NOT_LEARNED} {n_not_learned}/{n_runs}"] if n_not_learned else []
    parts += [f"{COLLAPSED} {n_collapsed}/{n_runs}"] if n_collapsed else []
    parts += [f"{UNDECIDED} {n_undecided}/{n_runs}"] if n_undecided else []
    parts += [f"{DIVERGED} {n_diverged}/{n_runs}"] if n_diverged else []
    return ", ".join(parts)


def counts_label(row, n_runs: int | None = None) -> str:
    """:func:`label` of a failure-count row (a Series or dict with ``n_collapsed``, ``n_diverged``,
    ``n_not_learned``, ``n_undecided``; missing or NaN counts as 0; ``n_runs`` default: the row's):
    the one reader of those columns, so no figure leaves a failure word out."""

    def count(name: str) -> int:
        value = row.get(name, 0)
        return int(value) if value is not None and pd.notna(value) else 0

    return label(
        count("n_collapsed"),
        count("n_runs") if n_runs is None else n_runs,
        count("n_diverged"),
        count("n_not_learned"),
        count("n_undecided"),
    )


def outcomes_label(outcomes: pd.Series) -> str:
    """:func:`label` of a column of outcome words (one per run)."""
    found = outcomes.value_counts()
    return label(
        int(found.get(COLLAPSED, 0)),
        len(outcomes),
        int(found.get(DIVERGED, 0)),
        int(found.get(NOT_LEARNED, 0)),
        int(found.get(UNDECIDED, 0)),
    )


def top_class_share(predictions: np.ndarray) -> float:
    """Share of ``predictions`` (class ids, shape (n,)) in the most frequent one; NaN if empty."""
    predictions = np.asarray(predictions).reshape(-1)
    if predictions.size == 0:
        return float("nan")
    return float(np.bincount(predictions.astype(np.int64)).max() / predictions.size)


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")
