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
"""

from __future__ import annotations

from collections.abc import Sequence


def tarone_family(smallest: Sequence[float], alpha: float) -> int:
    """Tarone's family size: the smallest K >= 1 with #{i: smallest[i] < alpha / K} <= K.

    Parameters
    ----------
    smallest : sequence of float, shape (cells,)
        Each cell's smallest attainable p-value at its group sizes.
    alpha : float
        The claim's family-wise level.

    Returns
    -------
    int
        K; a cell is testable when ``smallest[i] < alpha / K``. 1 for no cells.
    """
    for family in range(1, len(smallest) + 1):
        if sum(p < alpha / family for p in smallest) <= family:
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
