import pytest

from robustkit.errors import RobustkitError
from robustkit.spec import RunSpec


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
    [({"task": "nope"}, "nope"), ({"method": "lora"}, "lora"), ({"seed": "x"}, "seed"), ({"epochs": 0}, "epochs"), ({"lr": -1.0}, "lr")],
)
def test_bad_values_are_named(fields, named):
    with pytest.raises(RobustkitError, match=named):
        RunSpec(**fields).resolved()
