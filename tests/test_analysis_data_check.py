"""Analyses re-check the data they read (issue #39 item 3): a run's local data edited after
training is refused by name instead of silently changing the analysis, and a relative data
folder is stored resolved, so the same analysis from another folder reads the same data."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import TINY_RTE, write_rte

from robustkit.analysis import registry
from robustkit.errors import DataChangedError
from robustkit.store.manifest import read_manifest
from robustkit.train import train

LANDSCAPE = {"alphas": "0,1", "checkpoint": "last", "splits": ["validation"]}


@pytest.fixture
def own_data_run(tmp_path, monkeypatch):
    """One houlsby run trained with a relative --data-dir, from tmp_path."""
    write_rte(tmp_path / "glue")
    monkeypatch.chdir(tmp_path)
    run_dir = train(dataclasses.replace(TINY_RTE, data_dir="glue"), tmp_path / "runs", progress=False)
    return tmp_path, run_dir


def test_a_relative_data_folder_is_stored_resolved(own_data_run, monkeypatch):
    tmp_path, run_dir = own_data_run
    assert read_manifest(run_dir)["spec"]["data_dir"] == str((tmp_path / "glue").resolve())
    other = tmp_path / "elsewhere"
    write_rte(other / "glue", dev=6)  # another data set under the same relative path
    monkeypatch.chdir(other)
    frame = registry.get("landscape").run(tmp_path / "runs", progress=False, **LANDSCAPE)
    monkeypatch.chdir(tmp_path)
    again = registry.get("landscape").run(tmp_path / "runs", progress=False, **LANDSCAPE)
    assert frame["value"].tolist() == again["value"].tolist()  # the run's own data, wherever it ran


def test_data_edited_after_training_is_refused_by_name(own_data_run):
    tmp_path, run_dir = own_data_run
    dev = tmp_path / "glue" / "RTE" / "dev.tsv"
    lines = dev.read_text().splitlines()
    head, *rows = lines
    flipped = [
        row.rsplit("\t", 1)[0] + "\t" + ("entailment" if row.endswith("not_entailment") else "not_entailment")
        for row in rows
    ]
    dev.write_text("\n".join([head, *flipped]) + "\n")
    with pytest.raises(DataChangedError) as refused:
        registry.get("landscape").run(tmp_path / "runs", progress=False, **LANDSCAPE)
    message = str(refused.value)
    assert "dev.tsv changed since" in message and run_dir.name in message and "\n" not in message, message


@pytest.mark.parametrize(
    "verb",
    [["runs"], ["stats"], ["analyze", "scores"], ["plot", "box-seeds", "-o", "{tmp}/box.pdf"]],
    ids=lambda v: " ".join(v[:2]),
)
def test_every_verb_that_reads_the_store_flags_changed_data_in_one_line(own_data_run, verb, monkeypatch):
    """Issue #46 item 2: runs, stats, scores and plot say so (analyses refuse, above), once, in
    one ``warning:`` line naming the file and the run."""
    import warnings

    from robustkit.cli import main
    from robustkit.store import tables
    from robustkit.store.run_data import DataChangedWarning

    tmp_path, run_dir = own_data_run
    dev = tmp_path / "glue" / "RTE" / "dev.tsv"
    dev.write_text(dev.read_text().replace("not_entailment", "entailment", 1))
    monkeypatch.setattr(tables, "_WARNED", set())
    store = str(tmp_path / "runs")
    argv = [part.replace("{tmp}", str(tmp_path)) for part in verb]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main([*argv[:2], store, *argv[2:]] if argv[0] != "runs" else ["runs", store]) == 0
    changed = [w for w in caught if issubclass(w.category, DataChangedWarning)]
    assert len(changed) == 1
    shown = warnings.formatwarning(changed[0].message, changed[0].category, changed[0].filename, changed[0].lineno)
    assert shown.startswith("warning: ") and shown.count("\n") == 1  # as the CLI prints it
    assert "dev.tsv" in shown or "glue" in shown
    assert "changed since training" in shown and run_dir.name in shown
