"""Examples per second of a model's training steps and evaluations on this CPU, one thread per run.

What ``robustkit reproduce --plan`` divides a run's examples by to estimate CPU-hours
(``bench/cpu_throughput.toml``, read by :mod:`robustkit.sweeps.plan`). Runs train with one
thread each (``threads`` 1, ``--jobs`` = cores), so the rate is measured at one thread: full
fine-tuning's training step (forward, backward, clipping, AdamW; batch 16 as the demo preset,
max length 64, the fastest of ``--repeats`` blocks of ``--steps`` steps after a warm-up step)
and :func:`robustkit.train.evaluate.evaluate` over 256 validation examples (the fastest of
``--repeats`` passes). Prints the TOML table of each model, to paste into the table with the
date; a second job on the other core slows a step by what the machine shares (memory
bandwidth), which the plan's estimate does not model.

    .venv/bin/python bench/cpu_throughput.py [--models bert-tiny,minilm-l6] [--steps 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import datetime
import platform
import time

import torch

from robustkit.data import batches as data
from robustkit.data import tasks
from robustkit.models.pretrained import load_tokenizer
from robustkit.specs.spec import RunSpec
from robustkit.train.evaluate import EVAL_BATCH_SIZE, eval_batches, evaluate
from robustkit.train.loop import _Loop
from robustkit.train.optimiser import _Optimiser
from robustkit.train.run_model import build_classifier

BATCH, LENGTH, EVAL_EXAMPLES = 16, 64, 256


def measure(model_name: str, steps: int, repeats: int) -> tuple[float, float]:
    """(training examples/s, evaluation examples/s) of full fine-tuning of ``model_name``."""
    splits = tasks.load_splits("rt")
    tokenizer = load_tokenizer(model_name)
    task = tasks.get_task("rt")
    texts = data.split_texts(splits["train"], task.text_fields)[: BATCH * steps]
    features = data.encode_labelled(texts, splits["train"]["label"][: BATCH * steps], tokenizer, LENGTH)
    collator = data.classification_collator(tokenizer)
    batches = [collator(features[i : i + BATCH]) for i in range(0, len(features), BATCH)]
    spec = RunSpec(model=model_name, task="rt", method="full", max_length=LENGTH).resolved()
    model, _, _ = build_classifier(spec, num_labels=2)
    optimiser = _Optimiser(model, spec.lr, 0.0)
    loop = _Loop(run_dir=None, seed=0, progress=False)
    loop.step(model, batches[0], optimiser, 1.0, 0, 1.0)  # warm-up, not timed
    fastest = float("inf")
    for block in range(repeats):
        started = time.perf_counter()
        for step, batch in enumerate(batches):
            loop.step(model, batch, optimiser, 1.0, block * len(batches) + step + 1, 1.0)
        fastest = min(fastest, time.perf_counter() - started)
    train_rate = BATCH * len(batches) / fastest
    val_texts = data.split_texts(splits["validation"], task.text_fields)[:EVAL_EXAMPLES]
    val = data.encode_labelled(val_texts, splits["validation"]["label"][:EVAL_EXAMPLES], tokenizer, LENGTH)
    eval_set = eval_batches(val, EVAL_BATCH_SIZE, collator)
    evaluate(model, eval_set, task)  # warm-up
    fastest = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        evaluate(model, eval_set, task)
        fastest = min(fastest, time.perf_counter() - started)
    return train_rate, EVAL_EXAMPLES / fastest


def _cpu_name() -> str:
    """The CPU's model name (Linux), else the platform's machine type."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="bert-tiny,minilm-l6")
    parser.add_argument("--steps", type=int, default=8, help="timed steps per block (default: 8)")
    parser.add_argument("--repeats", type=int, default=3, help="timed blocks; the fastest counts (default: 3)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    machine = f"{_cpu_name()}, 1 thread"
    for model in args.models.split(","):
        train_rate, eval_rate = measure(model, args.steps, args.repeats)
        print(
            f"[{model}]\ndevice = {machine!r}\ntrain_examples_per_s = {train_rate:.1f}\n"
            f"eval_examples_per_s = {eval_rate:.1f}\nmax_length = {LENGTH}\n"
            f'source = "bench/cpu_throughput.py, {datetime.date.today()}, torch {torch.__version__}"\n'
        )


if __name__ == "__main__":
    main()
