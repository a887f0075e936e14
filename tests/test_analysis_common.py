import pandas as pd
import pytest
import torch

from robustkit import store
from robustkit.analysis.cache import cached
from robustkit.analysis.select import parse_filters, select_runs
from robustkit.errors import RobustkitError, StoreError


def _run(tmp_path, name, **spec):
    run_dir = tmp_path / name
    run_dir.mkdir()
    store.write_manifest(run_dir, {"run_id": name, "kind": "finetune", "status": "complete", "spec": spec, "checkpoints": {}})
    return run_dir


def test_parse_and_select(tmp_path):
    _run(tmp_path, "a", task="rt", method="houlsby", seed=0)
    _run(tmp_path, "b", task="rt", method="full", seed=1)
    assert parse_filters(["method=houlsby,full", "seed=1"]) == {"method": ["houlsby", "full"], "seed": ["1"]}
    assert list(select_runs(tmp_path, ["seed=1"]).run_id) == ["b"]
    with pytest.raises(RobustkitError, match="'colour'"):
        select_runs(tmp_path, ["colour=red"])
    with pytest.raises(RobustkitError, match="no complete run"):
        select_runs(tmp_path, ["task=sst2"])
    with pytest.raises(RobustkitError, match="bad selection"):
        parse_filters(["task"])


def test_cache_hits_and_invalidates_on_a_changed_checkpoint(tmp_path):
    run_dir = _run(tmp_path, "a")
    store.save_checkpoint(run_dir, "best", {"w": torch.zeros(2)}, {}, step=1)
    calls = []

    def compute():
        calls.append(1)
        return pd.DataFrame({"value": [len(calls)]})

    first = cached(run_dir, "demo", {"n": 5}, ["best"], compute)
    again = cached(run_dir, "demo", {"n": 5}, ["best"], compute)
    assert len(calls) == 1 and first.equals(again)
    cached(run_dir, "demo", {"n": 6}, ["best"], compute)
    assert len(calls) == 2
    store.save_checkpoint(run_dir, "best", {"w": torch.ones(2)}, {}, step=2)
    assert cached(run_dir, "demo", {"n": 5}, ["best"], compute)["value"].item() == 3
    with pytest.raises(StoreError, match="no checkpoint 'step-0'"):
        cached(run_dir, "demo", {}, ["step-0"], compute)
