"""Linear centred kernel alignment (Kornblith et al. 2019, "Similarity of neural network
representations revisited", eq. 5), a second similarity besides RSA.

For representations of the same n items, ``A`` (n, d1) and ``B`` (n, d2), with every feature
(column) centred to mean zero::

    CKA(A, B) = ||B^T A||_F^2 / (||A^T A||_F ||B^T B||_F)

It is invariant to orthogonal transforms and isotropic scaling of either side (and, through
the centring, to translations), but not to general invertible linear maps. Values lie in
[0, 1]. Computed in float64.

A value that cannot be computed honestly is NaN, never a number: non-finite input (NaN or inf
anywhere, e.g. a diverged model's hidden states) and a side without variation (every item the
same). "Without variation" is decided per feature against the feature's own size, not by an
exact zero test, because centring a constant column in floating point leaves rounding residue
(see :data:`CONSTANT_RTOL`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from robustkit.measures.moments import CrossMoments

# A centred feature whose norm is at most this fraction of its uncentred norm holds rounding
# residue only and is set to exactly zero. Centring a constant float64 column leaves residue of
# ~eps * log2(n) of its size (pairwise-summed mean): ~2e-15 for n = 5000, three orders below.
# The smallest real variation a float32 input can hold -- one item off by one float32 ulp
# (6e-8 relative) -- is 6e-8 / sqrt(n) of the column's norm: 8e-10 at n = 5000, and above
# 1e-12 for any n below ~3e9. So the threshold separates the two for every realistic input.
CONSTANT_RTOL = 1e-12


def linear_cka(a: Tensor, b: Tensor) -> float:
    """Linear CKA of two representation sets of the same n items.

    Parameters
    ----------
    a : Tensor, shape (n, d1)
    b : Tensor, shape (n, d2)
        Row i of each is item i; d1 and d2 may differ.

    Returns
    -------
    float
        In [0, 1]. NaN when either input holds a NaN or an infinity, or when either side is
        constant: every feature's centred norm at most :data:`CONSTANT_RTOL` of its uncentred
        norm (only rounding residue left after centring).

    Raises
    ------
    ValueError
        Not 2-D, different n, or fewer than 2 items.
    """
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"expected 2-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"a and b must describe the same items: {a.shape[0]} vs {b.shape[0]} rows")
    if a.shape[0] < 2:
        raise ValueError(f"CKA needs at least 2 items, got {a.shape[0]}")
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        # NaN would propagate, and min(1.0, nan) is 1.0: report "unchanged" for broken input
        return math.nan
    a = _centred(a)
    b = _centred(b.to(a.device))
    if a.shape[0] < max(a.shape[1], b.shape[1]):
        # Fewer items than features: the n x n Gram form is cheaper, and equal, because
        # ||B^T A||_F^2 = <A A^T, B B^T>_F and ||A^T A||_F = ||A A^T||_F.
        gram_a, gram_b = a @ a.T, b @ b.T
        cross, norm_a, norm_b = (gram_a * gram_b).sum(), gram_a.norm(), gram_b.norm()
    else:
        cross = (b.T @ a).square().sum()
        norm_a, norm_b = (a.T @ a).norm(), (b.T @ b).norm()
    denominator = (norm_a * norm_b).item()
    if denominator == 0.0:  # exact: _centred zeroes features that are constant up to rounding
        return math.nan
    value = cross.item() / denominator
    if not math.isfinite(value):  # overflow of the products (entries past ~1e77): no number
        return math.nan
    return min(1.0, value)  # rounding can exceed 1 for identical inputs


def cka_layers(a: Tensor, b: Tensor) -> Tensor:
    """Linear CKA per layer.

    Parameters
    ----------
    a : Tensor, shape (n_layers, n, d1)
    b : Tensor, shape (n_layers, n, d2)

    Returns
    -------
    Tensor, shape (n_layers,), float64
    """
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0]:
        raise ValueError(
            f"expected two (n_layers, n, d) stacks with one layer count, got {tuple(a.shape)} and {tuple(b.shape)}"
        )
    return torch.tensor([linear_cka(a[i], b[i]) for i in range(a.shape[0])], dtype=torch.float64)


def _centred(x: Tensor) -> Tensor:
    """Float64 copy with each column's mean removed (the centring matrix H applied as H X).

    A column left with rounding residue only (centred norm <= :data:`CONSTANT_RTOL` x its
    uncentred norm) is set to zero: a constant side then gives exactly zero norms (NaN), not
    a ratio of residues (anything from ~1e-32 to 1).
    """
    x = x.to(torch.float64)
    centred = x - x.mean(dim=0, keepdim=True)
    residue = centred.norm(dim=0) <= CONSTANT_RTOL * x.norm(dim=0)
    return centred.masked_fill(residue, 0.0)


def from_moments(m: CrossMoments) -> float:
    """Linear CKA from the additive moments of (a, b) (:class:`robustkit.measures.moments.CrossMoments`).

    ||C_ab||_F^2 / (||C_aa||_F ||C_bb||_F) with the centred cross-products C = X^T X - s s^T / n:
    what the token bootstrap (:mod:`robustkit.measures.half_sampling`) evaluates on each subset.
    Pass moments of column-centred inputs (any fixed shift is exact; the full sample's mean
    keeps the subtraction from cancelling). NaN where :func:`linear_cka` says so.
    """
    cross = m.centred_cross().square().sum().item()
    denominator = (m.centred_a().norm() * m.centred_b().norm()).item()
    if not math.isfinite(cross) or not math.isfinite(denominator) or denominator == 0.0:
        return math.nan
    return min(1.0, cross / denominator)
