"""How often the failure rule calls an honest run failed, and a failed run ok, at small evaluation sets.

    python tools/simulate_collapse_rule.py [--draws 20000]

A binary task whose majority class holds ``q`` of the ``n`` scored examples. An honest run of
true accuracy ``p`` gets each example right with probability ``p`` (its errors spread over both
classes, so its top-class share stays far below 0.95); a failed run predicts the majority class
for all but a ``leak`` share of examples, chosen at random. Each draw is scored by
:func:`robustkit.train.collapse.outcome` and :func:`~robustkit.train.collapse.undecided`, and
the rule of before issue #46 (``value <= baseline + 2 se``) beside it. Prints one Markdown row
per setting: the share called collapsed, undecided and ok.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from robustkit.train import collapse

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20_000)
    frame = table(parser.parse_args().draws)
    columns = list(frame.columns)
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in frame.itertuples(index=False):
        cells = [f"{v:.4f}" if isinstance(v, float) and k != "q" else str(v) for k, v in zip(columns, row)]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
