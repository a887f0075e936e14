"""The top Hessian eigenvalue of an adapter run vs its full fine-tuning run, on the same batch
(issue #16): time, memory, and proof that the adapter-only estimate touches only trained tensors.

For each method (houlsby, full) and each way of running the products, in a fresh process of
its own (so that one measurement's memory cannot be reused by the next): the minilm-l6
classifier of a run (``--store``: the rt run of that method and seed 0 at its ``best``
checkpoint; default: the run's model at step-0, built from its spec, no training needed), the
same ``--examples`` rt training examples (max length 64, identical token ids checked), and a
fixed number of power-iteration steps (no early stop, so both do the same number of
Hessian-vector products). The two ways:

- *whole batch*: the gradient's graph of the whole batch built once and kept for every product
  (the fastest; ``robustkit analyze curvature``'s default);
- *micro-batches* of ``--micro-batch`` examples (default 1, the floor: what no batch size can
  shrink): the product summed over parts, one part's graph in memory at a time
  (``--micro-batch`` of ``robustkit analyze curvature``).

Printed per method and way:

- seconds per Hessian-vector product (fastest of the timed products) and for the whole top
  eigenvalue; the ratio full / adapters;
- memory of the products: (a) the bytes autograd saves for the gradient's graph (counted with
  saved-tensor hooks, each storage once, the model's own weights left out: they are held
  anyway; in micro-batches, the largest part's graph, the one alive at a time) plus the
  parameter-sized buffers the power iteration holds (whole batch: gradient, v, H v; in parts
  also the part's product before it is summed); (b) the peak resident memory above the level
  before the first product (sampled every 2 ms); the ratios full / adapters (target: >= 5x
  for the adapter run);
- what the products touched: parameters differentiated (= the trained ones, and their count),
  frozen parameters that received a gradient (must be 0), and parameters whose value changed
  (must be 0);
- that both ways give the same eigenvalue (up to float32 rounding).

    .venv/bin/python bench/curvature.py [--store runs/demo] [--examples 32] [--iterations 10] [--micro-batch 1]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time

METHODS = ("houlsby", "full")


def measure(method: str, store: str | None, examples: int, iterations: int, micro_batch: int | None) -> dict:
    """One method's numbers, the whole batch at once or in micro-batches (run in a process of its own)."""
    import psutil
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from robustkit.analysis.batches import sampled_batches
    from robustkit.analysis.curvature import micro_batches
    from robustkit.measures.hessian import HessianVectorProduct, top_eigenvalue
    from robustkit.specs.spec import RunSpec
    from robustkit.store.checkpoints import load_checkpoint
    from robustkit.store.manifest import read_spec
    from robustkit.store.tables import load_runs
    from robustkit.train.evaluate import model_inputs
    from robustkit.train.run_model import build_classifier, load_tensors

    torch.set_num_threads(1)  # comparable timings on a shared machine
    if store:
        runs = load_runs(store)
        chosen = runs[
            (runs["method"] == method)
            & (runs["task"] == "rt")
            & (runs["seed"] == 0)
            & (runs["model"] == "minilm-l6")
            & (runs["status"] == "complete")
        ].sort_values("run_id")
        if chosen.empty:
            raise SystemExit(f"no complete minilm-l6 rt {method} run of seed 0 in {store}")
        spec = read_spec(chosen.iloc[0]["path"]).resolved()
        source = f"{chosen.iloc[0]['run_id']} at best"
    else:
        spec = RunSpec(model="minilm-l6", task="rt", method=method, seed=0, train_size=1000, max_length=64).resolved()
        source = "step-0 (built from the spec)"
    model, names, fingerprint = build_classifier(spec, 2)
    if store:
        tensors, metadata = load_checkpoint(chosen.iloc[0]["path"], "best")
        load_tensors(model, tensors, metadata, fingerprint, source)
    model.eval()
    # the same examples for both methods: the demo's data settings and length, not the run's own
    data_spec = RunSpec(model="minilm-l6", task="rt", method="full", seed=0, train_size=spec.train_size, max_length=64)
    (batch,) = sampled_batches(data_spec, "train", examples, 0, batch_size=examples)
    inputs = model_inputs(batch, torch.device("cpu"))
    trained = set(names)
    named = dict(model.named_parameters())
    for name, parameter in named.items():
        parameter.requires_grad_(name in trained)
    parameters = [p for n, p in named.items() if n in trained]
    before = {n: p.detach().clone() for n, p in named.items()}

    saved: dict[int, int] = {}
    largest_part = [0]  # in micro-batches: the saved bytes of the largest part's graph
    # a saved weight is the parameter itself, held whether or not a Hessian is taken: not counted
    weights = {p.untyped_storage().data_ptr() for p in named.values()}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    def part_loss(part):
        def loss():
            # a new part starts: the previous part's graph is freed by now
            largest_part[0] = max(largest_part[0], sum(saved.values()))
            saved.clear()
            return model(**part).loss

        return loss

    if micro_batch is None:
        objective = lambda: model(**inputs).loss  # noqa: E731
    else:
        objective = [(weight, part_loss(part)) for weight, part in micro_batches(inputs, micro_batch)]

    process = psutil.Process()
    peak = [0]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], process.memory_info().rss)
            time.sleep(0.002)

    baseline = process.memory_info().rss
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    times = []
    with sdpa_kernel(SDPBackend.MATH), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        hvp = HessianVectorProduct(objective, parameters)
        started = time.perf_counter()
        if micro_batch is None:
            hvp.gradient()  # the graph, built once (its saved tensors are counted by the hook)

        class Timed:
            parameters = hvp.parameters

            def __call__(self, vector, block=None):
                tick = time.perf_counter()
                out = hvp(vector, block)
                times.append(time.perf_counter() - tick)
                return out

        estimate = top_eigenvalue(Timed(), max_iterations=iterations, tol=0.0)
        total = time.perf_counter() - started
    stop.set()
    sampler.join()
    largest_part[0] = max(largest_part[0], sum(saved.values()))
    # gradient, v, H v; in parts also each part's product before it is added to H v
    buffers = (3 if micro_batch is None else 4) * sum(p.numel() * p.element_size() for p in parameters)
    frozen_with_grad = [n for n, p in named.items() if n not in trained and p.grad is not None]
    changed = [n for n, p in named.items() if not torch.equal(p.detach(), before[n])]
    return {
        "method": method,
        "source": source,
        "input_ids": inputs["input_ids"].tolist(),
        "eigenvalue": estimate.value,
        "residual": estimate.residual,
        "products": hvp.products,
        "seconds_per_product": min(times),
        "seconds_total": total,
        "graph_bytes": sum(saved.values()) if micro_batch is None else largest_part[0],
        "buffer_bytes": buffers,
        "micro_batch": micro_batch,
        "peak_rss_increase": peak[0] - baseline,
        "differentiated": len(parameters),
        "differentiated_scalars": sum(p.numel() for p in parameters),
        "trained_scalars": sum(named[n].numel() for n in trained),
        "all_scalars": sum(p.numel() for p in named.values()),
        "frozen_with_grad": len(frozen_with_grad),
        "changed": len(changed),
        "touched_only_trained": set(n for n, p in named.items() if p.requires_grad) == trained,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--store",
        help="a store with minilm-l6 rt houlsby and full runs of seed 0 "
        "(default: step-0 models built from their specs)",
    )
    parser.add_argument("--examples", type=int, default=32, help="rt training examples in the batch (default: 32)")
    parser.add_argument("--iterations", type=int, default=10, help="power-iteration steps, no early stop (default: 10)")
    parser.add_argument(
        "--micro-batch", type=int, default=1, help="examples per part in the micro-batched way (default: 1)"
    )
    parser.add_argument("--_one", help=argparse.SUPPRESS)
    parser.add_argument("--_parts", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._one:
        print(json.dumps(measure(args._one, args.store, args.examples, args.iterations, args._parts)))
        return
    ways = {"whole batch, graph kept": None, f"micro-batches of {args.micro_batch}": args.micro_batch}
    results = {}
    for way, parts in ways.items():
        for method in METHODS:
            command = [
                sys.executable,
                __file__,
                "--_one",
                method,
                "--examples",
                str(args.examples),
                "--iterations",
                str(args.iterations),
            ]
            command += ["--store", args.store] if args.store else []
            command += ["--_parts", str(parts)] if parts else []
            output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            results[way, method] = json.loads(output.strip().splitlines()[-1])
    first = results[next(iter(ways)), "full"]
    assert all(r["input_ids"] == first["input_ids"] for r in results.values()), "the runs did not see the same batch"
    mib = 2**20
    print(
        f"top Hessian eigenvalue, minilm-l6 on rt, one batch of {args.examples} training examples "
        f"({len(first['input_ids'][0])} tokens max), {args.iterations} power-iteration steps each, 1 thread"
    )
    for way in ways:
        adapters, full = results[way, "houlsby"], results[way, "full"]
        print(f"{way}:")
        for name, r in (("adapters (houlsby)", adapters), ("full fine-tuning", full)):
            print(
                f"  {name:20s} {r['source']}: lambda_max = {r['eigenvalue']:.6g} (residual {r['residual']:.2g}); "
                f"{r['seconds_per_product']:.3f} s per product, {r['seconds_total']:.1f} s in all; "
                f"graph {r['graph_bytes'] / mib:.1f} MiB + buffers {r['buffer_bytes'] / mib:.1f} MiB; "
                f"peak RSS +{r['peak_rss_increase'] / mib:.0f} MiB"
            )
            print(
                f"  {'':20s} differentiated {r['differentiated']} tensors = {r['differentiated_scalars']:,} scalars "
                f"(trained: {r['trained_scalars']:,} of {r['all_scalars']:,}); frozen tensors with a gradient: "
                f"{r['frozen_with_grad']}; tensors changed: {r['changed']}; only trained tensors require grad: "
                f"{r['touched_only_trained']}"
            )
        memory = (full["graph_bytes"] + full["buffer_bytes"]) / (adapters["graph_bytes"] + adapters["buffer_bytes"])
        rss = full["peak_rss_increase"] / max(adapters["peak_rss_increase"], 1)
        print(
            "  full / adapters: time per product "
            f"{full['seconds_per_product'] / adapters['seconds_per_product']:.2f}x, "
            f"whole eigenvalue {full['seconds_total'] / adapters['seconds_total']:.2f}x; memory (graph + buffers) "
            f"{memory:.2f}x, peak RSS increase {rss:.2f}x (target: adapters >= 5x cheaper in memory: "
            f"{'met' if min(memory, rss) >= 5 else 'NOT met'} on both measures)"
        )
    whole, parts = (results[way, "houlsby"] for way in ways)
    print(
        "adapters in micro-batches vs the whole batch: "
        f"{parts['seconds_per_product'] / whole['seconds_per_product']:.2f}x "
        "the time per product, "
        f"{(whole['graph_bytes'] + whole['buffer_bytes']) / (parts['graph_bytes'] + parts['buffer_bytes']):.1f}x "
        f"less graph + buffers, {whole['peak_rss_increase'] / max(parts['peak_rss_increase'], 1):.1f}x less peak RSS"
    )
    for method in METHODS:
        values = [results[way, method]["eigenvalue"] for way in ways]
        print(
            f"{method}: the same eigenvalue both ways: {values[0]:.6g} vs {values[1]:.6g} "
            f"(relative difference {abs(values[0] - values[1]) / abs(values[0]):.1e})"
        )
    ok = all(
        results[way, "houlsby"]["frozen_with_grad"] == 0
        and results[way, "houlsby"]["changed"] == 0
        and results[way, "houlsby"]["touched_only_trained"]
        for way in ways
    )
    print(f"adapter-only estimate touches only trained tensors: {'yes' if ok else 'NO'}")


if __name__ == "__main__":
    main()
