"""Confidence intervals for a similarity measure from a bootstrap over the token sample:
random-group half-sampling of the tokens, with basic (reflected) intervals.

A per-layer similarity is computed on one sample of n tokens; another sample would give another
value. The usual bootstrap (resample the n tokens with replacement) is wrong here: every
measure of :mod:`robustkit.measures` compares *pairs* of tokens, and a token drawn twice makes
a pair of a token with its own copy (cosine 1 in both models), a fake pair that inflates RSA and
puts back part of the bias that debiased CKA removes. So the resamples have no duplicates:

1. the n tokens are dealt at random (``seed``) into G groups of (nearly) equal size;
2. each resample is a random half of the groups, drawn without replacement, and the measure is
   computed on its tokens;
3. with theta the full-sample value and q the quantiles of the resampled values, the interval
   is the *basic* bootstrap interval [2 theta - q_(1 - alpha/2), 2 theta - q_(alpha/2)].

Why halves: sampling m = G/2 of G groups without replacement has variance (S^2 / m)(1 - m/G)
= S^2 / G, where S^2 is the spread of the group-level values: exactly the variance of the
full-sample estimate for a statistic that averages over groups, with no rescaling (McCarthy
1969's half-samples; the delete-d jackknife with d = n/2, Shao and Wu 1989). Why the basic
interval: a half-sample's small-sample bias (biased linear CKA's grows like 1/n) is about twice
the full sample's, and reflecting around theta removes that first-order shift instead of
copying it into the interval. The interval's ends come from the G - 1 degrees of freedom of the
groups (default 20: ends stable to about 15 % of the interval's width).

Every measure is evaluated on a half through additive moments
(:class:`robustkit.measures.moments.CrossMoments`): each group's d x d sums are computed once,
and a half's moments are the sum of its groups', so a resample costs O(G d^2 + d^3), never a
pass over the tokens. Memory: G x 6 d x d float64 matrices (142 MB for G = 20, d = 384).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from robustkit.measures import cka, debiased_cka, procrustes, rsa
from robustkit.measures.moments import CrossMoments, stack_sum

DEFAULT_GROUPS = 20
DEFAULT_RESAMPLES = 200
DEFAULT_CONFIDENCE = 0.95


@dataclass(frozen=True)
class Interval:
    """A measure's value on the whole token sample and its half-sampling interval.

    Attributes
    ----------
    value : float
        The measure on all n tokens (through moments; equal to the measure's own function up to
        rounding).
    low, high : float
        Basic bootstrap interval at the requested confidence; NaN when fewer than half the
        resamples gave a number.
    resamples : int
        Resamples with a finite value.
    """

    value: float
    low: float
    high: float
    resamples: int


@dataclass(frozen=True)
class _Inputs:
    """Group moments of the two kinds every measure needs, and the shifts of the unit rows."""

    centred: list[CrossMoments]
    unit: list[CrossMoments]
    shift_a: Tensor
    shift_b: Tensor


# measure name -> function of the inputs summed over some groups
MomentMeasure = Callable[[CrossMoments, CrossMoments, Tensor, Tensor], float]
MEASURES: dict[str, MomentMeasure] = {
    "rsa": lambda centred, unit, sa, sb: rsa.from_unit_moments(unit, sa, sb),
    "cka": lambda centred, unit, sa, sb: cka.from_moments(centred),
    "cka-debiased": lambda centred, unit, sa, sb: debiased_cka.from_moments(centred),
    "procrustes": lambda centred, unit, sa, sb: procrustes.from_moments(centred),
}


def group_moments(a: Tensor, b: Tensor, groups: int = DEFAULT_GROUPS, seed: int = 0) -> _Inputs:
    """Deal the n tokens into ``groups`` random groups and take each group's moments.

    Parameters
    ----------
    a : Tensor, shape (n, d1)
    b : Tensor, shape (n, d2)
    groups : int
        G, even, at least 4 and at most n.
    seed : int
        Seed of the dealing.
    """
    n = a.shape[0]
    if a.ndim != 2 or b.ndim != 2 or b.shape[0] != n:
        raise ValueError(f"expected (n, d1) and (n, d2) with one n, got {tuple(a.shape)} and {tuple(b.shape)}")
    if groups < 4 or groups % 2 or groups > n:
        raise ValueError(f"groups must be even, at least 4 and at most the {n} tokens, got {groups}")
    a, b = a.to(torch.float64), b.to(a.device, torch.float64)
    # centred by the full sample's means (exact for the shift-invariant measures, no cancellation)
    centred_a, centred_b = a - a.mean(dim=0), b - b.mean(dim=0)
    unit_a, unit_b = rsa.unit_rows(a), rsa.unit_rows(b)
    shift_a, shift_b = unit_a.mean(dim=0), unit_b.mean(dim=0)
    order = torch.from_numpy(np.random.default_rng(seed).permutation(n)).to(a.device)
    parts = torch.tensor_split(order, groups)
    return _Inputs(
        centred=[CrossMoments.of(centred_a[p], centred_b[p]) for p in parts],
        unit=[CrossMoments.of(unit_a[p] - shift_a, unit_b[p] - shift_b) for p in parts],
        shift_a=shift_a,
        shift_b=shift_b,
    )


def intervals(
    a: Tensor,
    b: Tensor,
    measures: Mapping[str, MomentMeasure] | None = None,
    groups: int = DEFAULT_GROUPS,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> dict[str, Interval]:
    """Each measure's value and its basic half-sampling interval (see the module docstring).

    Parameters
    ----------
    a : Tensor, shape (n, d1)
    b : Tensor, shape (n, d2)
        Representations of the same n tokens (e.g. one layer of the base model and of a run).
    measures : mapping of str to callable, optional
        Default :data:`MEASURES` (rsa, cka, cka-debiased, procrustes).
    groups : int
        G (even, >= 4).
    resamples : int
        Random halves drawn (with ``seed``; the same halves for every measure).
    confidence : float
        Level of the interval, in (0, 1).
    seed : int
        Seed of the dealing into groups and of the halves: the same tokens, seed and G give the
        same halves for every run compared on that sample.

    Returns
    -------
    dict of str to Interval
        NaN value and ends for non-finite input.
    """
    measures = dict(MEASURES if measures is None else measures)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 2:
        raise ValueError(f"resamples must be at least 2, got {resamples}")
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return {name: Interval(math.nan, math.nan, math.nan, 0) for name in measures}
    inputs = group_moments(a, b, groups, seed)
    full = (stack_sum(inputs.centred), stack_sum(inputs.unit), inputs.shift_a, inputs.shift_b)
    values = {name: measure(*full) for name, measure in measures.items()}
    rng = np.random.default_rng([seed, groups])
    draws: dict[str, list[float]] = {name: [] for name in measures}
    for _ in range(resamples):
        half = rng.choice(groups, size=groups // 2, replace=False)
        chosen = (
            stack_sum([inputs.centred[i] for i in half]),
            stack_sum([inputs.unit[i] for i in half]),
            inputs.shift_a,
            inputs.shift_b,
        )
        for name, measure in measures.items():
            draws[name].append(measure(*chosen))
    return {name: _basic(values[name], np.asarray(draws[name]), confidence) for name in measures}


def _basic(value: float, draws: np.ndarray, confidence: float) -> Interval:
    finite = draws[np.isfinite(draws)]
    if not math.isfinite(value) or len(finite) < max(2, len(draws) / 2):
        return Interval(value, math.nan, math.nan, len(finite))
    tail = (1 - confidence) / 2
    low_q, high_q = np.quantile(finite, [tail, 1 - tail])
    return Interval(value, float(2 * value - high_q), float(2 * value - low_q), len(finite))
