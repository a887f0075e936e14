"""Write the recipes' plan table (``robustkit claims --plan --markdown``) into recipes/README.md.

    python tools/plan_table.py            # rewrite the table between the README's markers
    python tools/plan_table.py --check    # exit 1 when the README's table is stale

A new or changed recipe changes the table; this regenerates it, so no one edits it by hand
(tests/test_recipes.py fails until it is regenerated). ~20 CPU-seconds: the exact null
distributions of the largest pooled cells.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # tools/markers.py, also when a test loads this file
from markers import between  # noqa: E402

README = Path(__file__).resolve().parents[1] / "recipes" / "README.md"
BEGIN = "<!-- generated: robustkit claims --plan --markdown (edit the recipes, not this table) -->\n"
END = "<!-- end of generated table -->"


def table() -> str:
    """The markdown plan of every shipped recipe at both scales (what the README shows)."""
    from robustkit.verdicts.decidability import markdown, plan
    from robustkit.verdicts.recipes import list_recipes, load_recipe

    recipes = [load_recipe(name) for name in list_recipes()]
    return markdown(plan(recipes), recipes)


def with_table(readme: str, text: str) -> str:
    """``readme`` with ``text`` between its markers."""
    return between(readme, BEGIN, END, text, name=str(README))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when the README's table is stale; write nothing")
    args = parser.parse_args()
    readme = README.read_text()
    updated = with_table(readme, table())
    if args.check:
        print("stale: run python tools/plan_table.py" if updated != readme else "up to date")
        return int(updated != readme)
    README.write_text(updated)
    print(f"wrote the plan table into {README}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
