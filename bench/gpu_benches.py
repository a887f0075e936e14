"""The three GPU benchmarks in one Python process (each start costs ~20 s on the GPU image).

Runs ``bench/trainers.py``, ``bench/precision.py`` and ``bench/attack.py`` one after the other,
each printing to its own log in ``--out``, and writes ``summary.txt`` there: each one's headline
ratios, or the error that stopped it (one failing does not stop the others). ``--small``: the
sizes ``bench/gpu_check.sh`` uses to rehearse on a CPU.

    PYTHONPATH=. python bench/gpu_benches.py --out OUT [--device cuda] [--small]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bench scripts import each other

# (script, its arguments at full size, at --small)
BENCHES = (
    (
        "trainers",
        [],
        [
            "--examples",
            "128",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--repeats",
            "1",
            "--batch-size",
            "8",
            "--max-length",
            "32",
        ],
    ),
    (
        "precision",
        [],
        [
            "--examples",
            "128",
            "--steps",
            "3",
            "--warmup",
            "1",
            "--repeats",
            "1",
            "--batch-size",
            "8",
            "--max-length",
            "32",
            "--train-size",
            "32",
            "--epochs",
            "1",
            "--seeds",
            "0",
        ],
    ),
    ("attack", ["--model", "bert-tiny", "--n", "30", "--quick"], ["--model", "bert-tiny", "--n", "2", "--quick"]),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder of the logs")
    parser.add_argument("--device", default="cuda", help="default: cuda")
    parser.add_argument("--small", action="store_true", help="tiny sizes (a rehearsal on a CPU)")
    parser.add_argument("--only", help="comma-separated: trainers, precision, attack (default: all three)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary, failed = [], 0
    chosen = args.only.split(",") if args.only else [name for name, _, _ in BENCHES]
    for name, full, small in BENCHES:
        if name not in chosen:
            continue
        arguments = [*(small if args.small else full), "--device", args.device]
        started = time.perf_counter()
        with (
            open(out / f"bench-{name}.log", "w") as log,
            contextlib.redirect_stdout(log),
            contextlib.redirect_stderr(log),
        ):
            print(f"$ python bench/{name}.py {' '.join(arguments)}", flush=True)
            try:
                result = __import__(name).main(arguments)
                line = f"{name}: ok, {result}"
            except BaseException as error:  # noqa: BLE001 - reported, the next bench runs
                traceback.print_exc()
                line = f"{name}: FAILED {type(error).__name__}: {error}"
                failed += 1
        summary.append(f"{line} ({time.perf_counter() - started:.0f} s)")
        (out / "summary.txt").write_text("\n".join(summary) + "\n")  # after each: a timeout keeps what ran
        print(summary[-1], flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
