import pandas as pd
import pytest
import torch

from robustkit.analysis.each_run import each_run
from robustkit.analysis.select import parse_filters, select_runs
from robustkit.errors import RobustkitError
from robustkit.store.checkpoints import save_checkpoint
from robustkit.store.manifest import write_manifest


def _run(tmp_path, name, **spec):
    run_dir = tmp_path / name
    run_dir.mkdir()
    write_manifest(run_dir, {"run_id": name, "kind": "finetune", "status": "complete", "spec": spec, "checkpoints": {}})
    return run_dir


def test_parse_and_select(tmp_path):
    _run(tmp_path, "a", task="rt", method="houlsby", seed=0)
    _run(tmp_path, "b", task="rt", method="full", seed=1)
    assert parse_filters(["method=houlsby,full", "seed=1"]) == {"method": ["houlsby", "full"], "seed": ["1"]}
    # an AdapterHub config string keeps its commas
    assert parse_filters(["method=adapterhub:lora[r=4,alpha=8],full"]) == {
        "method": ["adapterhub:lora[r=4,alpha=8]", "full"]
    }
    assert list(select_runs(tmp_path, ["seed=1"]).run_id) == ["b"]
    with pytest.raises(RobustkitError, match="'colour'"):
        select_runs(tmp_path, ["colour=red"])
    with pytest.raises(RobustkitError, match="no complete run"):
        select_runs(tmp_path, ["task=sst2"])
    with pytest.raises(RobustkitError, match="bad selection"):
        parse_filters(["task"])


def test_each_run_caches_invalidates_on_a_changed_checkpoint_and_adds_identity(tmp_path):
    run_dir = _run(tmp_path, "a", task="rt", method="houlsby", seed=3)
    save_checkpoint(run_dir, "best", {"w": torch.zeros(2)}, {}, step=1)
    calls = []

    def compute(row):
        calls.append(row["run_id"])
        return pd.DataFrame({"value": [len(calls)]})

    def analyse(params, checkpoints=("best",)):
        return each_run(select_runs(tmp_path), "demo", params, checkpoints, compute)

    first, again = analyse({"n": 5}), analyse({"n": 5})
    assert calls == ["a"] and first.equals(again)
    assert first.loc[0, ["run_id", "task", "method", "seed", "value"]].tolist() == ["a", "rt", "houlsby", 3, 1]
    analyse({"n": 6})
    assert len(calls) == 2  # other parameters: another key
    save_checkpoint(run_dir, "best", {"w": torch.ones(2)}, {}, step=2)
    assert analyse({"n": 5})["value"].item() == 3  # a changed checkpoint: recomputed
    # the one run lacks the checkpoint: an error naming it (tests/test_left_out.py: more runs)
    with pytest.raises(RobustkitError, match="a has no checkpoint 'step-0'"):
        analyse({}, ["step-0"])


def test_a_resumable_analysis_keeps_its_own_file_under_the_same_key(tmp_path):
    run_dir = _run(tmp_path, "a", task="rt", method="full", seed=0)
    save_checkpoint(run_dir, "best", {"w": torch.zeros(2)}, {}, step=1)
    files = []

    def compute(row, path):
        files.append(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as out:
            out.write('{"example": %d}\n' % len(files))
        return pd.read_json(path, lines=True)

    each_run(select_runs(tmp_path), "attack", {"n": 1}, ["best"], compute, resumable=True)
    second = each_run(select_runs(tmp_path), "attack", {"n": 1}, ["best"], compute, resumable=True)
    assert files[0] == files[1] and files[0].suffix == ".jsonl" and files[0].name.startswith("a-")
    assert second["example"].tolist() == [1, 2] and (second["run_id"] == "a").all()
