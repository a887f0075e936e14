"""Additive sufficient statistics of two paired representation sets, from which the linear
similarity measures are computed: linear and debiased CKA, Procrustes, and RSA (on unit rows).

For n items with representations ``a`` (n, d1) and ``b`` (n, d2), every one of these measures
is a function of sums over the items: sum a_i, sum a_i a_i^T, sum a_i b_i^T, ... (the d x d
forms of the n x n Gram matrices). Sums add, so the statistics of any subset of items are the
sum of its parts' statistics: :mod:`robustkit.measures.half_sampling` resamples groups of tokens
by adding their moments, never touching the n x d arrays again.

Computed in float64. Callers that want exactness for the shift-invariant measures (CKA,
Procrustes) pass representations centred by their column means first: uncentred BERT states
have large per-feature offsets, and ``A^T A - s s^T / n`` would cancel them away.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import torch
from torch import Tensor


@dataclass(frozen=True)
class CrossMoments:
    """Sums over n items of two paired representation sets ``a`` (n, d1) and ``b`` (n, d2).

    With k_i = ||a_i||^2 and l_i = ||b_i||^2 (the diagonals of the linear Gram matrices
    K = a a^T and L = b b^T), all float64:

    Attributes
    ----------
    n : int
        Items.
    sum_a, sum_b : Tensor, shapes (d1,), (d2,)
    aa, bb, ab : Tensor, shapes (d1, d1), (d2, d2), (d1, d2)
        a^T a, b^T b, a^T b.
    k, l, kl, kk, ll : Tensor, shape ()
        sum k_i, sum l_i, sum k_i l_i, sum k_i^2, sum l_i^2.
    a_k, a_l : Tensor, shape (d1,)
        sum k_i a_i, sum l_i a_i.
    b_k, b_l : Tensor, shape (d2,)
        sum k_i b_i, sum l_i b_i.
    """

    n: int
    sum_a: Tensor
    sum_b: Tensor
    aa: Tensor
    bb: Tensor
    ab: Tensor
    k: Tensor
    l: Tensor
    kl: Tensor
    kk: Tensor
    ll: Tensor
    a_k: Tensor
    a_l: Tensor
    b_k: Tensor
    b_l: Tensor

    @classmethod
    def of(cls, a: Tensor, b: Tensor) -> CrossMoments:
        """The moments of ``a`` (n, d1) and ``b`` (n, d2), rows paired (float64)."""
        if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[0]:
            raise ValueError(f"expected (n, d1) and (n, d2) with one n, got {tuple(a.shape)} and {tuple(b.shape)}")
        a = a.to(torch.float64)
        b = b.to(a.device, torch.float64)
        k, l = a.square().sum(dim=1), b.square().sum(dim=1)
        return cls(
            n=a.shape[0],
            sum_a=a.sum(dim=0),
            sum_b=b.sum(dim=0),
            aa=a.T @ a,
            bb=b.T @ b,
            ab=a.T @ b,
            k=k.sum(),
            l=l.sum(),
            kl=(k * l).sum(),
            kk=k.square().sum(),
            ll=l.square().sum(),
            a_k=k @ a,
            a_l=l @ a,
            b_k=k @ b,
            b_l=l @ b,
        )

    def __add__(self, other: CrossMoments) -> CrossMoments:
        return CrossMoments(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def swapped(self) -> CrossMoments:
        """The moments of (b, a)."""
        return CrossMoments(
            n=self.n,
            sum_a=self.sum_b,
            sum_b=self.sum_a,
            aa=self.bb,
            bb=self.aa,
            ab=self.ab.T,
            k=self.l,
            l=self.k,
            kl=self.kl,
            kk=self.ll,
            ll=self.kk,
            a_k=self.b_l,
            a_l=self.b_k,
            b_k=self.a_l,
            b_l=self.a_k,
        )

    def centred_cross(self) -> Tensor:
        """(a - mean a)^T (b - mean b), shape (d1, d2)."""
        return self.ab - torch.outer(self.sum_a, self.sum_b) / self.n

    def centred_a(self) -> Tensor:
        """(a - mean a)^T (a - mean a), shape (d1, d1)."""
        return self.aa - torch.outer(self.sum_a, self.sum_a) / self.n

    def centred_b(self) -> Tensor:
        """(b - mean b)^T (b - mean b), shape (d2, d2)."""
        return self.bb - torch.outer(self.sum_b, self.sum_b) / self.n


def stack_sum(parts: list[CrossMoments]) -> CrossMoments:
    """The moments of the union of disjoint item sets (their sum)."""
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def finite_ratio(numerator: float, denominator: float) -> float:
    """numerator / denominator, NaN when the denominator is not positive or either is not finite."""
    if not (math.isfinite(numerator) and math.isfinite(denominator)) or denominator <= 0:
        return math.nan
    return numerator / denominator
