"""Layer-span adapter ablation speed: naive (one evaluation per span) vs fast (prefix cache),
in one run, on the same model and batches.

Setting: minilm-l6 (6 layers, hidden 384) with Houlsby adapters (m = 64) whose weights are
perturbed (normal, std 0.05) so that removing a span changes the predictions, on the first
``--examples`` rt dev sentences (max length 64, batches of 64 as in training's evaluation).
Both implementations count their encoder-layer calls (forward hooks); the heatmaps (every
span's loss and accuracy) must be identical to 1e-5 and the accuracies exactly equal.

    .venv/bin/python bench/ablation.py [--examples 200] [--threads 2] [--repeat 1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from robustkit.analysis import ablation
from robustkit.methods import ADAPTER_NAME
from robustkit.specs.spec import RunSpec
from robustkit.train.evaluate import split_batches
from robustkit.train.run_model import build_classifier


def perturbed_model(spec: RunSpec, std: float = 0.05, seed: int = 0) -> torch.nn.Module:
    """The run's model with N(0, std^2) added to every adapter weight (fresh adapters are
    near identity, so spans would hardly matter)."""
    model, _, _ = build_classifier(spec, 2)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if f".adapters.{ADAPTER_NAME}." in name:
                parameter.add_(std * torch.randn(parameter.shape, generator=generator))
    return model.eval()


def dev_batches(spec: RunSpec, examples: int) -> list[dict]:
    """Whole batches covering the first ``examples`` dev sentences (the last one cut short)."""
    batches, kept, left = split_batches(spec, ["validation"])["validation"], [], examples
    for batch in batches:
        if left <= 0:
            break
        kept.append({k: v[:left] for k, v in batch.items()})
        left -= len(kept[-1]["labels"])
    return kept


def timed(function, repeat: int):
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1, help="best of this many timings each")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    spec = RunSpec(model="minilm-l6", task="rt", method="houlsby", max_length=64)
    model = perturbed_model(spec)
    batches = dev_batches(spec, args.examples)
    n = sum(len(b["labels"]) for b in batches)
    L = len(ablation.encoder_layers(model))
    print(
        f"minilm-l6 houlsby (adapters + N(0, 0.05^2)), {L} layers, {len(ablation.spans(L))} spans, "
        f"{n} rt dev sentences in {len(batches)} batches, {args.threads} threads"
    )
    naive_s, naive = timed(lambda: ablation.naive_spans(model, batches, "rt"), args.repeat)
    fast_s, fast = timed(lambda: ablation.fast_spans(model, batches, "rt"), args.repeat)
    naive_n, fast_n = naive.attrs["layer_evaluations"], fast.attrs["layer_evaluations"]
    print(f"{'':8}{'time (s)':>10}{'layer evaluations':>20}")
    print(f"{'naive':8}{naive_s:>10.2f}{naive_n:>20d}")
    print(f"{'fast':8}{fast_s:>10.2f}{fast_n:>20d}")
    print(f"ratio naive/fast: time {naive_s / fast_s:.2f}x, layer evaluations {naive_n / fast_n:.2f}x")
    difference = float(np.abs(naive["value"].to_numpy() - fast["value"].to_numpy()).max())
    accuracy = (fast["metric"] == "accuracy").to_numpy()
    spread = fast.loc[accuracy, "value"]
    print(
        f"max |naive - fast| over {len(fast)} values: {difference:.3g}; "
        f"span accuracies from {spread.min():.3f} to {spread.max():.3f} (all adapters: "
        f"{fast.attrs['full']['accuracy']:.3f})"
    )
    assert naive[["first", "last", "metric"]].equals(fast[["first", "last", "metric"]])
    assert difference <= 1e-5, "heatmaps differ"
    assert (naive["value"].to_numpy()[accuracy] == fast["value"].to_numpy()[accuracy]).all(), "accuracies differ"
    print("heatmaps identical")


if __name__ == "__main__":
    main()
