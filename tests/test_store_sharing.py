"""A store shared by a lab group (issue #13, item 6): files honour the umask, and identical runs
give identical checkpoint bytes, so content hashes can compare and dedupe runs."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from robustkit.store.atomic import atomic_write_parquet
from robustkit.store.checkpoints import load_checkpoint, save_checkpoint
from robustkit.store.folders import HISTORY, MODEL_FILE, open_store
from robustkit.store.locks import run_lock
from robustkit.store.manifest import write_manifest


@contextlib.contextmanager
def _umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _new_run(run_dir: Path) -> None:
    write_manifest(run_dir, {"run_id": run_dir.name, "kind": "finetune", "spec": {"task": "rt"}, "checkpoints": {}})


def _fill(run_dir: Path) -> None:
    """Every kind of file the store writes: manifest, parquet logs, checkpoint files, lock."""
    _new_run(run_dir)
    atomic_write_parquet(run_dir / HISTORY, pd.DataFrame({"step": [1], "value": [0.5]}))
    save_checkpoint(
        run_dir, "last", {"w": torch.ones(3)}, {"run_id": run_dir.name}, 1, extra={"state.json": b'{"step": 1}'}
    )
    with run_lock(run_dir):
        pass


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}


@pytest.mark.parametrize("mask, group_reads", [(0o027, True), (0o002, True), (0o077, False)])
def test_store_files_honour_the_umask(tmp_path, mask, group_reads):
    with _umask(mask):
        root = open_store(tmp_path / "runs")
        _fill(root / "run-a")
    modes = _modes(root)
    assert {
        "run-a/manifest.json",
        "run-a/history.parquet",
        "run-a/.lock",
        "run-a/checkpoints/last/model.safetensors",
        "run-a/checkpoints/last/state.json",
    } <= set(modes)
    for name, mode in modes.items():
        assert mode & mask == 0, f"{name}: {oct(mode)} under umask {oct(mask)}"
        assert bool(mode & stat.S_IRGRP) == group_reads, f"{name}: {oct(mode)} under umask {oct(mask)}"


def test_identical_checkpoints_have_identical_bytes(tmp_path):
    """safetensors writes its metadata in a random order at every call: the store sorts it."""
    tensors = {"b": torch.arange(4.0), "a": torch.ones(2, 3)}
    metadata = {"run_id": "r", "model": "m", "method": "full", "base_fingerprint": "f" * 64}
    digests = set()
    for i in range(6):
        run_dir = tmp_path / f"run-{i}"
        _new_run(run_dir)
        shuffled = dict(sorted(metadata.items(), reverse=bool(i % 2)))
        entry = save_checkpoint(run_dir, "best", tensors, shuffled, 3)
        digests.add(entry["files"][MODEL_FILE])
        loaded, meta = load_checkpoint(run_dir, "best")
        assert meta == metadata and all(torch.equal(loaded[k], tensors[k]) for k in tensors)
    assert len(digests) == 1


_TRAIN = """
import sys, torch
torch.set_num_threads(1)
sys.path.insert(0, sys.argv[3])
from conftest import TINY_RTE
import dataclasses
from robustkit.train import train
train(dataclasses.replace(TINY_RTE, method="houlsby", data_dir=sys.argv[1]), sys.argv[2], progress=False)
"""


@pytest.mark.slow
def test_identical_runs_in_two_processes_give_identical_checkpoints(tmp_path, rte_folder):
    """The same bert-tiny run trained by two processes (each with its own hash seed) into two
    stores under a group umask: the same sha256 for every checkpoint file, every file readable
    by the group."""
    glue = rte_folder(tmp_path / "glue")
    stores = [tmp_path / "store-a", tmp_path / "store-b"]
    tests = str(Path(__file__).parent)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _TRAIN, str(glue), str(root), tests], umask=0o027, stderr=subprocess.PIPE, text=True
        )
        for root in stores
    ]
    for child in children:
        assert child.wait(timeout=300) == 0, child.stderr.read()
    manifests = [json.loads(next(root.glob("*/manifest.json")).read_text()) for root in stores]
    checkpoints = [m["checkpoints"] for m in manifests]
    assert set(checkpoints[0]) == {"step-0", "best", "last"}
    assert checkpoints[0] == checkpoints[1]
    for root in stores:
        for name, mode in _modes(root).items():
            assert mode & stat.S_IRGRP and not mode & stat.S_IRWXO, f"{name}: {oct(mode)}"
