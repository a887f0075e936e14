"""How often the failure rule calls an honest run failed, and a failed run ok, at small evaluation sets.

    python tools/simulate_collapse_rule.py [--draws 20000]
    python tools/simulate_collapse_rule.py --mcc [--factor 1.0]

A binary task whose majority class holds ``q`` of the ``n`` scored examples. An honest run of
true accuracy ``p`` gets each example right with probability ``p`` (its errors spread over both
classes, so its top-class share stays far below 0.95); a failed run predicts the majority class
for all but a ``leak`` share of examples, chosen at random. Each draw is scored by
:func:`robustkit.store.collapse.outcome` and :func:`~robustkit.store.collapse.undecided`, and
the rule of before issue #46 (``value <= baseline + 2 se``) beside it. Prints one Markdown row
per setting: the share called collapsed, undecided and ok.

``--mcc``: the MCC branch's two error rates, exactly (no draws): a binary split of ``n`` examples,
``round(q n)`` of them of the majority label; a run predicts the majority label with probability
``a`` on majority examples and ``b`` on the others, set by the run's population MCC ``phi`` and
its predicted share ``r`` of the majority label. Every table (true positives x false positives,
two independent binomials) is enumerated and weighed (scipy's ``binom.pmf``; MCC written out as
sklearn computes it, 0 where a margin is empty). Per ``n``, the worst over the nuisances ``q`` in
0.5-0.85 and ``r`` in 0.1-0.9 (steps of 0.05; a predicted top-class share above 0.9 is left to
the share rule): ``false collapsed`` (phi = the learned margin, called collapsed by the MCC
branch) and ``false learned`` (phi = 0, the baseline, called learned). ``--factor`` scores the
rule with ``se = factor / sqrt(n)`` instead of :data:`robustkit.store.collapse.MCC_SE_FACTOR`
(1.0: the rule before issue #55).
"""

from __future__ import annotations

import argparse
import dataclasses
import math

import numpy as np
import pandas as pd

from robustkit.store import collapse

SETTINGS = [(n, q) for n in (32, 64, 100, 200, 500, 1000) for q in (0.5, 0.55, 0.7)]


def _old_rule(value: float, baseline: float, n: int) -> str:
    """The rule before issue #46: within 2 standard errors of the baseline is collapsed."""
    return collapse.COLLAPSED if value <= baseline + collapse.noise_band("accuracy", baseline, n) else collapse.OK


def simulate(n: int, q: float, p: float | str | None, draws: int, seed: int = 0, leak: float = 0.02) -> dict:
    """Shares of ``draws`` runs called collapsed (new and old rule) and undecided.

    Parameters
    ----------
    n : int
        Scored examples.
    q : float
        Majority class share (the baseline accuracy).
    p : float, "margin" or None
        True accuracy of an honest run ("margin": the baseline of the ``n`` examples plus the
        rule's learned margin, the hardest honest run); None: a failed run (majority class but
        ``leak``).
    """
    rng = np.random.default_rng([seed, n, int(q * 1000), int(isinstance(p, float) and p * 1000)])
    n_major = round(q * n)
    labels = np.r_[np.ones(n_major, int), np.zeros(n - n_major, int)]
    baseline = n_major / n
    if p == "margin":
        p = baseline + collapse.DEFAULT_RULE.learned_margin
    counts = {"collapsed": 0, "undecided": 0, "old collapsed": 0}
    for _ in range(draws):
        if p is None:
            predictions = np.where(rng.random(n) < leak, rng.integers(0, 2, n), 1)
        else:
            right = rng.random(n) < p
            predictions = np.where(right, labels, 1 - labels)
        value = float((predictions == labels).mean())
        share = float(max(predictions.mean(), 1 - predictions.mean()))
        result = collapse.outcome(value, baseline, "accuracy", n, share)
        counts["collapsed"] += result == collapse.COLLAPSED
        counts["undecided"] += collapse.undecided(value, baseline, "accuracy", n, share)
        counts["old collapsed"] += (share >= 0.95) or _old_rule(value, baseline, n) == collapse.COLLAPSED
    return {key: value / draws for key, value in counts.items()}


def table(draws: int) -> pd.DataFrame:
    """One row per (n, q, kind of run): honest at the learned margin, honest at 70%, failed."""
    rows = []
    margin = collapse.DEFAULT_RULE.learned_margin
    for n, q in SETTINGS:
        for kind, p in ((f"honest, p = q + {margin:g}", "margin"), ("honest, p = 0.70", 0.70), ("failed", None)):
            if isinstance(p, float) and p <= q:
                continue
            rows.append({"n": n, "q": q, "run": kind, **simulate(n, q, p, draws)})
    return pd.DataFrame(rows)


MCC_SIZES = [*range(32, 129), 160, 200, 256, 320, 400, 500, 700, 1000]
MCC_SHARES = np.round(np.arange(0.5, 0.851, 0.05), 2)  # the labels' majority share q
MCC_PREDICTED = np.round(np.arange(0.1, 0.901, 0.05), 2)  # the run's predicted majority share r


def mcc_tables(n: int, q: float, r: float, phi: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Every confusion table of a run of population MCC ``phi`` on ``n`` examples: (the sample
    MCC of each, its probability), both of shape (n_major + 1, n_minor + 1) indexed by (true
    positives, false positives) of the majority label; None where no run has these margins."""
    from scipy.stats import binom

    n_major = round(q * n)
    n_minor = n - n_major
    share = n_major / n
    joint = share * r + phi * math.sqrt(share * (1 - share) * r * (1 - r))  # P(label and prediction majority)
    a, b = joint / share, (r - joint) / (1 - share)
    if n_minor == 0 or not (0 <= a <= 1 and 0 <= b <= 1):
        return None
    tp, fp = np.arange(n_major + 1)[:, None], np.arange(n_minor + 1)[None, :]
    fn, tn = n_major - tp, n_minor - fp
    spread = np.sqrt(((tp + fp) * (fn + tn)).astype(float) * n_major * n_minor)
    value = np.where(spread > 0, (tp * tn - fp * fn) / np.where(spread > 0, spread, 1), 0.0)
    weight = binom.pmf(np.arange(n_major + 1), n_major, a)[:, None] * binom.pmf(np.arange(n_minor + 1), n_minor, b)
    return value, weight


def mcc_error_rates(n: int, q: float, r: float, rule: collapse.CollapseRule = collapse.DEFAULT_RULE) -> dict:
    """The MCC branch's exact error rates at one setting: ``false collapsed`` (a run of MCC =
    the learned margin called collapsed) and ``false learned`` (a run of MCC 0 called learned);
    NaN where no run has these margins."""
    rates = {}
    for name, phi, wrong in (
        ("false collapsed", rule.learned_margin, collapse.below_learned),
        ("false learned", 0.0, collapse.above_baseline),
    ):
        tables = mcc_tables(n, q, r, phi)
        if tables is None:
            rates[name] = float("nan")
            continue
        value, weight = tables
        # the rule's verdict is monotone in the value (collapsed below a threshold, learned above
        # one): find where it turns among the sorted distinct values by bisection, a few calls
        distinct = np.unique(value)
        low = wrong is collapse.below_learned  # called wrong at the low end of the values
        lo, hi = 0, len(distinct)  # the first index of the other verdict than at the low end
        while lo < hi:
            mid = (lo + hi) // 2
            if wrong(float(distinct[mid]), 0.0, "mcc", n, rule) == low:
                lo = mid + 1
            else:
                hi = mid
        called = value < distinct[lo] if lo < len(distinct) else np.ones_like(value, bool)
        rates[name] = float(weight[called if low else ~called].sum())
    return rates


def mcc_table(factor: float | None = None) -> pd.DataFrame:
    """Per ``n`` (:data:`MCC_SIZES`): the worst of each MCC error rate over the nuisances and where
    it is; ``factor``: the rule with ``mcc_se_factor = factor`` (1.0: before issue #55)."""
    rule = collapse.DEFAULT_RULE if factor is None else dataclasses.replace(collapse.DEFAULT_RULE, mcc_se_factor=factor)
    rows = []
    for n in MCC_SIZES:
        rates = pd.DataFrame(
            [{"q": q, "r": r, **mcc_error_rates(n, q, r, rule)} for q in MCC_SHARES for r in MCC_PREDICTED]
        )
        row = {"n": n}
        for name in ("false collapsed", "false learned"):
            worst = rates.loc[rates[name].idxmax()]
            row[name], row[f"{name} at (q, r)"] = worst[name], f"({worst['q']:g}, {worst['r']:g})"
        rows.append(row)
    return pd.DataFrame(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20_000)
    parser.add_argument("--mcc", action="store_true", help="the MCC branch's exact error rates")
    parser.add_argument("--factor", type=float, help="with --mcc: se = FACTOR / sqrt(n) (1.0: the old rule)")
    args = parser.parse_args()
    frame = mcc_table(args.factor) if args.mcc else table(args.draws)
    if args.mcc:
        alpha = 0.5 * math.erfc(collapse.DEFAULT_RULE.noise_z / math.sqrt(2))
        print(
            f"worst over n: false collapsed {frame['false collapsed'].max():.4f}, false learned "
            f"{frame['false learned'].max():.4f} (level {alpha:.4f})"
        )
    columns = list(frame.columns)
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in frame.itertuples(index=False):
        cells = [f"{v:.4f}" if isinstance(v, float) and k != "q" else str(v) for k, v in zip(columns, row)]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
