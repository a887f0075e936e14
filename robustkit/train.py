"""Training: task-specific pretraining (masked LM) and supervised tuning, into the run store.

- :func:`pretrain` runs ONE masked-LM run per :class:`TspSpec` and keeps ``tsp-<N>`` at every
  requested step N; the method decides what trains (adapter runs: adapters, LayerNorms, head).
- :func:`train` runs one supervised :class:`RunSpec` from the pretrained model (``tsp_step`` 0)
  or from ``tsp-<N>``: AdamW, linear warmup (10%) and decay, gradient clipping, evaluation every
  ``eval_every`` steps and at each epoch end, ``step-0`` / ``best`` / ``last`` checkpoints,
  per-layer gradient norms (before clipping) at every step.

Both resume from their ``last`` checkpoint after a crash and reproduce the uninterrupted run
exactly: the batch and the dropout/masking randomness of step ``s`` depend only on (seed, s).

Both stop a run that diverges (:class:`Diverged`): a non-finite training loss or gradient norm
(checked every step, before the update), or non-finite weights (checked before every evaluation
and checkpoint). Nothing non-finite is ever saved: the run keeps its last finite state as
``last`` (and ``best``), is marked ``diverged`` in its manifest (status and outcome,
:mod:`robustkit.collapse`), and is finished: never trained again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import time
from pathlib import Path

import pandas as pd
import torch
from safetensors.torch import load as load_safetensors
from safetensors.torch import save as save_safetensors
from tqdm.auto import tqdm

from robustkit import collapse, data, models, preflight, store, tasks
from robustkit.errors import DamagedRunError, DataChangedError, RobustkitError, StoreError
from robustkit.evaluate import (
    EVAL_BATCH_SIZE,
    encode_split,
    eval_batches,
    evaluate,
    final_outcomes,
    resolve_device,
    to_device,
)
from robustkit.methods import adaptation_of, adapter_parameter_counts
from robustkit.methods.model_parts import count_parameters, layer_groups
from robustkit.mixout import apply_mixout
from robustkit.provenance import asset_hashes, package_versions
from robustkit.run_model import (
    build_classifier,
    build_masked_lm,
    checkpoint_metadata,
    load_tensors,
    trainable_state,
)
from robustkit.spec import RunSpec, TspSpec, data_identity, full_data_fingerprint

TSP_SAVE_EVERY = 500
_LAYER = re.compile(r"\.layer\.(\d+)\.")


# ---------------------------------------------------------------------------------------------
# public entry points


# The loop state saved with ``last`` (state.json) besides the step: the best validation score so
# far, its step, and the share of the most predicted validation class at ``best`` and ``last``.
LOOP_STATE = ("best_value", "best_step", "best_share", "last_share")


def train(spec: RunSpec, store_path: str | Path, progress: bool = True, device: str | None = None) -> Path:
    """Train one supervised run into the store (resuming it if it was interrupted).

    A run whose manifest says ``complete`` is returned as it is, never trained again.

    ``device`` (``cpu``, ``cuda``, ``cuda:1``; default: the GPU if there is one) is where it
    trains; it is recorded in the manifest but is not part of the run's identity.

    Returns
    -------
    Path
        The run's folder.
    """
    spec = spec.resolved()
    root = store.open_store(store_path)
    run_dir = root / spec.run_id
    if _is_complete(run_dir):
        return run_dir
    task = tasks.get_task(spec.task)
    # a bad model, device or data (or a top_k beyond the model's layers) fails here, before any folder is made
    preflight.check_run(spec, device)
    tsp_dir = None
    if spec.tsp_step:
        tsp_dir = pretrain(spec.tsp_spec(), [spec.tsp_step], root, data_dir=spec.data_dir, progress=progress, device=device)
    with store.run_lock(run_dir):
        if _is_complete(run_dir):
            return run_dir
        store.refuse_damaged(run_dir)  # never train over the checkpoints of a run without a manifest
        _Finetune(spec, task, run_dir, tsp_dir, progress, device).run()
    return run_dir


def pretrain(
    spec: TspSpec,
    steps: list[int],
    store_path: str | Path,
    data_dir: str | None = None,
    progress: bool = True,
    device: str | None = None,
) -> Path:
    """Masked-LM pretraining on the task's training text, keeping ``tsp-<N>`` for each N in steps.

    Waits for another process that holds the same TSP run, then uses what it saved.

    A spec without a ``data_fingerprint`` gets the one of the data ``data_dir`` gives (as
    :meth:`RunSpec.resolved` does), which may name another folder than ``spec.run_id``.

    Returns
    -------
    Path
        The TSP run's folder.
    """
    spec = dataclasses.replace(spec, data_fingerprint=data_identity(spec.task, data_dir, spec.data_fingerprint))
    wanted = sorted({int(s) for s in steps if int(s) > 0})
    if any(s < 0 for s in map(int, steps)):
        raise RobustkitError(f"TSP steps must be >= 0, got {steps}")
    run_dir = store.open_store(store_path) / spec.run_id
    if not wanted or _has_checkpoints(run_dir, wanted):
        return run_dir
    preflight.check_run(spec, device, data_dir=data_dir)  # before the run's folder is made
    with store.run_lock(run_dir, wait=True):
        if not _has_checkpoints(run_dir, wanted):
            store.refuse_damaged(run_dir)
            _refuse_diverged_steps(run_dir, wanted)
            _Pretrain(spec, wanted, run_dir, data_dir, progress, device).run()
    return run_dir


def _refuse_diverged_steps(run_dir: Path, wanted: list[int]) -> None:
    """Raise :class:`Diverged` for a TSP step the run diverged before reaching.

    Training is deterministic: it would diverge again at the same step, so it is not retried.
    Steps before the divergence that were never requested can still be trained.
    """
    if not (run_dir / store.MANIFEST).exists():
        return
    manifest = store.read_manifest(run_dir)
    diverged = manifest.get("diverged")
    if manifest.get("status") != store.DIVERGED or not diverged:
        return
    saved = manifest.get("checkpoints", {})
    lost = [s for s in wanted if f"tsp-{s}" not in saved and s >= diverged["step"]]
    if lost:
        stop = Diverged(diverged["step"], f"{diverged['reason']}; no tsp-{', tsp-'.join(map(str, lost))}")
        raise stop.named(run_dir.name)


# ---------------------------------------------------------------------------------------------
# shared pieces


def _is_complete(run_dir: Path) -> bool:
    """Whether the run is finished (:data:`robustkit.store.FINISHED`: complete, or diverged),
    so that a train() or sweep never trains it again."""
    return (run_dir / store.MANIFEST).exists() and store.read_manifest(run_dir).get("status") in store.FINISHED


def check_data(run_dir: Path, spec: RunSpec | TspSpec, data_dir: str | None, splits: dict) -> dict:
    """The manifest's record of the data the run reads now (:func:`robustkit.tasks.data_record`),
    after checking it is the data the run is for.

    The run id holds the data's fingerprint, and the manifest of a started run records it (with
    the ``datasets`` fingerprints of hub data, which the id cannot hold): training or resuming a
    run on other data would mix two datasets in one run (a spec resolved before the data
    changed, a Slurm job that starts after it did, a resume after the TSV files were edited).

    Raises
    ------
    DataChangedError
        The data differs from the run's; the message names both fingerprints.
    """
    record = tasks.data_record(spec.task, data_dir, splits)
    where = f"data_dir {data_dir}" if record["source"] == "tsv" else f"the {record['source']} data of {spec.task!r}"
    recorded = store.read_manifest(run_dir).get("data", {}) if (run_dir / store.MANIFEST).exists() else {}
    claims = [("its run id", full_data_fingerprint(spec), record["fingerprint"]),
              ("its manifest's datasets fingerprints", recorded.get("datasets"), record.get("datasets"))]
    for source, expected, actual in claims:
        if expected and actual and expected != actual:
            raise DataChangedError(
                f"run {run_dir.name!r} is for data {expected} ({source}), but {where} now gives {actual}: "
                "refusing to train or resume it on different data. Restore the data it was trained on, "
                "or train the new data as a run of its own (a spec resolved now has a new run id)")
    return record


class Diverged(RobustkitError):
    """Training met a non-finite number: the run stops (outcome ``diverged``, :mod:`robustkit.collapse`).

    Attributes
    ----------
    step : int
        Optimisation step (1-based) at which it was found.
    reason : str
        What was not finite: the training loss, the gradient norm of which layer groups, or
        the weights.
    loss : float or None
        The step's training loss where it was computed (possibly NaN or inf).
    """

    def __init__(self, step: int, reason: str, loss: float | None = None, run: str | None = None):
        self.step, self.reason, self.loss = step, reason, loss
        super().__init__(f"{f'run {run!r} ' if run else ''}diverged at step {step}: {reason}")

    def named(self, run: str) -> Diverged:
        """The same divergence, its message naming the run."""
        return Diverged(self.step, self.reason, self.loss, run)


def _non_finite(loss: float, norms: dict[str, float]) -> str | None:
    """Why a step's loss or gradient norms rule out its update (None: they do not)."""
    if not math.isfinite(loss):
        return f"training loss {loss}"
    bad = [layer for layer, value in norms.items() if not math.isfinite(value)]
    return f"gradient norm not finite in {', '.join(bad)}" if bad else None


def weights_finite(named: list[tuple[str, torch.nn.Parameter]]) -> bool:
    """Whether every one of these parameters is finite (one device -> host transfer)."""
    if not named:
        return True
    return bool(torch.stack([torch.isfinite(p.detach()).all() for _, p in named]).all())


def _has_checkpoints(run_dir: Path, steps: list[int]) -> bool:
    if not (run_dir / store.MANIFEST).exists():
        return False
    saved = store.read_manifest(run_dir).get("checkpoints", {})
    return all(f"tsp-{s}" in saved for s in steps)


def seed_step(seed: int, step: int, stage: str) -> None:
    """Seed the global RNGs for one step (dropout, masking) from (seed, step, stage) alone."""
    value = int.from_bytes(hashlib.sha256(f"{stage}:{seed}:{step}".encode()).digest()[:8], "little")
    torch.manual_seed(value % (2**63))


def linear_lr_factor(step: int, warmup: int, total: int) -> float:
    """Linear warmup to 1 over ``warmup`` steps, then linear decay to 0 at ``total``.

    The same schedule as ``transformers.get_linear_schedule_with_warmup``, written as a pure
    function of the step so a resumed run sets its learning rate without replaying a scheduler.
    """
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


def constant_lr_factor(step: int, warmup: int) -> float:
    """Linear warmup, then constant (TSP: independent of how long the run goes)."""
    return min(1.0, step / max(1, warmup))


def layer_group(name: str) -> str:
    """The layer group of a parameter from its name alone (BERT-style names); training groups
    by the model's structure instead (:func:`robustkit.methods.model_parts.layer_groups`) and
    uses this only for names that mapping lacks.

    ``embeddings``, ``layer.<i>`` (encoder layer i, adapters included), ``pooler``,
    ``classifier`` or ``mlm_head``.
    """
    match = _LAYER.search(name)
    if match:
        return f"layer.{match.group(1)}"
    if ".embeddings." in name or name.startswith("embeddings."):
        return "embeddings"
    if ".pooler." in name:
        return "pooler"
    if name.startswith(("cls.", "lm_head.")):
        return "mlm_head"
    return "classifier"


def gradient_norms(named: list[tuple[str, torch.nn.Parameter]], groups: dict[str, str] | None = None) -> dict[str, float]:
    """L2 norm of the gradient per layer group (before clipping).

    ``groups`` maps parameter names to groups (:func:`robustkit.methods.model_parts.layer_groups`,
    from the model's structure: any encoder architecture, a method's own parameters under their
    layer); names it lacks are grouped by :func:`layer_group`.
    """
    groups = groups or {}
    squares: dict[str, torch.Tensor] = {}
    for name, parameter in named:
        if parameter.grad is not None:
            group = groups.get(name) or layer_group(name)
            squares[group] = squares.get(group, 0.0) + parameter.grad.detach().float().pow(2).sum()
    # one device -> host transfer per step, not one per parameter
    values = torch.stack(list(squares.values())).sqrt().tolist() if squares else []
    return dict(zip(squares, values))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


class _Optimiser:
    """AdamW over the model's trainable parameters (``requires_grad``), with its state as named
    tensors for checkpoints."""

    def __init__(self, model: torch.nn.Module, lr: float, weight_decay: float):
        named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.named = named
        self.groups = layer_groups(model)
        self.lr = lr
        self.optimizer = torch.optim.AdamW([p for _, p in named], lr=lr, weight_decay=weight_decay, fused=True)

    def set_lr_factor(self, factor: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr * factor

    def state_tensors(self) -> dict[str, torch.Tensor]:
        out = {}
        for name, parameter in self.named:
            for key, value in self.optimizer.state.get(parameter, {}).items():
                out[f"{name}::{key}"] = torch.as_tensor(value).detach().cpu().clone()
        return out

    def load_state_tensors(self, tensors: dict[str, torch.Tensor]) -> None:
        for name, parameter in self.named:
            state = {k.split("::", 1)[1]: v for k, v in tensors.items() if k.split("::", 1)[0] == name}
            if state:
                self.optimizer.state[parameter] = {k: v.to(parameter.device) for k, v in state.items()}


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
        reason = _non_finite(value, norms)
        if reason:
            optimiser.optimizer.zero_grad(set_to_none=True)
            raise Diverged(step, reason, value)
        if max_grad_norm:
            torch.nn.utils.clip_grad_norm_([p for _, p in optimiser.named], max_grad_norm)
        optimiser.optimizer.step()
        optimiser.optimizer.zero_grad(set_to_none=True)
        return value

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

    def flush_logs(self) -> None:
        store.atomic_write_parquet(self.run_dir / store.HISTORY, _frame(self.history, ["step", "epoch", "split", "metric", "value"]))
        store.atomic_write_parquet(self.run_dir / store.GRADNORMS, _frame(self.gradnorms, ["step", "layer", "value"]))

    def save_last(self, model, names, optimiser: _Optimiser | None, step: int, metadata: dict, state: dict) -> None:
        """Logs first, then the resumable checkpoint: rows past a checkpoint are dropped on resume.

        ``optimiser`` None saves an empty optimizer state (a state restored from ``step-0``).
        """
        self.flush_logs()
        extra = {
            "optimizer.safetensors": save_safetensors(optimiser.state_tensors() if optimiser else {}),
            "state.json": json.dumps({"step": step, **state}).encode(),
        }
        store.save_checkpoint(self.run_dir, "last", trainable_state(model, names), metadata, step, extra)

    def resume(self, model, optimiser: _Optimiser, fingerprint: str) -> dict | None:
        """Load ``last`` (model, optimizer, loop state) if the run has one; None otherwise."""
        store.recover_checkpoints(self.run_dir)
        if "last" not in store.read_manifest(self.run_dir).get("checkpoints", {}):
            return None
        try:
            tensors, meta = store.load_checkpoint(self.run_dir, "last")
            optimizer_bytes = store.read_checkpoint_file(self.run_dir, "last", "optimizer.safetensors")
            state = json.loads(store.read_checkpoint_file(self.run_dir, "last", "state.json"))
        except DamagedRunError:
            raise
        except StoreError as error:  # a corrupt `last` fails every resume the same way: say what to do
            raise DamagedRunError(self.run_dir.name, f"its checkpoint 'last' cannot be resumed from: {error}",
                                  store.repair_hint(self.run_dir)) from None
        load_tensors(model, tensors, meta, fingerprint, f"{self.run_dir.name}/last")
        optimiser.load_state_tensors(load_safetensors(optimizer_bytes))
        self.history = _rows_until(self.run_dir / store.HISTORY, state["step"])
        self.gradnorms = _rows_until(self.run_dir / store.GRADNORMS, state["step"])
        return state

    def start_manifest(self, manifest: dict) -> None:
        """Create the manifest of a new run, or mark an interrupted one as running again."""
        path = self.run_dir / store.MANIFEST
        if path.exists():
            store.update_manifest(self.run_dir, status="running", updated=_now(), error=None)
            return
        manifest.update(
            status="running", created=_now(), updated=_now(), versions=package_versions(), checkpoints={},
            device=str(self.device),
        )
        store.write_manifest(self.run_dir, manifest)

    def bar(self, total: int, initial: int, description: str):
        return tqdm(total=total, initial=initial, desc=description, disable=not self.progress, leave=False, unit="step")


def _frame(rows: list[dict], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns)


def _rows_until(path: Path, step: int) -> list[dict]:
    if not path.exists():
        return []
    frame = pd.read_parquet(path)
    return frame[frame["step"] <= step].to_dict("records")


def trainable_summary(model, names: list[str]) -> dict:
    """The manifest's ``trainable``: count and names of what trains, the model's total, the
    parameters the method added (``added``; ``total - added`` is the pretrained model with its
    head) and each bottleneck adapter module's count; and ``method_check``, the method's
    trainable-count check against its formula (:meth:`robustkit.methods.base.Method.check`)."""
    adaptation = adaptation_of(model)
    return {
        "count": count_parameters(model, names),
        "total": count_parameters(model),
        "names": names,
        "added": count_parameters(model, adaptation.added),
        "adapter_modules": adapter_parameter_counts(model),
        "method_check": adaptation.check,
    }


# ---------------------------------------------------------------------------------------------
# task-specific pretraining


def masked_lm_loss(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy over the masked tokens, the value ``model(**batch).loss`` gives.

    Written out because transformers' masked-LM forward projects EVERY token onto the
    vocabulary (30k x d per token, as much compute as the encoder of a small BERT), while only
    the ~15% masked tokens count: the head here sees only those.
    """
    labels = batch["labels"]
    hidden = model.base_model(**{k: v for k, v in batch.items() if k != "labels"})[0]
    selected = labels != -100
    head = model.cls if hasattr(model, "cls") else model.lm_head
    return torch.nn.functional.cross_entropy(head(hidden[selected]), labels[selected])


class _Pretrain(_Loop):
    stage = "tsp"

    def loss(self, model, batch) -> torch.Tensor:
        return masked_lm_loss(model, batch)

    def __init__(self, spec: TspSpec, steps: list[int], run_dir: Path, data_dir: str | None, progress: bool, device):
        super().__init__(run_dir, spec.seed, progress, device)
        self.spec, self.steps, self.data_dir = spec, steps, data_dir

    def run(self) -> None:
        spec = self.spec
        splits = tasks.load_splits(
            spec.task, data_dir=self.data_dir, train_size=spec.train_size, split_seed=spec.split_seed
        )
        data_record = check_data(self.run_dir, spec, self.data_dir, splits)
        tokenizer = models.load_tokenizer(spec.model)
        # Sentence pairs stay pairs ([CLS] a [SEP] b [SEP]), as in BERT's own pretraining input.
        texts = data.split_texts(splits["train"], tasks.get_task(spec.task).text_fields)
        features = data.encode(texts, tokenizer, spec.max_length)
        collator = data.masked_lm_collator(tokenizer, spec.mlm_probability)
        model, names, fingerprint, initialised, optimiser = self._fresh_model()
        self.start_manifest(
            {
                "run_id": spec.run_id,
                "kind": "tsp",
                "spec": dataclasses.asdict(spec),
                "base_fingerprint": fingerprint,
                "mlm_head_initialized": initialised,
                "trainable": trainable_summary(model, names),
                "assets": asset_hashes(spec.model, spec.task),
                "data": data_record,
                "n_texts": len(features),
            }
        )
        state = self.resume(model, optimiser, fingerprint)
        start = state["step"] if state else 0
        if start > min(s for s in self.steps if not self._saved(s)):
            # A requested step lies before the resume point and was never saved: replay from 0
            # (deterministic, so the result is the same as if it had been requested at first).
            model, names, fingerprint, _, optimiser = self._fresh_model()
            start, self.history, self.gradnorms = 0, [], []
        meta = checkpoint_metadata(fingerprint, spec.run_id, spec.model, spec.method)
        target = max(self.steps)
        per_epoch = data.steps_per_epoch(len(features), spec.batch_size)
        try:
            with self.bar(target, start, f"TSP {spec.task}/{spec.method}") as bar:
                for step in range(start + 1, target + 1):
                    seed_step(spec.seed, step, self.stage)
                    index = data.batch_indices(len(features), spec.batch_size, spec.seed, step - 1)
                    batch = collator([features[i] for i in index])
                    loss = self.step(model, batch, optimiser, constant_lr_factor(step, spec.warmup_steps), step, None)
                    self.log(step, step / per_epoch, "train", "mlm_loss", loss)
                    bar.update(1)
                    bar.set_postfix(loss=f"{loss:.3f}")
                    if step in self.steps or step % TSP_SAVE_EVERY == 0:
                        self.check_weights(optimiser, step)
                    if step in self.steps:
                        store.save_checkpoint(self.run_dir, f"tsp-{step}", trainable_state(model, names), meta, step)
                    if step in self.steps or step % TSP_SAVE_EVERY == 0:
                        self.save_last(model, names, optimiser, step, meta, {})
        except Diverged as stop:
            # the TSP checkpoints saved so far are finite and stay usable; the later ones cannot
            # be made (the run would diverge again at the same step): fine-tuning runs that need
            # them fail with this message
            if stop.loss is not None:
                self.log(stop.step, stop.step / per_epoch, "train", "mlm_loss", stop.loss)
            self.flush_logs()
            store.update_manifest(self.run_dir, status=store.DIVERGED, updated=_now(), tsp_steps=self._all_saved(),
                                  diverged={"step": stop.step, "reason": stop.reason})
            raise stop.named(self.run_dir.name) from None
        # a run that diverged past the steps trained now stays diverged
        status = store.DIVERGED if "diverged" in store.read_manifest(self.run_dir) else store.COMPLETE
        store.update_manifest(self.run_dir, status=status, updated=_now(), tsp_steps=self._all_saved())

    def _fresh_model(self):
        """The masked-LM model at TSP step 0 on this loop's device, and its optimiser."""
        model, names, fingerprint, initialised = build_masked_lm(self.spec)
        model.to(self.device)
        return model, names, fingerprint, initialised, _Optimiser(model, self.spec.lr, 0.0)

    def _saved(self, step: int) -> bool:
        return f"tsp-{step}" in store.read_manifest(self.run_dir).get("checkpoints", {})

    def _all_saved(self) -> list[int]:
        names = store.read_manifest(self.run_dir).get("checkpoints", {})
        return sorted(int(n[4:]) for n in names if n.startswith("tsp-"))


# ---------------------------------------------------------------------------------------------
# supervised tuning


class _Finetune(_Loop):
    stage = "finetune"

    def __init__(self, spec: RunSpec, task, run_dir: Path, tsp_dir: Path | None, progress: bool, device):
        super().__init__(run_dir, spec.seed, progress, device)
        self.spec, self.task, self.tsp_dir = spec, task, tsp_dir

    def run(self) -> None:
        spec, task = self.spec, self.task
        splits = tasks.load_splits(spec.task, data_dir=spec.data_dir, train_size=spec.train_size, split_seed=spec.split_seed)
        self.data_record = check_data(self.run_dir, spec, spec.data_dir, splits)
        tokenizer = models.load_tokenizer(spec.model)
        encoded = {name: encode_split(split, task, tokenizer, spec.max_length) for name, split in splits.items()}
        collator = data.classification_collator(tokenizer)
        model, names, fingerprint = build_classifier(spec, task.num_labels)
        model.to(self.device)
        meta = checkpoint_metadata(fingerprint, spec.run_id, spec.model, spec.method)
        self.start_manifest(self._manifest(model, names, fingerprint, splits))
        self.splits = splits  # labels for the majority baseline of the run's outcome
        try:
            self._train(model, names, fingerprint, meta, encoded, collator)
        except Exception as error:  # a crash is recorded; KeyboardInterrupt/kill leaves it resumable
            store.update_manifest(self.run_dir, status="failed", error=f"{type(error).__name__}: {error}", updated=_now())
            raise

    def _manifest(self, model, names, fingerprint, splits) -> dict:
        spec = self.spec
        return {
            "run_id": spec.run_id,
            "kind": "finetune",
            "spec": spec.to_dict(),
            "base_fingerprint": fingerprint,
            "trainable": trainable_summary(model, names),
            "assets": asset_hashes(spec.model, spec.task),
            "data": self.data_record,
            "tsp_run": self.tsp_dir.name if self.tsp_dir else None,
            "splits": {name: len(split) for name, split in splits.items()},
            "main_metric": self.task.main_metric,
        }

    def _train(self, model, names, fingerprint, meta, encoded, collator) -> None:
        spec = self.spec
        # theta_0 even when resuming (`last` then replaces the weights): it is mixout's target w0
        self._start_from_tsp(model, fingerprint)
        apply_mixout(model, spec.mixout)  # same parameters and names: checkpoints hold W
        optimiser = _Optimiser(model, spec.lr, spec.weight_decay)
        state = self.resume(model, optimiser, fingerprint)
        if state is None:
            store.save_checkpoint(self.run_dir, "step-0", trainable_state(model, names), meta, 0)
            state = {"step": 0, "best_value": None, "best_step": None}
        n_train = len(encoded["train"])
        per_epoch = data.steps_per_epoch(n_train, spec.batch_size)
        total = spec.epochs * per_epoch
        warmup = round(spec.warmup_ratio * total)
        evals = self._eval_points(per_epoch, total)
        batches = {s: eval_batches(encoded[s], EVAL_BATCH_SIZE, collator) for s in ("validation", "test")}
        try:
            with self.bar(total, state["step"], f"{spec.task}/{spec.method}/s{spec.seed}/tsp{spec.tsp_step}") as bar:
                for step in range(state["step"] + 1, total + 1):
                    seed_step(spec.seed, step, self.stage)
                    index = data.batch_indices(n_train, spec.batch_size, spec.seed, step - 1)
                    batch = collator([encoded["train"][i] for i in index])
                    loss = self.step(model, batch, optimiser, linear_lr_factor(step, warmup, total), step, spec.max_grad_norm)
                    self.log(step, step / per_epoch, "train", "loss", loss)
                    bar.update(1)
                    if step in evals:
                        self.check_weights(optimiser, step)
                        metrics = evaluate(model, batches["validation"], self.task, shares=True)
                        # kept for the run's outcome (no extra pass at the end), not logged as a metric
                        state["last_share"] = metrics.pop("top_class_share", None)
                        for metric, value in metrics.items():
                            self.log(step, step / per_epoch, "validation", metric, value)
                        bar.set_postfix(loss=f"{loss:.3f}", **{self.task.main_metric: f"{metrics[self.task.main_metric]:.3f}"})
                        if state["best_value"] is None or metrics[self.task.main_metric] > state["best_value"]:
                            state.update(best_value=metrics[self.task.main_metric], best_step=step, best_share=state["last_share"])
                            store.save_checkpoint(self.run_dir, "best", trainable_state(model, names), meta, step)
                        self.save_last(model, names, optimiser, step, meta, {k: state.get(k) for k in LOOP_STATE})
        except Diverged as stop:
            self._diverged(stop, model, names, fingerprint, meta, optimiser, batches, state, per_epoch)
            return
        self._finish(model, fingerprint, batches, state)

    def _diverged(self, stop: Diverged, model, names, fingerprint, meta, optimiser, batches, state, per_epoch) -> None:
        """Keep the run's last finite state as ``last`` (and ``best`` if it has none), score
        it, and mark the run diverged: status, ``diverged`` (step, reason) and an outcome of
        ``diverged`` on every checkpoint and split, whatever the kept checkpoints score."""
        if stop.loss is not None:
            self.log(stop.step, stop.step / per_epoch, "train", "loss", stop.loss)
        saved = store.read_manifest(self.run_dir)["checkpoints"]
        if weights_finite(optimiser.named):
            # found before its update was applied: the weights are those after step - 1
            kept = stop.step - 1
            self.save_last(model, names, optimiser, kept, meta, {k: state.get(k) for k in LOOP_STATE})
        else:
            # an earlier update made them non-finite: back to the newest finite checkpoint,
            # which every saved one is (weights are checked before each save)
            source = "last" if "last" in saved else "step-0"
            tensors, metadata = store.load_checkpoint(self.run_dir, source)
            load_tensors(model, tensors, metadata, fingerprint, f"{self.run_dir.name}/{source}")
            kept = saved[source]["step"]
            if source == "last":
                self.flush_logs()
            else:
                self.save_last(model, names, None, kept, meta, {k: state.get(k) for k in LOOP_STATE})
        if "best" not in saved:  # diverged before its first evaluation: the one state it has
            store.save_checkpoint(self.run_dir, "best", trainable_state(model, names), meta, kept)
            state["best_step"] = kept
        best_step = store.read_manifest(self.run_dir)["checkpoints"]["best"]["step"]
        final = {"last": self._scores(model, batches)}
        if best_step == kept:
            final["best"] = final["last"]
        else:
            tensors, metadata = store.load_checkpoint(self.run_dir, "best")
            load_tensors(model, tensors, metadata, fingerprint, f"{self.run_dir.name}/best")
            final["best"] = self._scores(model, batches)
        outcome = {name: {split: collapse.DIVERGED for split in scores} for name, scores in final.items()}
        store.update_manifest(self.run_dir, status=store.DIVERGED, updated=_now(), final=final, best_step=state["best_step"],
                              outcome=outcome, diverged={"step": stop.step, "reason": stop.reason})

    def _scores(self, model, batches) -> dict:
        """Validation and test metrics of the model as it is (with the top class share)."""
        return {split: evaluate(model, batches[split], self.task, shares=True) for split in ("validation", "test")}

    def _start_from_tsp(self, model, fingerprint) -> None:
        if self.tsp_dir is None:
            return
        name = f"tsp-{self.spec.tsp_step}"
        tensors, meta = store.load_checkpoint(self.tsp_dir, name)
        load_tensors(model, tensors, meta, fingerprint, f"{self.tsp_dir.name}/{name}", ignore_prefixes=("cls.", "lm_head."))

    def _eval_points(self, per_epoch: int, total: int) -> set[int]:
        points = set(range(per_epoch, total + 1, per_epoch)) | {total}
        if self.spec.eval_every:
            points |= set(range(self.spec.eval_every, total + 1, self.spec.eval_every))
        return points

    def _finish(self, model, fingerprint, batches, state) -> None:
        """Test metrics of ``last`` (the model as it ends) and ``best``, the share of the most
        predicted class on both splits, the run's outcome (:mod:`robustkit.collapse`); mark the
        run complete."""
        history = pd.DataFrame(self.history)
        steps = {name: entry["step"] for name, entry in store.read_manifest(self.run_dir)["checkpoints"].items()}
        final = {}
        for name in ("last", "best"):
            if name == "best" and steps["best"] == steps["last"]:
                final["best"] = final["last"]  # the same weights: no second test pass
                continue
            if name == "best":
                tensors, meta = store.load_checkpoint(self.run_dir, "best")
                load_tensors(model, tensors, meta, fingerprint, f"{self.run_dir.name}/best")
            rows = history[(history.split == "validation") & (history.step == steps[name])]
            validation = dict(zip(rows.metric, rows.value))
            if not self.task.is_regression:  # from the evaluation at that step; a pass if resumed from an older run
                share = state.get(f"{name}_share")
                validation["top_class_share"] = (share if share is not None else
                                                 evaluate(model, batches["validation"], self.task, shares=True)["top_class_share"])
            final[name] = {"validation": validation, "test": evaluate(model, batches["test"], self.task, shares=True)}
        outcomes = self._outcomes(final)
        store.update_manifest(self.run_dir, status=store.COMPLETE, updated=_now(), final=final, best_step=state["best_step"],
                              outcome=outcomes)

    def _outcomes(self, final: dict) -> dict:
        """``{checkpoint: {split: outcome}}`` of the main metric against the majority baseline."""
        return final_outcomes(self.task, self.splits, final)
