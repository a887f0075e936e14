"""Training throughput: robustkit's loop vs Hugging Face ``Trainer`` / AdapterHub's ``AdapterTrainer``, one run.

For full fine-tuning (against ``Trainer``) and two adapter methods, Houlsby adapters and LoRA
(against ``AdapterTrainer``), on the same model (robustkit's ``build_classifier`` of ``--model``,
seed 0: the same weights and adapters for both), the same examples (the first ``--examples``
``rt`` training sentences), the same batch size, every batch padded to ``--max-length`` (so that
the order each side draws batches in costs the same), the same precision (``--precision bf16``:
robustkit's ``RunSpec.precision`` autocast vs ``TrainingArguments(bf16=True)``), AdamW at the
method's learning rate with a linear schedule, weight decay 0, gradient clipping at 1.0, and
the same device. The two sides run alternately, ``--repeats`` times each, every time on a fresh
model.

What is timed: ``--steps`` optimisation steps after ``--warmup`` untimed ones (the CUDA context,
kernels' first launches), wall time with the device synchronised at both ends:

- robustkit: the body of ``robustkit.train.finetuning``'s step loop (per-step seeding, the batch's
  indices, collation, ``_Loop.step``: forward, backward, per-layer gradient norms, the
  non-finite checks, clipping, AdamW, and the loss logged), without its evaluations and
  checkpoints;
- Trainer / AdapterTrainer: ``trainer.train()`` with ``max_steps`` = warm-up + timed steps,
  logging, saving and evaluation off, the clock read (after a synchronisation) in a callback at
  the end of the last warm-up step and of the last step.

Printed per method: examples/s of each side (the fastest repeat), robustkit's ratio to the other
(target: >= 1), and on CUDA each side's peak allocated memory over its steps
(``torch.cuda.max_memory_allocated``; on the CPU peak memory is not measured: one process's peak
RSS cannot be split between the two sides).

    .venv/bin/python bench/trainers.py [--device cuda] [--model bert-tiny] [--batch-size 32] [--steps 50] \
        [--precision bf16]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch

from robustkit.data import batches as data
from robustkit.data import tasks
from robustkit.models.pretrained import load_tokenizer
from robustkit.specs.spec import RunSpec
from robustkit.train.loop import _Loop, seed_step
from robustkit.train.optimiser import _Optimiser, linear_lr_factor
from robustkit.train.run_model import build_classifier

# method -> the class that trains it the way its users would without robustkit
BASELINES = {"full": "Trainer", "houlsby": "AdapterTrainer", "lora": "AdapterTrainer"}


def examples(model: str, n: int, max_length: int) -> tuple[list[dict], object]:
    """The first ``n`` rt training examples (token ids, labels) and a collator that pads every
    batch to ``max_length``."""
    from transformers import DataCollatorWithPadding

    train = tasks.load_splits("rt")["train"]
    tokenizer = load_tokenizer(model)
    texts = data.split_texts(train, tasks.get_task("rt").text_fields)[:n]
    features = data.encode_labelled(texts, train["label"][:n], tokenizer, max_length)
    return features, DataCollatorWithPadding(
        tokenizer, padding="max_length", max_length=max_length, return_tensors="pt"
    )


def synchronise(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def peak_start(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_mib(device: str) -> float:
    return torch.cuda.max_memory_allocated(device) / 2**20 if device.startswith("cuda") else float("nan")


def spec_of(method: str, args, precision: str | None = None) -> RunSpec:
    return RunSpec(
        model=args.model,
        task="rt",
        method=method,
        batch_size=args.batch_size,
        max_length=args.max_length,
        precision=precision or args.precision,
    ).resolved()


def robustkit_loop(method: str, features: list[dict], collator, args) -> tuple[float, float]:
    """(examples/s, peak MiB) of robustkit's training step loop."""
    spec = spec_of(method, args)
    model, _, _ = build_classifier(spec, num_labels=2)
    model.to(args.device)
    optimiser = _Optimiser(model, spec.lr, spec.weight_decay)
    loop = _Loop(run_dir=None, seed=spec.seed, progress=False, device=args.device)
    total = args.warmup + args.steps
    history = []

    def one(step: int) -> None:
        seed_step(spec.seed, step, "finetune")
        index = data.batch_indices(len(features), spec.batch_size, spec.seed, step - 1)
        batch = collator([features[i] for i in index])
        loss = loop.step(model, batch, optimiser, linear_lr_factor(step, 0, total), step, spec.max_grad_norm)
        history.append(loss)

    for step in range(1, args.warmup + 1):
        one(step)
    synchronise(args.device)
    peak_start(args.device)
    started = time.perf_counter()
    for step in range(args.warmup + 1, total + 1):
        one(step)
    synchronise(args.device)
    return args.steps * spec.batch_size / (time.perf_counter() - started), peak_mib(args.device)


def hugging_face(method: str, features: list[dict], collator, args) -> tuple[float, float]:
    """(examples/s, peak MiB) of ``Trainer`` (full) or ``AdapterTrainer`` (adapter methods)."""
    from transformers import Trainer, TrainerCallback, TrainingArguments

    spec = spec_of(method, args, precision="fp32")  # the Trainer's own bf16 autocast does it
    model, _, _ = build_classifier(spec, num_labels=2)
    clock: dict[str, float] = {}
    device = args.device

    class Clock(TrainerCallback):
        def on_step_end(self, arguments, state, control, **kwargs):
            if state.global_step == args.warmup:
                synchronise(device)
                peak_start(device)
                clock["start"] = time.perf_counter()
            elif state.global_step == args.warmup + args.steps:
                synchronise(device)
                clock["end"] = time.perf_counter()
                clock["peak"] = peak_mib(device)

    with tempfile.TemporaryDirectory() as out:
        arguments = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=spec.batch_size,
            max_steps=args.warmup + args.steps,
            learning_rate=spec.lr,
            lr_scheduler_type="linear",
            warmup_steps=0,
            weight_decay=spec.weight_decay,
            max_grad_norm=spec.max_grad_norm,
            optim="adamw_torch",
            bf16=args.precision == "bf16",
            seed=spec.seed,
            logging_strategy="no",
            save_strategy="no",
            eval_strategy="no",
            report_to=[],
            disable_tqdm=True,
            dataloader_num_workers=0,
            remove_unused_columns=False,
            use_cpu=device == "cpu",
        )
        if method == "full":
            trainer = Trainer(
                model=model, args=arguments, train_dataset=features, data_collator=collator, callbacks=[Clock()]
            )
        else:
            from adapters import AdapterTrainer

            trainer = AdapterTrainer(
                model=model, args=arguments, train_dataset=features, data_collator=collator, callbacks=[Clock()]
            )
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)  # its end-of-training summary; the table below says it
        trainer.train()
    return args.steps * spec.batch_size / (clock["end"] - clock["start"]), clock["peak"]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N (default: cpu)")
    parser.add_argument("--model", default="bert-tiny", help="embedded model (default: bert-tiny)")
    parser.add_argument(
        "--methods", default="full,houlsby,lora", help="comma-separated, of full, houlsby, lora (default: all three)"
    )
    parser.add_argument("--examples", type=int, default=2048, help="rt training examples drawn from (default: 2048)")
    parser.add_argument("--batch-size", type=int, default=32, help="default: 32 (the papers')")
    parser.add_argument("--max-length", type=int, default=64, help="every batch padded to it (default: 64)")
    parser.add_argument("--steps", type=int, default=50, help="timed steps (default: 50)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (default: 5)")
    parser.add_argument(
        "--repeats", type=int, default=2, help="alternating repeats per side; the fastest counts (default: 2)"
    )
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16"), help="default: fp32")
    args = parser.parse_args(argv)
    features, collator = examples(args.model, args.examples, args.max_length)
    where = (
        torch.cuda.get_device_name(args.device)
        if args.device.startswith("cuda")
        else f"CPU, {torch.get_num_threads()} threads"
    )
    print(
        f"{args.model} on {args.device} ({where}), torch {torch.__version__}, {args.precision}, batch "
        f"{args.batch_size}, "
        f"max length {args.max_length}, {args.steps} timed steps after {args.warmup}, fastest of {args.repeats}"
    )
    print(
        f"{'method':8s} {'baseline':>15s} {'robustkit ex/s':>15s} {'baseline ex/s':>14s} {'ratio':>7s} "
        f"{'robustkit MiB':>14s} {'baseline MiB':>13s}"
    )
    ratios = {}
    for method in args.methods.split(","):
        ours, theirs = [], []
        for _ in range(args.repeats):
            ours.append(robustkit_loop(method, features, collator, args))
            theirs.append(hugging_face(method, features, collator, args))
        (rate, peak), (base_rate, base_peak) = max(ours), max(theirs)
        ratios[method] = rate / base_rate
        print(
            f"{method:8s} {BASELINES[method]:>15s} {rate:15.1f} {base_rate:14.1f} {rate / base_rate:6.2f}x "
            f"{peak:14.1f} {base_peak:13.1f}"
        )
    print("ratio: robustkit's examples/s over the baseline's (target >= 1)")
    return ratios


if __name__ == "__main__":
    main()
