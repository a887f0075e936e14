"""Write the whole-path simulation table (robustkit.verdict_simulation) into analyses/README.md.

    python tools/simulate_verdicts.py [--draws 2000] [--out FILE]

Simulates every judged, decidable claim of every recipe at both scales (claims of one shape
once) and replaces the table between the README's ``<!-- simulated -->`` markers, or writes it
to ``--out``. Slow: hours at 2,000 draws on 2 cores; the suite runs a smaller check
(tests/test_claim_simulation.py).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from robustkit import verdict_simulation
from robustkit.recipes import list_recipes, load_recipe

README = Path(__file__).resolve().parents[1] / "analyses" / "README.md"
BEGIN, END = "<!-- simulated: python tools/simulate_verdicts.py -->", "<!-- end of simulated table -->"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=None, help="write the table here instead of the README")
    args = parser.parse_args()
    table = verdict_simulation.simulate([load_recipe(name) for name in list_recipes()], draws=args.draws)
    text = verdict_simulation.markdown(table)
    if args.out:
        args.out.write_text(text)
        table.to_csv(args.out.with_suffix(".csv"), index=False)
        return
    readme = README.read_text()
    head, _, rest = readme.partition(BEGIN)
    _, _, tail = rest.partition(END)
    README.write_text(f"{head}{BEGIN}\n{text}{END}{tail}")


if __name__ == "__main__":
    main()
