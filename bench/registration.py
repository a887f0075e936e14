"""Registries: reading declarations from source vs each module registering itself on import.

robustkit finds its analyses, figures and attacks by reading each module's ``DECLARED = ...``
statement from its source (:mod:`robustkit.analysis.registry`), so ``robustkit --help`` imports
none of them. The simpler alternative (peft's ``register_peft_method``: each module registers
itself when imported) makes ``--help`` import every declaring module. This measures, in one run
on this machine:

- ``robustkit --help`` as it is (the baseline);
- importing every module of ``robustkit.analysis``, ``robustkit.figures`` and
  ``robustkit.attacks`` in a fresh process: what plain registration costs ``--help`` with the
  modules' imports as they are;
- importing only the third-party libraries those modules use at module level (numpy, pandas,
  scipy.stats, matplotlib.pyplot, torch): the least plain registration would cost unless every
  module deferred them into its functions;

each as a ratio to the baseline (median of ``--repeat`` fresh processes), and the lines of the
source-reading machinery. The target: ``--help`` under 1 s.

    .venv/bin/python bench/registration.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT_ALL = """
import importlib, pkgutil
import robustkit.analysis, robustkit.attacks, robustkit.figures
for package in (robustkit.analysis, robustkit.figures, robustkit.attacks):
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")
"""
LIBRARIES = "import numpy, pandas, scipy.stats, matplotlib.pyplot, torch"
MACHINERY = {  # file -> the functions or classes of the source-reading registration in it
    "robustkit/analysis/registry.py": ("declaration", "_dotted", "_closings", "discover"),
    "robustkit/attacks/registry.py": (
        "discover",
        "read_source",
        "_info",
        "_same_source",
        "_with_source",
        "_is_decorator",
        "_class_literals",
    ),
    "robustkit/figures/units.py": ("_GrowingSet",),
}


def seconds(code: list[str], repeat: int) -> float:
    """Median wall seconds of ``code`` run in a fresh Python ``repeat`` times."""
    found = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, *code], cwd=ROOT, check=True, capture_output=True)
        found.append(time.perf_counter() - started)
    return statistics.median(found)


def machinery_lines() -> dict[str, int]:
    """Lines of each named function or class of :data:`MACHINERY` that exists (by ``ast``)."""
    import ast

    lines = {}
    for path, names in MACHINERY.items():
        tree = ast.parse((ROOT / path).read_text())
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in names:
                lines[f"{path}:{node.name}"] = node.end_lineno - node.lineno + 1
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    baseline = seconds(["-m", "robustkit", "--help"], args.repeat)
    every = seconds(["-c", IMPORT_ALL], args.repeat)
    libraries = seconds(["-c", LIBRARIES], args.repeat)
    print(f"robustkit --help (source-reading registries): {baseline:.2f} s (baseline)")
    print(f"importing every declaring module (plain registration): {every:.2f} s, {every / baseline:.1f}x")
    print(f"their module-level libraries alone: {libraries:.2f} s, {libraries / baseline:.1f}x")
    lines = machinery_lines()
    print(f"source-reading machinery: {sum(lines.values())} lines ({', '.join(f'{k} {v}' for k, v in lines.items())})")


if __name__ == "__main__":
    main()
