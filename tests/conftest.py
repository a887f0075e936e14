"""Shared fixtures: the embedded tiny model, and small run specs that train in seconds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from robustkit.spec import RunSpec


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """Tiny test models gain nothing from a second thread, and two threads per process thrash
    when test processes overlap (the kill/resume subprocess, Slurm jobs) on 2 cores."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def shared_nltk_data() -> str:
    """The NLTK data tree for PWWS: $NLTK_DATA (the Makefile sets it), else ../shared/nltk_data."""
    path = os.environ.get("NLTK_DATA") or str(Path(__file__).resolve().parents[2] / "shared" / "nltk_data")
    assert Path(path, "corpora", "wordnet").is_dir(), f"no NLTK data tree at {path}: set NLTK_DATA"
    return path


@pytest.fixture(scope="session")
def tiny_model() -> str:
    """Folder of the embedded 2-layer BERT (hidden 128) with a masked-LM head."""
    from robustkit.assets import asset_path

    return str(asset_path("bert-tiny"))


@pytest.fixture
def tiny_spec() -> RunSpec:
    """A run of a few steps on bert-tiny / rt: 64 training and 1k validation examples."""
    return RunSpec(
        model="bert-tiny",
        task="rt",
        method="houlsby",
        seed=1,
        train_size=64,
        epochs=2,
        batch_size=16,
        max_length=32,
        adapter_size=16,
        eval_every=2,
    )
