"""Mixout (Lee et al. 2020): p = 0 is plain dropout, mixout pulls weights toward w0, and a run
with ``mixout=0.9`` trains, saves the same tensors as without it, resumes and reloads."""

import dataclasses

import pandas as pd
import pytest
import torch
from torch import nn

from robustkit.data import batches as data
from robustkit.data import tasks
from robustkit.errors import MethodError
from robustkit.models import pretrained as models
from robustkit.models.mixout import MixLinear, apply_mixout, disable_dropout, draw_mask, mix_linears, mix_weight
from robustkit.specs.spec import RunSpec
from robustkit.store.checkpoints import load_checkpoint
from robustkit.store.manifest import read_manifest
from robustkit.train import train
from robustkit.train.evaluate import EVAL_BATCH_SIZE, eval_batches, evaluate
from robustkit.train.loop import _Loop
from robustkit.train.run_model import build_classifier, load_run_model

# conftest's TINY_RTE: bert-tiny on a 24-example local RTE (rte_folder), 6 steps
TINY_RTE = RunSpec(model="bert-tiny", task="rte", epochs=2, batch_size=8, max_length=32, adapter_size=16, eval_every=2)
FULL = dataclasses.replace(TINY_RTE, method="full")


def _model(spec=FULL):
    model, names, _ = build_classifier(spec, num_labels=2)
    return model, names


def _batch():
    ids = torch.tensor([[101, 2023, 3185, 2003, 2307, 102], [101, 2172, 1998, 2146, 102, 0]])
    return {"input_ids": ids, "attention_mask": (ids != 0).long(), "labels": torch.tensor([1, 0])}


def _train_step(model, seed=0):
    """Training-mode loss and gradients of one batch, dropout/mixout drawn from ``seed``."""
    model.train()
    model.zero_grad()
    torch.manual_seed(seed)
    output = model(**_batch())
    output.loss.backward()
    return output.logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _assert_same_step(a, b):
    (logits_a, grads_a), (logits_b, grads_b) = a, b
    assert torch.equal(logits_a, logits_b)
    assert grads_a.keys() == grads_b.keys()
    for name in grads_a:
        assert torch.equal(grads_a[name], grads_b[name]), name


# --- p = 0 is plain dropout ------------------------------------------------------------------


def test_mixout_0_is_the_model_with_its_dropout():
    plain, _ = _model()
    mixed, _ = _model()
    assert apply_mixout(mixed, 0.0) == []
    assert not any(isinstance(m, MixLinear) for m in mixed.modules())
    # dropout is on (outputs are random in training mode) and draws the same masks
    assert not torch.equal(_train_step(plain, seed=0)[0], _train_step(plain, seed=1)[0])
    _assert_same_step(_train_step(plain), _train_step(mixed))


def test_mix_linear_at_p_0_computes_exactly_the_linear_layer_under_dropout():
    plain, _ = _model()
    mixed, _ = _model()
    wrapped = mix_linears(mixed, 0.0)  # MixLinear layers in place, dropout left as it is
    assert len(wrapped) == 14 and all(isinstance(mixed.get_submodule(n), MixLinear) for n in wrapped)
    assert [n for n, _ in mixed.named_parameters()] == [n for n, _ in plain.named_parameters()]
    _assert_same_step(_train_step(plain), _train_step(mixed))


def test_mixout_with_target_0_is_dropout_of_the_input_neurons():
    """Lee et al. 2020: mixout(0, p) drops all outgoing weights of a neuron, as dropout of it."""
    torch.manual_seed(0)
    x, weight, p = torch.randn(5, 8), torch.randn(3, 8), 0.6
    mask = torch.tensor([[1.0, 0, 0, 1, 1, 0, 1, 0]])
    mixed = nn.functional.linear(x, mix_weight(weight, torch.zeros_like(weight), mask, p))
    dropped = nn.functional.linear(x * mask / (1 - p), weight)
    torch.testing.assert_close(mixed, dropped)


# --- mixout pulls the weights toward w0 ------------------------------------------------------


def test_mixed_weight_mixes_whole_columns_and_is_unbiased():
    torch.manual_seed(0)
    weight, target, p = torch.randn(3, 4), torch.randn(3, 4), 0.9
    draws = torch.stack([mix_weight(weight, target, draw_mask(weight, p), p) for _ in range(4000)])
    kept = torch.isclose(draws, target + (weight - target) / (1 - p))
    replaced = torch.isclose(draws, target)
    assert (kept | replaced).all()
    assert (kept.all(dim=1) | replaced.all(dim=1)).all()  # one draw per input neuron (column)
    assert kept[:, 0, :].float().mean() == pytest.approx(1 - p, abs=0.02)
    # E[W_eff] = W; per element, the mean of 4000 draws has std 3|W - w0| / sqrt(4000)
    error = (draws.mean(0) - weight).abs()
    assert (error < 5 * 3 * (weight - target).abs() / 4000**0.5).all()


def test_at_evaluation_the_mixed_layer_is_w():
    linear = nn.Linear(8, 4)
    layer = MixLinear(linear, 0.9)
    with torch.no_grad():
        layer.weight.add_(1.0)
    x = torch.randn(5, 8)
    assert torch.equal(layer.eval()(x), nn.functional.linear(x, layer.weight, layer.bias))
    assert not torch.equal(layer.train()(x), layer.eval()(x))


def test_gradients_reach_w_through_the_kept_columns_only():
    torch.manual_seed(0)
    layer = MixLinear(nn.Linear(8, 4), 0.5).train()
    x = torch.randn(6, 8)
    torch.manual_seed(3)
    layer(x).sum().backward()
    torch.manual_seed(3)
    mask = draw_mask(layer.weight, 0.5)
    expected = (torch.ones(6, 4).T @ x) * mask / 0.5  # d sum(x W_eff^T) / dW_eff, times M / (1 - p)
    torch.testing.assert_close(layer.weight.grad, expected)
    assert 0 < int(mask.sum()) < 8


def _distance_after_sgd(p: float) -> float:
    """||W - w0|| after 300 SGD steps of a regression whose solution is w0 + 1."""
    torch.manual_seed(0)
    linear = nn.Linear(8, 4)
    target = linear.weight.detach().clone()
    x = torch.randn(32, 8)
    y = x @ (target + 1.0).T
    layer = MixLinear(linear, p).train()
    optimiser = torch.optim.SGD(layer.parameters(), lr=0.01)
    for step in range(300):
        torch.manual_seed(1000 + step)
        loss = ((layer(x) - y) ** 2).mean()
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return float((layer.weight.detach() - target).norm())


def test_mixout_keeps_the_weights_near_w0():
    # Lee et al. 2020 theorem 2: like an L2 penalty p/(1-p) ||W - w0||^2, 9x the data term here
    plain, mixed = _distance_after_sgd(0.0), _distance_after_sgd(0.9)
    assert plain > 3.0  # on its way to the solution, ||1|| = 5.66 away
    assert mixed < 0.3 * plain


# --- what is mixed, per method ---------------------------------------------------------------


def _dropout_left(model) -> list:
    return [m for m in model.modules() if getattr(m, "p", 0) and isinstance(m, nn.Dropout)] + [
        m for m in model.modules() if getattr(m, "dropout_prob", 0)
    ]


@pytest.mark.parametrize(
    "spec, expected",
    [
        (FULL, 2 * 6 + 2),  # per layer q, k, v, attention output, intermediate, output; pooler, classifier
        (TINY_RTE, 2 * 2 * 2 + 1),  # per layer two adapters of two projections; classifier
        (dataclasses.replace(TINY_RTE, adapter_sharing="3-layer"), 2 + 1),  # one shared adapter
    ],
    ids=["full", "houlsby", "houlsby-shared"],
)
def test_mixout_replaces_dropout_on_the_trained_linear_layers(spec, expected):
    model, names = _model(spec)
    before = dict(model.named_parameters())
    keys = list(model.state_dict())
    assert _dropout_left(model)
    mixed = apply_mixout(model, 0.9)
    assert len(mixed) == expected
    assert not _dropout_left(model)  # nn.Dropout and SDPA's attention dropout
    for name in mixed:
        layer = model.get_submodule(name)
        assert layer.weight.requires_grad and torch.equal(layer.target, layer.weight)
    frozen = [m for m in model.modules() if isinstance(m, nn.Linear) and not isinstance(m, MixLinear)]
    assert all(not m.weight.requires_grad for m in frozen)
    # the same parameter objects under the same names: optimiser and checkpoints see no change
    assert dict(model.named_parameters()).keys() == before.keys()
    assert all(p is before[n] for n, p in model.named_parameters())
    assert list(model.state_dict()) == keys
    if spec.adapter_sharing != "none":
        ups = {
            id(m.adapters["task"].adapter_up)
            for m in model.modules()
            if hasattr(m, "adapters") and "task" in getattr(m, "adapters", {})
        }
        assert len(ups) == 1


def test_without_dropout_training_mode_is_deterministic():
    model, _ = _model()
    disable_dropout(model)
    assert torch.equal(_train_step(model, seed=0)[0], _train_step(model, seed=1)[0])


@pytest.mark.parametrize("p", [1.0, -0.1, "0.9", True])
def test_bad_probability_is_named(p):
    with pytest.raises(MethodError, match="mixout probability"):
        apply_mixout(nn.Linear(2, 2), p)


# --- a real run ------------------------------------------------------------------------------


def _evaluate_reloaded(run_dir, spec, glue) -> dict:
    """Test metrics of the run's ``last`` checkpoint rebuilt as base model + saved tensors."""
    task = tasks.get_task(spec.task)
    splits = tasks.load_splits(spec.task, data_dir=glue, train_size=spec.train_size, split_seed=spec.split_seed)
    tokenizer = models.load_tokenizer(spec.model)
    texts = data.split_texts(splits["test"], task.text_fields)
    features = data.encode_labelled(texts, splits["test"]["label"], tokenizer, spec.resolved().max_length)
    batches = eval_batches(features, EVAL_BATCH_SIZE, data.classification_collator(tokenizer))
    return evaluate(load_run_model(run_dir, "last"), batches, task)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["houlsby", "full"])
def test_a_mixout_run_saves_the_same_tensors_and_reloads(method, tmp_path, rte_folder):
    glue = str(rte_folder(tmp_path / "glue"))
    plain_spec = dataclasses.replace(TINY_RTE, method=method, data_dir=glue)
    mixout_spec = dataclasses.replace(plain_spec, mixout=0.9)
    plain = train(plain_spec, tmp_path / "runs", progress=False)
    mixed = train(mixout_spec, tmp_path / "runs", progress=False)
    assert plain != mixed
    manifest = read_manifest(mixed)
    assert manifest["status"] == "complete" and manifest["spec"]["mixout"] == 0.9
    assert manifest["trainable"] == read_manifest(plain)["trainable"]
    for checkpoint in ("step-0", "best", "last"):
        assert load_checkpoint(mixed, checkpoint)[0].keys() == load_checkpoint(plain, checkpoint)[0].keys()
    # theta_0 is the same; the runs then differ (no dropout, mixed weights)
    for name, tensor in load_checkpoint(plain, "step-0")[0].items():
        assert torch.equal(tensor, load_checkpoint(mixed, "step-0")[0][name]), name
    last_plain, last_mixed = load_checkpoint(plain, "last")[0], load_checkpoint(mixed, "last")[0]
    assert any(not torch.equal(tensor, last_plain[name]) for name, tensor in last_mixed.items())
    # the checkpoint holds W: rebuilt without mixout, it scores what the run recorded
    reloaded = _evaluate_reloaded(mixed, mixout_spec, glue)
    recorded = manifest["final"]["last"]["test"]
    assert reloaded["accuracy"] == recorded["accuracy"]
    assert reloaded["loss"] == pytest.approx(recorded["loss"], rel=1e-6)


def test_w0_is_the_step_0_checkpoint_after_tsp(tmp_path, monkeypatch, rte_folder):
    from robustkit.train import finetuning

    spec = dataclasses.replace(TINY_RTE, data_dir=str(rte_folder(tmp_path / "glue")), tsp_step=2, mixout=0.9)
    targets = {}

    def recording(model, p):
        mixed = apply_mixout(model, p)
        targets.update({f"{name}.weight": model.get_submodule(name).target.cpu().clone() for name in mixed})
        return mixed

    monkeypatch.setattr(finetuning, "apply_mixout", recording)  # where the tuning loop looks it up
    run_dir = train(spec, tmp_path / "runs", progress=False)
    step_0 = load_checkpoint(run_dir, "step-0")[0]
    tsp = load_checkpoint(tmp_path / "runs" / spec.tsp_spec().run_id, "tsp-2")[0]
    assert len(targets) == 9
    for name, target in targets.items():
        assert torch.equal(target, step_0[name]), name
        if name in tsp:  # the adapters trained during TSP: their start is the TSP state
            assert torch.equal(target, tsp[name]), name
    assert sum(name in tsp for name in targets) == 8


class _Killed(BaseException):
    """Stands for a kill: not an ``Exception``, so the run stays resumable (not ``failed``)."""


def test_an_interrupted_mixout_run_resumes_to_the_same_result(tmp_path, monkeypatch, rte_folder):
    """w0 must be theta_0, not the weights of the ``last`` checkpoint the run resumes from."""
    glue = str(rte_folder(tmp_path / "glue"))
    spec = dataclasses.replace(TINY_RTE, data_dir=glue, mixout=0.9, lr=1e-2)
    reference = train(spec, tmp_path / "reference", progress=False)
    original = _Loop.step

    def step(self, model, batch, optimiser, factor, step, max_grad_norm):
        if step == 5:
            raise _Killed
        return original(self, model, batch, optimiser, factor, step, max_grad_norm)

    monkeypatch.setattr(_Loop, "step", step)
    with pytest.raises(_Killed):
        train(spec, tmp_path / "killed", progress=False)
    monkeypatch.setattr(_Loop, "step", original)
    run_dir = tmp_path / "killed" / spec.run_id
    assert read_manifest(run_dir)["checkpoints"]["last"]["step"] == 4
    resumed = train(spec, tmp_path / "killed", progress=False)
    for log in ("history.parquet", "gradnorms.parquet"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(resumed / log), pd.read_parquet(reference / log), check_exact=True
        )


# --- wiring: command line and grid files -----------------------------------------------------


def test_mixout_from_the_command_line_and_a_grid():
    from robustkit.cli import build_parser
    from robustkit.cli.train import specs_from_args
    from robustkit.sweeps.grid import expand_grid

    args = build_parser().parse_args(["train", "--store", "s", "--method", "full", "--mixout", "0.9"])
    assert [s.mixout for s in specs_from_args(args)] == [0.9]
    default = specs_from_args(build_parser().parse_args(["train", "--store", "s"]))
    assert [s.mixout for s in default] == [0.0]
    specs = expand_grid({"base": {"model": "bert-tiny", "method": "full"}, "grid": {"mixout": [0.0, 0.9]}})
    assert [s.mixout for s in specs] == [0.0, 0.9]
    assert specs[0].run_id == RunSpec(model="bert-tiny", method="full").run_id != specs[1].run_id
