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
from timing import fastest_steps, rt_batches, rt_features  # bench/timing.py: a script's own folder is on its path

from robustkit.data import tasks
from robustkit.specs.spec import RunSpec
from robustkit.train.evaluate import EVAL_BATCH_SIZE, eval_batches, evaluate

BATCH, LENGTH, EVAL_EXAMPLES = 16, 64, 256


def measure(model_name: str, steps: int, repeats: int) -> tuple[float, float]:
    """(training examples/s, evaluation examples/s) of full fine-tuning of ``model_name``."""
    batches = rt_batches(model_name, BATCH * steps, BATCH, LENGTH)
    spec = RunSpec(model=model_name, task="rt", method="full", max_length=LENGTH).resolved()
    model, _, fastest = fastest_steps(spec, batches, len(batches), repeats)
    train_rate = BATCH * len(batches) / fastest
    features, collator = rt_features(model_name, EVAL_EXAMPLES, LENGTH, split="validation")
    eval_set = eval_batches(features, EVAL_BATCH_SIZE, collator)
    task = tasks.get_task("rt")
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
