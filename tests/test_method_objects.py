"""Every tuning method is one object (issue #14 items 1-2): its options, run ids, CLI flags and
store columns come from it; on bert-tiny each trains what its formula says, leaves the frozen
base bit-identical, gives the base model's outputs when switched off and resumes bit-identically
after a kill; runs of one method with different options are never pooled."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pandas as pd
import pytest
import torch
from conftest import TINY_RTE

from robustkit.analysis.registry import get as analysis
from robustkit.errors import MethodError, RobustkitError
from robustkit.methods import METHOD_NAMES, adaptation_of, apply_method, get_method
from robustkit.methods.model_parts import count_parameters
from robustkit.models.pretrained import load_classifier
from robustkit.specs.spec import RunSpec
from robustkit.store.checkpoints import load_checkpoint
from robustkit.store.folders import MODEL_FILE
from robustkit.store.manifest import read_manifest

D, FFN, LAYERS = 128, 512, 2  # bert-tiny
# The options each method needs (top-k has no default k) and the generic method's config.
NEEDS = {"topk": {"top_k": 1}, "adapterhub": {"config": "seq_bn[reduction_factor=8]"}}


# ---------------------------------------------------------------------------------------------
# the objects and what is read from them (no model)


def test_the_registry_and_the_spec_import_neither_torch_nor_adapters():
    code = (
        "import sys, robustkit.specs.spec, robustkit.methods; print([m for m in ('torch', 'adapters', 'transformers') "
        "if m in sys.modules])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stderr[-2000:]


def test_every_method_has_its_own_label_colour_and_option_names():
    from robustkit.figures.method_style import METHOD_COLORS, METHOD_LABELS
    from robustkit.store.tables import IDENTITY

    assert {
        "full",
        "houlsby",
        "adapterhub-houlsby",
        "topk",
        "layernorm",
        "lora",
        "dora",
        "vera",
        "ia3",
        "prefix",
        "prompt",
        "compacter",
        "parallel",
        "pfeiffer",
        "loreft",
        "unipelt",
        "mam",
        "adapterhub",
    } <= set(METHOD_NAMES)  # and whatever joins
    assert len(set(METHOD_COLORS.values())) == len(METHOD_NAMES) and set(METHOD_LABELS) == set(METHOD_NAMES)
    for name in METHOD_NAMES:
        method = get_method(name)
        assert len({o.name for o in method.options}) == len(method.options)
        for option in method.options:  # every option is a store column the pooling checks see
            assert method.column(option.name) in IDENTITY


@pytest.mark.parametrize(
    "fields, named",
    [
        (
            {"method": "lora", "method_options": {"r": 0}},
            r"method 'lora': option 'r' must be an integer >= 1 and <= 1048576, got 0",
        ),
        (
            {"method": "lora", "method_options": {"rank": 4}},
            r"method 'lora' has no option 'rank' \(its options: r, alpha",
        ),
        ({"method": "lora", "method_options": {"matrices": "q,x"}}, r"method 'lora': option 'matrices' = 'q,x'"),
        (
            {"method": "prefix", "method_options": {"reparametrise": "perhaps"}},
            r"'reparametrise' must be true or false, got 'perhaps'",
        ),
        (
            {"method": "prompt", "method_options": {"combine": "suffix"}},
            r"'combine' must be one of prefix, prefix_after_bos",
        ),
        ({"method": "full", "method_options": {"r": 4}}, r"method 'full' has no option 'r'"),
        ({"method": "adapterhub:no_such_config"}, r"method 'adapterhub': option 'config' = 'no_such_config'"),
        ({"method": "adapterhub"}, r"method 'adapterhub' needs option 'config'"),
        ({"method": "lora:x"}, r"method 'lora' takes no ':' argument"),
        ({"method": "lora", "method_options": {"lorra.r": 4}}, r"no method is named 'lorra'"),
    ],
)
def test_bad_options_name_the_method_the_option_and_the_value(fields, named):
    with pytest.raises(RobustkitError, match=named):
        RunSpec(**fields).resolved()


def test_every_option_is_part_of_the_run_id_and_one_setting_has_one_id():
    lora = RunSpec(method="lora").run_id
    assert RunSpec(method="lora", method_options={"r": 8, "alpha": 8, "matrices": "q,v", "dropout": 0}).run_id == lora
    assert RunSpec(method="lora", method_options={"matrices": "v, q", "lora.r": "8"}).run_id == lora  # spelling, text
    assert RunSpec(method="lora", method_options=(("r", 8),)).run_id == lora
    changed = [
        RunSpec(method="lora", method_options={name: value}).run_id
        for name, value in (("r", 4), ("alpha", 16), ("dropout", 0.1), ("matrices", "q,k,v"))
    ]
    assert len({lora, *changed}) == 5
    for name in METHOD_NAMES:  # every option of every method changes the id
        method = get_method(name)
        base = RunSpec(method=name, method_options=NEEDS.get(name, {}))
        options = method.resolve(NEEDS.get(name, {}))
        for option in method.options:
            value = options[option.name]
            other = {
                int: lambda: value + 1,
                float: lambda: 0.5 * value if value else 0.5,
                bool: lambda: not value,
                str: lambda: (
                    option.choices[-1]
                    if option.choices
                    else {"matrices": "v", "config": "seq_bn[reduction_factor=4]"}[option.name]
                ),
            }
            changed = dataclasses.replace(
                base, method_options={**dict(base.method_options), option.name: other[option.kind]()}
            )
            assert changed.run_id != base.run_id, (name, option.name)
    # the options of other methods change nothing (a grid over several methods)
    assert RunSpec(method="full", method_options={"lora.r": 4}).run_id == RunSpec(method="full").run_id
    # the generic method, two spellings
    assert (
        RunSpec(method="adapterhub:lora[r=4]").run_id
        == RunSpec(method="adapterhub", method_options={"config": "lora[r=4]"}).run_id
    )


def test_resolved_options_round_trip_through_a_manifest():
    spec = RunSpec(method="prefix", method_options={"length": 5, "reparametrise": False}, tsp_step=10).resolved()
    assert dict(spec.method_options) == {"length": 5, "reparametrise": False, "bottleneck": 512}
    back = RunSpec(**json.loads(json.dumps(spec.to_dict())))
    assert back == spec and back.run_id == spec.run_id
    assert spec.tsp_spec().method_options == spec.method_options  # TSP trains the same prefix


def test_method_options_from_the_command_line_and_a_grid():
    from robustkit.cli import build_parser
    from robustkit.cli.train import specs_from_args
    from robustkit.sweeps.grid import expand_grid

    args = build_parser().parse_args(
        ["train", "--store", "s", "--method", "lora", "--method-option", "r=4", "--method-option", "matrices=q,k,v"]
    )
    (spec,) = specs_from_args(args)
    assert dict(spec.method_options) == {"r": 4, "alpha": 8, "dropout": 0.0, "matrices": "q,k,v"}
    generic = specs_from_args(build_parser().parse_args(["train", "--store", "s", "--method", "adapterhub:seq_bn"]))
    assert generic[0].method == "adapterhub" and dict(generic[0].method_options) == {"config": "seq_bn"}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--store", "s", "--method", "lorra"])
    grid = expand_grid(
        {
            "base": {"model": "bert-tiny", "task": "rte"},
            "grid": {"method": ["lora", "full"], "method_options": [{"lora.r": 2}, {"lora.r": 4}]},
        }
    )
    assert [(s.method, dict(s.method_options).get("r")) for s in grid] == [
        ("lora", 2),
        ("lora", 4),
        ("full", None),
        ("full", None),
    ]
    assert grid[2].run_id == grid[3].run_id  # full ignores LoRA's r: one run


def test_a_bad_option_on_the_command_line_is_named(tmp_path, capsys):
    from robustkit.cli import main

    code = main(
        ["train", "--store", str(tmp_path), "--model", "bert-tiny", "--method", "lora", "--method-option", "r=many"]
    )
    assert code == 2 and "option 'r' must be an integer >= 1 and <= 1048576, got 'many'" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# on bert-tiny: trainable counts by hand


@pytest.mark.parametrize(
    "method, options, own",
    [
        ("lora", {"r": 4}, LAYERS * 2 * (2 * 4 * D)),  # 2rd per adapted d x d matrix
        (
            "lora",
            {"r": 2, "matrices": "intermediate,output"},
            LAYERS * 2 * 2 * (D + FFN),
        ),  # r (d_in + d_out), non-square
        ("dora", {"r": 4}, LAYERS * 2 * (2 * 4 * D + D)),  # + a magnitude per output unit
        ("vera", {"r": 4}, LAYERS * 2 * (4 * 4 + D * D)),  # AdapterHub's full scaling matrices
        ("ia3", {}, LAYERS * (D + D + FFN)),  # keys, values, FFN intermediate
        ("prefix", {"length": 5, "bottleneck": 16}, 5 * D + (D * 16 + 16) + (16 * 2 * LAYERS * D + 2 * LAYERS * D)),
        ("prefix", {"length": 5, "reparametrise": False}, 5 * 2 * LAYERS * D),
        ("prompt", {"length": 7}, 7 * D),
        ("pfeiffer", {}, LAYERS * (2 * 8 * D + D + 8)),  # m = d / 16
        ("parallel", {"reduction_factor": 4}, LAYERS * (2 * 32 * D + D + 32)),
        ("loreft", {"r": 2}, LAYERS * 2 * 2 * (2 * D + 1)),  # two units of r (2d + 1)
        ("houlsby", {"adapter_size": 16}, 2 * LAYERS * (2 * 16 * D + D + 16)),
        ("adapterhub-houlsby", {}, 2 * LAYERS * (2 * 8 * D + D + 8)),
    ],
)
def test_trainable_count_equals_the_formula(tiny_model, method, options, own):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    names = apply_method(model, method, **options)
    adaptation = adaptation_of(model)
    assert count_parameters(model, set(names) & set(adaptation.added)) == own
    assert adaptation.check["found"] == adaptation.check["expected"] == own
    head = [n for n in names if n.startswith("classifier.")]
    layer_norms = [n for n in names if "LayerNorm" in n]
    assert set(names) == set(names) & set(adaptation.added) | set(head) | set(layer_norms)
    assert bool(layer_norms) == (method == "houlsby")  # only Houlsby et al. train the LayerNorms


def test_a_method_that_trains_nothing_of_its_own_is_refused(tiny_model, monkeypatch):
    from robustkit.methods import adapterhub

    # the bug the issue describes: adapters added, but frozen (only the head would train)
    monkeypatch.setattr(adapterhub, "add_adapter", lambda model, method, config: _frozen_adapter(model, config))
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    with pytest.raises(
        MethodError, match="method 'lora' trains none of its own parameters on BertForSequenceClassification"
    ):
        apply_method(model, "lora")


def _frozen_adapter(model, config):
    import adapters

    adapters.init(model)
    model.add_adapter("task", config=config)
    for parameter in model.base_model.parameters():
        parameter.requires_grad_(False)


def test_a_count_that_differs_from_the_formula_is_refused(tiny_model, monkeypatch):
    from robustkit.methods.lora import LORA

    monkeypatch.setattr(type(LORA), "config_fields", lambda self, options: {"r": options["r"] + 1})
    with pytest.raises(
        MethodError,
        match=r"method 'lora' on BertForSequenceClassification \(bert\) trains 9216 parameters .* formula gives 8192",
    ):
        apply_method(load_classifier(tiny_model, num_labels=2, seed=0), "lora")


@pytest.mark.parametrize(
    "method, options",
    [
        ("prompt", {}),
        ("prompt", {"combine": "prefix_after_bos"}),
        ("adapterhub:prompt_tuning[prompt_length=4]|lora", {}),
    ],
)
def test_a_prompt_leaves_one_token_state_per_input_token(tiny_model, method, options):
    """Prompt tuning lengthens the encoder's output; the masked-LM loss of TSP needs one state per
    input token, and the states of the input's tokens are those AdapterHub computed."""
    from robustkit.data.batches import encode, masked_lm_collator
    from robustkit.models.masked_lm import masked_lm_loss
    from robustkit.models.pretrained import load_masked_lm, load_tokenizer

    model, _ = load_masked_lm(tiny_model, seed=0)
    apply_method(model, method, **options)
    model.eval()
    tokenizer = load_tokenizer(tiny_model)
    torch.manual_seed(0)
    batch = masked_lm_collator(tokenizer, 0.15)(
        encode([("a fine and quite long film about the sea",)] * 4, tokenizer, 16)
    )
    with torch.no_grad():
        n = batch["input_ids"].shape[1]
        assert model.base_model(input_ids=batch["input_ids"])[0].shape[1] == n
        assert model(**batch).logits.shape[1] == n
        assert torch.isfinite(masked_lm_loss(model, batch))


def test_a_method_adapterhub_cannot_add_is_named(tiny_model):
    model = load_classifier(tiny_model, num_labels=2, seed=0)
    # invertible adapters sit on the bare encoder's embeddings; AdapterHub refuses them under a head
    with pytest.raises(
        MethodError,
        match=r"method 'adapterhub': AdapterHub does not support SeqBnInvConfig on BertForSequenceClassification",
    ):
        apply_method(model, "adapterhub:seq_bn_inv")


# ---------------------------------------------------------------------------------------------
# on bert-tiny: every method trains, resumes, keeps its base and switches off


class _Killed(BaseException):
    """Stands for a kill: not an ``Exception``, so the run stays resumable (not ``failed``)."""


@pytest.fixture(scope="module")
def glue(tmp_path_factory, rte_folder):
    return str(rte_folder(tmp_path_factory.mktemp("glue")))


@pytest.fixture(scope="module")
def full_checkpoint_bytes(tmp_path_factory, glue):
    from robustkit.train import train

    run = train(
        dataclasses.replace(TINY_RTE, method="full", epochs=1, data_dir=glue),
        tmp_path_factory.mktemp("full"),
        progress=False,
    )
    return (run / "checkpoints" / "best" / MODEL_FILE).stat().st_size


@pytest.mark.slow
@pytest.mark.parametrize("method", [m for m in METHOD_NAMES if m != "full"])
def test_each_method_trains_resumes_keeps_its_base_and_switches_off(
    method, tmp_path, glue, monkeypatch, full_checkpoint_bytes
):
    from robustkit.train import train
    from robustkit.train.finetuning import _Finetune
    from robustkit.train.loop import _Loop
    from robustkit.train.run_model import load_run_model

    spec = dataclasses.replace(TINY_RTE, method=method, method_options=NEEDS.get(method, {}), data_dir=glue)
    trained_model = {}
    finish = _Finetune._finish

    def keep_model(self, model, *args):  # the model of the training process, after every step and evaluation
        trained_model["model"] = model
        return finish(self, model, *args)

    monkeypatch.setattr(_Finetune, "_finish", keep_model)
    reference = train(spec, tmp_path / "reference", progress=False)
    manifest = read_manifest(reference)
    check = manifest["trainable"]["method_check"]
    assert manifest["status"] == "complete" and check["found"] > 0
    assert check["expected"] is None or check["expected"] == check["found"]
    # the checkpoint holds exactly what trains, as safetensors; an adapter's is small
    saved, _ = load_checkpoint(reference, "best")
    assert sorted(saved) == sorted(manifest["trainable"]["names"])
    assert sum(t.numel() for t in saved.values()) == manifest["trainable"]["count"]
    size = (reference / "checkpoints" / "best" / MODEL_FILE).stat().st_size
    if get_method(method).uses_adapters:
        assert size < 0.15 * full_checkpoint_bytes, (
            f"{method}: {size} bytes vs {full_checkpoint_bytes} for full fine-tuning"
        )

    # killed after step 4, resumed: the same run to the bit
    original = _Loop.step

    def step(self, model, batch, optimiser, factor, step, max_grad_norm):
        if step == 5:
            raise _Killed
        return original(self, model, batch, optimiser, factor, step, max_grad_norm)

    monkeypatch.setattr(_Loop, "step", step)
    with pytest.raises(_Killed):
        train(spec, tmp_path / "killed", progress=False)
    monkeypatch.setattr(_Loop, "step", original)
    assert read_manifest(tmp_path / "killed" / spec.run_id)["checkpoints"]["last"]["step"] == 4
    resumed = train(spec, tmp_path / "killed", progress=False)
    for log in ("history.parquet", "gradnorms.parquet"):
        pd.testing.assert_frame_equal(
            pd.read_parquet(resumed / log), pd.read_parquet(reference / log), check_exact=True
        )
    again, _ = load_checkpoint(resumed, "last")
    last, _ = load_checkpoint(reference, "last")
    assert all(torch.equal(again[n], last[n]) for n in last)

    # the frozen base of the training process is bit-identical after its steps and evaluations
    base = load_classifier(spec.model, num_labels=2, seed=spec.seed)
    trained = set(manifest["trainable"]["names"])
    base_parameters = dict(base.named_parameters())
    after = dict(trained_model["model"].named_parameters())
    frozen = [n for n in after if n in base_parameters and n not in trained]
    assert frozen and all(torch.equal(after[n].cpu(), base_parameters[n]) for n in frozen)
    model = load_run_model(reference, "last")

    # switched off, an adapter method computes what the base with the run's head (and trained
    # LayerNorms) computes
    if get_method(method).uses_adapters:
        adaptation = adaptation_of(model)
        with torch.no_grad():
            for name in trained - set(adaptation.added):
                base_parameters[name].copy_(dict(model.named_parameters())[name])
            ids = torch.tensor([[101, 2023, 3185, 2003, 2307, 102, 0, 0], [101, 2307, 102, 0, 0, 0, 0, 0]])
            mask = (ids != 0).long()
            on = model(input_ids=ids, attention_mask=mask).logits
            get_method(method).deactivate(model)
            off = model(input_ids=ids, attention_mask=mask).logits
            reference_logits = base.eval()(input_ids=ids, attention_mask=mask).logits
        assert torch.equal(off, reference_logits)
        assert not torch.equal(on, reference_logits)


# ---------------------------------------------------------------------------------------------
# no analysis pools runs of one method with different options


@pytest.mark.slow
def test_runs_of_one_method_with_different_options_are_never_pooled(tmp_path, glue):
    from robustkit.analysis import scores, stability, tradeoff
    from robustkit.analysis.pooling import PoolingError
    from robustkit.train import train

    for seed, r in ((0, 2), (1, 4)):
        spec = dataclasses.replace(TINY_RTE, method="lora", seed=seed, epochs=1, data_dir=glue, method_options={"r": r})
        train(spec, tmp_path / "runs", progress=False)
    frame = scores.outcomes(tmp_path / "runs", split="validation", checkpoint="last", metric=None)
    assert sorted(frame["lora.r"]) == [2, 4] and set(frame["lora.matrices"]) == {"q,v"}
    with pytest.raises(PoolingError, match=r"differ in lora\.r = 2, 4"):
        stability.summarize(frame, ["task", "method"], include_failed=True)
    assert "lora.r" in stability.default_within(frame, "method")
    assert list(stability.summarize(frame, ["task", "method", "lora.r"], include_failed=True)["n"]) == [1, 1]
    assert list(
        scores.outcomes(tmp_path / "runs", ["lora.r=4"], split="validation", checkpoint="best", metric=None)["lora.r"]
    ) == [4]  # --select lora.r=4
    table = analysis("tradeoff").run(tmp_path / "runs")
    points = tradeoff.with_points(table)
    assert sorted(points["point"].unique()) == [2, 4]  # r orders LoRA's trade-off curve
    with pytest.raises(PoolingError, match="lora.r"):
        tradeoff.select_best(points.assign(point=0.0))  # one "point" would pool both ranks
