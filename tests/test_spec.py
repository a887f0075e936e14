import pytest

from robustkit.errors import RobustkitError
from robustkit.specs.spec import RunSpec


def test_paper_defaults_per_method():
    adapter = RunSpec(method="houlsby").resolved()
    full = RunSpec(method="full").resolved()
    assert (adapter.lr, adapter.epochs, adapter.max_length, adapter.adapter_size) == (1e-4, 20, 256, 64)
    assert (full.lr, full.epochs, full.max_length, full.adapter_size) == (2e-5, 10, 128, None)


def test_run_id_is_stable_and_tells_runs_apart():
    assert RunSpec(seed=1).run_id == RunSpec(seed=1).run_id
    assert RunSpec(seed=1).run_id != RunSpec(seed=2).run_id
    assert RunSpec(seed=1).run_id == RunSpec(seed=1, lr=1e-4).run_id  # 1e-4 is houlsby's default
    assert RunSpec(data_dir="/a").run_id == RunSpec(data_dir="/b").run_id  # where data lives is not what it is
    # without TSP, the TSP settings change nothing
    assert RunSpec(tsp_seed=5).run_id == RunSpec().run_id
    assert RunSpec(tsp_step=10, tsp_seed=5).run_id != RunSpec(tsp_step=10).run_id


def test_runs_of_different_seeds_share_one_tsp_run():
    a, b = RunSpec(seed=1, tsp_step=100), RunSpec(seed=2, tsp_step=200)
    assert a.tsp_spec() == b.tsp_spec()
    assert RunSpec(method="full", tsp_step=100).tsp_spec() != a.tsp_spec()


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"task": "nope"}, "nope"),
        ({"method": "lorra"}, "lorra"),
        ({"seed": "x"}, "seed"),
        ({"epochs": 0}, "epochs"),
        ({"lr": -1.0}, "lr"),
    ],
)
def test_bad_values_are_named(fields, named):
    with pytest.raises(RobustkitError, match=named):
        RunSpec(**fields).resolved()


# Run ids computed with the code before top_k / adapter_init_std / adapter_sharing existed (and,
# for topk, layernorm and the houlsby variants, before method objects and method_options): adding
# fields or methods must never change the id (and so the folder) of a run already in a store.
PINNED_IDS = {
    RunSpec(): "rt-houlsby-minilm-l6-s0-tsp0-605128a5",
    RunSpec(method="full", seed=2, tsp_step=200): "rt-full-minilm-l6-s2-tsp200-325b79ac",
    RunSpec(method="adapterhub-houlsby", task="rte"): "rte-adapterhub-houlsby-minilm-l6-s0-tsp0-27b12a42",
    RunSpec(method="topk", top_k=2): "rt-topk-minilm-l6-s0-tsp0-3830dfbb",
    RunSpec(method="topk", top_k=1, task="rte", seed=3): "rte-topk-minilm-l6-s3-tsp0-bfe83277",
    RunSpec(method="layernorm"): "rt-layernorm-minilm-l6-s0-tsp0-1417022f",
    RunSpec(method="layernorm", tsp_step=100, seed=1): "rt-layernorm-minilm-l6-s1-tsp100-dc415aef",
    RunSpec(adapter_sharing="3-layer", adapter_init_std=1e-3): "rt-houlsby-minilm-l6-s0-tsp0-b553bd70",
    RunSpec(method="houlsby", adapter_size=8, lr=1e-3): "rt-houlsby-minilm-l6-s0-tsp0-01916b4c",
    RunSpec(mixout=0.9, method="full"): "rt-full-minilm-l6-s0-tsp0-5e37a6d6",
}
PINNED_TSP_IDS = {
    RunSpec(method="topk", top_k=2): "tsp-rt-topk-minilm-l6-96e4755b",
    RunSpec(method="layernorm", tsp_step=100, seed=1): "tsp-rt-layernorm-minilm-l6-5fcde4b3",
    RunSpec(adapter_sharing="3-layer", adapter_init_std=1e-3): "tsp-rt-houlsby-minilm-l6-768a4af0",
}


@pytest.mark.parametrize("spec, run_id", PINNED_IDS.items())
def test_run_ids_of_existing_runs_do_not_change(spec, run_id):
    assert spec.run_id == run_id


def test_tsp_run_id_of_existing_runs_does_not_change():
    assert RunSpec(seed=2, tsp_step=200).tsp_spec().run_id == "tsp-rt-houlsby-minilm-l6-e169dbc3"
    for spec, run_id in PINNED_TSP_IDS.items():
        assert spec.tsp_spec().run_id == run_id


def test_method_settings_are_normalised_to_their_method():
    assert (
        RunSpec(method="full", top_k=3, adapter_sharing="layer", adapter_init_std=1e-3).run_id
        == RunSpec(method="full").run_id
    )
    assert RunSpec(method="topk", top_k=2, adapter_init_std=1.0).resolved().adapter_init_std is None
    houlsby = RunSpec(top_k=2, adapter_init_std=1, adapter_sharing="3-layer").resolved()
    assert (houlsby.top_k, houlsby.adapter_init_std, houlsby.adapter_sharing) == (None, 1.0, "3-layer")
    assert RunSpec(adapter_init_std=1).run_id == RunSpec(adapter_init_std=1.0).run_id  # TOML 1 vs 1.0
    ids = {
        RunSpec(method="topk", top_k=1).run_id,
        RunSpec(method="topk", top_k=2).run_id,
        RunSpec(adapter_sharing="layer").run_id,
        RunSpec(adapter_sharing="3-layer").run_id,
        RunSpec(adapter_init_std=1e-3).run_id,
        RunSpec().run_id,
    }
    assert len(ids) == 6


def test_new_method_defaults():
    topk, layernorm = RunSpec(method="topk", top_k=1).resolved(), RunSpec(method="layernorm").resolved()
    assert (topk.lr, topk.epochs, topk.max_length) == (2e-5, 10, 128)
    assert (layernorm.lr, layernorm.epochs, layernorm.max_length, layernorm.adapter_size) == (1e-4, 20, 256, None)


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"method": "topk"}, "top_k"),
        ({"method": "topk", "top_k": 0}, "top_k"),
        ({"adapter_sharing": "2-layer"}, "2-layer"),
        ({"adapter_init_std": 0.0}, "adapter_init_std"),
        ({"adapter_init_std": "big"}, "adapter_init_std"),
    ],
)
def test_bad_method_settings_are_named(fields, named):
    with pytest.raises(RobustkitError, match=named):
        RunSpec(**fields).resolved()


def test_mixout_is_part_of_the_run_id_only_when_on():
    assert RunSpec(mixout=0.9).run_id != RunSpec().run_id
    assert RunSpec(mixout=0).run_id == RunSpec(mixout=0.0).run_id == RunSpec().run_id  # ids of runs before mixout
    assert RunSpec(method="full", mixout=0.9).run_id != RunSpec(method="full").run_id
    assert RunSpec(mixout=0.9, tsp_step=100).tsp_spec() == RunSpec(tsp_step=100).tsp_spec()  # TSP has no mixout


@pytest.mark.parametrize("mixout", [1.0, 1, -0.1, "0.9", True])
def test_bad_mixout_is_named(mixout):
    with pytest.raises(RobustkitError, match="mixout"):
        RunSpec(mixout=mixout).resolved()


def test_light_method_names_are_the_registrys():
    # the CLI takes --method choices from spec.METHOD_NAMES so that --help never imports methods
    from robustkit.methods import METHODS
    from robustkit.specs.spec import METHOD_NAMES

    assert METHOD_NAMES == tuple(METHODS)


def test_a_spec_is_resolved_once_into_a_resolved_type():
    import dataclasses
    import pickle

    from robustkit.specs.spec import ResolvedRunSpec

    spec = RunSpec(task="rt", method="lora", seed=3)
    resolved = spec.resolved()
    assert isinstance(resolved, ResolvedRunSpec) and resolved.resolved() is resolved
    assert resolved.run_id == spec.run_id and resolved.tsp_spec() == spec.tsp_spec()
    # a plain spec of the same values is equal to it, hashes the same and has its id
    plain = RunSpec(**resolved.to_dict())
    assert type(plain) is RunSpec and plain == resolved and hash(plain) == hash(resolved)
    assert plain.run_id == resolved.run_id and plain != dataclasses.replace(plain, seed=4)
    # changed values may need resolving again: replace gives a plain spec, resolved anew
    changed = dataclasses.replace(resolved, tsp_step=100)  # its tsp_lr is filled in by resolving
    assert type(changed) is RunSpec and changed.resolved().tsp_lr == resolved.lr
    assert changed.run_id == RunSpec(task="rt", method="lora", seed=3, tsp_step=100).run_id
    assert type(ResolvedRunSpec(task="rt")) is RunSpec  # only resolved() makes one
    again = pickle.loads(pickle.dumps(resolved))  # a job's spec stays resolved in its process
    assert isinstance(again, ResolvedRunSpec) and again == resolved and again.run_id == resolved.run_id
