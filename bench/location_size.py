"""Size and power of the location test (issue #56 item 3): what the 2^-min(n) floor costs and
buys, and what pairing runs by seed gains.

``--floor``: the one-sided false-positive rate of the studentized permutation Brunner-Munzel
test *without* its point-group sign bound (the bound that floors every p at 2^-min(n),
``robustkit.measures.brunner_munzel._point_group_bound``) and with it, at the null the
whole-path simulation draws (``robustkit.verdicts.simulation``: skewed scores on a 1/1000 grid,
equal median difference, one group 10 times as wide as the other), per n vs n, both tails.

``--paired``: power at a true 1 SD shift of the paired sign test of within-seed differences
(``robustkit.measures.paired``) and of the unpaired Brunner-Munzel test on the same draws, at
pair correlations 0 and 0.5 (``simulation._draw_cell`` of a paired claim, exchangeable spreads).

Both call the tests themselves on the simulation's draws (the whole path adds the failure and
convergence checks; tests/test_paired.py and tests/test_claim_simulation.py run it). Prints one
JSON line per case; the rates with their draws and 95% Clopper-Pearson upper bounds.

    .venv/bin/python bench/location_size.py --floor --n 5,8,12,18 --draws 3000
    .venv/bin/python bench/location_size.py --paired --n 5,8 --draws 2000
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np
from scipy import stats

from robustkit.measures import brunner_munzel, paired
from robustkit.verdicts import simulation
from robustkit.verdicts.spec import Claim

WIDE = {  # name -> scale of a, of b (SD units of one run's score), the values' grid
    "a wide and skewed, b tight": (3.0, 0.3, simulation.GRID),
    "a tight, b wide and skewed": (0.3, 3.0, simulation.GRID),
    "a wide, b tight, 1/50 grid": (3.0, 0.3, simulation.ATTACK_GRID),
}


def upper(hits: int, draws: int) -> float:
    """95% one-sided Clopper-Pearson upper bound of a rate."""
    return float(stats.beta.ppf(0.95, hits + 1, draws - hits)) if hits < draws else 1.0


def null_draw(
    rng: np.random.Generator, n: int, scale_a: float, scale_b: float, grid: int
) -> tuple[np.ndarray, np.ndarray]:
    """Two groups at the simulation's location null (its _draw_cell without failures)."""
    a = simulation._score(rng, n) * scale_a - simulation._median_difference(scale_a, scale_b)
    b = simulation._score(rng, n) * scale_b
    values = [np.round((simulation.CENTRE + x * simulation.SPREAD) * grid) / grid for x in (a, b)]
    return values[0], values[1]


def floor(sizes: list[int], draws: int) -> None:
    for n in sizes:
        for name, (scale_a, scale_b, grid) in WIDE.items():
            rng = np.random.default_rng(7)
            hits = np.zeros((2, 2), int)  # without / with the bound x greater / less
            for _ in range(draws):
                a, b = null_draw(rng, n, scale_a, scale_b, grid)
                hits[0] += np.array(brunner_munzel._permutation_tails(a, b)) < 0.05
                hits[1] += np.array(brunner_munzel.tails(a, b)) < 0.05
            worst = int(hits[0].max())
            print(
                json.dumps(
                    {
                        "n": n,
                        "nuisance": name,
                        "draws": draws,
                        "without_bound": [int(h) for h in hits[0]],
                        "with_bound": [int(h) for h in hits[1]],
                        "worst_rate_without": round(worst / draws, 4),
                        "upper95_without": round(upper(worst, draws), 4),
                    }
                ),
                flush=True,
            )


def paired_power(sizes: list[int], draws: int, shift: float = 1.0) -> None:
    claim = Claim.from_table(
        {"id": "p", "says": "p", "statistic": "scores.score", "compare": "location", "a": "houlsby", "b": "full"}
        | {"direction": "greater", "paired": True},
        "bench",
    )
    for n in sizes:
        for correlation in (0.0, 0.5):
            nuisance = dataclasses.replace(simulation.NUISANCES[0], pair_correlation=correlation)
            rng = np.random.default_rng(11)
            hits = np.zeros(2, int)
            for _ in range(draws):
                a, b, _, _ = simulation._draw_cell(claim, "boundary", n, n, rng, "true", "", nuisance, shift)
                hits += [paired.tails(a, b)[0] < 0.05, brunner_munzel.tails(a, b)[0] < 0.05]
            print(
                json.dumps(
                    {"n": n, "correlation": correlation, "shift_sd": shift, "draws": draws}
                    | {"paired": round(hits[0] / draws, 3), "unpaired": round(hits[1] / draws, 3)}
                ),
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--floor", action="store_true", help="size without the point-group bound")
    parser.add_argument("--paired", action="store_true", help="power of the paired and unpaired tests at 1 SD")
    parser.add_argument("--n", default="5,8,12,18", help="runs per group, comma-separated")
    parser.add_argument("--draws", type=int, default=2000)
    args = parser.parse_args()
    sizes = [int(n) for n in args.n.split(",")]
    if args.floor:
        floor(sizes, args.draws)
    if args.paired:
        paired_power(sizes, args.draws)


if __name__ == "__main__":
    main()
