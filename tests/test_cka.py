"""Linear CKA (Kornblith et al. 2019) against the published formula, and its invariances."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import ortho_group

from robustkit.measures.cka import cka_layers, linear_cka


def published_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Kornblith et al. 2019, eq. 5 with the centring matrix H = I - 11^T/n written out."""
    n = x.shape[0]
    h = np.eye(n) - np.ones((n, n)) / n
    x, y = h @ x, h @ y
    return np.linalg.norm(y.T @ x, "fro") ** 2 / (np.linalg.norm(x.T @ x, "fro") * np.linalg.norm(y.T @ y, "fro"))


def _data(n, d1, d2, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d1))
    y = x[:, :d2] @ rng.normal(size=(d2, d2)) + 0.5 * rng.normal(size=(n, d2)) + 3.0
    return x, y


def _cka(x, y) -> float:
    return linear_cka(torch.from_numpy(x), torch.from_numpy(y))


def test_identical_representations_give_one():
    x, _ = _data(50, 8, 8)
    assert _cka(x, x) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("n, d1, d2", [(60, 10, 4), (12, 30, 20)])  # feature form and n < d Gram form
def test_matches_the_published_formula(n, d1, d2):
    x, y = _data(n, d1, d2)
    assert _cka(x, y) == pytest.approx(published_cka(x, y), rel=1e-10)
    assert _cka(x, y) == pytest.approx(_cka(y, x), rel=1e-12)  # symmetric


def test_invariant_to_orthogonal_transform_scaling_and_translation():
    x, y = _data(80, 16, 16)
    q = ortho_group.rvs(16, random_state=1)
    expected = _cka(x, y)
    assert _cka(x @ q, y) == pytest.approx(expected, rel=1e-10)
    assert _cka(x, 7.5 * y) == pytest.approx(expected, rel=1e-10)
    assert _cka(x + 4.0, y) == pytest.approx(expected, rel=1e-10)
    assert _cka(x, x @ q * 0.01) == pytest.approx(1.0, abs=1e-10)


def test_not_invariant_to_a_general_invertible_map():
    # The invariance assertions above can fail: a badly conditioned (but invertible) linear map
    # changes CKA, as Kornblith et al. point out (it is CCA, not CKA, that ignores such maps).
    x, _ = _data(80, 16, 16)
    rng = np.random.default_rng(2)
    m = rng.normal(size=(16, 16)) @ np.diag(np.logspace(0, 3, 16))
    assert abs(np.linalg.det(m)) > 0
    assert _cka(x, x @ m) < 0.9


def test_layers_and_errors():
    pairs = [_data(30, 5, 5, seed=s) for s in range(3)]
    values = cka_layers(
        torch.from_numpy(np.stack([p[0] for p in pairs])), torch.from_numpy(np.stack([p[1] for p in pairs]))
    )
    assert values.shape == (3,)
    for layer, (x, y) in enumerate(pairs):
        assert values[layer].item() == pytest.approx(published_cka(x, y), rel=1e-10)
    assert math.isnan(linear_cka(torch.ones(5, 3), torch.randn(5, 3)))
    with pytest.raises(ValueError, match="same items"):
        linear_cka(torch.randn(5, 3), torch.randn(4, 3))


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("n, d", [(30, 5), (6, 20)])  # feature form and n < d Gram form
def test_non_finite_input_gives_nan_not_one(bad, n, d):
    # min(1.0, nan) is 1.0: a NaN anywhere used to come out as CKA 1.0, "geometry unchanged"
    x, y = _data(n, d, d)
    broken = x.copy()
    broken[2, 1] = bad
    assert math.isnan(_cka(broken, y))
    assert math.isnan(_cka(y, broken))
    assert math.isnan(_cka(broken, broken))
    values = cka_layers(torch.from_numpy(np.stack([x, broken])), torch.from_numpy(np.stack([x, x])))
    assert values[0].item() == pytest.approx(1.0, abs=1e-12) and math.isnan(values[1].item())


@pytest.mark.parametrize("n", [7, 50, 1000])
def test_constant_input_gives_nan_despite_centring_residue(n):
    # every item the same vector: centring leaves ~1e-16 residue (the mean of n copies of a
    # float is not always that float), which an exact == 0 test took for data: CKA came out
    # ~1e-17 (even negative) against anything and exactly 1.0 against itself
    rng = np.random.default_rng(n)
    constant = np.tile(3.0 * rng.normal(size=8), (n, 1))
    centred = constant - constant.mean(axis=0)
    assert np.abs(centred).max() > 0  # the residue this test is about is there
    y = rng.normal(size=(n, 8))
    assert math.isnan(_cka(constant, y))
    assert math.isnan(_cka(y, constant))
    assert math.isnan(_cka(constant, constant))


def test_near_constant_but_valid_input_still_gives_its_value():
    rng = np.random.default_rng(0)
    noise, y = rng.normal(size=(60, 12)), rng.normal(size=(60, 5))
    # a tiny spread around a large offset is data: CKA is translation and scale invariant
    assert _cka(5.0 + 1e-6 * noise, y) == pytest.approx(_cka(noise, y), rel=1e-8)
    # the smallest variation float32 can hold: one item one ulp off, still a (finite) value
    one_ulp = torch.full((60, 12), 5.0)
    one_ulp[7, 3] = torch.nextafter(torch.tensor(5.0), torch.tensor(6.0))
    value = linear_cka(one_ulp, torch.from_numpy(y))
    assert math.isfinite(value) and 0.0 <= value <= 1.0
