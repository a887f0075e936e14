"""Is `settle`'s offered n calibrated? Fresh simulated stores at a true effect, from small pilots.

For each true effect (in SDs of the seed-to-seed spread; group a = N(effect, 1), b = N(0, 1),
a claim "a greater than b" of kind ``--kind``), draw ``--pilots`` pilots of ``--runs`` runs per
group, judge each through :func:`robustkit.verdicts.rules.judge`, and give every inconclusive
one to :func:`robustkit.verdicts.settle.runs_to_decide`. Where it offers an n, draw ``--draws``
fresh stores of n runs per group from the *true* model and judge them: the delivered power is
the rate of the verdict it promised (its ``side``; a promise to contradict a true claim
delivers 0). Reported per effect (issue #56 item 5):

- ``offered``: inconclusive pilots offered an n, of all inconclusive pilots (at 0.5, 1 and 2 SD
  some n <= 200 reaches 80% power, so every inconclusive pilot there is one where an n exists);
- ``delivered``: the mean delivered power over offered pilots, and its one-sided 95% lower bound
  (Student t over pilots: pilots differ, draws within a pilot are not independent of it);
- ``worst``: the smallest delivered power of one pilot; ``wrong side``: offers that promise the
  verdict the truth does not give; the median offered n and seconds per settle call.

Usage: ``.venv/bin/python tools/settle_calibration.py [--kind location] [--effects 0,0.5,1,2]
[--pilots 30] [--draws 60] [--seed 0]``; the table is markdown.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from scipy import stats

from robustkit.verdicts import settle
from robustkit.verdicts.rules import judge
from robustkit.verdicts.spec import AGREES, CONTRADICTS, INCONCLUSIVE, Claim


def claim_of(kind: str) -> Claim:
    """A claim of kind ``kind``: group a (``lora``) scores greater than group b (``full``)."""
    return Claim.from_table(
        {
            "id": "calibration",
            "says": "a scores greater than b (simulated)",
            "statistic": "scores.score",
            "compare": kind,
            "a": "lora",
            "b": "full",
            "direction": "greater",
        },
        "calibration",
    )


def store(effect: float, n: int, rng: np.random.Generator) -> pd.DataFrame:
    """One simulated store: n runs per group, one row per run (columns ``run_id, method, seed,
    value, outcome``); a's values N(effect, 1), b's N(0, 1), in SDs."""
    values = {"lora": effect + rng.standard_normal(n), "full": rng.standard_normal(n)}
    return pd.DataFrame(
        [
            {"run_id": f"{m}-{i}", "method": m, "seed": i, "value": float(v), "outcome": "ok"}
            for m, vs in values.items()
            for i, v in enumerate(vs)
        ]
    )


def verdict(claim: Claim, frame: pd.DataFrame) -> str:
    return judge(claim, frame, describe=False).iloc[-1]["verdict"]


def calibrate(
    kind: str, effect: float, pilots: int, draws: int, seed: int = 0, runs: int = 5, simulations: int | None = None
) -> pd.DataFrame:
    """One row per pilot: ``pilot`` verdict, ``observed`` effect (SD), ``n`` offered (NaN: none),
    ``side``, ``delivered`` (the promised verdict's rate on ``draws`` fresh stores of the true
    model at n), ``seconds`` (of the settle call) and ``reason`` (why no n)."""
    claim, rng = claim_of(kind), np.random.default_rng([seed, int(round(effect * 1000))])
    options = {} if simulations is None else {"simulations": simulations}
    rows = []
    for _ in range(pilots):
        pilot = store(effect, runs, rng)
        found = {"pilot": verdict(claim, pilot), "observed": settle.observed_effects(claim, pilot)[0]}
        found.update(n=np.nan, side="", delivered=np.nan, seconds=np.nan)
        if found["pilot"] == INCONCLUSIVE:
            start = time.perf_counter()
            offer = settle.runs_to_decide(claim, pilot, **options)
            found["seconds"], found["reason"] = time.perf_counter() - start, offer["reason"]
            if offer["n"] is not None:
                n, side = offer["n"], offer["side"]
                found.update(n=n, side=side)
                found["delivered"] = float(
                    np.mean([verdict(claim, store(effect, n, rng)) == side for _ in range(draws)])
                )
        rows.append(found)
    return pd.DataFrame(rows)


def summary(rows: pd.DataFrame, effect: float) -> dict:
    """The table row of one effect (module docstring)."""
    inconclusive = rows[rows["pilot"] == INCONCLUSIVE]
    offered = inconclusive[inconclusive["n"].notna()]
    delivered = offered["delivered"].to_numpy(float)
    m = len(delivered)
    low = float(delivered.mean() - stats.t.ppf(0.95, m - 1) * delivered.std(ddof=1) / np.sqrt(m)) if m > 1 else np.nan
    truth = AGREES if effect > 0 else CONTRADICTS if effect < 0 else ""
    return {
        "effect (SD)": effect,
        "pilots": len(rows),
        "inconclusive": len(inconclusive),
        "offered": len(offered),
        "share offered": len(offered) / len(inconclusive) if len(inconclusive) else np.nan,
        "delivered": float(delivered.mean()) if m else np.nan,
        "lower bound": low,
        "worst": float(delivered.min()) if m else np.nan,
        "wrong side": int((offered["side"] != truth).sum()) if truth else int(m),
        "median n": float(offered["n"].median()) if m else np.nan,
        "s per call": float(inconclusive["seconds"].mean()) if len(inconclusive) else np.nan,
    }


def markdown(table: pd.DataFrame) -> str:
    """``table`` as a markdown table, numbers to 3 significant digits (no tabulate needed)."""
    cells = [[f"{v:.3g}" if isinstance(v, float) else str(v) for v in row] for row in table.itertuples(index=False)]
    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", default="location")
    parser.add_argument("--effects", default="0,0.5,1,2")
    parser.add_argument("--pilots", type=int, default=30)
    parser.add_argument("--draws", type=int, default=60)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rows", help="write every pilot's row to this CSV file")
    args = parser.parse_args(argv)
    table = []
    for effect in (float(e) for e in args.effects.split(",")):
        rows = calibrate(args.kind, effect, args.pilots, args.draws, args.seed, args.runs)
        table.append(summary(rows, effect))
        if args.rows:
            rows.assign(effect=effect).to_csv(args.rows, mode="a", index=False, header=len(table) == 1)
        print(pd.DataFrame(table[-1:]).to_string(index=False), flush=True)
        reasons = rows["reason"].dropna()
        print(reasons[reasons != ""].str.slice(0, 60).value_counts().to_string(), flush=True)
    print(markdown(pd.DataFrame(table)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
