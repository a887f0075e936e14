"""Task-specific pretraining: one masked-LM run on a task's training text, keeping ``tsp-<N>``
at every requested step N (and a resumable ``last`` every :data:`TSP_SAVE_EVERY` steps)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch

from robustkit.data import batches as data
from robustkit.data import tasks
from robustkit.models import pretrained as models
from robustkit.models.masked_lm import masked_lm_loss
from robustkit.progress import elapsed, event
from robustkit.specs.spec import TspSpec
from robustkit.store.checkpoints import save_checkpoint
from robustkit.store.manifest import read_manifest, update_manifest
from robustkit.store.schema import COMPLETE, DIVERGED
from robustkit.train.divergence import Diverged
from robustkit.train.loop import _Loop, seed_step, timestamp
from robustkit.train.optimiser import _Optimiser, constant_lr_factor
from robustkit.train.provenance import asset_hashes
from robustkit.train.records import check_data, trainable_summary
from robustkit.train.run_model import build_masked_lm, checkpoint_metadata, trainable_state

TSP_SAVE_EVERY = 500


class _Pretrain(_Loop):
    stage = "tsp"

    def loss(self, model, batch) -> torch.Tensor:
        return masked_lm_loss(model, batch)

    def __init__(
        self,
        spec: TspSpec,
        steps: list[int],
        run_dir: Path,
        data_dir: str | None,
        progress: bool,
        device,
        splits: dict | None = None,
    ):
        super().__init__(run_dir, spec.seed, progress, device)
        self.spec, self.steps, self.data_dir = spec, steps, data_dir
        self.splits = splits  # the task's splits if loaded already (robustkit.train.runs), else None

    def run(self) -> None:
        spec = self.spec
        splits = self.splits
        if splits is None:
            splits = tasks.load_splits(
                spec.task, data_dir=self.data_dir, train_size=spec.train_size, split_seed=spec.split_seed
            )
        data_record = check_data(self.run_dir, spec, self.data_dir, splits)
        tokenizer = models.load_tokenizer(spec.model)
        # Sentence pairs stay pairs ([CLS] a [SEP] b [SEP]), as in BERT's own pretraining input.
        texts = data.split_texts(splits["train"], tasks.get_task(spec.task, self.data_dir).text_fields)
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
        began = time.monotonic()
        event(f"{spec.run_id}: TSP started, {target} steps" + (f", resuming at step {start}" if start else ""))
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
                        save_checkpoint(self.run_dir, f"tsp-{step}", trainable_state(model, names), meta, step)
                        event(f"{spec.run_id}: TSP step {step}/{target} saved, masked-LM loss {loss:.4f}")
                    if step in self.steps or step % TSP_SAVE_EVERY == 0:
                        self.save_last(model, names, optimiser, step, meta, {})
        except Diverged as stop:
            # the TSP checkpoints saved so far are finite and stay usable; the later ones cannot
            # be made (the run would diverge again at the same step): fine-tuning runs that need
            # them fail with this message
            if stop.loss is not None:
                self.log(stop.step, stop.step / per_epoch, "train", "mlm_loss", stop.loss)
            self.flush_logs()
            update_manifest(
                self.run_dir,
                status=DIVERGED,
                updated=timestamp(),
                tsp_steps=self._all_saved(),
                diverged={"step": stop.step, "reason": stop.reason},
            )
            raise stop.named(self.run_dir.name) from None
        # a run that diverged past the steps trained now stays diverged
        status = DIVERGED if "diverged" in read_manifest(self.run_dir) else COMPLETE
        update_manifest(self.run_dir, status=status, updated=timestamp(), tsp_steps=self._all_saved())
        event(f"{spec.run_id}: TSP finished in {elapsed(time.monotonic() - began)}")

    def _fresh_model(self):
        """The masked-LM model at TSP step 0 on this loop's device, and its optimiser."""
        model, names, fingerprint, initialised = build_masked_lm(self.spec)
        model.to(self.device)
        return model, names, fingerprint, initialised, _Optimiser(model, self.spec.lr, 0.0)

    def _saved(self, step: int) -> bool:
        return f"tsp-{step}" in read_manifest(self.run_dir).get("checkpoints", {})

    def _all_saved(self) -> list[int]:
        names = read_manifest(self.run_dir).get("checkpoints", {})
        return sorted(int(n[4:]) for n in names if n.startswith("tsp-"))
