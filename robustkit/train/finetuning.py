"""Supervised tuning: one run from the pretrained model or a TSP checkpoint, with ``step-0`` /
``best`` / ``last`` checkpoints, evaluation every ``eval_every`` steps and at each epoch end, and
the run's final metrics and outcome."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from robustkit.data import batches as data
from robustkit.data import tasks
from robustkit.models import pretrained as models
from robustkit.models.mixout import apply_mixout
from robustkit.progress import elapsed, event
from robustkit.specs.spec import ResolvedRunSpec
from robustkit.store import collapse
from robustkit.store.checkpoints import load_checkpoint, save_checkpoint
from robustkit.store.manifest import read_manifest, update_manifest
from robustkit.store.schema import COMPLETE, DIVERGED
from robustkit.train import convergence_rule
from robustkit.train.divergence import Diverged, weights_finite
from robustkit.train.eta import Projection
from robustkit.train.evaluate import (
    EVAL_BATCH_SIZE,
    encode_split,
    eval_batches,
    evaluate,
    final_outcomes,
    split_baselines,
)
from robustkit.train.loop import LOOP_STATE, _Loop, seed_step, timestamp
from robustkit.train.optimiser import _Optimiser, linear_lr_factor
from robustkit.train.provenance import asset_hashes
from robustkit.train.records import check_data, trainable_summary
from robustkit.train.run_model import build_classifier, checkpoint_metadata, load_tensors, trainable_state


class _Finetune(_Loop):
    stage = "finetune"

    def __init__(
        self,
        spec: ResolvedRunSpec,
        task,
        run_dir: Path,
        tsp_dir: Path | None,
        progress: bool,
        device,
        splits: dict | None = None,
    ):
        super().__init__(run_dir, spec.seed, progress, device)
        self.spec, self.task, self.tsp_dir = spec, task, tsp_dir
        self.splits = splits  # the task's splits if loaded already (robustkit.train.runs), else None

    def run(self) -> None:
        spec, task = self.spec, self.task
        splits = self.splits
        if splits is None:
            splits = tasks.load_splits(
                spec.task, data_dir=spec.data_dir, train_size=spec.train_size, split_seed=spec.split_seed
            )
        self.data_record = check_data(self.run_dir, spec, spec.data_dir, splits)
        tokenizer = models.load_tokenizer(spec.model)
        encoded = {name: encode_split(split, task, tokenizer, spec.max_length, name) for name, split in splits.items()}
        collator = data.classification_collator(tokenizer)
        model, names, fingerprint = build_classifier(spec, task.num_labels)
        model.to(self.device)
        meta = checkpoint_metadata(fingerprint, spec.run_id, spec.model, spec.method)
        self.start_manifest(self._manifest(model, names, fingerprint, splits))
        self.splits = splits  # labels for the majority baseline of the run's outcome
        self.baselines = split_baselines(task, splits)  # once: the stopping rule reads it at every evaluation
        try:
            self._train(model, names, fingerprint, meta, encoded, collator)
        except Exception as error:  # a crash is recorded; KeyboardInterrupt/kill leaves it resumable
            update_manifest(
                self.run_dir, status="failed", error=f"{type(error).__name__}: {error}", updated=timestamp()
            )
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
            save_checkpoint(self.run_dir, "step-0", trainable_state(model, names), meta, 0)
            state = {"step": 0, "best_value": None, "best_step": None}
        n_train = len(encoded["train"])
        per_epoch = data.steps_per_epoch(n_train, spec.batch_size)
        total = spec.epochs * per_epoch
        warmup = round(spec.warmup_ratio * total)
        evals = self._eval_points(per_epoch, total)
        batches = {s: eval_batches(encoded[s], EVAL_BATCH_SIZE, collator) for s in ("validation", "test")}
        label = f"{spec.task}/{spec.method}/s{spec.seed}/tsp{spec.tsp_step}"
        projection = Projection(
            label,
            self.device.type,
            state["step"],
            total,
            sum(1 for e in evals if e > state["step"]),
            len(encoded["validation"]),
            spec.batch_size,
            self._settings_hint(),
        )
        self.started = (time.monotonic(), time.process_time())
        resumed = f", resuming at step {state['step']}" if state["step"] else ""
        event(f"{spec.run_id}: started, {total} steps ({spec.epochs} epochs of {per_epoch}){resumed}")
        # a run trained until converged that had converged before it was interrupted trains no more
        first = total + 1 if self._converged() else state["step"] + 1
        try:
            with self.bar(total, state["step"], label) as bar:
                for step in range(first, total + 1):
                    seed_step(spec.seed, step, self.stage)
                    index = data.batch_indices(n_train, spec.batch_size, spec.seed, step - 1)
                    batch = collator([encoded["train"][i] for i in index])
                    loss = self.step(
                        model, batch, optimiser, linear_lr_factor(step, warmup, total), step, spec.max_grad_norm
                    )
                    self.log(step, step / per_epoch, "train", "loss", loss)
                    bar.update(1)
                    projection.step_done(step)
                    if step in evals:
                        self.check_weights(optimiser, step)
                        metrics = evaluate(model, batches["validation"], self.task, shares=True)
                        # kept for the run's outcome (no extra pass at the end), not logged as a metric
                        state["last_share"] = metrics.pop("top_class_share", None)
                        for metric, value in metrics.items():
                            self.log(step, step / per_epoch, "validation", metric, value)
                        bar.set_postfix(
                            loss=f"{loss:.3f}", **{self.task.main_metric: f"{metrics[self.task.main_metric]:.3f}"}
                        )
                        event(
                            f"{spec.run_id}: step {step}/{total} (epoch {step / per_epoch:.2f}): validation "
                            f"{self.task.main_metric} {metrics[self.task.main_metric]:.4f}, train loss {loss:.4f}, "
                            f"{elapsed(time.monotonic() - self.started[0])} in"
                        )
                        if state["best_value"] is None or metrics[self.task.main_metric] > state["best_value"]:
                            state.update(
                                best_value=metrics[self.task.main_metric],
                                best_step=step,
                                best_share=state["last_share"],
                            )
                            save_checkpoint(self.run_dir, "best", trainable_state(model, names), meta, step)
                        self.save_last(model, names, optimiser, step, meta, {k: state.get(k) for k in LOOP_STATE})
                        if self._converged():  # until_converged: the guard's rule says it stops here
                            event(f"{spec.run_id}: converged at step {step}/{total}: dev loss no longer improving")
                            break
        except Diverged as stop:
            self._diverged(stop, model, names, fingerprint, meta, optimiser, batches, state, per_epoch)
            event(f"{spec.run_id}: diverged at step {stop.step} after {elapsed(time.monotonic() - self.started[0])}")
            return
        self._finish(model, fingerprint, batches, state, projection.seconds)
        wall, cpu = time.monotonic() - self.started[0], time.process_time() - self.started[1]
        test = read_manifest(self.run_dir)["final"]["best"]["test"].get(self.task.main_metric)
        event(
            f"{spec.run_id}: finished in {elapsed(wall)} (CPU {elapsed(cpu)}), best step {state['best_step']}"
            + (f", test {self.task.main_metric} {test:.4f}" if test is not None else "")
        )

    def _validation_values(self, metric: str) -> list[float]:
        """``metric`` on the dev split at every evaluation so far, in step order (the history,
        resumed ones too)."""
        rows = [r for r in self.history if r["split"] == "validation" and r["metric"] == metric]
        return [r["value"] for r in sorted(rows, key=lambda r: r["step"])]

    def _ever_learned(self) -> bool | None:
        """Whether any dev score so far is significantly above the majority baseline
        (:func:`collapse.ever_learned`; None where the metric has no baseline)."""
        main, baseline = self.task.main_metric, self.baselines.get("validation", {})
        return collapse.ever_learned(self._validation_values(main), baseline.get(main), main, baseline.get("n"))

    def _converged(self) -> bool:
        """Whether a run trained ``until_converged`` stops now (:func:`convergence_rule.converged`):
        only once it has learned (a validation score significantly above the majority baseline)."""
        return self.spec.until_converged and convergence_rule.converged(
            self._validation_values("loss"), learned=self._ever_learned()
        )

    def _settings_hint(self) -> str:
        """What a CPU-time warning adds: the demo preset, where the run has the papers' epochs
        and length (robustkit.train.eta)."""
        from robustkit.methods.registry import get_method

        method = get_method(self.spec.method)
        if (self.spec.epochs, self.spec.max_length) != (method.default_epochs, method.default_max_length):
            return ""
        return (
            f". These are the papers' settings ({self.spec.epochs} epochs, length {self.spec.max_length}): "
            "`--preset demo` (robustkit.verdicts.recipes.preset_spec('demo', ...) in a notebook) trains the "
            "calibrated demo settings in minutes per run"
        )

    def _diverged(self, stop: Diverged, model, names, fingerprint, meta, optimiser, batches, state, per_epoch) -> None:
        """Keep the run's last finite state as ``last`` (and ``best`` if it has none), score
        it, and mark the run diverged: status, ``diverged`` (step, reason) and an outcome of
        ``diverged`` on every checkpoint and split, whatever the kept checkpoints score."""
        if stop.loss is not None:
            self.log(stop.step, stop.step / per_epoch, "train", "loss", stop.loss)
        saved = read_manifest(self.run_dir)["checkpoints"]
        if weights_finite(optimiser.named):
            # found before its update was applied: the weights are those after step - 1
            kept = stop.step - 1
            self.save_last(model, names, optimiser, kept, meta, {k: state.get(k) for k in LOOP_STATE})
        else:
            # an earlier update made them non-finite: back to the newest finite checkpoint,
            # which every saved one is (weights are checked before each save)
            source = "last" if "last" in saved else "step-0"
            tensors, metadata = load_checkpoint(self.run_dir, source)
            load_tensors(model, tensors, metadata, fingerprint, f"{self.run_dir.name}/{source}")
            kept = saved[source]["step"]
            if source == "last":
                self.flush_logs()
            else:
                self.save_last(model, names, None, kept, meta, {k: state.get(k) for k in LOOP_STATE})
        if "best" not in saved:  # diverged before its first evaluation: the one state it has
            save_checkpoint(self.run_dir, "best", trainable_state(model, names), meta, kept)
            state["best_step"] = kept
        best_step = read_manifest(self.run_dir)["checkpoints"]["best"]["step"]
        final = {"last": self._scores(model, batches)}
        if best_step == kept:
            final["best"] = final["last"]
        else:
            tensors, metadata = load_checkpoint(self.run_dir, "best")
            load_tensors(model, tensors, metadata, fingerprint, f"{self.run_dir.name}/best")
            final["best"] = self._scores(model, batches)
        outcome = {name: {split: collapse.DIVERGED for split in scores} for name, scores in final.items()}
        update_manifest(
            self.run_dir,
            status=DIVERGED,
            updated=timestamp(),
            final=final,
            best_step=state["best_step"],
            outcome=outcome,
            diverged={"step": stop.step, "reason": stop.reason},
        )

    def _scores(self, model, batches) -> dict:
        """Validation and test metrics of the model as it is (with the top class share)."""
        return {split: evaluate(model, batches[split], self.task, shares=True) for split in ("validation", "test")}

    def _start_from_tsp(self, model, fingerprint) -> None:
        if self.tsp_dir is None:
            return
        name = f"tsp-{self.spec.tsp_step}"
        tensors, meta = load_checkpoint(self.tsp_dir, name)
        load_tensors(
            model, tensors, meta, fingerprint, f"{self.tsp_dir.name}/{name}", ignore_prefixes=("cls.", "lm_head.")
        )

    def _eval_points(self, per_epoch: int, total: int) -> set[int]:
        points = set(range(per_epoch, total + 1, per_epoch)) | {total}
        if self.spec.eval_every:
            points |= set(range(self.spec.eval_every, total + 1, self.spec.eval_every))
        return points

    def _finish(self, model, fingerprint, batches, state, projected: float | None = None) -> None:
        """Test metrics of ``last`` (the model as it ends) and ``best``, the share of the most
        predicted class on both splits, the run's outcome (:mod:`robustkit.store.collapse`); mark the
        run complete."""
        history = pd.DataFrame(self.history)
        steps = {name: entry["step"] for name, entry in read_manifest(self.run_dir)["checkpoints"].items()}
        final = {}
        for name in ("last", "best"):
            if name == "best" and steps["best"] == steps["last"]:
                final["best"] = final["last"]  # the same weights: no second test pass
                continue
            if name == "best":
                tensors, meta = load_checkpoint(self.run_dir, "best")
                load_tensors(model, tensors, meta, fingerprint, f"{self.run_dir.name}/best")
            rows = history[(history.split == "validation") & (history.step == steps[name])]
            validation = dict(zip(rows.metric, rows.value))
            if not self.task.is_regression:  # from the evaluation at that step; a pass if resumed from an older run
                share = state.get(f"{name}_share")
                validation["top_class_share"] = (
                    share
                    if share is not None
                    else evaluate(model, batches["validation"], self.task, shares=True)["top_class_share"]
                )
            final[name] = {"validation": validation, "test": evaluate(model, batches["test"], self.task, shares=True)}
        outcomes = self._outcomes(final)
        update_manifest(
            self.run_dir,
            status=COMPLETE,
            updated=timestamp(),
            final=final,
            best_step=state["best_step"],
            outcome=outcomes,
            baselines=self.baselines,
            # why it ended: its budget, or (until_converged) the guard's rule; and whether the guard
            # calls it still improving (the same rule: never for a run stopped as converged)
            stopped={
                "step": int(steps["last"]),
                "reason": "converged" if self._converged() else "budget",
                "still_improving": convergence_rule.improving(self._validation_values("loss")),
            },
            # what the CPU projection said, beside what the run took (bench/eta.py); in the one
            # write that completes the run, so a kill leaves it either running or complete
            eta=None
            if projected is None
            else {"projected_s": projected, "measured_s": time.monotonic() - self.started[0]},
            # whether it ever left the majority class: a collapsed run that never did is not-learned
            ever_learned=self._ever_learned(),
        )

    def _outcomes(self, final: dict) -> dict:
        """``{checkpoint: {split: outcome}}`` of the main metric against the majority baseline."""
        return final_outcomes(self.task, self.splits, final)
