"""Write the real-runs null table (robustkit.verdicts.real_null) into recipes/README.md.

    python tools/simulate_real_null.py --store runs/demo [RECIPE ...] [--draws 200] [--out FILE]

For every two-group claim of every recipe whose demo runs the store holds, at each scale the
claim is judged at: one compared group's demo runs relabelled into two groups, ``--draws``
stores of that scale's runs per group drawn from them (each group's runs, the worse rate kept),
each judged by the claim's own verdict path. Replaces the
table between the README's ``<!-- real-runs null -->`` markers, or writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd
from markers import write_table  # tools/markers.py: a script's own folder is on its path

from robustkit.analysis.convergence import still_improving
from robustkit.verdicts import real_null, tally
from robustkit.verdicts.recipes import list_recipes, load_recipe
from robustkit.verdicts.simulation import bound, shape

README = Path(__file__).resolve().parents[1] / "recipes" / "README.md"
BEGIN, END = "<!-- real-runs null: python tools/simulate_real_null.py -->", "<!-- end of real-runs null -->"


def table(store: Path, draws: int, names: list[str] | None = None, scale: str = "demo") -> pd.DataFrame:
    """One row per two-group claim and scale it is judged at, on the runs of ``scale`` in
    ``store``: its relabelled-null rates at that scale's runs per group."""
    rows = []
    for name in names or list_recipes():
        recipe = load_recipe(name)
        claims = [c for c in recipe.claims if real_null.drawable(c)]
        if scale not in recipe.scales or not claims:
            continue
        run_ids = [spec.run_id for spec in recipe.specs(scale)]
        memo: dict = {}
        late = None
        for claim in claims:
            try:
                found = tally.observations(claim, recipe.figure, recipe.figure_params(scale), store, run_ids, memo)
            except Exception as error:  # noqa: BLE001 - a recipe without its runs gives no row, said
                print(f"{name} {claim.id}: no observations ({error})", flush=True)
                continue
            if claim.final and late is None:
                late = still_improving(store, run_ids)
            for judged_at in claim.scales:
                if judged_at not in recipe.scales:
                    continue
                n = max(max(a, b) for _, a, b in shape(recipe, claim, judged_at).cells)
                rates = real_null.null_rates(claim, found, late if claim.final else None, draws=draws, n=n)
                if not rates["draws"]:
                    continue
                limit = bound(claim.alpha, rates["draws"])
                worst = max(x for x in (rates["false_agrees"], rates["false_contradicts"]) if not math.isnan(x))
                row = {"recipe": name, "claim": claim.id, "scale": judged_at, "compare": claim.compare, **rates}
                rows.append({**row, "bound": limit, "passes": worst <= limit})
                print(row, flush=True)
    return pd.DataFrame(rows)


def summary(found: pd.DataFrame) -> str:
    """The sentence above the table: what it covers, and the rates against their bounds."""
    worst = found[["false_agrees", "false_contradicts"]].max(axis=1)
    top = found.loc[worst.idxmax()]
    failing = found[~found.passes]
    draws = sorted(set(found.draws))
    said = (
        f"{len(found)} claim-and-scale rows of {found.recipe.nunique()} recipes, "
        f"{' or '.join(map(str, draws))} draws each. "
    )
    if failing.empty:
        said += f"Every rate is within alpha plus two Monte-Carlo standard errors ({found.bound.max():.3f} at most). "
    else:
        names = ", ".join(f"{r.recipe} {r.claim} ({r.scale})" for r in failing.itertuples())
        said += f"{len(failing)} exceed alpha plus two Monte-Carlo standard errors: {names}. "
    return (
        said + f"The largest, {worst.max():.3f}, is {top.recipe} {top.claim} at {top.scale} n ({top.n} per group).\n\n"
    )


def markdown(found: pd.DataFrame) -> str:
    lines = [
        "| recipe | claim | judged at | kind | runs relabelled | runs per group drawn | false agrees | "
        "false contradicts | draws |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    text = lambda x: "-" if math.isnan(x) else f"{x:.3f}"  # noqa: E731 - not a false decision for its kind
    for row in found.itertuples():
        lines.append(
            f"| {row.recipe} | {row.claim} | {row.scale} | {row.compare} | {row.source} | {row.n} | "
            f"{text(row.false_agrees)} | {text(row.false_contradicts)} | {row.draws} |"
        )
    return summary(found) + "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("recipes", nargs="*", help="recipes (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="write the table here instead of the README")
    args = parser.parse_args()
    found = table(args.store, args.draws, args.recipes)
    text = markdown(found)
    write_table(text, found, args.out, README, BEGIN, END)


if __name__ == "__main__":
    main()
