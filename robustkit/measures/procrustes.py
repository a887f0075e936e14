"""Orthogonal Procrustes distance between two representation sets (Ding, Denain and Steinhardt
2021, "Grounding representation similarity with statistical testing", §2; Schönemann 1966)::

    d(A, B) = min_R ||A - B R||_F^2 = ||A||_F^2 + ||B||_F^2 - 2 ||A^T B||_*   (R orthogonal)

with A and B centred (each column's mean removed) and scaled to unit Frobenius norm, so
d = 2 - 2 ||A^T B||_* lies in [0, 2]: 0 for representations equal up to a rotation or
reflection and isotropic scaling (and translation), 2 at most. ``||.||_*`` is the nuclear norm
(sum of singular values) of the d1 x d2 cross-covariance; different widths are allowed (the
narrower side is padded with zero features, which changes nothing). Unlike CKA it is a distance
(small = similar), and Ding et al. find it more sensitive to changes in the low-variance
directions that CKA ignores.

Written here (a singular value decomposition of A^T B) rather than with
``scipy.linalg.orthogonal_procrustes``, which returns the rotation, not the distance, and needs
equal widths; the test checks the distance against that rotation's residual. Computed from
:class:`robustkit.measures.moments.CrossMoments` (so the token bootstrap resamples it by
adding moments) in float64. NaN for non-finite input or a side without variation.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from robustkit.measures.moments import CrossMoments, finite_ratio


def procrustes_distance(a: Tensor, b: Tensor) -> float:
    """Orthogonal Procrustes distance of two representation sets of the same n items.

    Parameters
    ----------
    a : Tensor, shape (n, d1)
    b : Tensor, shape (n, d2)

    Returns
    -------
    float
        In [0, 2]; 0 for identical inputs (up to rounding). NaN as the module says.

    Raises
    ------
    ValueError
        Not 2-D, different n, or fewer than 2 items.
    """
    if a.ndim != 2 or b.ndim != 2 or a.shape[0] != b.shape[0]:
        raise ValueError(f"expected (n, d1) and (n, d2) with one n, got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[0] < 2:
        raise ValueError(f"the Procrustes distance needs at least 2 items, got {a.shape[0]}")
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return math.nan
    a, b = a.to(torch.float64), b.to(a.device, torch.float64)
    return from_moments(CrossMoments.of(a - a.mean(dim=0), b - b.mean(dim=0)))


def from_moments(m: CrossMoments) -> float:
    """The distance from the moments of (a, b) (any translation of either side)."""
    norm_a = float(torch.trace(m.centred_a()))  # ||A - mean||_F^2
    norm_b = float(torch.trace(m.centred_b()))
    nuclear = float(torch.linalg.svdvals(m.centred_cross()).sum())  # the nuclear norm
    similarity = finite_ratio(nuclear, math.sqrt(max(norm_a, 0.0) * max(norm_b, 0.0)))
    if math.isnan(similarity):
        return math.nan
    return max(0.0, 2.0 - 2.0 * min(1.0, similarity))  # rounding can push it a hair past the ends
