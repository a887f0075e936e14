"""Representational Similarity Analysis (Laakso and Cottrell 2000), as He et al. 2021 §2.2 use it.

For two sets of representations of the same n items, ``a`` (n, d1) and ``b`` (n, d2):

1. the n x n cosine-similarity matrix of each set, S_a and S_b;
2. RSA = Pearson correlation of the two matrices' strict upper triangles (the N = n(n-1)/2
   pairs i < j; the diagonal is all ones and the lower triangle repeats the upper one).

Neither matrix is ever held whole. Two exact (up to rounding) ways to get the five Pearson sums over the pairs
(sum x, sum y, sum x^2, sum y^2, sum xy), chosen by cost (``method="auto"``):

``gram``
    With unit rows A and B, S_a = A A^T, so every sum over all n^2 entries has a d x d form:
    sum S_a = ||1^T A||^2, sum S_a^2 = ||A^T A||_F^2, sum S_a * S_b = ||A^T B||_F^2; the upper
    triangle is (all - diagonal) / 2. Cost O(n d^2), memory O(n d + d^2): for n = 5000,
    d = 384 about 4x fewer FLOPs than ``chunked``. The rows are first written around their
    mean direction, which shifts every similarity by one constant (Pearson r is unchanged) and
    keeps these raw sums from cancelling: BERT representations are anisotropic, their
    similarities sit in a narrow band far from 0. Float64.
``chunked``
    The similarity matrices ``chunk`` rows at a time, each row-chunk against the columns at or
    after it (the upper triangle only), with the chunk's centred moments merged into running
    totals (Chan et al. 1979), so nothing cancels. Cost O(n^2 d), memory two ``chunk x n``
    float64 matrices. Cheaper than ``gram`` when d is not small next to n.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from robustkit.measures.moments import CrossMoments

DEFAULT_CHUNK = 1024
METHODS = ("auto", "gram", "chunked")


def rsa(
    a: Tensor, b: Tensor, chunk: int = DEFAULT_CHUNK, dtype: torch.dtype = torch.float64, method: str = "auto"
) -> float:
    """RSA of two representation sets of the same n items.

    Parameters
    ----------
    a : Tensor, shape (n, d1)
    b : Tensor, shape (n, d2)
        Row i of each is item i (a token); d1 and d2 may differ.
    chunk : int
        ``chunked`` only: rows of the similarity matrices computed at a time; memory is about
        ``2 * chunk * n * 8`` bytes (80 MB for chunk 1024, n 5000).
    dtype : torch.dtype
        ``chunked`` only: precision of the cosine similarities (float32 halves time and memory
        at ~1e-7 error per similarity). Moments are float64 in both methods.
    method : str
        ``auto`` (the cheaper of the two for these shapes), ``gram`` or ``chunked``.

    Returns
    -------
    float
        Pearson r in [-1, 1]. NaN (never a number that reads as a result) when either input
        holds a NaN or an infinity (e.g. the hidden states of a diverged model), or when either
        matrix is constant over the upper triangle (e.g. every item has the same direction), up
        to rounding. A zero vector has similarity 0 with everything.

    Raises
    ------
    ValueError
        Not 2-D, different n, fewer than 3 items, chunk < 1 or an unknown method.
    """
    _check_pair(a, b, ndim=2)
    return _rsa_one(a, b.to(a.device), chunk, dtype, method)


def rsa_layers(
    a: Tensor, b: Tensor, chunk: int = DEFAULT_CHUNK, dtype: torch.dtype = torch.float64, method: str = "auto"
) -> Tensor:
    """RSA per layer of two stacks of representations of the same n items.

    Layers are taken one after the other: each is already one large matrix product (or a few),
    and a batched (bmm) version measured no faster on CPU while holding every layer's chunk.

    Parameters
    ----------
    a : Tensor, shape (n_layers, n, d1)
    b : Tensor, shape (n_layers, n, d2)
    chunk, dtype, method
        As for :func:`rsa`.

    Returns
    -------
    Tensor, shape (n_layers,), float64
        RSA of ``a[l]`` and ``b[l]`` for each layer l; NaN for a layer as :func:`rsa` says
        (non-finite or constant), the other layers unaffected.
    """
    _check_pair(a, b, ndim=3)
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"a has {a.shape[0]} layers, b has {b.shape[0]}")
    values = [_rsa_one(a[i], b[i].to(a.device), chunk, dtype, method) for i in range(a.shape[0])]
    return torch.tensor(values, dtype=torch.float64)


def choose_method(n: int, d1: int, d2: int) -> str:
    """``gram`` or ``chunked``, whichever needs fewer multiply-adds for these shapes."""
    gram = n * (d1 * d1 + d2 * d2 + d1 * d2)  # A^T A, B^T B, A^T B
    chunked = n * n * (d1 + d2) // 2  # the upper triangles of A A^T and B B^T
    return "gram" if gram <= chunked else "chunked"


def _check_pair(a: Tensor, b: Tensor, ndim: int) -> None:
    if a.ndim != ndim or b.ndim != ndim:
        raise ValueError(f"expected {ndim}-D tensors, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[-2] != b.shape[-2]:
        raise ValueError(f"a and b must describe the same items: {a.shape[-2]} vs {b.shape[-2]} rows")
    if a.shape[-2] < 3:
        raise ValueError(f"RSA needs at least 3 items (2 pairs), got {a.shape[-2]}")


def _rsa_one(a: Tensor, b: Tensor, chunk: int, dtype: torch.dtype, method: str) -> float:
    if method not in METHODS:
        raise ValueError(f"unknown RSA method {method!r}; known: {', '.join(METHODS)}")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    if not (_finite(a) and _finite(b)):
        # a NaN or inf would propagate to r = NaN, which the clip to [-1, 1] turned into 1.0
        # ("unchanged"); say NaN outright instead of relying on propagation
        return math.nan
    if method == "auto":
        method = choose_method(a.shape[0], a.shape[1], b.shape[1])
    if method == "gram":
        return _rsa_gram(_unit_rows(a, torch.float64), _unit_rows(b, torch.float64))
    return _rsa_chunked(_unit_rows(a, dtype), _unit_rows(b, dtype), chunk)


def _finite(x: Tensor) -> bool:
    return bool(torch.isfinite(x).all())


def _unit_rows(x: Tensor, dtype: torch.dtype) -> Tensor:
    """Rows scaled to unit L2 norm (zero rows stay zero), so ``x @ x.T`` is cosine similarity.

    Normalised in float64 after dividing each row by its largest magnitude, then cast to
    ``dtype``: a squared norm taken in ``dtype`` overflows for entries past ~1e19 in float32
    (the row would silently become zero, similarity 0), and one in float64 past ~1e154.
    """
    x = x.to(torch.float64)
    tiny = torch.finfo(torch.float64).tiny
    x = x / x.abs().amax(dim=1, keepdim=True).clamp_min(tiny)
    return (x / x.norm(dim=1, keepdim=True).clamp_min(tiny)).to(dtype)


# --- gram: sums over the pairs from d x d products ----------------------------------------------


def _rsa_gram(a: Tensor, b: Tensor) -> float:
    """Pearson r of the strict upper triangles of ``a @ a.T`` and ``b @ b.T`` (unit rows, float64).

    Written around the mean unit row m, a_i = m + r_i, so that a_i . a_j - m . m =
    u_i + u_j + r_i . r_j with u_i = m . r_i: the sums below are then of values spread around
    zero, not around the (anisotropic, large) mean similarity, and nothing cancels.
    """
    n = a.shape[0]
    pairs = n * (n - 1) / 2
    x, y = _Centred(a), _Centred(b)
    # Sums over all n^2 entries of x_ij = a_i . a_j - m.m (and y_ij), then minus the diagonal.
    sum_x = (x.total - x.diag.sum()) / 2
    sum_y = (y.total - y.diag.sum()) / 2
    sum_xx = (x.square_total - x.diag.square().sum()) / 2
    sum_yy = (y.square_total - y.diag.square().sum()) / 2
    cross = (
        2 * n * (x.u * y.u).sum()
        + 2 * x.u.sum() * y.u.sum()
        + 2 * (x.u * y.residual_sums).sum()
        + 2 * (y.u * x.residual_sums).sum()
        + (x.r.T @ y.r).square().sum()
    )
    sum_xy = (cross - (x.diag * y.diag).sum()) / 2
    mean_x, mean_y = sum_x / pairs, sum_y / pairs
    var_x = (sum_xx / pairs - mean_x**2).item()
    var_y = (sum_yy / pairs - mean_y**2).item()
    cov = (sum_xy / pairs - mean_x * mean_y).item()
    # Spread at the level of rounding error is no signal: call the matrix constant.
    noise = (64 * torch.finfo(torch.float64).eps) ** 2
    if var_x <= noise or var_y <= noise:
        return math.nan
    return _clip(cov / math.sqrt(var_x * var_y))


class _Centred:
    """Unit rows a_i = m + r_i around their mean m, and the n x n sums of x_ij = a_i.a_j - m.m.

    Exact for any m (the terms in ``residual_sums`` vanish when m is the exact mean).
    """

    def __init__(self, a: Tensor) -> None:
        mean = a.mean(dim=0)
        self.r = a - mean  # (n, d)
        self.u = self.r @ mean  # (n,): m . r_i
        self.residual_sums = self.r @ self.r.sum(dim=0)  # (n,): r_i . sum_j r_j, ~0
        n = a.shape[0]
        # x_ii = 2 u_i + |r_i|^2 (= |a_i|^2 - m.m, written without cancellation)
        self.diag = 2 * self.u + self.r.square().sum(dim=1)
        # sum_ij x_ij = 2n sum u + |sum r|^2
        self.total = 2 * n * self.u.sum() + self.r.sum(dim=0).square().sum()
        # sum_ij x_ij^2 = 2n sum u^2 + 2 (sum u)^2 + 4 sum_i u_i (r_i . sum r) + ||r^T r||_F^2
        self.square_total = (
            2 * n * self.u.square().sum()
            + 2 * self.u.sum() ** 2
            + 4 * (self.u * self.residual_sums).sum()
            + (self.r.T @ self.r).square().sum()
        )


# --- chunked: centred moments of row-chunks of the similarity matrices, merged -----------------


def _rsa_chunked(a: Tensor, b: Tensor, chunk: int) -> float:
    """Pearson r of the strict upper triangles of ``a @ a.T`` and ``b @ b.T`` (unit rows)."""
    n = a.shape[0]
    total = _Moments()
    for start in range(0, n - 1, chunk):
        stop = min(start + chunk, n)
        total.merge(_chunk_moments(a, b, start, stop))
    # Spread at the level of the similarities' rounding error is no signal: call it constant.
    return total.pearson(noise=64 * torch.finfo(a.dtype).eps)


def _chunk_moments(a: Tensor, b: Tensor, start: int, stop: int) -> _Moments:
    """Moments over the pairs (i, j), start <= i < stop, i < j < n."""
    # Columns before `start` belong to earlier chunks' rows (the pair (j, i) with j < i).
    sa = (a[start:stop] @ a[start:].T).to(torch.float64)
    sb = (b[start:stop] @ b[start:].T).to(torch.float64)
    rows = stop - start
    # Only the leading rows x rows block holds pairs with j <= i; zero them so that plain sums
    # and dot products over the whole chunk count the upper-triangle pairs only.
    lower = torch.ones(rows, rows, dtype=torch.bool, device=sa.device).tril()
    moments = _Moments(count=rows * (a.shape[0] - start) - rows * (rows + 1) // 2)
    for s in (sa, sb):
        s[:, :rows].masked_fill_(lower, 0.0)
    moments.mean_x = (sa.sum() / moments.count).item()
    moments.mean_y = (sb.sum() / moments.count).item()
    # Centre in place (no third chunk-sized buffer), then re-zero the excluded entries.
    sa.sub_(moments.mean_x)[:, :rows].masked_fill_(lower, 0.0)
    sb.sub_(moments.mean_y)[:, :rows].masked_fill_(lower, 0.0)
    flat_a, flat_b = sa.view(-1), sb.view(-1)
    moments.m2_x = torch.dot(flat_a, flat_a).item()
    moments.m2_y = torch.dot(flat_b, flat_b).item()
    moments.c_xy = torch.dot(flat_a, flat_b).item()
    return moments


class _Moments:
    """Count, means and centred second moments of paired samples, mergeable (Chan et al.)."""

    def __init__(self, count: int = 0) -> None:
        self.count = count
        self.mean_x = self.mean_y = 0.0
        self.m2_x = self.m2_y = self.c_xy = 0.0

    def merge(self, other: _Moments) -> None:
        if other.count == 0:
            return
        total = self.count + other.count
        dx, dy = other.mean_x - self.mean_x, other.mean_y - self.mean_y
        weight = self.count * other.count / total
        self.m2_x += other.m2_x + dx * dx * weight
        self.m2_y += other.m2_y + dy * dy * weight
        self.c_xy += other.c_xy + dx * dy * weight
        self.mean_x += dx * other.count / total
        self.mean_y += dy * other.count / total
        self.count = total

    def pearson(self, noise: float = 0.0) -> float:
        """Pearson r; NaN if either standard deviation is at most ``noise`` x max(1, |mean|)."""
        for m2, mean in ((self.m2_x, self.mean_x), (self.m2_y, self.mean_y)):
            if math.sqrt(m2 / self.count) <= noise * max(1.0, abs(mean)):
                return math.nan
        return _clip(self.c_xy / math.sqrt(self.m2_x * self.m2_y))


def _clip(r: float) -> float:
    """Rounding can push |r| a hair past 1 for identical inputs; NaN stays NaN.

    ``min(1.0, nan)`` is 1.0 in Python (the comparison with NaN is false), which reported a
    broken input as "unchanged": test for NaN before clipping.
    """
    if math.isnan(r):
        return r
    return max(-1.0, min(1.0, r))


# --- from additive moments: the token bootstrap (robustkit.measures.half_sampling) ------------------


def unit_rows(x: Tensor) -> Tensor:
    """Rows of ``x`` scaled to unit L2 norm in float64 (zero rows stay zero): cosine geometry."""
    return _unit_rows(x, torch.float64)


def from_unit_moments(m: CrossMoments, shift_a: Tensor, shift_b: Tensor) -> float:
    """RSA from the moments of shifted unit rows, r_i = unit(a_i) - shift_a (and b's).

    The gram method's sums (see :func:`_rsa_gram`), written in the additive sums of
    :class:`robustkit.measures.moments.CrossMoments` of r (the shift plays the mean unit row's
    part: exact for any shift, free of cancellation when it is near the mean), so that the RSA
    of any subset of items is a function of the subset's summed moments.

    Parameters
    ----------
    m : CrossMoments
        Of ``unit_rows(a) - shift_a`` and ``unit_rows(b) - shift_b`` over the items.
    shift_a, shift_b : Tensor, shapes (d1,), (d2,), float64

    Returns
    -------
    float
        Pearson r of the cosine similarities over the pairs i < j, as :func:`rsa`; NaN for a
        constant side.
    """
    n = m.n
    if n < 3:
        return math.nan
    c, e = shift_a.to(torch.float64), shift_b.to(torch.float64)
    su, sv = c @ m.sum_a, e @ m.sum_b  # sums of u_i = c . r_i and v_i = e . r'_i
    suu, svv, suv = c @ m.aa @ c, e @ m.bb @ e, c @ m.ab @ e
    # sums over all n^2 entries of x_ij = s_ij - c.c (and y_ij), then of the diagonal
    total_x, total_y = 2 * n * su + m.sum_a @ m.sum_a, 2 * n * sv + m.sum_b @ m.sum_b
    square_x = 2 * n * suu + 2 * su**2 + 4 * c @ m.aa @ m.sum_a + m.aa.square().sum()
    square_y = 2 * n * svv + 2 * sv**2 + 4 * e @ m.bb @ m.sum_b + m.bb.square().sum()
    cross = 2 * n * suv + 2 * su * sv + 2 * c @ m.ab @ m.sum_b + 2 * m.sum_a @ m.ab @ e + m.ab.square().sum()
    diag_x, diag_y = 2 * su + m.k, 2 * sv + m.l
    diag_xx, diag_yy = 4 * suu + 4 * c @ m.a_k + m.kk, 4 * svv + 4 * e @ m.b_l + m.ll
    diag_xy = 4 * suv + 2 * c @ m.a_l + 2 * e @ m.b_k + m.kl
    pairs = n * (n - 1) / 2
    mean_x, mean_y = (total_x - diag_x) / 2 / pairs, (total_y - diag_y) / 2 / pairs
    var_x = ((square_x - diag_xx) / 2 / pairs - mean_x**2).item()
    var_y = ((square_y - diag_yy) / 2 / pairs - mean_y**2).item()
    cov = ((cross - diag_xy) / 2 / pairs - mean_x * mean_y).item()
    noise = (64 * torch.finfo(torch.float64).eps) ** 2
    if var_x <= noise or var_y <= noise:
        return math.nan
    return _clip(cov / math.sqrt(var_x * var_y))
