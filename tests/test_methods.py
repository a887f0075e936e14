import pytest
import torch

from robustkit.errors import MethodError
from robustkit.methods import (
    ADAPTER_NAME,
    adapter_parameter_counts,
    apply_method,
    count_parameters,
    get_method,
    houlsby_adapter_size,
)
from robustkit.models.pretrained import load_classifier, load_masked_lm


def test_unknown_method_is_named():
    with pytest.raises(MethodError, match="'lorra'"):
        get_method("lorra")


def test_houlsby_adapter_counts_match_the_paper(tiny_model):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    names = apply_method(model, "houlsby", adapter_size=16)
    counts = adapter_parameter_counts(model)
    d, m, layers = 128, 16, 2
    assert len(counts) == 2 * layers  # two adapters per layer
    assert set(counts.values()) == {houlsby_adapter_size(d, m)} == {2 * m * d + d + m}
    adapter_total = sum(counts.values())
    layer_norms = [n for n in names if "LayerNorm" in n]
    assert len(layer_norms) == 2 * (1 + 2 * layers)  # embeddings + two per layer, weight and bias
    heads = [n for n in names if n.startswith("classifier.")]
    assert count_parameters(model, names) == adapter_total + count_parameters(model, layer_norms) + count_parameters(
        model, heads
    )
    assert not any(n.startswith("bert.encoder") and "adapters" not in n and "LayerNorm" not in n for n in names)


def test_adapterhub_preset_freezes_layer_norms(tiny_model):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    names = apply_method(model, "adapterhub-houlsby")
    assert not any("LayerNorm" in n for n in names)
    assert set(adapter_parameter_counts(model).values()) == {houlsby_adapter_size(128, 128 // 16)}


def test_full_trains_everything(tiny_model):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    names = apply_method(model, "full")
    assert count_parameters(model, names) == count_parameters(model)


def test_masked_lm_head_trains_but_not_the_tied_word_embeddings(tiny_model):
    model, initialised = load_masked_lm(tiny_model, seed=0)
    assert initialised == []  # bert-tiny ships its MLM head
    names = apply_method(model, "houlsby", adapter_size=16)
    assert "bert.embeddings.word_embeddings.weight" not in names
    assert any(n.startswith("cls.predictions.transform") for n in names)


def test_skipping_every_adapter_gives_the_adapter_free_model(tiny_model):
    plain = load_classifier(tiny_model, num_labels=2, seed=0).eval()
    adapted = load_classifier(tiny_model, num_labels=2, seed=0).eval()
    apply_method(adapted, "houlsby", adapter_size=16)
    with torch.no_grad():  # make the adapters far from the identity so skipping matters
        for name, p in adapted.named_parameters():
            if f"adapters.{ADAPTER_NAME}" in name:
                p.normal_(0, 0.5)
    ids = torch.tensor([[101, 2023, 3185, 2003, 2307, 102]])
    with torch.no_grad():
        reference = plain(input_ids=ids).logits
        assert not torch.allclose(adapted(input_ids=ids).logits, reference)
        adapted.set_active_adapters(ADAPTER_NAME, skip_layers=[0, 1])
        assert torch.equal(adapted(input_ids=ids).logits, reference)


# ---------------------------------------------------------------------------------------------
# topk, layernorm, adapter init std and sharing (Houlsby et al. 2019 sections 3.4 and 3.6;
# Mohebbi's report section 6)

import dataclasses  # noqa: E402
import math  # noqa: E402

from robustkit.methods import (  # noqa: E402
    adapter_layers,
    check_sharing_counts,
    sharing_adapter_parameters,
)

D, LAYERS = 128, 2  # bert-tiny
# One BERT encoder layer: Q, K, V, attention output (d^2 + d each), FFN (2 * 4d^2 + 5d), two
# LayerNorms (2d each) = 12d^2 + 13d; pooler d^2 + d; binary classifier 2d + 2.
BERT_LAYER = 12 * D * D + 13 * D
POOLER, HEAD = D * D + D, 2 * D + 2


@pytest.mark.parametrize("k", [1, 2])
def test_topk_trains_the_top_k_layers_pooler_and_head(tiny_model, k):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    names = apply_method(model, "topk", top_k=k)
    assert count_parameters(model, names) == k * BERT_LAYER + POOLER + HEAD
    trained_layers = {int(n.split(".layer.")[1].split(".")[0]) for n in names if ".layer." in n}
    assert trained_layers == set(range(LAYERS - k, LAYERS))
    assert not any("embeddings" in n for n in names)


@pytest.mark.parametrize(
    "k, message",
    [
        (None, "needs option 'top_k'"),
        (0, "'top_k' must be an integer >= 1 and <= 1048576, got 0"),
        (3, "between 1 and 2 .*got 3"),
    ],
)
def test_topk_out_of_range_is_named(tiny_model, k, message):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    with pytest.raises(MethodError, match=message):
        apply_method(model, "topk", top_k=k)


def test_layernorm_trains_only_layer_norms_and_head(tiny_model):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    names = apply_method(model, "layernorm")
    # 2d per LayerNorm: the embeddings' and two per layer (Houlsby: 40k for BERT-base)
    assert count_parameters(model, names) == 2 * D * (1 + 2 * LAYERS) + HEAD
    assert all("LayerNorm" in n or n.startswith("classifier.") for n in names)


def test_adapter_options_are_refused_without_adapters(tiny_model):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    with pytest.raises(MethodError, match="'full' has no option 'adapter_sharing'"):
        apply_method(model, "full", sharing="layer")


def test_sharing_formulas_reproduce_the_reports_table_1():
    d, m, layers = 768, 64, 12  # BERT-base, adapter size 64
    assert sharing_adapter_parameters(d, m, layers, "layer") == 1_189_632  # "Houlsby"
    assert sharing_adapter_parameters(d, m, layers, "3-layer") == 396_544  # "3-shared"
    # "not shared": adapters + the encoder's LayerNorms + a second d x d classifier layer
    assert sharing_adapter_parameters(d, m, layers, "none") + layers * 4 * d + d * d + d == 3_006_720


@pytest.mark.parametrize("sharing, modules", [("none", 4), ("layer", 2), ("3-layer", 1)])
def test_shared_adapter_counts_match_the_formula(tiny_model, sharing, modules):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    names = apply_method(model, "houlsby", adapter_size=16, sharing=sharing)
    check = check_sharing_counts(model, 16, sharing)
    assert check["modules"] == modules and check["positions"] == 2 * LAYERS
    assert check["found"] == check["expected"] == modules * houlsby_adapter_size(D, 16)
    adapter_names = [n for n in names if f".adapters.{ADAPTER_NAME}." in n]
    assert count_parameters(model, adapter_names) == modules * houlsby_adapter_size(D, 16)


def test_layer_sharing_ties_both_positions_of_a_layer(tiny_model):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    apply_method(model, "houlsby", adapter_size=16, sharing="layer")
    modules = [p.adapters[ADAPTER_NAME] for p in adapter_layers(model)]
    assert modules[0] is modules[1] and modules[2] is modules[3] and modules[0] is not modules[2]
    ids = torch.tensor([[101, 2023, 3185, 2003, 2307, 102]])
    with torch.no_grad():  # a change to the shared module changes the output through both positions
        before = model(input_ids=ids).logits
        modules[0].adapter_up.weight.normal_(0, 0.5)
        assert not torch.allclose(model(input_ids=ids).logits, before)


def test_three_layer_sharing_groups_consecutive_layers():
    from robustkit.assets import asset_path

    model = load_classifier(str(asset_path("minilm-l6")), num_labels=2, seed=0)
    apply_method(model, "houlsby", adapter_size=8, sharing="3-layer")
    owner = {p.layer_idx: p.adapters[ADAPTER_NAME] for p in adapter_layers(model)}
    positions = adapter_layers(model)
    assert len(positions) == 12
    assert all(p.adapters[ADAPTER_NAME] is owner[3 * (p.layer_idx // 3)] for p in positions)
    assert owner[0] is not owner[3]
    assert check_sharing_counts(model, 8, "3-layer")["modules"] == 2


TRUNCATED_STD = math.sqrt(1 - 4 * math.exp(-2) / math.sqrt(2 * math.pi) / math.erf(2 / math.sqrt(2)))  # ~0.880


def _adapter_weights(model) -> tuple[torch.Tensor, torch.Tensor]:
    params = dict(model.named_parameters())
    weights = torch.cat([p.flatten() for n, p in params.items() if ".adapters." in n and n.endswith("weight")])
    biases = torch.cat([p.flatten() for n, p in params.items() if ".adapters." in n and n.endswith("bias")])
    return weights.detach(), biases.detach()


@pytest.mark.parametrize("std", [None, 1e-7, 1e-4, 0.3])
def test_init_std_sets_the_measured_weight_std(tiny_model, std):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    torch.manual_seed(0)
    apply_method(model, "houlsby", adapter_size=16, init_std=std)
    weights, biases = _adapter_weights(model)
    drawn = 1e-2 if std is None else std  # None: AdapterHub's houlsby init, the same distribution
    # 4 adapters x 2 x 16 x 128 = 16384 draws: the sample std is within ~1% of the truncated one
    assert float(weights.std()) == pytest.approx(TRUNCATED_STD * drawn, rel=0.03)
    assert float(weights.abs().max()) <= 2 * drawn * (1 + 1e-5)
    assert torch.count_nonzero(biases) == 0


def test_init_std_is_seeded_and_draws_shared_modules_once(tiny_model):
    def weights(seed, sharing="none"):
        model = load_classifier(tiny_model, num_labels=2, seed=0)
        torch.manual_seed(seed)
        apply_method(model, "houlsby", adapter_size=16, init_std=1e-3, sharing=sharing)
        return _adapter_weights(model)[0]

    assert torch.equal(weights(0), weights(0))
    assert not torch.equal(weights(0), weights(1))
    assert weights(0, "layer").numel() == weights(0).numel() // 2


# ---------------------------------------------------------------------------------------------
# tiny training runs of the new methods: they complete and their checkpoints round-trip


@pytest.fixture(scope="module")
def glue_dir(tmp_path_factory, rte_folder):
    return str(rte_folder(tmp_path_factory.mktemp("glue"), train=16, dev=8))


@pytest.mark.slow
@pytest.mark.parametrize(
    "changes",
    [
        {"method": "topk", "top_k": 1},
        {"method": "layernorm"},
        {"method": "houlsby", "adapter_sharing": "layer"},
        {"method": "houlsby", "adapter_sharing": "3-layer", "adapter_init_std": 1e-3},
    ],
    ids=["topk", "layernorm", "houlsby-layer", "houlsby-3-layer-std"],
)
def test_new_methods_train_and_round_trip(tiny_spec, tmp_path, glue_dir, changes):
    from robustkit.store.checkpoints import load_checkpoint
    from robustkit.store.manifest import read_manifest
    from robustkit.train import train
    from robustkit.train.run_model import load_run_model

    spec = dataclasses.replace(
        tiny_spec, task="rte", train_size=None, epochs=1, batch_size=8, data_dir=glue_dir, **changes
    )
    run_dir = train(spec, tmp_path, progress=False)
    manifest = read_manifest(run_dir)
    assert manifest["status"] == "complete"
    assert manifest["spec"]["adapter_sharing"] == changes.get("adapter_sharing", "none")
    saved, _ = load_checkpoint(run_dir, "best")
    assert sorted(saved) == sorted(manifest["trainable"]["names"])
    assert sum(t.numel() for t in saved.values()) == manifest["trainable"]["count"]
    if spec.method == "houlsby":
        check = manifest["trainable"]["method_check"]["sharing"]
        assert check["found"] == check["expected"] == sharing_adapter_parameters(D, 16, LAYERS, spec.adapter_sharing)
    model = load_run_model(run_dir, "best")
    parameters = dict(model.named_parameters())
    assert all(torch.equal(parameters[name], tensor) for name, tensor in saved.items())
    start, _ = load_checkpoint(run_dir, "step-0")
    assert any(not torch.equal(start[name], saved[name]) for name in saved)  # training moved them


@pytest.mark.slow
def test_tsp_of_a_shared_adapter_run_carries_its_settings(tiny_spec, tmp_path, glue_dir):
    from robustkit.store.checkpoints import load_checkpoint
    from robustkit.train import train

    spec = dataclasses.replace(
        tiny_spec,
        task="rte",
        train_size=None,
        epochs=1,
        batch_size=8,
        data_dir=glue_dir,
        tsp_step=2,
        adapter_sharing="layer",
        adapter_init_std=1e-3,
    )
    tsp = spec.tsp_spec()
    assert (tsp.adapter_sharing, tsp.adapter_init_std) == ("layer", 1e-3)
    assert tsp.run_id != dataclasses.replace(spec, adapter_sharing="none").tsp_spec().run_id
    run_dir = train(spec, tmp_path, progress=False)
    tsp_tensors, _ = load_checkpoint(tmp_path / tsp.run_id, "tsp-2")
    start, _ = load_checkpoint(run_dir, "step-0")
    adapters = [n for n in start if ".adapters." in n]
    assert len(adapters) == 4 * LAYERS  # one module per layer (4 tensors), named at its first position
    assert all(".attention.output.adapters." in n for n in adapters)
    assert all(torch.equal(start[n], tsp_tensors[n]) for n in adapters)
