"""Write the whole-path simulation table (robustkit.verdicts.simulation) into analyses/README.md.

    python tools/simulate_verdicts.py [--draws 2000] [--out FILE]

Simulates every judged, decidable claim of every recipe at both scales (claims of one shape
once; 500 draws first, 2,000 where a rate is above 0.02) and replaces the table between the
README's ``<!-- simulated -->`` markers, or writes it to ``--out``. Shapes done are kept in
``--cache``, so an interrupted run resumes. Slow: hours at 2,000 draws on 2 cores; the suite runs a smaller check
(tests/test_claim_simulation.py).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from robustkit.verdicts import simulation as verdict_simulation
from robustkit.verdicts.recipes import list_recipes, load_recipe

README = Path(__file__).resolve().parents[1] / "analyses" / "README.md"
BEGIN, END = "<!-- simulated: python tools/simulate_verdicts.py -->", "<!-- end of simulated table -->"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=None, help="write the table here instead of the README")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path.home() / ".cache" / "robustkit" / "verdict-simulation.json",
        help="shapes already simulated (kept between runs, so an interrupted run resumes)",
    )
    args = parser.parse_args()
    memo = {}
    if args.cache.exists():
        memo = {key: tuple(value) for key, value in json.loads(args.cache.read_text()).items()}

    def save(key, value):
        args.cache.parent.mkdir(parents=True, exist_ok=True)
        args.cache.write_text(json.dumps({**{k: list(v) for k, v in memo.items()}, key: list(value)}))
        print(f"{len(memo)} shapes: {key[:100]} -> {value}", flush=True)

    table = verdict_simulation.simulate(
        [load_recipe(name) for name in list_recipes()], draws=args.draws, memo=memo, progress=save
    )
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
