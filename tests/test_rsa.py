"""RSA (He et al. 2021 §2.2) against a direct SciPy computation, on random data."""

import math

import numpy as np
import pytest
import torch
from scipy.spatial.distance import pdist
from scipy.stats import pearsonr

from robustkit.measures.rsa import choose_method, rsa, rsa_layers

METHODS = ["gram", "chunked"]


def reference_rsa(a: np.ndarray, b: np.ndarray) -> float:
    """The textbook computation: full cosine matrices, upper triangles, scipy's Pearson r.

    ``pdist`` lists exactly the strict upper triangle (i < j) in row-major order.
    """
    return pearsonr(1.0 - pdist(a, "cosine"), 1.0 - pdist(b, "cosine")).statistic


def _pair(n=70, d1=12, d2=5, offset=0.0, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, d1)) + offset
    b = a @ rng.normal(size=(d1, d2)) + rng.normal(size=(n, d2)) + offset
    return a, b


@pytest.mark.parametrize("method", METHODS)
def test_identical_representations_give_one(method):
    a, _ = _pair()
    x = torch.from_numpy(a)
    assert rsa(x, x, method=method) == pytest.approx(1.0, abs=1e-12)
    # cosine similarity ignores rotations and per-item scale
    q, _ = torch.linalg.qr(torch.randn(12, 12, dtype=torch.float64))
    scale = torch.rand(70, 1, dtype=torch.float64) + 0.5
    assert rsa(x, (x @ q) * scale, method=method) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("offset", [0.0, 20.0])
def test_matches_scipy_on_random_data(method, offset):
    # offset 20: nearly parallel vectors, cosines packed near 1 (BERT's anisotropy, overdone):
    # Pearson sums taken around 0 instead of the mean would cancel ~4 of their 16 digits.
    a, b = _pair(offset=offset)
    expected = reference_rsa(a, b)
    assert rsa(torch.from_numpy(a), torch.from_numpy(b), method=method) == pytest.approx(expected, rel=1e-12)


def test_chunked_equals_unchunked_and_zero_rows_count_as_zero_similarity():
    a, b = _pair(n=53)
    a[[3, 40]] = 0.0  # no direction: cosine 0 with everything (scipy's pdist would give NaN)
    x, y = torch.from_numpy(a), torch.from_numpy(b)
    whole = rsa(x, y, chunk=10_000, method="chunked")
    for chunk in (1, 2, 7, 52, 53):
        assert rsa(x, y, chunk=chunk, method="chunked") == pytest.approx(whole, rel=1e-12)
    assert rsa(x, y, method="gram") == pytest.approx(whole, rel=1e-10)
    unit = lambda m: m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-300)
    upper = np.triu_indices(53, 1)
    expected = np.corrcoef((unit(a) @ unit(a).T)[upper], (unit(b) @ unit(b).T)[upper])[0, 1]
    assert whole == pytest.approx(expected, rel=1e-12)


def test_auto_picks_the_cheaper_method():
    assert choose_method(5000, 384, 384) == "gram"  # minilm, He et al.'s 5000 tokens
    assert choose_method(5000, 768, 768) == "gram"  # bert-base
    assert choose_method(100, 768, 768) == "chunked"


def test_float32_inputs_and_similarities():
    a, b = _pair()
    expected = reference_rsa(a, b)
    x, y = torch.from_numpy(a).float(), torch.from_numpy(b).float()
    assert isinstance(rsa(x, y), float)
    assert rsa(x, y) == pytest.approx(expected, rel=1e-6)
    assert rsa(x, y, dtype=torch.float32, method="chunked") == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("method", METHODS)
def test_layers_match_one_at_a_time(method):
    pairs = [_pair(n=40, d1=6, d2=6, seed=s) for s in range(3)]
    a = torch.from_numpy(np.stack([p[0] for p in pairs]))
    b = torch.from_numpy(np.stack([p[1] for p in pairs]))
    values = rsa_layers(a, b, chunk=9, method=method)
    assert values.shape == (3,) and values.dtype == torch.float64
    for layer, (x, y) in enumerate(pairs):
        assert values[layer].item() == pytest.approx(reference_rsa(x, y), rel=1e-9)


def test_constant_similarities_give_nan_and_bad_shapes_raise():
    same_direction = torch.ones(5, 3) * torch.arange(1, 6).unsqueeze(1)
    for method in METHODS:
        assert math.isnan(rsa(same_direction, torch.randn(5, 3), method=method))
    with pytest.raises(ValueError, match="unknown RSA method"):
        rsa(torch.randn(5, 3), torch.randn(5, 3), method="spearman")
    with pytest.raises(ValueError, match="same items"):
        rsa(torch.randn(5, 3), torch.randn(6, 3))
    with pytest.raises(ValueError, match="at least 3"):
        rsa(torch.randn(2, 3), torch.randn(2, 3))
    with pytest.raises(ValueError, match="2-D"):
        rsa(torch.randn(5), torch.randn(5))
    with pytest.raises(ValueError, match="chunk"):
        rsa(torch.randn(5, 3), torch.randn(5, 3), chunk=0)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_input_gives_nan_not_one(method, bad):
    # min(1.0, nan) is 1.0: a NaN anywhere used to come out as RSA 1.0, "geometry unchanged"
    a, b = _pair(n=20)
    x, y = torch.from_numpy(a), torch.from_numpy(b)
    broken = x.clone()
    broken[4, 2] = bad
    assert math.isnan(rsa(broken, y, method=method))
    assert math.isnan(rsa(y, broken, method=method))
    assert math.isnan(rsa(broken, broken, method=method))
    # per layer: only the broken layer is NaN
    values = rsa_layers(torch.stack([x, broken]), torch.stack([x, x]), method=method)
    assert values[0].item() == pytest.approx(1.0, abs=1e-12) and math.isnan(values[1].item())


def test_huge_finite_entries_do_not_overflow_the_row_norms():
    # float32 squares overflow past ~1e19: the rows would become zero vectors (similarity 0)
    a, b = _pair()
    x, y = torch.from_numpy(a).float(), torch.from_numpy(b).float()
    expected = rsa(x, y, dtype=torch.float32, method="chunked")
    huge = x * 1e25
    assert torch.isfinite(huge).all()
    assert rsa(huge, y, dtype=torch.float32, method="chunked") == pytest.approx(expected, rel=1e-5)
    assert rsa(huge, y, method="gram") == pytest.approx(reference_rsa(a, b), rel=1e-6)


@pytest.mark.parametrize("method", METHODS)
def test_near_constant_but_valid_input_still_gives_its_value(method):
    # every item close to one direction (spread 1e-3), but not the same: a real RSA, not NaN
    rng = np.random.default_rng(3)
    a = rng.normal(size=12) + 1e-3 * rng.normal(size=(60, 12))
    b = rng.normal(size=(60, 5))
    value = rsa(torch.from_numpy(a), torch.from_numpy(b), method=method)
    # scipy's 1 - cosine distance itself keeps only ~10 digits of cosines this close to 1
    assert value == pytest.approx(reference_rsa(a, b), rel=1e-6)
