"""What task-specific pretraining and supervised tuning share: the run folder, the logs, one
optimisation step (with the divergence guard), the resumable ``last`` checkpoint and resuming
from it, the manifest of a new run, per-step seeding."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors

from robustkit.errors import DamagedRunError, RobustkitError, StoreError
from robustkit.progress import bar as progress_bar
from robustkit.store.atomic import atomic_write_bytes, sha256_bytes
from robustkit.store.checkpoints import load_checkpoint, read_checkpoint_file, recover_checkpoints, save_checkpoint
from robustkit.store.folders import GRADNORMS, HISTORY, MANIFEST, repair_hint
from robustkit.store.logs import record_logs, resume_log_problems
from robustkit.store.manifest import read_manifest, update_manifest, write_manifest
from robustkit.train.divergence import Diverged, non_finite_reason, weights_finite
from robustkit.train.evaluate import resolve_device, to_device
from robustkit.train.gradnorms import gradient_norms
from robustkit.train.optimiser import _Optimiser
from robustkit.train.provenance import cpu_capability, kernel_identity, package_versions, refuse_other_kernels
from robustkit.train.run_model import load_tensors, trainable_state

# The loop state saved with ``last`` (state.json) besides the step: the best validation score so
# far, its step, and the share of the most predicted validation class at ``best`` and ``last``.
LOOP_STATE = ("best_value", "best_step", "best_share", "last_share")


def seed_step(seed: int, step: int, stage: str) -> None:
    """Seed the global RNGs for one step (dropout, masking) from (seed, step, stage) alone."""
    value = int.from_bytes(hashlib.sha256(f"{stage}:{seed}:{step}".encode()).digest()[:8], "little")
    torch.manual_seed(value % (2**63))


@contextlib.contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """torch's intra-op CPU threads set to ``threads`` (a run's ``threads`` setting) inside the
    block, and back to what they were after it: a CPU run's bytes depend on the count, so it is
    the run's own setting, never the machine's or the sweep's."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class ResumeMismatch(RobustkitError):
    """An interrupted run resumed under settings its bytes depend on that differ from the ones it
    started under (device type; thread count of a run from before threads were recorded)."""


def timestamp() -> str:
    """The local time in ISO 8601 with its UTC offset (a manifest's ``created`` and ``updated``)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class _Loop:
    """What TSP and supervised tuning share: run folder, logs, one optimisation step, resume."""

    stage = "loop"

    def __init__(self, run_dir: Path, seed: int, progress: bool, device: str | None = None):
        self.device = resolve_device(device)
        self.run_dir = run_dir
        self.seed = seed
        self.progress = progress
        self.history: list[dict] = []
        self.gradnorms: list[dict] = []

    def loss(self, model, batch) -> torch.Tensor:
        return model(**batch).loss

    def step(self, model, batch, optimiser: _Optimiser, factor: float, step: int, max_grad_norm: float | None):
        """One update: forward, backward, gradient norms (pre-clipping), clip, AdamW.

        Raises
        ------
        Diverged
            The loss or a gradient norm is not finite; the update is not applied (the
            gradient norms of the step are logged all the same).
        """
        model.train()
        optimiser.set_lr_factor(factor)
        loss = self.loss(model, to_device(batch, self.device))
        loss.backward()
        norms = gradient_norms(optimiser.named, optimiser.groups)
        for layer, value in norms.items():
            self.gradnorms.append({"step": step, "layer": layer, "value": value})
        value = float(loss.detach())  # no extra sync: the norms above already waited for backward
        # before the update: clipping a NaN gradient gives NaN, and AdamW would write it into
        # the weights (and its moments) for good
        reason = non_finite_reason(value, norms, self.first_loss())
        if reason:
            optimiser.optimizer.zero_grad(set_to_none=True)
            raise Diverged(step, reason, value)
        if max_grad_norm:
            torch.nn.utils.clip_grad_norm_([p for _, p in optimiser.named], max_grad_norm)
        optimiser.optimizer.step()
        optimiser.optimizer.zero_grad(set_to_none=True)
        return value

    def first_loss(self) -> float | None:
        """The run's first logged training loss (the reference of the exploded-loss rule), from
        the history, which resuming restores; None before the first step."""
        for row in self.history:
            if row["split"] == "train" and math.isfinite(row["value"]):
                return row["value"]
        return None

    def check_weights(self, optimiser: _Optimiser, step: int) -> None:
        """Raise :class:`Diverged` if an update left a non-finite weight.

        Called before every evaluation and checkpoint: a finite loss and gradient do not make a
        finite update (an infinite learning rate, an overflowing step), and a non-finite
        ``best`` or ``last`` must never be written.
        """
        if not weights_finite(optimiser.named):
            raise Diverged(step, "weights not finite after the update")

    def log(self, step: int, epoch: float, split: str, metric: str, value: float) -> None:
        self.history.append({"step": step, "epoch": epoch, "split": split, "metric": metric, "value": float(value)})

    def flush_logs(self) -> dict[str, str]:
        """Write the logs; return their sha256 (kept with ``last`` by :meth:`save_last`).

        Their sha256 go into the manifest *before* the files are written: after a kill at any
        point each log hashes to the manifest's or to ``last``'s, so that resuming can refuse any
        other (:func:`robustkit.store.integrity.resume_log_problems`).
        """
        data = {
            HISTORY: _parquet(self.history, ["step", "epoch", "split", "metric", "value"]),
            GRADNORMS: _parquet(self.gradnorms, ["step", "layer", "value"]),
        }
        hashes = {name: sha256_bytes(content) for name, content in data.items()}
        record_logs(self.run_dir, hashes)
        for name, content in data.items():
            atomic_write_bytes(self.run_dir / name, content)
        return hashes

    def save_last(self, model, names, optimiser: _Optimiser | None, step: int, metadata: dict, state: dict) -> None:
        """Logs first, then the resumable checkpoint: rows past a checkpoint are dropped on resume.

        ``optimiser`` None saves an empty optimizer state (a state restored from ``step-0``).
        """
        logs = self.flush_logs()
        extra = {
            "optimizer.safetensors": save_safetensors(optimiser.state_tensors() if optimiser else {}),
            "state.json": json.dumps({"step": step, **state, "logs": logs}).encode(),
        }
        save_checkpoint(self.run_dir, "last", trainable_state(model, names), metadata, step, extra)

    def resume(self, model, optimiser: _Optimiser, fingerprint: str) -> dict | None:
        """Load ``last`` (model, optimizer, loop state) if the run has one; None otherwise."""
        recover_checkpoints(self.run_dir)
        if "last" not in read_manifest(self.run_dir).get("checkpoints", {}):
            return None
        try:
            tensors, meta = load_checkpoint(self.run_dir, "last")
            optimizer_bytes = read_checkpoint_file(self.run_dir, "last", "optimizer.safetensors")
            state = json.loads(read_checkpoint_file(self.run_dir, "last", "state.json"))
        except StoreError as error:  # a corrupt `last` fails every resume the same way: say what to do
            reason = error.problem if isinstance(error, DamagedRunError) else error
            raise DamagedRunError(
                self.run_dir.name, f"its checkpoint 'last' cannot be resumed from: {reason}", repair_hint(self.run_dir)
            ) from None
        # the logs as the run wrote them, or nothing: a history edited or swapped in from another
        # run would finish it with scores it never had (its best step, outcome, gradient norms)
        problems = resume_log_problems(self.run_dir, read_manifest(self.run_dir), state.pop("logs", None) or {})
        if problems:
            raise DamagedRunError(
                self.run_dir.name, f"its logs cannot be resumed from: {'; '.join(problems)}", repair_hint(self.run_dir)
            )
        load_tensors(model, tensors, meta, fingerprint, f"{self.run_dir.name}/last")
        optimiser.load_state_tensors(load_safetensors(optimizer_bytes))
        self.history = _rows_until(self.run_dir, HISTORY, state["step"])
        self.gradnorms = _rows_until(self.run_dir, GRADNORMS, state["step"])
        return state

    def start_manifest(self, manifest: dict) -> None:
        """Create the manifest of a new run, or mark an interrupted one as running again."""
        path = self.run_dir / MANIFEST
        if path.exists():
            recorded = read_manifest(self.run_dir)
            _refuse_other_settings(self.run_dir, recorded, manifest, self.device)
            lacking = refuse_other_kernels(self.run_dir.name, recorded, self.device.type, ResumeMismatch)
            kernels = {}
            if lacking:  # a run from before kernels were recorded: from now on it is held to these
                identity = kernel_identity()
                kernels = {
                    "cpu_capability": identity["cpu_capability"],
                    "versions": {**recorded.get("versions", {}), "torch": identity["torch"]},
                }
                warnings.warn(
                    f"run {self.run_dir.name}: its manifest did not record {' or '.join(lacking)}; recorded "
                    f"now ({identity['cpu_capability']}, torch {identity['torch']}): later resumes are held "
                    "to them",
                    stacklevel=2,
                )
            update_manifest(self.run_dir, status="running", updated=timestamp(), error=None, **kernels)
            return
        manifest.update(
            status="running",
            created=timestamp(),
            updated=timestamp(),
            versions=package_versions(),
            checkpoints={},
            device=str(self.device),
            cpu_capability=cpu_capability(),
        )
        write_manifest(self.run_dir, manifest)

    def bar(self, total: int, initial: int, description: str):
        return progress_bar(
            total=total, initial=initial, desc=description, show=self.progress, leave=False, unit="step"
        )


def _refuse_other_settings(run_dir: Path, recorded: dict, new: dict, device: torch.device) -> None:
    """Raise :class:`ResumeMismatch`, naming both values, if the run in ``run_dir`` (manifest
    ``recorded``) was started on another type of device or with another thread count than it
    would resume with (``new``'s spec): the rest would be trained otherwise than the start, a
    hybrid that matches neither. (The thread count is part of the run id, so only a run started
    before it was recorded can differ.)"""
    started = recorded.get("device")
    if started is not None and torch.device(started).type != device.type:
        raise ResumeMismatch(
            f"run {run_dir.name} was started on {started}; resuming it on {device} would train "
            f"the rest otherwise: resume it with --device {torch.device(started).type}, or move "
            "the folder aside to train it again"
        )
    threads = new["spec"].get("threads")
    if device.type == "cpu" and recorded.get("spec", {}).get("threads") != threads:
        was = recorded.get("spec", {}).get("threads", "an unrecorded number of")
        raise ResumeMismatch(
            f"run {run_dir.name} was started with {was} CPU threads; resuming it with {threads} "
            "would train the rest otherwise: move the folder aside to train it again"
        )


def _parquet(rows: list[dict], columns: list[str]) -> bytes:
    buffer = io.BytesIO()
    pd.DataFrame(rows, columns=columns).to_parquet(buffer, index=False)
    return buffer.getvalue()


def _rows_until(run_dir: Path, name: str, step: int) -> list[dict]:
    """The log's rows up to ``step``; a log that cannot be parsed is named (a run from before
    logs were hashed is not checked before it is read)."""
    path = run_dir / name
    if not path.exists():
        return []
    try:
        frame = pd.read_parquet(path)
    except Exception as error:  # pyarrow's errors name no file ("Dictionary page must be before data page")
        raise DamagedRunError(
            run_dir.name, f"its {name} cannot be read ({type(error).__name__}: {error})", repair_hint(run_dir)
        ) from None
    return frame[frame["step"] <= step].to_dict("records")
