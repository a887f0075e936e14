"""Shared fixtures: the embedded tiny model, and small run specs that train in seconds."""

from __future__ import annotations

import pytest

from robustkit.spec import RunSpec


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
