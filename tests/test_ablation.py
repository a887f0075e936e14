"""Layer-span adapter ablation (Houlsby et al. 2019 figure 6): fast == naive, identities, cache."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from robustkit.analysis import ablation
from robustkit.analysis.registry import get as analysis
from robustkit.analysis.select import select_runs
from robustkit.errors import RobustkitError
from robustkit.methods import ADAPTER_NAME
from robustkit.specs.spec import RunSpec
from robustkit.store.manifest import read_manifest
from robustkit.train.evaluate import split_batches
from robustkit.train.run_model import load_run_model


@pytest.fixture(scope="module")
def houlsby_run(tiny_store):
    """(model, dev batches, task) of the tiny store's houlsby run, adapters perturbed so that
    ablating a span changes the logits noticeably (trained 4 steps, they are near identity)."""
    path = select_runs(tiny_store, ["method=houlsby"])["path"].iloc[0]
    spec = RunSpec(**read_manifest(path)["spec"])
    model = load_run_model(path, "best")
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if f".adapters.{ADAPTER_NAME}." in name:
                parameter.add_(0.2 * torch.randn(parameter.shape, generator=generator))
    return model, split_batches(spec, ["validation"])["validation"], spec.task


def test_fast_equals_naive_with_fewer_layer_evaluations(houlsby_run):
    model, batches, task = houlsby_run
    naive = ablation.naive_spans(model, batches, task)
    fast = ablation.fast_spans(model, batches, task)
    n_layers = len(ablation.encoder_layers(model))
    assert len(naive) == len(fast) == n_layers * (n_layers + 1) // 2 * 2  # loss + accuracy
    assert naive[["first", "last", "metric"]].equals(fast[["first", "last", "metric"]])
    np.testing.assert_allclose(fast["value"], naive["value"], rtol=0, atol=1e-5)
    accuracy = fast["metric"] == "accuracy"
    assert (fast.loc[accuracy, "value"].to_numpy() == naive.loc[accuracy, "value"].to_numpy()).all()
    assert fast.attrs["full"] == pytest.approx(naive.attrs["full"], abs=1e-6)
    expected = ablation.expected_layer_evaluations(n_layers, len(batches))
    assert naive.attrs["layer_evaluations"] == expected["naive"]
    assert fast.attrs["layer_evaluations"] == expected["fast"] < expected["naive"]
    # the model is left as it was: every adapter active
    assert model.adapters_config.skip_layers is None


@torch.no_grad()
def test_ablating_every_layer_is_the_adapter_free_model(houlsby_run, tiny_store):
    model, batches, task = houlsby_run
    n_layers = len(ablation.encoder_layers(model))
    inputs = {k: v for k, v in batches[0].items() if k != "order"}
    model.set_active_adapters(ADAPTER_NAME, skip_layers=list(range(n_layers)))
    skipped = model(**inputs).logits
    model.set_active_adapters(ADAPTER_NAME)
    adapted = model(**inputs).logits
    # the same run rebuilt, its adapters deleted: base + trained LayerNorms and head
    path = select_runs(tiny_store, ["method=houlsby"])["path"].iloc[0]
    plain = load_run_model(path, "best")
    plain.delete_adapter(ADAPTER_NAME)
    assert not any(".adapters." in n for n, _ in plain.named_parameters())
    free = plain(**inputs).logits
    assert torch.equal(skipped, free)
    assert not torch.equal(adapted, free)
    # and the fast span 0..L-1 equals evaluating the adapter-free model
    from robustkit.data.tasks import get_task
    from robustkit.train.evaluate import evaluate

    fast = ablation.fast_spans(model, batches, task)
    everything = fast[(fast["first"] == 0) & (fast["last"] == n_layers - 1)].set_index("metric")["value"]
    reference = evaluate(plain, batches, get_task(task))
    assert everything.to_dict() == pytest.approx(reference, abs=1e-6)


def test_run_caches_and_skips_full_runs(tiny_store, monkeypatch):
    with pytest.warns(UserWarning, match="without per-layer adapters"):
        first = analysis("ablation").run(tiny_store, progress=False)
    assert set(first["method"]) == {"houlsby"}
    assert set(first["metric"]) == {"loss", "accuracy"}
    single = first[first["first"] == first["last"]]
    assert np.isfinite(single["relative_change"]).all()
    calls = []
    monkeypatch.setattr(ablation, "fast_spans", lambda *a, **k: calls.append(1))
    second = analysis("ablation").run(tiny_store, ["method=houlsby"], progress=False)
    assert not calls  # a cache hit: nothing recomputed
    assert second.equals(first)
    with pytest.raises(RobustkitError, match="no adapter run"), pytest.warns(UserWarning):
        analysis("ablation").run(tiny_store, ["method=full"], progress=False)


def test_heatmap_renders_pdf(tiny_store, tmp_path):
    from robustkit.figures.ablation import ablation_heatmap
    from robustkit.figures.style import save_pdf

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = analysis("ablation").run(tiny_store, ["method=houlsby"], progress=False)
    fig = ablation_heatmap(**ablation.ablation_heatmap(frame))  # through the figure's view
    assert "n=1 runs" in fig.axes[0].get_title()
    path = save_pdf(fig, tmp_path / "fig6.pdf")
    assert path.read_bytes()[:5] == b"%PDF-"


def test_single_drop_is_each_layers_own_drop(tiny_store):
    """``ablation.single-drop``: one row per run and encoder layer (1..L), the diagonal's drop,
    no run's largest (issue #55: no selection inside a statistic)."""
    from robustkit.analysis import registry

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = analysis("ablation").run(tiny_store, ["method=houlsby"], progress=False)
        drops = registry.per_run("ablation.single-drop", tiny_store, {"run_id": list(frame["run_id"].unique())})
    diagonal = frame[(frame["first"] == frame["last"]) & (frame["metric"] == "accuracy")]
    n_layers = diagonal["first"].nunique()
    assert len(drops) == len(diagonal) == n_layers * frame["run_id"].nunique()
    assert sorted(drops["layer"].unique()) == list(range(1, n_layers + 1))
    expected = -diagonal.set_index(["run_id", diagonal["first"] + 1])["relative_change"]
    got = drops.set_index(["run_id", "layer"])["value"]
    np.testing.assert_allclose(got.loc[expected.index].to_numpy(), expected.to_numpy())
    assert "outcome" in drops
