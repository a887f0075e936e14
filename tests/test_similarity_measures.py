"""Similarity beyond the papers (issue #16 item 3): debiased linear CKA and the Procrustes distance
against their references, RSA against rsatoolbox, the token bootstrap against a closed form, and
the analysis on bert-tiny runs."""

import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.linalg import orthogonal_procrustes
from scipy.stats import ortho_group

from robustkit.analysis import similarity_ci
from robustkit.analysis.registry import get as analysis
from robustkit.measures import cka, half_sampling, rsa
from robustkit.measures.debiased_cka import debiased_linear_cka
from robustkit.measures.moments import CrossMoments
from robustkit.measures.procrustes import procrustes_distance


def _data(n=80, d1=12, d2=9, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d1)) + 4.0
    y = x[:, :5] @ rng.normal(size=(5, d2)) + rng.normal(size=(n, d2)) - 2.0
    return torch.from_numpy(x), torch.from_numpy(y)


def kornblith_debiased_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Kornblith's reference (the CKA notebook of Kornblith et al. 2019): Gram matrices, unbiased centring."""

    def center_gram(gram):
        gram = gram.copy()
        n = gram.shape[0]
        np.fill_diagonal(gram, 0)
        means = np.sum(gram, 0, dtype=np.float64) / (n - 2)
        means -= np.sum(means) / (2 * (n - 1))
        gram -= means[:, None]
        gram -= means[None, :]
        np.fill_diagonal(gram, 0)
        return gram

    gx, gy = center_gram(x @ x.T), center_gram(y @ y.T)
    return gx.ravel().dot(gy.ravel()) / (np.linalg.norm(gx) * np.linalg.norm(gy))


def scipy_procrustes(x: np.ndarray, y: np.ndarray) -> float:
    """min_R ||X - Y R||_F^2 over orthogonal R (scipy's rotation), X and Y centred, unit norm, padded."""
    x, y = x - x.mean(0), y - y.mean(0)
    x, y = x / np.linalg.norm(x), y / np.linalg.norm(y)
    width = max(x.shape[1], y.shape[1])
    x, y = np.pad(x, ((0, 0), (0, width - x.shape[1]))), np.pad(y, ((0, 0), (0, width - y.shape[1])))
    rotation, _ = orthogonal_procrustes(y, x)
    return float(np.linalg.norm(x - y @ rotation) ** 2)


def test_debiased_cka_and_procrustes_match_their_references():
    x, y = _data()
    assert debiased_linear_cka(x, y) == pytest.approx(kornblith_debiased_cka(x.numpy(), y.numpy()), abs=1e-10)
    assert procrustes_distance(x, y) == pytest.approx(scipy_procrustes(x.numpy(), y.numpy()), abs=1e-10)
    assert debiased_linear_cka(x, y) == pytest.approx(debiased_linear_cka(y, x), abs=1e-12)  # symmetric
    assert procrustes_distance(x, y) == pytest.approx(procrustes_distance(y, x), abs=1e-12)


def test_identical_inputs_give_one_and_distance_zero():
    x, _ = _data()
    assert debiased_linear_cka(x, x) == pytest.approx(1.0, abs=1e-12)
    assert procrustes_distance(x, x) == pytest.approx(0.0, abs=1e-12)
    assert cka.linear_cka(x, x) == pytest.approx(1.0, abs=1e-12) and rsa.rsa(x, x) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("measure", [debiased_linear_cka, procrustes_distance, cka.linear_cka])
def test_invariant_to_orthogonal_transforms_isotropic_scaling_and_translation(measure):
    x, y = _data()
    q = torch.from_numpy(ortho_group.rvs(12, random_state=3))
    expected = measure(x, y)
    assert measure(x @ q, y) == pytest.approx(expected, abs=1e-10)
    assert measure(x, 0.01 * y) == pytest.approx(expected, abs=1e-10)
    assert measure(x * 250.0 + 7.0, y) == pytest.approx(expected, abs=1e-10)
    same = 1.0 if measure is not procrustes_distance else 0.0
    assert measure(x, 3.0 * x @ q) == pytest.approx(same, abs=1e-10)


def test_debiased_cka_of_independent_features_is_near_zero_where_biased_cka_is_not():
    rng = np.random.default_rng(1)
    values = []
    for _ in range(5):
        x, y = (torch.from_numpy(rng.normal(size=(200, 400))) for _ in range(2))
        values.append((debiased_linear_cka(x, y), cka.linear_cka(x, y)))
    debiased, biased = np.array(values).T
    assert np.abs(debiased).max() < 0.03 and abs(debiased.mean()) < 0.015
    assert biased.min() > 0.6  # the biased estimator reads unrelated features as similar


def test_rsa_agrees_with_rsatoolbox():
    rsatoolbox = pytest.importorskip("rsatoolbox")
    x, y = _data(n=60, d1=20, d2=15)
    # rsatoolbox has no cosine RDM: its (squared, per-channel) Euclidean RDM of unit rows is
    # (2 - 2 cos) / d, an affine map of the cosine similarities, which Pearson r does not see
    rdms = [
        rsatoolbox.rdm.calc_rdm(rsatoolbox.data.Dataset(rsa.unit_rows(z).numpy()), method="euclidean") for z in (x, y)
    ]
    reference = float(rsatoolbox.rdm.compare(rdms[0], rdms[1], method="corr")[0, 0])
    assert rsa.rsa(x, y) == pytest.approx(reference, abs=1e-10)
    unit_x, unit_y = rsa.unit_rows(x), rsa.unit_rows(y)
    shift_x, shift_y = unit_x.mean(0), unit_y.mean(0)
    moments = CrossMoments.of(unit_x - shift_x, unit_y - shift_y)
    assert rsa.from_unit_moments(moments, shift_x, shift_y) == pytest.approx(reference, abs=1e-10)


def test_measures_from_moments_add_over_groups():
    x, y = _data(n=90)
    xc, yc = x - x.mean(0), y - y.mean(0)
    whole = CrossMoments.of(xc, yc)
    parts = CrossMoments.of(xc[:40], yc[:40]) + CrossMoments.of(xc[40:], yc[40:])
    assert cka.from_moments(parts) == pytest.approx(cka.linear_cka(x, y), abs=1e-12)
    assert cka.from_moments(whole) == pytest.approx(cka.from_moments(parts), abs=1e-12)
    assert cka.from_moments(whole.swapped()) == pytest.approx(cka.from_moments(whole), abs=1e-12)


def test_half_sampling_interval_has_the_full_samples_spread():
    # the mean of one feature, as a measure of moments: its interval must be the normal one,
    # +- 1.96 sigma / sqrt(n) around the value (closed form), for any group count
    rng = np.random.default_rng(4)
    n, sigma = 4000, 2.0
    a = torch.from_numpy(rng.normal(1.0, sigma, size=(n, 3)))
    mean = {"mean": lambda centred, unit, sa, sb: float(centred.sum_a[0]) / centred.n}
    interval = half_sampling.intervals(a, a, mean, groups=40, resamples=2000, seed=0)["mean"]
    assert interval.value == pytest.approx(0.0, abs=1e-12)  # centred by the full mean
    half_width = (interval.high - interval.low) / 2
    assert half_width == pytest.approx(1.96 * sigma / math.sqrt(n), rel=0.3)
    assert interval.resamples == 2000
    nan = half_sampling.intervals(a.clone().fill_(float("nan")), a, mean, groups=4)["mean"]
    assert math.isnan(nan.value) and math.isnan(nan.low)


def test_similarity_ci_of_runs(tiny_store, monkeypatch):
    frame = analysis("similarity-ci").run(tiny_store, tokens=120, groups=4, resamples=20, progress=False)
    assert set(frame["measure"]) == {"rsa", "cka", "cka-debiased", "procrustes"}
    assert len(frame) == 2 * 3 * 4  # runs x (embeddings + 2 layers) x measures
    assert (frame["ci_low"] <= frame["ci_high"]).all() and (frame["resamples"] == 20).all()
    # the values are those of the similarity analysis (same tokens, same representations)
    plain = (
        analysis("rsa").run(tiny_store, tokens=120, progress=False).set_index(["run_id", "layer", "measure"])["value"]
    )
    mine = frame.set_index(["run_id", "layer", "measure"])["value"]
    for measure in ("rsa", "cka"):
        ours = mine.xs(measure, level="measure")
        np.testing.assert_allclose(ours, plain.xs(measure, level="measure").reindex(ours.index), atol=1e-10)
    from robustkit.analysis import registry

    claimed = registry.per_run(
        "similarity-ci.similarity",
        tiny_store,
        {"run_id": list(frame["run_id"].unique())},
        **{"measure": "procrustes", "tokens": 120, "groups": 4, "resamples": 20},
    )
    assert len(claimed) == 2 * 3 and set(claimed["layer"]) == {0, 1, 2}
    monkeypatch.setattr(similarity_ci, "compare", lambda *a, **k: pytest.fail("recomputed"))
    pd.testing.assert_frame_equal(
        analysis("similarity-ci").run(tiny_store, tokens=120, groups=4, resamples=20, progress=False), frame
    )
