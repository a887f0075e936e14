"""Debiased linear CKA: linear CKA with the unbiased estimator of HSIC (Song et al. 2012, "Feature
selection via dependence maximization", eq. 5), as Nguyen, Raghu and Kornblith (2021, "Do wide
and deep networks learn the same things?", §3) use it::

    dCKA(A, B) = HSIC_1(K, L) / sqrt(HSIC_1(K, K) HSIC_1(L, L)),   K = A A^T, L = B B^T

    HSIC_1(K, L) = [tr(K~ L~) + 1^T K~ 1 1^T L~ 1 / ((n-1)(n-2)) - 2/(n-2) 1^T K~ L~ 1] / (n (n-3))

with K~, L~ the Gram matrices with their diagonals set to zero. The biased estimator behind
plain linear CKA (:mod:`robustkit.measures.cka`) overstates the similarity of unrelated
representations when the width d is not small next to n (two independent Gaussian feature sets
of n = 200, d = 400 have linear CKA near 0.67); HSIC_1 is a U-statistic, unbiased for HSIC, so
independent features give values near 0 (either sign). Invariant, like linear CKA, to
orthogonal transforms, isotropic scaling and translation of either side.

Computed in the feature space, O(n d^2), through the additive sums of
:class:`robustkit.measures.moments.CrossMoments` (every n x n term above has a d x d form:
tr(K~ L~) = ||A^T B||_F^2 - sum_i k_i l_i, ...), never forming an n x n matrix. Written here
rather than taken from a package: no registry package ships debiased CKA as a library function
(Kornblith's reference is a notebook); the test checks it against that notebook's Gram-matrix
formulation to 1e-10.

A value that cannot be computed honestly is NaN: non-finite input, a side without variation
(HSIC_1(K, K) <= 0), fewer than 4 items (the estimator divides by n - 3).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from robustkit.measures.moments import CrossMoments, finite_ratio

MIN_ITEMS = 4


def debiased_linear_cka(a: Tensor, b: Tensor) -> float:
    """Debiased linear CKA of two representation sets of the same n items.

    Parameters
    ----------
    a : Tensor, shape (n, d1)
    b : Tensor, shape (n, d2)

    Returns
    -------
    float
        At most 1 (1 for identical inputs up to rounding); near 0, either sign, for unrelated
        ones. NaN as the module says.

    Raises
    ------
    ValueError
        Not 2-D or different n.
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[0]:
        raise ValueError(f"expected (n, d1) and (n, d2) with one n, got {tuple(a.shape)} and {tuple(b.shape)}")
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return math.nan
    a, b = a.to(torch.float64), b.to(a.device, torch.float64)
    # centring is exact for HSIC_1 (a translation-invariant U-statistic) and keeps the sums small
    return from_moments(CrossMoments.of(a - a.mean(dim=0), b - b.mean(dim=0)))


def from_moments(m: CrossMoments) -> float:
    """Debiased linear CKA from the moments of (a, b) (any translation of either side)."""
    if m.n < MIN_ITEMS:
        return math.nan
    cross = _hsic(
        m.n,
        m.ab.square().sum() - m.kl,
        m.sum_a @ m.sum_a - m.k,
        m.sum_b @ m.sum_b - m.l,
        m.sum_a @ m.ab @ m.sum_b - m.sum_a @ m.a_l - m.sum_b @ m.b_k + m.kl,
    )
    self_a = _hsic(
        m.n,
        m.aa.square().sum() - m.kk,
        m.sum_a @ m.sum_a - m.k,
        m.sum_a @ m.sum_a - m.k,
        m.sum_a @ m.aa @ m.sum_a - 2 * m.sum_a @ m.a_k + m.kk,
    )
    self_b = _hsic(
        m.n,
        m.bb.square().sum() - m.ll,
        m.sum_b @ m.sum_b - m.l,
        m.sum_b @ m.sum_b - m.l,
        m.sum_b @ m.bb @ m.sum_b - 2 * m.sum_b @ m.b_l + m.ll,
    )
    if not (self_a > 0 and self_b > 0):
        return math.nan
    value = finite_ratio(cross, math.sqrt(self_a * self_b))
    return value if math.isnan(value) else min(1.0, value)  # rounding can exceed 1 for identical inputs


def _hsic(n: int, trace: Tensor, one_k: Tensor, one_l: Tensor, one_kl: Tensor) -> float:
    """HSIC_1 from tr(K~L~), 1^T K~ 1, 1^T L~ 1 and 1^T K~ L~ 1 (Song et al. 2012, eq. 5)."""
    value = trace + one_k * one_l / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * one_kl
    return float(value) / (n * (n - 3))
