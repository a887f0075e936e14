"""bf16 autocast (``--precision bf16``): its speed-up and its effect on the metrics, one run.

1. Training throughput: robustkit's training step loop (as ``bench/trainers.py`` times it: the
   same examples, batches padded to ``--max-length``, warm-up steps untimed, device synchronised)
   in fp32 and in bf16, for full fine-tuning and Houlsby adapters, alternately, the fastest of
   ``--repeats``; examples/s and bf16's speed-up.
2. Evaluation throughput (what the analyses run): ``robustkit.train.evaluate.evaluate`` over the rt
   validation split (1,066 examples, batches of 64), fp32 vs bf16, on a freshly built model.
3. The metrics: whole runs (``robustkit.train.train``) of full fine-tuning and Houlsby adapters
   on ``--train-size`` rt examples for ``--epochs`` epochs, seeds ``--seeds``, in fp32 and bf16
   (each pair differs in nothing but ``precision``): test accuracy and loss at ``best`` of each,
   the bf16 - fp32 difference per seed, and the fp32 seed-to-seed spread beside it for scale.

    .venv/bin/python bench/precision.py [--device cuda] [--train-size 2000] [--epochs 2] [--seeds 0,1]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

import torch
from trainers import examples, robustkit_loop, synchronise

from robustkit.data import batches as data
from robustkit.data import tasks
from robustkit.models.pretrained import load_tokenizer
from robustkit.specs.spec import RunSpec
from robustkit.train.evaluate import eval_batches, evaluate
from robustkit.train.run_model import build_classifier

METHODS = ("full", "houlsby")


def evaluation_rate(method: str, precision: str, args) -> float:
    """Validation examples per second of ``evaluate`` (the fastest of ``--repeats``)."""
    spec = RunSpec(
        model=args.model, task="rt", method=method, max_length=args.max_length, precision=precision
    ).resolved()
    model, _, _ = build_classifier(spec, num_labels=2)
    model.to(args.device)
    split = tasks.load_splits("rt")["validation"]
    tokenizer = load_tokenizer(args.model)
    features = data.encode_labelled(
        data.split_texts(split, tasks.get_task("rt").text_fields), split["label"], tokenizer, args.max_length
    )
    batches = eval_batches(features, 64, data.classification_collator(tokenizer))
    fastest = float("inf")
    with torch.no_grad():
        evaluate(model, batches[:2], "rt")  # warm-up
        for _ in range(args.repeats):
            synchronise(args.device)
            started = time.perf_counter()
            evaluate(model, batches, "rt")
            synchronise(args.device)
            fastest = min(fastest, time.perf_counter() - started)
    return len(features) / fastest


def final_metrics(run_dir: Path) -> dict:
    from robustkit.store.manifest import read_manifest

    return read_manifest(run_dir)["final"]["best"]["test"]


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N (default: cpu)")
    parser.add_argument("--model", default="bert-tiny", help="embedded model (default: bert-tiny)")
    parser.add_argument(
        "--examples", type=int, default=2048, help="rt training examples the throughput steps draw from (default: 2048)"
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--steps", type=int, default=50, help="timed training steps (default: 50)")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--train-size", type=int, default=2000, help="training examples of the whole runs (default: 2000)"
    )
    parser.add_argument("--epochs", type=int, default=2, help="epochs of the whole runs (default: 2)")
    parser.add_argument("--seeds", default="0,1", help="seeds of the whole runs (default: 0,1)")
    args = parser.parse_args(argv)
    where = (
        torch.cuda.get_device_name(args.device)
        if args.device.startswith("cuda")
        else f"CPU, {torch.get_num_threads()} threads"
    )
    print(f"{args.model} on {args.device} ({where}), torch {torch.__version__}")

    features, collator = examples(args.model, args.examples, args.max_length)
    print(
        f"\n1. training steps: batch {args.batch_size}, max length {args.max_length}, {args.steps} timed steps, "
        f"fastest of {args.repeats}"
    )
    print(f"{'method':8s} {'fp32 ex/s':>10s} {'bf16 ex/s':>10s} {'speed-up':>9s}")
    speedups = {}
    for method in METHODS:
        rates = {"fp32": [], "bf16": []}
        for _ in range(args.repeats):
            for precision in rates:
                rates[precision].append(
                    robustkit_loop(
                        method, features, collator, argparse.Namespace(**{**vars(args), "precision": precision})
                    )[0]
                )
        fp32, bf16 = max(rates["fp32"]), max(rates["bf16"])
        speedups[f"train/{method}"] = bf16 / fp32
        print(f"{method:8s} {fp32:10.1f} {bf16:10.1f} {bf16 / fp32:8.2f}x")

    print("\n2. evaluation (the analyses' forward passes): rt validation, batches of 64")
    print(f"{'method':8s} {'fp32 ex/s':>10s} {'bf16 ex/s':>10s} {'speed-up':>9s}")
    for method in METHODS:
        fp32, bf16 = evaluation_rate(method, "fp32", args), evaluation_rate(method, "bf16", args)
        speedups[f"eval/{method}"] = bf16 / fp32
        print(f"{method:8s} {fp32:10.1f} {bf16:10.1f} {bf16 / fp32:8.2f}x")

    from robustkit.train import train

    seeds = [int(s) for s in args.seeds.split(",")]
    print(
        f"\n3. whole runs: {args.train_size} rt training examples, {args.epochs} epochs, seeds {seeds}; test metrics "
        "at best"
    )
    print(
        f"{'method':8s} {'seed':>4s} {'fp32 acc':>9s} {'bf16 acc':>9s} {'diff':>8s} {'fp32 loss':>10s} "
        f"{'bf16 loss':>10s} {'diff':>8s} {'fp32 s':>7s} {'bf16 s':>7s}"
    )
    differences = {}
    with tempfile.TemporaryDirectory() as store:
        for method in METHODS:
            accuracy = {"fp32": [], "bf16": []}
            for seed in seeds:
                row, seconds = {}, {}
                for precision in ("fp32", "bf16"):
                    spec = RunSpec(
                        model=args.model,
                        task="rt",
                        method=method,
                        seed=seed,
                        train_size=args.train_size,
                        epochs=args.epochs,
                        batch_size=args.batch_size,
                        max_length=args.max_length,
                    )
                    started = time.perf_counter()
                    run = train(
                        dataclasses.replace(spec, precision=precision), store, progress=False, device=args.device
                    )
                    seconds[precision] = time.perf_counter() - started
                    row[precision] = final_metrics(run)
                    accuracy[precision].append(row[precision]["accuracy"])
                a, b = row["fp32"], row["bf16"]
                print(
                    f"{method:8s} {seed:4d} {a['accuracy']:9.4f} {b['accuracy']:9.4f} "
                    f"{b['accuracy'] - a['accuracy']:+8.4f} "
                    f"{a['loss']:10.4f} {b['loss']:10.4f} {b['loss'] - a['loss']:+8.4f} {seconds['fp32']:7.1f} "
                    f"{seconds['bf16']:7.1f}"
                )
            diff = [b - a for a, b in zip(accuracy["fp32"], accuracy["bf16"])]
            differences[method] = statistics.mean(diff)
            spread = statistics.stdev(accuracy["fp32"]) if len(seeds) > 1 else float("nan")
            print(
                f"{method:8s} mean accuracy difference bf16 - fp32: {statistics.mean(diff):+.4f} "
                f"(fp32 seed-to-seed std {spread:.4f})"
            )
    return {"speedups": speedups, "accuracy_differences": differences}


if __name__ == "__main__":
    main()
