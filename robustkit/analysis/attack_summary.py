"""The attack's summaries: per run, attacker and success convention, from its per-example results.

One attack per example serves both success conventions, because the attacks are untargeted and
move away from the model's own prediction:

- ``openattack``: every example is attacked; success = the prediction changes (misclassified
  inputs included), as OpenAttack's ``AttackEval`` counts it.
- ``gold``: only correctly classified examples count; success = they become misclassified.

So :func:`summarize` (what ``robustkit analyze attack`` prints) has two rows per run and
attacker, one per ``convention``: ``attacked`` is ``n`` in the ``openattack`` row and the number
of correctly classified examples in the ``gold`` row; ``accuracy_before`` and
``accuracy_under_attack`` are over all ``n`` examples in both, so ``gold``'s ``success_rate`` is
``1 - accuracy_under_attack / accuracy_before``; ``openattack``'s also counts a misclassified
example whose prediction the attack moves (to the gold label, on a two-class task).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from robustkit.store.identity import IDENTITY

CONVENTIONS = ("openattack", "gold")


def summarize(examples: pd.DataFrame) -> pd.DataFrame:
    """Per attacker, run and success convention: success rate, accuracy before and under attack, costs.

    Parameters
    ----------
    examples : DataFrame
        Output of :func:`robustkit.analysis.attack.run` (of one attacker, or several concatenated).

    Returns
    -------
    DataFrame
        Identity columns + ``attacker``, ``convention`` (``openattack`` or ``gold``),
        ``attacked`` (examples the convention attacks), ``success_rate``, ``accuracy_before``,
        ``accuracy_under_attack``, ``mean_queries``, ``mean_forward_passes`` (sentences really
        run), ``mean_modification_rate`` (modified /
        total words, over successful attacks), ``mean_seconds`` (per attacked example).
    """
    rows = []
    for (attacker, _), group in examples.groupby(["attacker", "run_id"], sort=True):
        identity = group.iloc[0][[c for c in IDENTITY if c in group]].to_dict()
        correct = group["prediction"] == group["label"]
        fooled = correct & group["success"]
        for convention in CONVENTIONS:
            attacked = group if convention == "openattack" else group[correct]
            successful = attacked[attacked["success"]]
            rows.append(
                {
                    **identity,
                    "attacker": attacker,
                    "convention": convention,
                    "attacked": len(attacked),
                    "success_rate": attacked["success"].mean() if len(attacked) else np.nan,
                    "accuracy_before": correct.mean(),
                    "accuracy_under_attack": (correct & ~fooled).mean(),
                    "mean_queries": attacked["queries"].mean(),
                    "mean_forward_passes": attacked["forward_passes"].mean()
                    if "forward_passes" in attacked
                    else np.nan,
                    "mean_modification_rate": (successful["modified_words"] / successful["words"].clip(lower=1)).mean(),
                    "mean_seconds": attacked["seconds"].mean(),
                }
            )
    return pd.DataFrame(rows)


def attack_success(frame: pd.DataFrame, convention: str, attacker: str) -> pd.DataFrame:
    """The ``attack.success`` statistic: each run's success rate under ``attacker`` and
    ``convention`` (fraction; Han et al. 2021 §4), from the analysis's frame.

    Returns
    -------
    DataFrame
        One row per run: identity columns and ``value``.
    """
    summary = summarize(frame[frame["attacker"] == attacker])
    summary = summary[summary["convention"] == convention].rename(columns={"success_rate": "value"})
    return summary[[*IDENTITY, "value"]]
