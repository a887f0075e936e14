"""A run's identity includes the data it trained on (issue #13 item 2): local TSV folders by
content, hub datasets by name and revision, embedded tasks by their pinned sha256, which at
today's pins leave the run ids of existing stores unchanged."""

import dataclasses
import json
from pathlib import Path

import datasets
import pytest

from robustkit.specs.spec import RunSpec

# Computed with the code before run ids included the data: the runs of the measured demo store
# (embedded minilm-l6 on rt / polarity) and the paper-scale hub runs keep their ids and folders.
LEGACY_IDS = {
    RunSpec(): ("rt-houlsby-minilm-l6-s0-tsp0-605128a5", "tsp-rt-houlsby-minilm-l6-8878be6d"),
    RunSpec(method="full"): ("rt-full-minilm-l6-s0-tsp0-f4bd44bc", "tsp-rt-full-minilm-l6-63fca992"),
    RunSpec(task="polarity", train_size=1000, tsp_step=200, seed=2): (
        "polarity-houlsby-minilm-l6-s2-tsp200-d4c3bec7",
        "tsp-polarity-houlsby-minilm-l6-2c450579",
    ),
    RunSpec(
        adapter_size=64,
        batch_size=16,
        epochs=3,
        eval_every=24,
        lr=5e-4,
        max_length=64,
        train_size=1000,
        tsp_batch_size=16,
        tsp_lr=5e-4,
        tsp_step=200,
    ): ("rt-houlsby-minilm-l6-s0-tsp200-2a3d99e0", "tsp-rt-houlsby-minilm-l6-173330da"),
    RunSpec(
        batch_size=16, epochs=3, eval_every=24, lr=1e-4, max_length=64, method="full", task="polarity", train_size=1000
    ): ("polarity-full-minilm-l6-s0-tsp0-09731d8b", "tsp-polarity-full-minilm-l6-906d1575"),
    RunSpec(model="bert-tiny", task="rte", epochs=2, batch_size=8, max_length=32, adapter_size=16, eval_every=2): (
        "rte-houlsby-bert-tiny-s0-tsp0-e313d828",
        "tsp-rte-houlsby-bert-tiny-eb4aefac",
    ),  # hub data, no revision
}


@pytest.mark.parametrize("spec, ids", LEGACY_IDS.items(), ids=[ids[0] for ids in LEGACY_IDS.values()])
def test_run_ids_of_embedded_and_hub_runs_do_not_change(spec, ids):
    assert (spec.run_id, spec.tsp_spec().run_id) == ids


DEMO = Path(__file__).resolve().parents[1] / "runs" / "demo"


@pytest.mark.skipif(not DEMO.is_dir(), reason="no measured demo store in this checkout")
def test_every_run_of_the_demo_store_keeps_its_id():
    from robustkit.specs.spec import TspSpec

    for path in sorted(DEMO.glob("*/manifest.json")):
        manifest = json.loads(path.read_text())
        kind = RunSpec if manifest["kind"] == "finetune" else TspSpec
        assert kind(**manifest["spec"]).run_id == manifest["run_id"] == path.parent.name


def test_every_task_at_its_default_data_keeps_the_data_out_of_its_id():
    from robustkit.data.tasks import TASKS
    from robustkit.specs.spec import data_identity

    for name in TASKS:  # embedded files at today's pins, GLUE from the hub at no pinned revision
        assert data_identity(name, None) is None, name


def _flip_first_label(glue: Path, file_name: str = "train.tsv") -> None:
    path = glue / "RTE" / file_name
    header, first, *rest = path.read_text().splitlines()
    *fields, label = first.split("\t")
    flipped = "not_entailment" if label == "entailment" else "entailment"
    path.write_text("\n".join([header, "\t".join([*fields, flipped]), *rest]) + "\n")


def test_tsv_fingerprint_is_what_the_files_hold_not_where_they_are(tmp_path, rte_folder):
    from robustkit.data.tasks import data_fingerprint

    a, b = rte_folder(tmp_path / "a"), rte_folder(tmp_path / "b")
    assert data_fingerprint("rte", a) == data_fingerprint("rte", b) == data_fingerprint("rte", b / "RTE")
    assert data_fingerprint("rte", a).startswith("tsv:sha256:")
    (a / "RTE" / "test.tsv").write_text("not read by any run\n")  # files the task does not read: no change
    assert data_fingerprint("rte", a) == data_fingerprint("rte", b)
    _flip_first_label(a, "dev.tsv")
    assert data_fingerprint("rte", a) != data_fingerprint("rte", b)
    spec = RunSpec(task="rte", data_dir=str(a))
    assert spec.run_id != dataclasses.replace(spec, data_dir=str(b)).run_id
    assert spec.resolved().data_fingerprint == data_fingerprint("rte", a)
    # the TSP run starts from the same data, so it follows it too
    assert (
        RunSpec(task="rte", data_dir=str(a), tsp_step=2).tsp_spec().run_id
        != RunSpec(task="rte", data_dir=str(b), tsp_step=2).tsp_spec().run_id
    )


def test_a_missing_tsv_file_is_named_when_the_run_id_is_made(tmp_path, rte_folder):
    from robustkit.errors import TaskError

    glue = rte_folder(tmp_path / "glue")
    (glue / "RTE" / "dev.tsv").unlink()
    with pytest.raises(TaskError, match="dev.tsv"):
        RunSpec(task="rte", data_dir=str(glue)).run_id


def test_a_files_hash_is_remembered_only_while_it_cannot_change_unseen(tmp_path, monkeypatch):
    from robustkit.data import stat_keys, tasks

    path = tmp_path / "train.tsv"
    path.write_text("a\n")
    assert tasks._file_sha256(path) == tasks._file_sha256(path)
    assert not any(key[0] == str(path.resolve()) for key in tasks._HASHES)  # just written: not remembered
    path.write_text("b\n")  # same size, maybe the same mtime: still seen
    assert tasks._file_sha256(path) == store_sha(path)
    monkeypatch.setattr(stat_keys, "RACY_NS", 0)
    tasks._file_sha256(path)
    assert any(key[0] == str(path.resolve()) for key in tasks._HASHES)


def store_sha(path):
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_hub_runs_are_identified_by_name_and_revision_and_record_the_datasets_fingerprints(
    tmp_path, rte_folder, monkeypatch
):
    from robustkit.data import tasks

    glue = rte_folder(tmp_path / "glue")
    local = tasks.load_splits("rte", data_dir=glue)
    calls = []

    def fake_load_dataset(name, config, **kwargs):  # the hub, offline: the local TSV data
        calls.append((name, config, kwargs))
        return datasets_dict(local, fingerprint="hubdata1")

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)  # robustkit imports it where it loads
    spec = RunSpec(task="rte")
    assert spec.resolved().data_fingerprint is None and tasks.data_fingerprint("rte") == "hub:nyu-mll/glue/rte"
    unpinned = spec.run_id
    record = tasks.data_record("rte", None, tasks.load_splits("rte"))
    assert calls == [("nyu-mll/glue", "rte", {})]
    assert (
        record["source"] == "hub"
        and record["revision"] is None
        and set(record["datasets"]) == {"train", "validation", "test"}
    )
    # a pinned revision is loaded, and is part of the id
    monkeypatch.setattr(tasks, "GLUE_REVISION", "abc123")
    assert tasks.data_fingerprint("rte") == "hub:nyu-mll/glue/rte@abc123"
    assert spec.run_id != unpinned and spec.resolved().data_fingerprint == "hub:nyu-mll/glue/rte@abc123"
    tasks.load_splits("rte")
    assert calls[-1] == ("nyu-mll/glue", "rte", {"revision": "abc123"})


def datasets_dict(splits, fingerprint):
    """A DatasetDict as the hub gives it (``label`` as the hub's ints, a fixed fingerprint)."""
    import datasets

    out = {}
    for name in ("train", "validation"):
        split = datasets.Dataset.from_dict(splits[name].to_dict())
        split._fingerprint = f"{fingerprint}-{name}"
        out[name] = split
    return datasets.DatasetDict(out)


def _tiny(glue: Path) -> RunSpec:
    from conftest import TINY_RTE

    return dataclasses.replace(TINY_RTE, epochs=1, data_dir=str(glue))


def test_flipping_a_label_gives_a_new_run_that_the_sweep_trains(tmp_path, rte_folder):
    from robustkit.store.manifest import read_manifest
    from robustkit.store.tables import load_runs
    from robustkit.sweeps.grid import run_sweep

    glue = rte_folder(tmp_path / "glue")
    before = _tiny(glue).resolved()
    assert list(run_sweep([before], tmp_path / "runs", progress=False).status) == ["complete"]
    manifest = read_manifest(tmp_path / "runs" / before.run_id)
    assert manifest["data"]["fingerprint"] == manifest["spec"]["data_fingerprint"] == before.data_fingerprint
    assert set(manifest["data"]["files"]) == {"train.tsv", "dev.tsv"} and manifest["data"]["source"] == "tsv"
    _flip_first_label(glue)
    after = _tiny(glue).resolved()  # the same command again, on the edited data
    assert after.run_id != before.run_id
    assert list(run_sweep([after], tmp_path / "runs", progress=False).status) == ["complete"]  # not "skipped"
    runs = load_runs(tmp_path / "runs")
    assert set(runs.run_id) == {before.run_id, after.run_id} and runs["data_fingerprint"].nunique() == 2


def test_resuming_a_run_on_changed_tsv_files_is_refused_naming_both_fingerprints(tmp_path, rte_folder):
    from robustkit.errors import DataChangedError
    from robustkit.store.manifest import update_manifest
    from robustkit.train import pretrain, train

    glue = rte_folder(tmp_path / "glue")
    spec = _tiny(glue).resolved()
    run_dir = train(spec, tmp_path / "runs", progress=False)
    update_manifest(run_dir, status="failed")  # interrupted: a resumable run
    _flip_first_label(glue)
    before = (run_dir / "manifest.json").read_bytes()
    changed = _tiny(glue).resolved().data_fingerprint
    with pytest.raises(DataChangedError) as refused:
        train(spec, tmp_path / "runs", progress=False)  # e.g. a Slurm job queued before the edit
    assert spec.data_fingerprint in str(refused.value) and changed in str(refused.value)
    assert str(glue) in str(refused.value)
    assert (run_dir / "manifest.json").read_bytes() == before  # refused before anything was written
    # a TSP run too: its id holds the data it pretrains on
    tsp = dataclasses.replace(spec, tsp_step=2).tsp_spec()
    with pytest.raises(DataChangedError, match=spec.data_fingerprint):
        pretrain(tsp, [2], tmp_path / "runs", data_dir=str(glue), progress=False)


def test_resuming_a_hub_run_on_changed_hub_data_is_refused(tmp_path, rte_folder, monkeypatch):
    """The hub's content is not in the id (known only once loaded): the manifest records the
    ``datasets`` fingerprints, and a resume on other ones is refused."""
    from conftest import TINY_RTE

    from robustkit.data import tasks
    from robustkit.errors import DataChangedError
    from robustkit.store.manifest import read_manifest, update_manifest
    from robustkit.train import train

    local = tasks.load_splits("rte", data_dir=rte_folder(tmp_path / "glue"))
    hub = {"fingerprint": "v1"}
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config, **kw: datasets_dict(local, hub["fingerprint"]))
    spec = dataclasses.replace(TINY_RTE, epochs=1).resolved()
    run_dir = train(spec, tmp_path / "runs", progress=False)
    recorded = read_manifest(run_dir)["data"]
    assert recorded["fingerprint"] == "hub:nyu-mll/glue/rte" and recorded["datasets"]["train"]
    update_manifest(run_dir, status="failed")
    hub["fingerprint"] = "v2"
    with pytest.raises(DataChangedError, match="datasets fingerprints") as refused:
        train(spec, tmp_path / "runs", progress=False)
    assert recorded["datasets"]["train"] in str(refused.value)


def test_a_sweeps_data_dir_replaces_the_grids_folder_and_its_fingerprint(tmp_path, rte_folder):
    """``sweep --data-dir B`` over a grid whose [base] names folder A: the runs are B's, with B's
    fingerprint (not A's, which training on B would refuse as changed data)."""
    from robustkit.sweeps.grid import with_data_dir

    first, second = rte_folder(tmp_path / "a"), rte_folder(tmp_path / "b")
    _flip_first_label(second)
    spec = RunSpec(model="bert-tiny", task="rte", data_dir=str(first)).resolved()
    (moved,) = with_data_dir([spec], str(second))
    assert moved.data_dir == str(second)
    assert (
        moved.data_fingerprint
        == RunSpec(model="bert-tiny", task="rte", data_dir=str(second)).resolved().data_fingerprint
    )
    assert moved.data_fingerprint != spec.data_fingerprint and moved.run_id != spec.run_id
