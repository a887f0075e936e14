"""RSA speed and memory: robustkit's torch RSA vs a straightforward NumPy RSA, in one run.

He et al. 2021 §2.2 setting at minilm-l6 size: 5000 tokens x 7 layers (embeddings + 6 encoder
layers), hidden size 384, two models (base and tuned). Three implementations, same inputs:

numpy
    Per layer: unit rows, the two full n x n cosine matrices (float64), their upper triangles
    through ``np.triu_indices`` (computed once, outside the timing), ``np.corrcoef``.
torch chunked
    :func:`robustkit.measures.rsa.rsa_layers` with ``method="chunked"``: row-chunks of the
    upper triangles, centred moments merged (float64).
torch auto
    The default, ``method="auto"``, which picks ``gram`` here: the Pearson sums from d x d
    products, no n x n matrix at all (float64).

Each runs in a fresh child process (spawned) on the same saved inputs, so that one's memory
does not hide inside another's. Peak memory is the growth of the child's resident set during
the call (Linux VmHWM after resetting it through /proc/self/clear_refs, minus VmRSS before):
what the computation added to the process, allocator slack included. For numpy, tracemalloc's
peak (NumPy reports its buffers to it; torch does not) is printed as well, and for the torch
methods the analytic size of their largest buffers.

    .venv/bin/python bench/rsa.py [--tokens 5000] [--layers 7] [--dim 384] [--real]
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from pathlib import Path

import numpy as np


def random_representations(layers: int, n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Anisotropic stacks like BERT's (a shared direction per layer), b a perturbed copy of a."""
    rng = np.random.default_rng(seed)
    shared = 3.0 * rng.normal(size=(layers, 1, d)) / np.sqrt(d)
    a = shared + rng.normal(size=(layers, n, d)) / np.sqrt(d)
    b = a + np.linspace(0.1, 1.0, layers)[:, None, None] * rng.normal(size=(layers, n, d)) / np.sqrt(d)
    return a.astype(np.float32), b.astype(np.float32)


def minilm_representations(n: int) -> tuple[np.ndarray, np.ndarray]:
    """minilm-l6 on n rt dev tokens: the pretrained model vs the same with fresh adapters."""
    import torch

    from robustkit.analysis.representations import (
        load_base,
        representations,
        sample_tokens,
    )
    from robustkit.specs.spec import RunSpec
    from robustkit.train.run_model import build_classifier

    spec = RunSpec(model="minilm-l6", task="rt", method="houlsby")
    sample = sample_tokens(spec, n_tokens=n, seed=0)
    with torch.no_grad():
        a = representations(load_base(spec.model, spec.task), sample)
        b = representations(build_classifier(spec, num_labels=2)[0], sample)
    return a.numpy(), b.numpy()


# --- the implementations, each run in a child process --------------------------------------------


def numpy_rsa_layers(a: np.ndarray, b: np.ndarray, upper: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """The straightforward RSA, one layer at a time, full n x n float64 matrices."""
    values = []
    for layer in range(a.shape[0]):
        x = a[layer].astype(np.float64)
        y = b[layer].astype(np.float64)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        y /= np.linalg.norm(y, axis=1, keepdims=True)
        values.append(np.corrcoef((x @ x.T)[upper], (y @ y.T)[upper])[0, 1])
    return np.array(values)


def _child(name: str, folder: str, chunk: int, queue) -> None:
    import tracemalloc

    import torch

    from robustkit.measures.rsa import rsa_layers

    a, b = np.load(Path(folder, "a.npy")), np.load(Path(folder, "b.npy"))
    upper = np.triu_indices(a.shape[1], 1) if name == "numpy" else None
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    # Warm up (thread pools, lazy initialisation) on a small slice, outside the timing.
    numpy_rsa_layers(a[:1, :64], b[:1, :64], np.triu_indices(64, 1))
    for method in ("chunked", "gram"):
        rsa_layers(ta[:1, :64], tb[:1, :64], method=method)
    _reset_peak()
    before = _status("VmRSS")
    tracemalloc.start()
    started = time.perf_counter()
    if name == "numpy":
        values = numpy_rsa_layers(a, b, upper)
    else:
        values = rsa_layers(ta, tb, chunk=chunk, method="chunked" if name == "torch chunked" else "auto").numpy()
    seconds = time.perf_counter() - started
    traced = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    queue.put(
        {
            "seconds": seconds,
            "values": values,
            "rss": _status("VmHWM") - before,
            "traced": traced,
            "threads": torch.get_num_threads(),
        }
    )


def _reset_peak() -> None:
    """Set VmHWM (peak resident set) to the current resident set (Linux >= 4.0)."""
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")


def _status(field: str) -> int:
    """A /proc/self/status memory field, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def measure(name: str, folder: str, chunk: int) -> dict:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(name, folder, chunk, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=5000, help="n, tokens compared (default: 5000)")
    parser.add_argument("--layers", type=int, default=7, help="layers incl. embeddings (default: 7, minilm-l6)")
    parser.add_argument("--dim", type=int, default=384, help="hidden size (default: 384, minilm-l6)")
    parser.add_argument("--chunk", type=int, default=1024, help="rows per chunk of the chunked method (default: 1024)")
    parser.add_argument(
        "--real", action="store_true", help="minilm-l6 representations of rt dev tokens instead of random ones"
    )
    args = parser.parse_args()
    a, b = (
        minilm_representations(args.tokens) if args.real else random_representations(args.layers, args.tokens, args.dim)
    )
    layers, n, d = a.shape
    with tempfile.TemporaryDirectory() as folder:
        np.save(Path(folder, "a.npy"), a)
        np.save(Path(folder, "b.npy"), b)
        results = {name: measure(name, folder, args.chunk) for name in ("numpy", "torch chunked", "torch auto")}
    source = "minilm-l6 on rt dev tokens" if args.real else "random anisotropic"
    print(
        f"RSA of {layers} layers x {n} tokens x d={d} ({source}), two models; torch threads: "
        f"{results['torch auto']['threads']}"
    )
    estimates = {
        "numpy": "",
        "torch chunked": (
            f"   (buffers: 2 chunks {args.chunk} x {n} + 2 unit-row copies {n} x {d}, float64 = "
            f"{(2 * min(args.chunk, n) * n + 2 * n * d) * 8 / 1e6:.0f} MB)"
        ),
        "torch auto": f"   (buffers: ~4 x {n} x {d} float64 (unit rows, centred rows) = {4 * n * d * 8 / 1e6:.0f} MB)",
    }
    reference = results["numpy"]
    for name, result in results.items():
        traced = f", tracemalloc peak {result['traced'] / 1e6:.0f} MB" if name == "numpy" else ""
        print(
            f"{name:>13}: {result['seconds']:7.2f} s   peak RSS growth {result['rss'] / 1e6:6.0f} "
            f"MB{traced}{estimates[name]}"
        )
    for name in ("torch chunked", "torch auto"):
        result = results[name]
        gap = np.abs(result["values"] - reference["values"]).max()
        print(
            f"{name} vs numpy: {reference['seconds'] / result['seconds']:.1f}x faster, "
            f"{reference['rss'] / max(result['rss'], 1):.0f}x less peak memory, max |RSA difference| {gap:.1e}"
        )
    print("RSA per layer:", " ".join(f"{v:.4f}" for v in results["torch auto"]["values"]))


if __name__ == "__main__":
    main()
