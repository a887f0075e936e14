"""Training speed and checkpoint size of every tuning method against full fine-tuning, in one run.

For each method (default: every registered one, plus an ``adapterhub:`` config string), on the
same batches (rt texts, batch 32, max length 64, minilm-l6 by default): steps/s of the
training step (forward, backward, clipping, AdamW; the fastest of ``--repeats`` blocks of
``--steps`` steps, so that a busy machine's pauses do not count), and the size of the run's
checkpoint (the trained tensors only, safetensors) as a fraction of full fine-tuning's (the
whole model). Full fine-tuning is measured first; each ratio is against that measurement.

    .venv/bin/python bench/train.py [--steps 5] [--repeats 3] [--model minilm-l6] [--methods lora,prefix]
"""

from __future__ import annotations

import argparse

import torch
from safetensors.torch import save
from timing import fastest_steps, rt_batches  # bench/timing.py: a script's own folder is on its path

from robustkit.methods.registry import METHOD_NAMES
from robustkit.specs.spec import RunSpec
from robustkit.train.run_model import trainable_state

# Options a method needs (top-k has no default k) and the generic method's example config.
OPTIONS = {"topk": {"top_k": 2}}
EXTRA = ("adapterhub:lora[r=16,alpha=16]",)


def measure(method: str, model_name: str, steps: int, repeats: int, batches: list) -> tuple[float, int, int]:
    """(steps per second in the fastest block, checkpoint bytes, trainable parameters) of ``method``."""
    spec = RunSpec(model=model_name, task="rt", method=method, max_length=64, **OPTIONS.get(method, {})).resolved()
    model, names, fastest = fastest_steps(spec, batches, steps, repeats)
    state = trainable_state(model, names)
    return steps / fastest, len(save(state)), sum(t.numel() for t in state.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=5, help="timed steps per block (default: 5)")
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed blocks per method; the fastest counts (default: 3)"
    )
    parser.add_argument("--model", default="minilm-l6", help="model (default: minilm-l6)")
    parser.add_argument(
        "--methods", help="comma-separated methods (default: every registered one and an adapterhub: config)"
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    batches = rt_batches(args.model, 320, 32, 64)
    methods = args.methods.split(",") if args.methods else [m for m in METHOD_NAMES if m != "adapterhub"] + list(EXTRA)
    full_rate, full_bytes, full_params = measure("full", args.model, args.steps, args.repeats, batches)
    print(
        f"{args.model}, threads: {torch.get_num_threads()}, fastest of {args.repeats} x {args.steps} steps per "
        "method, batch 32, max length 64"
    )
    print(
        f"full fine-tuning: {full_rate:.2f} steps/s, checkpoint {full_bytes / 1e6:.1f} MB ({full_params:,} parameters)"
    )
    print(
        f"{'method':34s} {'steps/s':>8s} {'speed / full':>12s} {'checkpoint MB':>14s} {'% of full':>10s} "
        f"{'trained':>11s}"
    )
    for method in methods:
        rate, size, params = (
            (full_rate, full_bytes, full_params)
            if method == "full"
            else measure(method, args.model, args.steps, args.repeats, batches)
        )
        print(
            f"{method:34s} {rate:8.2f} {rate / full_rate:11.2f}x {size / 1e6:14.3f} {100 * size / full_bytes:9.2f}% "
            f"{params:11,}"
        )


if __name__ == "__main__":
    main()
