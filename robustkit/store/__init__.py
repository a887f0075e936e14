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

Checkpoint names: ``step-0`` (theta_0, the state before tuning), ``best``, ``last`` and
``tsp-<N>`` (task-specific pretraining runs). A checkpoint is valid only if the manifest lists
it with the sha256 of every file: files are written under a temporary name and renamed, and the
manifest is rewritten (atomically) after the rename, so a crash at any point leaves either the
old or the new checkpoint, never a mix.

One concern per module:

- :mod:`robustkit.store.atomic`: atomic file writes and sha256 of bytes and files;
- :mod:`robustkit.store.folders`: the store's layout: file names, store and run folders;
- :mod:`robustkit.store.schema`: run statuses and the manifest's schema;
- :mod:`robustkit.store.manifest`: reading and writing manifests, damaged runs, a run's spec;
- :mod:`robustkit.store.locks`: the lock held by the process training a run;
- :mod:`robustkit.store.integrity`: whether a run's files are those its manifest lists (every
  file hashed by ``verify``; by every reader once per change, through ``.cache/verified/``);
- :mod:`robustkit.store.checkpoints`: sha256-checked checkpoints, crash recovery;
- :mod:`robustkit.store.tables`: the store as tidy DataFrames (the notebook's loaders).

The notebook's loaders are re-exported here (``robustkit.store.load_runs``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from robustkit.store import tables
from robustkit.store.tables import DamagedRunWarning, load_gradnorms, load_history


def load_runs(store: str | Path, include_tsp: bool = False, include_damaged: bool = False) -> pd.DataFrame:
    """The store's runs as a notebook wants them: :func:`robustkit.store.tables.load_runs` with the
    option columns of the methods present only (``lora.r`` where LoRA ran), an ``outcome`` column in
    the words of the CLI and the figures (``ok``, ``not-learned``, ``collapsed``, ``diverged``) and
    ``data_changed`` where a run's data file was edited since."""
    return tables.load_runs(store, include_tsp=include_tsp, include_damaged=include_damaged, all_options=False)


__all__ = ["DamagedRunWarning", "load_gradnorms", "load_history", "load_runs"]
