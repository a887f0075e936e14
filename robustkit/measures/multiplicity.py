"""Which cells of a per-cell claim can be decided, once the cells are corrected for multiplicity.

A claim tested in k cells (``within``) corrects its p-values with Holm's step-down method: the
smallest p is multiplied by the number of cells tested. Exact rank tests at small n have a
smallest possible p (:func:`robustkit.measures.exact.smallest_p`), so a cell that reaches
alpha alone may never reach it after the correction: 4 vs 4 runs give p >= 1/70 = 0.0143, and
over 7 layers Holm makes that 0.1. Such a claim cannot decide at its n, whatever its runs show.

Cells whose smallest p can never pass their share of alpha are left out of the family before any
data is seen, by Tarone's rule for discrete tests (Tarone 1990, "A modified Bonferroni method for
discrete data", Biometrics 46:1071-1076): the family size is the smallest K for which at most K
cells have a smallest p below alpha / K; those cells are tested (Holm over them) and the others
are *too few runs*. Since the choice depends on the group sizes only, the family-wise error rate
stays at most alpha. Written here because neither scipy nor statsmodels implements Tarone's rule
(statsmodels' ``multipletests`` corrects given p-values only).

Across the claims of one family (a paper's figure: :func:`family_test`), the same rule leaves out
the claims that cannot decide at their n, and Benjamini-Yekutieli's procedure (scipy's) tests the
rest, valid however the claims' shared runs make them depend on each other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
from scipy.stats import false_discovery_control


def tarone_family(smallest: Sequence[float], alpha: float, level: Callable[[int], float] | None = None) -> int:
    """Tarone's family size: the smallest K >= 1 with #{i: smallest[i] < alpha / K} <= K.

    Parameters
    ----------
    smallest : sequence of float, shape (cells,)
        Each cell's smallest attainable p-value at its group sizes.
    alpha : float
        The claim's family-wise level.
    level : callable, optional
        K -> the least a test in a family of K must reach to be rejected at all (default
        ``alpha / K``, Bonferroni's and Holm's first step; :func:`family_test` passes
        Benjamini-Yekutieli's).

    Returns
    -------
    int
        K; a cell is testable when ``smallest[i] < level(K)``. 1 for no cells.
    """
    level = level or (lambda family: alpha / family)
    for family in range(1, len(smallest) + 1):
        if sum(p < level(family) for p in smallest) <= family:
            return family
    return max(1, len(smallest))


def cell_level(smallest: Sequence[float], alpha: float) -> float:
    """The level a cell's p must pass after Holm's correction over the testable cells: alpha / K,
    K = :func:`tarone_family` (Holm's first step; ``smallest`` as there)."""
    return alpha / tarone_family(smallest, alpha)


def decidable_cells(smallest: Sequence[float], alpha: float) -> list[bool]:
    """Per cell: can its test reach alpha after the correction over the testable cells?"""
    level = cell_level(smallest, alpha)
    return [p < level for p in smallest]


def family_test(p: Sequence[float], smallest: Sequence[float], alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Benjamini-Yekutieli over a family of claims, those that cannot decide at their n left out
    by Tarone's rule.

    Tarone's rule at Benjamini-Yekutieli's own level: K is the smallest family size with at most
    K claims whose smallest attainable p is below alpha / c_K, c_K = 1 + 1/2 + ... + 1/K, the
    least the procedure asks of the last of K claims (where Bonferroni asks alpha / K, which
    would leave out two claims at 5 runs, p >= 1/32, that Benjamini-Yekutieli passes at
    0.05 / 1.5). Those claims are tested, decided from the group sizes alone before any p is
    seen, and the others are left out of m: none of them could be rejected. Benjamini and
    Yekutieli's step-up procedure (2001, "The control of the false discovery rate in multiple
    testing under dependency", Ann. Statist. 29:1165-1188; scipy's
    ``false_discovery_control(method="by")``) keeps the false-discovery rate at most alpha under
    any dependence between the p-values, so claims that share runs need no model of how they
    move together. Under the family's complete null its false-discovery rate is its family-wise
    error rate. Leaving out claims on their sizes alone keeps that bound: the choice does not
    depend on the p-values.

    Parameters
    ----------
    p : sequence of float, shape (claims,)
        Each claim's p-value for one side (NaN: none, taken as 1, which is always a valid p).
    smallest : sequence of float, shape (claims,)
        Each claim's smallest attainable p at its group sizes (NaN: it cannot be tested).
    alpha : float
        The family's false-discovery rate.

    Returns
    -------
    tested : ndarray of bool, shape (claims,)
        The claims Tarone's rule keeps in the family.
    adjusted : ndarray of float, shape (claims,)
        Benjamini-Yekutieli adjusted p over the tested claims (NaN for the others); a claim is
        rejected at the family's level when its adjusted p is at most alpha.
    """
    p = np.nan_to_num(np.asarray(p, float), nan=1.0)
    smallest = np.nan_to_num(np.asarray(smallest, float), nan=1.0)

    def level(family: int) -> float:
        return alpha / float(np.sum(1.0 / np.arange(1, family + 1)))

    tested = smallest < level(tarone_family(list(smallest), alpha, level)) if len(p) else np.zeros(0, bool)
    adjusted = np.full(len(p), np.nan)
    if tested.any():
        adjusted[tested] = false_discovery_control(np.clip(p[tested], 0.0, 1.0), method="by")
    return tested, adjusted


def holm_adjusted(p_values: pd.Series) -> pd.Series:
    """Holm's step-down adjusted p-values of ``p_values`` (NaN kept out of the family and kept NaN):
    the j-th smallest of K is max over i <= j of min(1, (K - i + 1) p_(i)). Hand-written: scipy has
    only the false-discovery corrections, and statsmodels is not a dependency."""
    p = p_values.dropna().astype(float)
    ordered = p.sort_values(kind="stable")
    steps = np.minimum(1.0, (len(ordered) - np.arange(len(ordered))) * ordered.to_numpy())
    adjusted = pd.Series(np.maximum.accumulate(steps), index=ordered.index)
    return adjusted.reindex(p_values.index)
