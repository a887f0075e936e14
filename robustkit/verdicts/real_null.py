"""The verdict path on a null built from real runs: one method's runs relabelled into two groups.

The whole-path simulation (:mod:`robustkit.verdicts.simulation`) draws synthetic runs shaped like
the demo's. This is its check on the runs themselves: for a two-group claim, the tested runs of
one compared group (its *source*) are the only runs used; each simulated store draws ``n`` runs
per group and cell from them, with replacement, for group a and for group b alike, and is judged
by :func:`robustkit.verdicts.rules.judge`. Both groups then come from one distribution, the real
one with its skew, its grid, its ties, its failed runs and its still-improving flags, so any
decision the claim makes is false.

Which decisions are false depends on the claim's kind:

- ``location``, ``spread``, ``rate`` (no sign part): both. The relabelled groups sit exactly at
  the null (a median difference, spread ratio or rate difference of zero; a floor only moves the
  null further away);
- ``equivalence``: only *contradicts*; the groups are equivalent, so *agrees* is right;
- a claim with a ``sign`` part (a's own values against 0): only *agrees*; the sign part is
  whatever the source's runs are, so *contradicts* may be right;
- ``threshold`` and ``trend`` claims compare no two groups of runs and are not drawn.

Each source group with runs is drawn; the rates reported are the worse of the two. A run is drawn
with all its rows (a layer statistic's layers stay correlated); runs of one group that share a
cell set are exchangeable, as in :class:`robustkit.verdicts.settle.Bootstrap`, which draws them.

Written by hand: the path under test is robustkit's own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from robustkit.verdicts.cells import groups_of
from robustkit.verdicts.rules import judge, tested_rows
from robustkit.verdicts.settle import Bootstrap
from robustkit.verdicts.spec import AGREES, CONTRADICTS, Claim

KINDS = ("location", "mean", "spread", "rate", "equivalence")
NULL_COLUMNS = ["source", "n", "draws", "false_agrees", "false_contradicts"]


def drawable(claim: Claim) -> bool:
    """Whether the claim compares two groups of runs, so a relabelled null applies."""
    return claim.compare in KINDS and bool(claim.a)


def counted(claim: Claim) -> tuple[bool, bool]:
    """Whether a relabelled null makes *agrees* and *contradicts* false for this claim."""
    if claim.compare == "equivalence":
        return False, True
    if claim.sign:
        return True, False
    return True, True


def relabelled(claim: Claim, observations: pd.DataFrame, source: str) -> pd.DataFrame:
    """The claim's tested observations of group ``source`` (``"a"`` or ``"b"``), once as group a
    and once as group b, with run ids of their own (``<run id>|a``, ``<run id>|b``).

    Parameters
    ----------
    observations : DataFrame
        The claim's per-run observations (as :func:`robustkit.verdicts.rules.judge` takes them).
    source : {"a", "b"}

    Returns
    -------
    DataFrame
        Twice the source group's rows, ``claim.by`` set to a value of each group.
    """
    frame = tested_rows(claim, observations)
    group = groups_of(claim, frame)
    rows = frame[group == source]
    label_b = claim.b[0] if claim.b else frame.loc[group == "b", claim.by].iloc[0]
    return pd.concat(
        [
            rows.assign(**{claim.by: claim.a[0], "run_id": rows["run_id"].astype(str) + "|a"}),
            rows.assign(**{claim.by: label_b, "run_id": rows["run_id"].astype(str) + "|b"}),
        ],
        ignore_index=True,
    )


def null_rates(
    claim: Claim,
    observations: pd.DataFrame,
    improving: pd.Series | None = None,
    draws: int = 200,
    n: int | None = None,
    seed: int = 0,
) -> dict:
    """False-decision rates of ``claim`` on stores relabelled from one group's real runs.

    Parameters
    ----------
    observations : DataFrame
        The claim's per-run observations on a store.
    improving : Series, optional
        run_id -> still improving at its end; a drawn run keeps its run's flag.
    draws : int
        Simulated stores per source group.
    n : int, optional
        Runs per group and cell drawn; default the most runs a group of the claim has in a cell.

    Returns
    -------
    dict
        :data:`NULL_COLUMNS`: ``source`` (the group whose runs gave the worse rate, ``a=houlsby``),
        ``n``, ``draws``, ``false_agrees`` and ``false_contradicts`` (rates in [0, 1], NaN where
        that decision is not false for the claim's kind, :func:`counted`). Rates are NaN and
        ``draws`` 0 where neither group has runs.
    """
    counts_agrees, counts_contradicts = counted(claim)
    frame = tested_rows(claim, observations)
    groups = groups_of(claim, frame)
    n = n or Bootstrap(claim, frame).observed_n
    worst = {"source": "", "n": n, "draws": 0, "false_agrees": np.nan, "false_contradicts": np.nan}
    rng = np.random.default_rng(seed)
    for source in ("a", "b"):
        if not (groups == source).any():
            continue
        relabel = relabelled(claim, frame, source)
        flags = None
        if improving is not None:
            flags = pd.Series(
                improving.reindex(relabel["run_id"].str.rpartition("|")[0]).fillna(False).astype(bool).to_numpy(),
                index=relabel["run_id"],
            )
            flags = flags[~flags.index.duplicated()]
        boot = Bootstrap(claim, relabel, flags)
        hits = {AGREES: 0, CONTRADICTS: 0}
        for _ in range(draws):
            drawn, drawn_flags = boot.draw(n, rng)
            verdict = judge(claim, drawn, improving=drawn_flags, describe=False).iloc[-1]["verdict"]
            hits[verdict] = hits.get(verdict, 0) + 1
        agrees = hits[AGREES] / draws if counts_agrees else np.nan
        contradicts = hits[CONTRADICTS] / draws if counts_contradicts else np.nan
        name = ",".join(str(v) for v in (claim.a if source == "a" else claim.b or ("b",)))
        if worst["draws"] == 0 or np.nanmax([agrees, contradicts]) > np.nanmax(
            [worst["false_agrees"], worst["false_contradicts"]]
        ):
            worst = {
                "source": f"{source}={name}",
                "n": n,
                "draws": draws,
                "false_agrees": agrees,
                "false_contradicts": contradicts,
            }
    return worst
