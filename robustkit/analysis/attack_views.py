"""The attack's figures' data: success rates per victim with its outcome, as lines over TSP
steps (Han et al. 2021 figure 5) and as per-run boxes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from robustkit import attacks
from robustkit.analysis.attack_summary import summarize


def success_view(examples: pd.DataFrame, store: str | Path, checkpoint: str) -> pd.DataFrame:
    """Han et al. 2021 figure 5's data: :func:`summarize` per victim and attacker, with each
    victim's ``outcome`` on its test split (:func:`robustkit.analysis.scores.with_outcomes`).

    A victim stuck at the majority class predicts one label whatever the input, so no
    perturbation flips it: its low success rate is no robustness, and figures and claims leave
    it out (Han et al. 2021 figure 5 at demo scale once showed exactly that).
    """
    from robustkit.analysis import scores

    return scores.with_outcomes(summarize(examples), store, checkpoint=checkpoint)


def success_scores_view(examples: pd.DataFrame, store: str | Path, checkpoint: str, convention: str) -> pd.DataFrame:
    """Each victim's attack success rate as a per-run score, for box plots over seeds.

    Returns
    -------
    DataFrame
        One row per victim and attacker: :func:`success_view`'s columns for ``convention`` plus
        ``value`` (the success rate, a fraction), ``metric``
        (:func:`robustkit.attacks.success_metric`: ``"<attacker> success"``, shown in the unit
        the attacker declares),
        ``split`` (``test``) and ``baseline`` (none).
    """
    frame = success_view(examples, store, checkpoint)
    frame = frame[frame["convention"] == convention].copy()
    return frame.assign(
        value=frame["success_rate"], metric=frame["attacker"].map(attacks.success_metric), split="test", baseline=np.nan
    )


def attack_boxes(
    examples: pd.DataFrame, store: str | Path, checkpoint: str, convention: str, include_failed: bool = False
) -> dict:
    """The attack-boxes figure's data: :func:`success_scores_view` as per-run scores, one box per
    method with its statistics (:func:`robustkit.analysis.boxes.method_boxes`)."""
    from robustkit.analysis import boxes

    return boxes.method_boxes(
        success_scores_view(examples, store, checkpoint, convention), include_failed=include_failed
    )


LINE_COLUMNS = ["method", "tsp_step", "mean", "std", "n"]


def success_lines(summary: pd.DataFrame, convention: str = "openattack", include_failed: bool = False) -> dict:
    """Han et al. 2021 figure 5's lines: per attacker and method, the mean and the std of the
    success rate over the victims (seeds) at each TSP step, and the failed victims per method.

    Parameters
    ----------
    summary : DataFrame
        :func:`success_view` output (or :func:`summarize`'s, each victim then counting as
        ``ok``): one row per victim, attacker and convention, with ``method, tsp_step,
        convention, success_rate, attacked`` and optionally ``attacker`` and ``outcome``.
    convention : str
        ``openattack`` or ``gold``: the rows used.
    include_failed : bool
        Average collapsed / diverged victims in too.

    Returns
    -------
    dict
        The keyword arguments of :func:`robustkit.figures.attack.attack_vs_tsp` and
        :func:`~robustkit.figures.attack.attack_by_attacker`: ``summary`` (the rows of
        ``convention``, with ``outcome``), ``lines`` (``attacker`` where ``summary`` has it +
        :data:`LINE_COLUMNS`: ``mean`` and ``std`` (ddof 1; NaN for one victim) of the success
        rate, a fraction, over the ``n`` victims kept at that point), ``failures``
        (:func:`robustkit.store.collapse.failure_rates` per method of the victims, counted once: from
        the first attacker's rows), ``convention`` and ``include_failed``.

    Raises
    ------
    ValueError
        No row of ``convention``.
    """
    from robustkit.store import collapse

    data = summary[summary["convention"] == convention]
    if data.empty:
        raise ValueError(f"no rows with convention {convention!r}")
    if "outcome" not in data:
        data = data.assign(outcome=collapse.OK)
    panels = ["attacker"] if "attacker" in data else []
    lines = (
        collapse.kept(data, include_failed)
        .groupby([*panels, "method", "tsp_step"], sort=True)["success_rate"]
        .agg(["mean", "std", "count"])
        .rename(columns={"count": "n"})
        .reset_index()
    )
    if panels:  # panels in the attackers' order of appearance
        order = {attacker: i for i, attacker in enumerate(pd.unique(data["attacker"]))}
        lines = lines.sort_values("attacker", key=lambda a: a.map(order), kind="stable").reset_index(drop=True)
    # Collapse is a property of the victim: count it once, from the first attacker's rows.
    victims = data[data["attacker"] == data["attacker"].iloc[0]] if panels else data
    return {
        "summary": data,
        "lines": lines[[*panels, *LINE_COLUMNS]].astype({"n": int}),
        "failures": collapse.failure_rates(victims, ["method"]),
        "convention": convention,
        "include_failed": include_failed,
    }


def success_by_tsp(
    examples: pd.DataFrame, store: str | Path, checkpoint: str, convention: str, include_failed: bool = False
) -> dict:
    """The attack-vs-tsp and attack-by-attacker figures' data: :func:`success_lines` of
    :func:`success_view` (each victim's success rates and outcome)."""
    return success_lines(success_view(examples, store, checkpoint), convention, include_failed)
