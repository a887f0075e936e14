"""The run store: one folder per run, written so that nothing is lost when a process dies.

Layout::

    <store>/<run_id>/
        manifest.json          config, versions, asset hashes, status, trainable parameters,
                               checkpoints and logs with the sha256 of each file, final metrics,
                               the sha256 of its own content
        history.parquet        one row per eval step x split x metric (and train loss per step)
        gradnorms.parquet      one row per step x layer group: L2 norm of the gradient
        checkpoints/<name>/    model.safetensors (+ optimizer.safetensors, state.json for `last`)
        .lock                  held (flock) by the process training the run
    <store>/.cache/            what can be computed again: analysis frames, the readers' hashes
    <store>/.damaged/          runs moved aside by ``robustkit verify --repair``

A checkpoint (``step-0``, ``best``, ``last``, ``tsp-<N>``) is valid only if the manifest lists
it with the sha256 of every file; a crash at any point leaves the old or the new one, never a mix.

One concern per module of ``robustkit.store``: ``atomic`` (atomic writes, sha256), ``folders``
(the layout), ``schema`` (run statuses, the manifest's schema), ``manifest`` (manifests, damaged
runs, a run's spec), ``locks``, ``integrity`` (whether a run's files are those its manifest
lists), ``checkpoints`` (sha256-checked checkpoints, crash recovery) and ``tables`` (the store as
tidy DataFrames: the notebook's loaders, re-exported here as ``robustkit.store.load_runs``, ...).

Checkpoint names, the write order that makes crashes safe and each module in full:
``docs/reference.md``, "robustkit/store/__init__.py".
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from robustkit import lazy

if TYPE_CHECKING:  # for type checkers and IDEs only; at run time __getattr__ imports them
    import pandas as pd

    from robustkit.store.tables import DamagedRunWarning, load_gradnorms, load_history

# Name -> module that defines it, imported on first access (PEP 562 module __getattr__): the
# tables import pandas and the failure rule (robustkit.store.collapse, which itself imports
# robustkit.store.schema), so importing them here would load pandas for every module of the
# store (``folders``, ``manifest``, ...) and make collapse -> store -> tables -> collapse a cycle.
_LAZY = {
    "DamagedRunWarning": "robustkit.store.tables",
    "load_gradnorms": "robustkit.store.tables",
    "load_history": "robustkit.store.tables",
}


__getattr__, __dir__ = lazy.exports(__name__, _LAZY, globals())


def load_runs(store: str | Path, include_tsp: bool = False, include_damaged: bool = False) -> pd.DataFrame:
    """The store's runs as a notebook wants them: :func:`robustkit.store.tables.load_runs` with the
    option columns of the methods present only (``lora.r`` where LoRA ran), an ``outcome`` column in
    the words of the CLI and the figures (``ok``, ``not-learned``, ``collapsed``, ``diverged``) and
    ``data_changed`` where a run's data file was edited since."""
    # through importlib, as __getattr__: the tables need the failure rule (robustkit.store.collapse),
    # which needs only this package's vocabulary (robustkit.store.schema), not these loaders
    tables = importlib.import_module("robustkit.store.tables")
    return tables.load_runs(store, include_tsp=include_tsp, include_damaged=include_damaged, all_options=False)


__all__ = ["DamagedRunWarning", "load_gradnorms", "load_history", "load_runs"]
