"""How many directions a weight update uses: the spectrum of Delta W = W_tuned - W_0.

Two numbers of the singular values s_1 >= s_2 >= ... >= 0 of one update matrix:

- :func:`energy_rank`: the smallest r with sum_{i<=r} s_i^2 >= ``fraction`` * sum_i s_i^2, the
  rank of the best rank-r approximation that keeps ``fraction`` of the update's squared Frobenius
  norm (Eckart-Young). Biderman et al. 2024 ("LoRA Learns Less and Forgets Less", arXiv
  2405.09673) measure the rank "needed to explain 90% of the variance" of a full fine-tuning
  update this way (as recalled; to check against their section 6) and compare it with LoRA's
  ranks.
- :func:`effective_rank`: Roy and Vetterli 2007's effective rank exp(H(p)), p_i = s_i / sum s
  and H the Shannon entropy in nats: r for r equal singular values, between 1 and the number of
  nonzero ones otherwise, and continuous (no threshold to pick).

The entropy is scipy's (``scipy.stats.entropy``); the rest is a cumulative sum. No maintained
package computes either number from singular values (numpy's ``matrix_rank`` counts values
above a tolerance, which is neither). Tested on planted low-rank updates whose numbers are
known in closed form.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numpy.typing import ArrayLike
from scipy import stats


def singular_values(matrix: ArrayLike) -> np.ndarray:
    """Singular values of a matrix, largest first (float64).

    Parameters
    ----------
    matrix : array or Tensor, shape (m, n)

    Returns
    -------
    ndarray, shape (min(m, n),)
    """
    matrix = torch.as_tensor(matrix, dtype=torch.float64)
    if matrix.ndim != 2:
        raise ValueError(f"expected a matrix, got shape {tuple(matrix.shape)}")
    return torch.linalg.svdvals(matrix).numpy()  # torch's: it keeps to torch's thread count


def energy_rank(values: ArrayLike, fraction: float = 0.9) -> int:
    """The smallest r whose top-r singular values hold ``fraction`` of the squared norm.

    Parameters
    ----------
    values : array, shape (n,)
        Singular values (any order; nonnegative).
    fraction : float
        In (0, 1].

    Returns
    -------
    int
        0 for an all-zero update (no direction at all), else 1..n.
    """
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    energy = np.sort(np.asarray(values, dtype=np.float64))[::-1] ** 2
    total = energy.sum()
    if total == 0:
        return 0
    # a relative tolerance: equal singular values must reach e.g. 0.9 at exactly r = 0.9 n
    reached = np.cumsum(energy) >= fraction * total * (1 - 1e-12)
    return int(np.argmax(reached)) + 1


def effective_rank(values: ArrayLike) -> float:
    """Roy and Vetterli 2007's effective rank exp(H(s / sum s)) of singular values ``values``.

    Returns
    -------
    float
        In [1, number of nonzero values]; NaN for an all-zero update.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.sum() == 0:
        return math.nan
    return float(np.exp(stats.entropy(values)))  # entropy() normalises to s / sum s itself
