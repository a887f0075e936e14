"""A figure reads the cached frame of its analysis whatever sample size it was computed at
(issue #57 item 5): `analyze attack --n 10` then `plot attack-boxes` draws those 10 examples per
run instead of attacking 200 more, and says so in one line; a given `--n` is honoured.

A fake cache (run folders with a manifest, cache files and their records): no attack runs."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pytest

from robustkit.analysis import reuse
from robustkit.store.manifest import read_manifest, write_manifest

ATTACK = {"attackers": ["pwws"], "n": 200, "seed": 0, "query_budget": None, "checkpoint": "best", "attack_options": []}


def fake_run(store: Path, name: str, files: str = "a" * 64) -> Path:
    run = store / name
    run.mkdir(parents=True)
    manifest = {"run_id": name, "kind": "finetune", "spec": {"task": "rt"}}
    write_manifest(run, {**manifest, "checkpoints": {"best": {"step": 4, "files": {"model.safetensors": files}}}})
    return run


def cache_entry(store: Path, run: Path, values: dict, key: str, analysis: str = "attack", pair: bool = False) -> Path:
    """A cache file of ``run`` and its record, as each_run writes them inside Analysis.run."""
    path = store / ".cache" / analysis / f"{run.name}-pwws-{key}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{}\n")
    with reuse.computing(analysis, values):
        reuse.record(analysis, path, run, ["best"], pair=pair)
    return path


@pytest.fixture
def store(tmp_path):
    store = tmp_path / "runs"
    for name in ("a", "b", "c"):
        fake_run(store, name)
    return store


def paths(store: Path) -> dict[str, Path]:
    return {name: store / name for name in ("a", "b", "c")}


def test_each_run_reads_its_largest_cached_sample_and_the_others_are_computed(store):
    cache_entry(store, store / "a", {**ATTACK, "n": 10}, "k10")
    cache_entry(store, store / "a", {**ATTACK, "n": 50}, "k50")
    cache_entry(store, store / "b", {**ATTACK, "n": 10}, "k10")
    plan = reuse.plan("attack", store, paths(store), ATTACK, ["n"], {"n": "--n"})
    groups = {values["n"]: ids for values, ids in plan.groups}
    assert groups == {50: ["a"], 10: ["b"], 200: ["c"]}
    assert all(values["seed"] == 0 and values["attackers"] == ["pwws"] for values, _ in plan.groups)
    assert "using cached attack frames at n=50 for 1 run(s)" in plan.message
    assert "n=10 for 1 run(s)" in plan.message
    assert "computing attack at n=200 for 1 run(s) with no cached frame" in plan.message
    assert plan.message.endswith("pass --n to recompute") and "\n" not in plan.message


def test_one_size_for_every_run_is_one_call_and_one_line(store):
    for name in ("a", "b", "c"):
        cache_entry(store, store / name, {**ATTACK, "n": 10}, "k10")
    plan = reuse.plan("attack", store, paths(store), ATTACK, ["n"])
    assert plan.groups == [({**ATTACK, "n": 10}, None)]
    today = read_record_date(store)
    assert plan.message == f"using cached attack frames at n=10 (computed {today}); pass --n to recompute"


def read_record_date(store: Path) -> str:
    import json

    record = next((store / ".cache" / "attack").glob(f"*{reuse.RECORD_SUFFIX}"))
    return json.loads(record.read_text())["computed"][:10]


def test_a_given_size_is_honoured(store):
    cache_entry(store, store / "a", {**ATTACK, "n": 10}, "k10")
    plan = reuse.plan("attack", store, paths(store), ATTACK, [])
    assert plan.groups == [(ATTACK, None)] and plan.message == ""


def test_entries_of_other_parameters_or_stale_ones_are_not_read(store):
    cache_entry(store, store / "a", {**ATTACK, "n": 10, "seed": 1}, "seed1")  # another sample
    cache_entry(store, store / "b", {**ATTACK, "n": 10, "attackers": ["deepwordbug"]}, "dwb")
    gone = cache_entry(store, store / "c", {**ATTACK, "n": 10}, "gone")
    gone.unlink()  # the cache file deleted: its record says nothing
    plan = reuse.plan("attack", store, paths(store), ATTACK, ["n"])
    assert plan.groups == [(ATTACK, None)] and plan.message == ""
    # a retrained run (other checkpoint files) never reads its old entries
    cache_entry(store, store / "a", {**ATTACK, "n": 10}, "k10")
    manifest = read_manifest(store / "a")
    manifest["checkpoints"]["best"]["files"] = {"model.safetensors": "b" * 64}
    write_manifest(store / "a", manifest)
    assert reuse.plan("attack", store, paths(store), ATTACK, ["n"]).groups == [(ATTACK, None)]


def test_records_are_written_only_inside_their_analysis(store):
    path = store / ".cache" / "attack" / "a-x.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("{}\n")
    reuse.record("attack", path, store / "a", ["best"])  # outside Analysis.run
    with reuse.computing("stability", {"n": 3}):
        reuse.record("attack", path, store / "a", ["best"])  # another analysis reading this cache
    assert not reuse.record_path(path).exists()


def test_pairs_read_one_size_every_run_has(store):
    cache_entry(store, store / "a", {**ATTACK, "n": 10}, "k10", pair=True)
    cache_entry(store, store / "a", {**ATTACK, "n": 50}, "k50", pair=True)
    cache_entry(store, store / "b", {**ATTACK, "n": 10}, "k10", pair=True)
    cache_entry(store, store / "c", {**ATTACK, "n": 10}, "k10", pair=True)
    plan = reuse.plan("attack", store, paths(store), ATTACK, ["n"])
    assert plan.groups == [({**ATTACK, "n": 10}, None)]


def test_a_figure_draws_the_cached_sample_unless_told(store, monkeypatch, caplog):
    from robustkit import figures
    from robustkit.analysis import declare, select

    for name in ("a", "b", "c"):
        cache_entry(store, store / name, {**ATTACK, "n": 10}, "k10")
    runs = pd.DataFrame({"run_id": ["a", "b", "c"], "path": [str(store / n) for n in ("a", "b", "c")]})
    monkeypatch.setattr(select, "select_runs", lambda store, select=None: runs)
    asked = []

    def run(self, store, select=None, **given):
        asked.append(given)
        return pd.DataFrame({"run_id": ["a", "b", "c"]})

    monkeypatch.setattr(declare.Analysis, "run", run)
    figure = figures.get("attack-boxes")
    with caplog.at_level(logging.INFO, logger="robustkit"):
        values, _ = figure._frame(store, None, {}, None, any_size=True)
    assert asked[-1]["n"] == 10 and values["n"] == 10
    assert "using cached attack frames at n=10" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="robustkit"):
        values, _ = figure._frame(store, None, {"n": 200}, None, any_size=True)
        assert asked[-1]["n"] == 200 and values["n"] == 200
        # by default (reproduce, a notebook's draw) the figure reads the frame a claim judges
        values, _ = figure._frame(store, None, {}, None)
    assert asked[-1]["n"] == 200 and values["n"] == 200 and "cached" not in caplog.text


def test_plot_leaves_a_sample_size_not_given_unset(tmp_path):
    from robustkit.cli import parse_args

    (tmp_path / "runs").mkdir()
    args = parse_args(["plot", "attack-boxes", str(tmp_path / "runs"), "-o", str(tmp_path / "f.pdf")])
    assert args.n is None and args.seed == 0
    args = parse_args(["plot", "attack-boxes", str(tmp_path / "runs"), "-o", str(tmp_path / "f.pdf"), "--n", "7"])
    assert args.n == 7
