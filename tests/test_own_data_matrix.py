"""The user's own data through every analysis and figure (issue #46 item 1): the matrix of every
registered analysis and figure x a CSV file, a JSONL file and a notebook's DataFrame.

Each store is trained here; each analysis and figure then runs in a process that never read or
registered the data (``tests/own_data_matrix.py`` forks one per item from a fresh interpreter),
so it must find the run's task and data from the run itself. The driver iterates the registries:
a new analysis or figure joins the matrix by itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sentence_store import reviews, train_runs

from robustkit.analysis import registry
from robustkit.data import user_data
from robustkit.figures import FIGURES


@pytest.fixture(scope="module")
def own_stores(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("own-data-matrix")
    frame = reviews()
    frame.to_csv(root / "reviews.csv", index=False)
    frame.to_json(root / "notes.jsonl", orient="records", lines=True)
    sources = {
        "csv": dict(task="reviews", data_dir=str(root / "reviews.csv")),
        "jsonl": dict(task="notes", data_dir=str(root / "notes.jsonl")),
        "dataframe": dict(task="frame"),
    }
    user_data.register(frame, name="frame")  # lives in this process only: the store keeps a copy
    try:
        for source, fields in sources.items():
            train_runs(root / source, **fields)
    finally:
        user_data._REGISTRY.pop("frame", None)
    return {source: root / source for source in sources}


# What runs on each source: every analysis on every source (each reads the run's data itself);
# the figures draw from the analyses' frames, which carry no data source, so they run on the CSV
# (and every figure is drawn from a single-sentence store by tests/test_figures_axes.py).
KINDS = {"csv": ("analysis", "figure"), "jsonl": ("analysis",), "dataframe": ("analysis",)}


@pytest.mark.parametrize("source", list(KINDS))
def test_every_analysis_and_figure_on_own_data_in_a_fresh_process(own_stores, source, shared_nltk_data):
    driver = Path(__file__).with_name("own_data_matrix.py")
    env = {**os.environ, "NLTK_DATA": shared_nltk_data}
    command = [sys.executable, str(driver), str(own_stores[source]), ",".join(KINDS[source])]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    ran = {(r["kind"], r["name"]) for r in results}
    expected = {("analysis", n) for n in registry.ANALYSES} | {("figure", n) for n in FIGURES}
    expected = {(kind, name) for kind, name in expected if kind in KINDS[source]}
    assert ran == expected  # the registries, whole
    failed = {f"{r['kind']} {r['name']}": r.get("trace") or r["error"] for r in results if not r["ok"]}
    assert not failed, "\n".join(f"{name}: {trace}" for name, trace in failed.items())
    # issue #46 item 7: long analyses are never silent in a redirected log (stderr is a pipe here)
    said = {line.split()[2] for line in done.stderr.splitlines() if line.endswith(": computing")}
    assert {"similarity", "attack", "landscape", "curvature", "connectivity"} <= said, said
