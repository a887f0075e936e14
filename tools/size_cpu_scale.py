"""Size the cpu scale from the demo store (robustkit.verdicts.sizing) and write its table into
recipes/README.md.

    python tools/size_cpu_scale.py --pilot runs/demo [--cpu-hours 8] [--out FILE] [RECIPE ...]

For each headline recipe (default: robustkit.verdicts.sizing.HEADLINE) and claim: the runs per
group the pilot's effect needs for 80% power, the seeds that gives, the fixed training budget in
multiples of the demo's epochs (each run trains it to the end, its schedule decaying over it:
issue #55 item 5), and whether it fits the CPU budget, into the README and, as data, recipes/cpu-sizing.csv. The
recipes' ``[cpu]`` sections are then written from this table by hand (each cites it;
tests/test_sizing.py checks that their runs are the table's). Slow: the bootstrap power of every
claim, tens of CPU-minutes.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd
from markers import write_table  # tools/markers.py: a script's own folder is on its path

from robustkit.verdicts import sizing
from robustkit.verdicts.recipes import load_recipe

README = Path(__file__).resolve().parents[1] / "recipes" / "README.md"
SIZES = README.with_name("cpu-sizing.csv")  # the table as data: tests/test_sizing.py checks the [cpu] sections
BEGIN, END = "<!-- cpu scale sizing: python tools/size_cpu_scale.py -->", "<!-- end of cpu scale sizing -->"


def markdown(sizes, per_recipe, cpu_hours: float) -> str:
    number = lambda x: "" if isinstance(x, float) and math.isnan(x) else f"{x:g}"  # noqa: E731 - a cell
    lines = [
        "| recipe | claim | kind | pilot runs per group | runs per group for 80% power | from | seeds | "
        "epochs budget (x demo) | fits | why not |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    budgets = dict(zip(per_recipe["recipe"], per_recipe["epochs"]))
    for row in sizes.itertuples():
        lines.append(
            f"| {row.recipe} | {row.claim} | {row.compare} | {row.pilot_n} | {number(row.n)} | {row.basis} | "
            f"{number(row.seeds)} | {number(budgets.get(row.recipe, math.nan))} | {'yes' if row.fits else 'no'} | "
            f"{row.reason if not row.fits else ''} |"
        )
    lines += ["", "| recipe | seeds | runs | CPU-hours (estimate) |", "|---|---|---|---|"]
    for row in per_recipe.itertuples():
        lines.append(f"| {row.recipe} | {number(row.seeds)} | {row.runs} | {row.cpu_hours:.2f} |")
    lines.append(f"\nBudget: {cpu_hours:g} CPU-hours.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recipes", nargs="*", default=list(sizing.HEADLINE))
    parser.add_argument("--pilot", type=Path, required=True, help="a store with the recipes' demo runs")
    parser.add_argument("--cpu-hours", type=float, default=8.0)
    parser.add_argument("--simulations", type=int, default=200, help="bootstrap stores per candidate n, at most")
    parser.add_argument("--out", type=Path, default=None, help="write the table here instead of the README")
    parser.add_argument(
        "--sizes",
        type=Path,
        nargs="*",
        default=(),
        help="the pilot's sizes of some recipes already computed (the CSV an --out run writes): not computed again",
    )
    args = parser.parse_args()
    recipes = [load_recipe(name) for name in args.recipes]
    known = (
        pd.concat([pd.read_csv(path).fillna({"basis": "", "side": "", "reason": ""}) for path in args.sizes])
        if args.sizes
        else None
    )
    done = set(known["recipe"]) if known is not None else set()
    todo = [recipe for recipe in recipes if recipe.name not in done]
    sizes = sizing.pilot_sizes(todo, args.pilot, simulations=args.simulations) if todo else None
    sizes = pd.concat([s for s in (known, sizes) if s is not None], ignore_index=True)
    sizes = sizes[sizes["recipe"].isin([recipe.name for recipe in recipes])].drop(columns="fits", errors="ignore")
    sizes, per_recipe = sizing.fit(sizes, recipes, args.cpu_hours)
    text = markdown(sizes, per_recipe, args.cpu_hours)
    print(text)
    write_table(text, sizes, args.out, README, BEGIN, END)
    if not args.out:
        sizes.to_csv(SIZES, index=False)


if __name__ == "__main__":
    main()
