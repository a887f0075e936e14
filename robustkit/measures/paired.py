"""Paired two-group comparisons: the runs of two methods that share a seed, compared seed by seed.

One seed fixes a run's classifier-head initialisation (``models.load_classifier`` seeds torch
before the head is built, whatever the method adds after), its data order
(``data.batches.batch_indices(n, batch_size, seed, step)``) and its per-step RNG
(``train.loop.seed_step``), so an adapter run and a full fine-tuning run of one seed, task and
model start alike and see the same batches; their values are paired, and what varies from
seed to seed is partly shared. A test of the within-seed differences ``d_s = a_s - b_s`` removes
that shared part.

The test is the exact sign test of the differences (:func:`robustkit.measures.exact.sign_test`):
its null is "a run of a is above its seed's run of b at most half the time" (the median of the
differences at most 0), and it is exact whatever the differences' shape. The Wilcoxon
signed-rank test and sign-flip permutation tests are more powerful but assume the differences
are symmetric about 0 under the null, and with one method's runs wider and skewed (the
simulation's hardest null) they are not: the signed-rank test of a skewed variable at its
median agreed falsely 7-12% of the time (``exact.sign_test``). Written with exact.py's tests;
scipy's ``binomtest`` gives the same p.

A pair needs both runs: a seed with a run in one group only (a failed run left out, a missing
run) is no pair and is left out of the test (:func:`pair_up`); the verdict rule checks the
failed runs placed at either extreme separately (:func:`robustkit.verdicts.rules.judge`).
Inputs are 1-D arrays of per-run values (shape ``(n,)``, the values' units).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

from robustkit.measures import exact

__all__ = ["difference_interval", "differences", "pair_up", "smallest_p", "tails"]


def pair_up(
    a: np.ndarray, b: np.ndarray, keys_a: Sequence[Hashable], keys_b: Sequence[Hashable]
) -> tuple[np.ndarray, np.ndarray]:
    """The values of ``a`` and ``b`` whose keys (a run's seed and pooled settings) match, in the
    order of ``a``; keys in one group only are left out, as is a key repeated in a group (no
    one-to-one pair).

    Returns
    -------
    (ndarray, ndarray)
        Shape ``(pairs,)`` each: a's and b's value of each pair.
    """
    a, b = np.asarray(a, float), np.asarray(b, float)
    keys_a, keys_b = list(keys_a), list(keys_b)
    once_b = {k: i for i, k in enumerate(keys_b) if keys_b.count(k) == 1}
    rows = [(i, once_b[k]) for i, k in enumerate(keys_a) if k in once_b and keys_a.count(k) == 1]
    if not rows:
        return np.array([]), np.array([])
    left, right = (np.array(side, int) for side in zip(*rows))
    return a[left], b[right]


def differences(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Within-pair differences ``a - b`` on the data's grid (:func:`robustkit.measures.exact.on_grid`)."""
    return exact.on_grid(np.asarray(a, float) - np.asarray(b, float))


def tails(a: np.ndarray, b: np.ndarray, shift: float = 0.0) -> tuple[float, float]:
    """Both one-sided p-values (``greater``, ``less``) of the exact sign test that ``a - b`` is
    above / below ``shift`` (paired values, shape ``(pairs,)``): differences equal to the shift
    count against either side. 1.0 where there is no pair."""
    d = differences(a, b)
    if not len(d):
        return 1.0, 1.0
    return exact.sign_test(d, "greater", shift), exact.sign_test(d, "less", shift)


def difference_interval(a: np.ndarray, b: np.ndarray, alpha: float) -> tuple[float, float, float]:
    """The median within-pair difference and its exact ``1 - 2 alpha`` interval, inverting
    :func:`tails` (:func:`robustkit.measures.exact.median_interval` of the differences).

    Returns
    -------
    (float, float, float)
        Estimate, low, high (the values' units); low and high NaN where the sign test cannot
        reach ``alpha`` with these pairs.
    """
    return exact.median_interval(differences(a, b), alpha)


def smallest_p(pairs: int) -> float:
    """The smallest one-sided p the sign test of ``pairs`` differences can give: ``2 ** -pairs``."""
    return 1.0 if pairs < 1 else 2.0**-pairs
