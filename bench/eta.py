"""How close the CPU time projection of a run is to the time it took.

Training projects a run's duration from the median of its first timed steps
(:mod:`robustkit.train.eta`) and records the projection beside the measured wall time in the
run's manifest (``eta``). This prints, for every run of a store that has both, projected /
measured (1.0: exact; the projection warns only above 10 minutes) and their median, so a
projection is checked against what the same machine measured, never against a constant.

    .venv/bin/python bench/eta.py [STORE] [--train METHOD,...]

``--train`` first trains one run per method at the demo preset (minilm-l6 on rt, 1,000
examples, about 4 CPU-minutes each) into STORE (default: a new temporary folder).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from robustkit.store.folders import run_folders
from robustkit.store.manifest import read_manifest


def ratios(store: str | Path) -> list[tuple[str, float, float]]:
    """(run_id, projected seconds, measured seconds) of every run that recorded both."""
    found = []
    for run_dir in run_folders(Path(store)):
        eta = read_manifest(run_dir).get("eta")
        if eta:
            found.append((run_dir.name, float(eta["projected_s"]), float(eta["measured_s"])))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", nargs="?")
    parser.add_argument("--train", help="methods to train first at the demo preset, comma-separated")
    args = parser.parse_args()
    store = Path(args.store or tempfile.mkdtemp(prefix="eta-"))
    if args.train:
        from robustkit.train import train
        from robustkit.verdicts.recipes import preset_spec

        for method in args.train.split(","):
            train(preset_spec("demo", method=method), store, progress=False)
    rows = ratios(store)
    if not rows:
        raise SystemExit(f"no run of {store} records a projection (runs trained before it did, or on a GPU)")
    print("| run | projected | measured | projected / measured |\n|---|---|---|---|")
    for run_id, projected, measured in rows:
        print(f"| {run_id} | {projected:.0f} s | {measured:.0f} s | {projected / measured:.2f} |")
    print(f"\nmedian projected / measured over {len(rows)} runs: {statistics.median(p / m for _, p, m in rows):.2f}")


if __name__ == "__main__":
    main()
