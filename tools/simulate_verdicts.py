"""Write the whole-path simulation table (robustkit.verdicts.simulation) into recipes/README.md.

    python tools/simulate_verdicts.py [--draws 2000] [--first 500] [--out FILE] [--part K/N]
    python tools/simulate_verdicts.py --update [--redo RECIPE:CLAIM ...]

Simulates every judged, decidable claim of every recipe at both scales (claims of one shape
once; ``--first`` draws first, ``--draws`` where a rate is above 0.02), each under every nuisance
its null leaves free (the worst rate kept), and replaces the table between the README's
``<!-- simulated -->`` markers, or writes it to ``--out``. Shapes done are kept in ``--cache``,
so an interrupted run resumes. ``--part K/N`` simulates every N-th recipe from the K-th into
the cache and writes nothing else (one process per core; then a run without it, reading the
parts' caches with ``--merge``, writes the table). Slow: hours on 2 cores; the suite runs a
smaller check (tests/test_claim_simulation.py). ``--update`` keeps the README's rows whose claim
still has the kind, quantifier, cells and runs per group they were drawn for, and simulates only
the rest (claims new to the table, changed, or named by ``--redo``, e.g. after a rule change that
can raise their rates).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
from markers import write_table  # tools/markers.py: a script's own folder is on its path

from robustkit.verdicts import simulation as verdict_simulation
from robustkit.verdicts.recipes import list_recipes, load_recipe

README = Path(__file__).resolve().parents[1] / "recipes" / "README.md"
BEGIN, END = "<!-- simulated: python tools/simulate_verdicts.py -->", "<!-- end of simulated table -->"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--first", type=int, default=500, help="draws before deciding whether a shape needs --draws")
    parser.add_argument(
        "--part", default=None, help="K/N: simulate every N-th recipe from the K-th into the cache only"
    )
    parser.add_argument("--merge", type=Path, nargs="*", default=(), help="other caches to read (the parts')")
    parser.add_argument("--out", type=Path, default=None, help="write the table here instead of the README")
    parser.add_argument("--update", action="store_true", help="keep the README's rows that still fit their claims")
    parser.add_argument("--redo", nargs="*", default=(), help="RECIPE:CLAIM rows to simulate again with --update")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "robustkit" / "verdict-simulation.json",
        help="shapes already simulated (kept between runs, so an interrupted run resumes)",
    )
    args = parser.parse_args()
    memo = {}
    for cache in (*args.merge, args.cache):
        if cache.exists():
            memo.update({key: tuple(value) for key, value in json.loads(cache.read_text()).items()})

    def save(key, value):
        args.cache.parent.mkdir(parents=True, exist_ok=True)
        args.cache.write_text(json.dumps({**{k: list(v) for k, v in memo.items()}, key: list(value)}))
        print(f"{len(memo)} shapes: {key[:100]} -> {value}", flush=True)

    names = list_recipes()
    if args.part:
        k, n = (int(x) for x in args.part.split("/"))
        names = names[k::n]
    known = _readme_rows(set(args.redo)) if args.update else None
    table = verdict_simulation.simulate(
        [load_recipe(name) for name in names], draws=args.draws, first=args.first, memo=memo, progress=save, known=known
    )
    if args.part:
        return
    text = verdict_simulation.markdown(table)
    write_table(text, table, args.out, README, BEGIN, END)


def _readme_rows(redo: set[str]) -> pd.DataFrame:
    """The README's simulated table as rows (:data:`robustkit.verdicts.simulation.SIMULATION_COLUMNS`),
    those named in ``redo`` (``RECIPE:CLAIM``) marked to be simulated again."""
    lines = README.read_text().split(BEGIN, 1)[1].split(END, 1)[0].strip().splitlines()[2:]
    rows = []
    for line in lines:
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        recipe, scale, claim, kind, quantifier, count, n, agrees, contradicts, draws, under_a, under_c = cells
        limit = verdict_simulation.bound(0.05, int(draws))
        rows.append(
            {
                "recipe": recipe,
                "scale": scale,
                "claim": claim,
                "compare": kind,
                "quantifier": quantifier,
                "cells": int(count),
                "n": n,
                "draws": int(draws),
                "false_agrees": float(agrees),
                "false_contradicts": float(contradicts),
                "worst_agrees_under": under_a,
                "worst_contradicts_under": under_c,
                "bound": limit,
                "passes": float(agrees) <= limit and float(contradicts) <= limit,
                "redo": f"{recipe}:{claim}" in redo,
            }
        )
    return pd.DataFrame(rows)


if __name__ == "__main__":
    main()
