"""Training speed and checkpoint size: houlsby vs full fine-tuning on minilm-l6, in one run.

Prints steps/s of each method on the same batches (rt texts, batch 32, max length 64) and the
adapter checkpoint's size as a fraction of the full one (target: under 5%).

    .venv/bin/python bench/train.py [--steps 20]
"""

from __future__ import annotations

import argparse
import time

import torch
from safetensors.torch import save

from robustkit import data, tasks
from robustkit.run_model import build_classifier, trainable_state
from robustkit.models import load_tokenizer
from robustkit.spec import RunSpec
from robustkit.train import _Loop, _Optimiser


def measure(method: str, steps: int, batches: list) -> tuple[float, int]:
    """(steps per second, checkpoint bytes) of ``method`` on the given batches."""
    spec = RunSpec(model="minilm-l6", task="rt", method=method, max_length=64).resolved()
    model, names, _ = build_classifier(spec, num_labels=2)
    optimiser = _Optimiser(model, spec.lr, 0.0)
    loop = _Loop(run_dir=None, seed=0, progress=False)
    loop.step(model, batches[0], optimiser, 1.0, 0, 1.0)  # warm-up, not timed
    started = time.perf_counter()
    for step in range(steps):
        loop.step(model, batches[step % len(batches)], optimiser, 1.0, step + 1, 1.0)
    rate = steps / (time.perf_counter() - started)
    return rate, len(save(trainable_state(model, names)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per method (default: 20)")
    args = parser.parse_args()
    torch.manual_seed(0)
    splits = tasks.load_splits("rt")
    tokenizer = load_tokenizer("minilm-l6")
    features = data.encode_labelled(data.split_texts(splits["train"], tasks.get_task("rt").text_fields)[:320], splits["train"]["label"][:320], tokenizer, 64)
    collator = data.classification_collator(tokenizer)
    batches = [collator(features[i : i + 32]) for i in range(0, 320, 32)]
    adapter_rate, adapter_bytes = measure("houlsby", args.steps, batches)
    full_rate, full_bytes = measure("full", args.steps, batches)
    print(f"threads: {torch.get_num_threads()}, steps: {args.steps}, batch 32, max length 64")
    print(f"houlsby: {adapter_rate:.2f} steps/s   full: {full_rate:.2f} steps/s   speed ratio houlsby/full: {adapter_rate / full_rate:.2f}x")
    print(f"checkpoint: houlsby {adapter_bytes / 1e6:.2f} MB   full {full_bytes / 1e6:.2f} MB   ratio: {100 * adapter_bytes / full_bytes:.2f}% (target < 5%)")


if __name__ == "__main__":
    main()
