"""Intruder dimensions of a tuned weight matrix (Shuttleworth et al. 2024, "LoRA vs Full
Fine-tuning: An Illusion of Equivalence", arXiv 2410.21228).

For a pre-trained matrix W_0 and its tuned version W (both d_out x d_in), take the singular
value decompositions W_0 = U_0 S_0 V_0^T and W = U S V^T. Each of the top k left singular
vectors u_j of W (columns of U, largest singular values first) gets its largest absolute
cosine with any left singular vector of W_0::

    c_j = max_i |u_j . u0_i|        (unit vectors: the cosine is the dot product)

and u_j is an *intruder dimension* when c_j < epsilon: a high-ranking direction of the tuned
matrix that none of the pre-trained directions resembles. The absolute value makes the measure
blind to the sign of a singular vector, which the decomposition does not fix. The count over
j <= k is the matrix's number of intruder dimensions.

The settings are the paper's as implemented in huggingface/peft
(``peft/tuners/lora/intruders.py``, ``reduce_intruder_dimension``: ``top_k=10``,
``threshold_epsilon=0.5``, left singular vectors of the merged ``W + dW`` against the base
``W``), which agrees with the paper's definition as recalled (k = 10; the paper sweeps epsilon;
to check against the paper's section 3). The analysis keeps c_j for every j <= k, so a count
at any epsilon is a statistic of the same frame.

Written here: the measure is two SVDs and a maximum; peft's function couples it to a PEFT
LoRA model and rewrites the adapter, and no maintained package exposes the count on bare
matrices. Tested against a planted rotation whose count is known in closed form.
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import ArrayLike


def max_cosines(tuned: ArrayLike, base: ArrayLike, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The top-``k`` singular values of ``tuned`` and each one's largest |cosine| with ``base``.

    Parameters
    ----------
    tuned, base : array or Tensor, shape (d_out, d_in)
        The tuned and the pre-trained matrix (computed in float64, on the tensors' device).
    k : int
        Top singular vectors of ``tuned`` compared (at most min(d_out, d_in)).

    Returns
    -------
    singular_values : ndarray, shape (k,)
        Of ``tuned``, largest first (the units of the weights).
    cosines : ndarray, shape (k,)
        c_j = max_i |u_j . u0_i| over the left singular vectors u0_i of ``base`` (in [0, 1]).

    Raises
    ------
    ValueError
        Matrices of different shapes, not 2-D, or k outside 1..min(d_out, d_in).
    """
    tuned, base = torch.as_tensor(tuned, dtype=torch.float64), torch.as_tensor(base, dtype=torch.float64)
    if tuned.ndim != 2 or tuned.shape != base.shape:
        raise ValueError(f"expected two matrices of one shape, got {tuple(tuned.shape)} and {tuple(base.shape)}")
    if not 1 <= k <= min(tuned.shape):
        raise ValueError(f"k must be in 1..{min(tuned.shape)}, got {k}")
    # torch's decomposition: it keeps to torch's thread count (numpy's BLAS threads contend)
    u_tuned, s_tuned, _ = torch.linalg.svd(tuned, full_matrices=False)
    u_base, _, _ = torch.linalg.svd(base, full_matrices=False)
    overlaps = (u_tuned[:, :k].T @ u_base).abs()  # (k, rank of base): |cosines|
    return s_tuned[:k].cpu().numpy(), np.minimum(overlaps.max(dim=1).values.cpu().numpy(), 1.0)


def intruder_count(cosines: ArrayLike, epsilon: float) -> int:
    """How many of the compared singular vectors are intruders: c_j < ``epsilon``.

    Parameters
    ----------
    cosines : array, shape (k,)
        :func:`max_cosines`'s second output.
    epsilon : float
        The threshold, in (0, 1].
    """
    if not 0 < epsilon <= 1:
        raise ValueError(f"epsilon must be in (0, 1], got {epsilon}")
    return int((np.asarray(cosines, dtype=np.float64) < epsilon).sum())
