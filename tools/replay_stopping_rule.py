"""Replay the stopping rule of ``until_converged`` (robustkit.train.convergence_rule.converged) on
the dev histories of runs trained to a fixed budget: where each would have stopped, what it would
have lost, and how many the rule without its "has learned" condition stops at the majority class.

    python tools/replay_stopping_rule.py --store runs/demo

A run trained to its budget holds every evaluation the rule would have seen (same seed, data and
schedule up to the stop: the rule only ends training), so its history is the rule's input exactly.
Per method, prints: runs replayed, runs the rule stops before the budget and the share of
evaluations it saves, runs the loss rule alone stops before the run has learned (and how many of
those learned later), the best dev score lost by stopping (the best up to the stop against
the best over the budget: mean and largest drop), and, as medians, where the rule stops as a
share of the budget and the learning rate there as a share of its peak (the linear schedule,
robustkit.train.optimiser.linear_lr_factor, over the whole budget). A run stopped at a quarter of
its budget never anneals its rate: why the cpu scale trains a fixed budget, not until converged
(issue #55 item 5; recipes/README.md, "CPU scale").
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from robustkit.store import collapse
from robustkit.train import convergence_rule
from robustkit.train.optimiser import linear_lr_factor


def replay(run_dir: Path) -> dict | None:
    """The rule replayed on one complete fine-tuning run trained to a budget; None for others."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    spec, baseline = manifest.get("spec", {}), manifest.get("baselines", {}).get("validation", {})
    history_file = run_dir / "history.parquet"
    if manifest.get("status") != "complete" or spec.get("until_converged") or not history_file.exists():
        return None
    metric = manifest.get("main_metric", "accuracy")
    history = pd.read_parquet(history_file)
    dev = history[history.split == "validation"].pivot_table(index="step", columns="metric", values="value")
    if "loss" not in dev or metric not in dev:
        return None
    losses, scores = dev["loss"].tolist(), dev[metric].tolist()
    # runs trained before manifests recorded baselines: the demo's rt validation (1,000 rows, 0.574)
    share, n = baseline.get(metric, 0.574), baseline.get("n", 1000)
    stop = loss_only = None
    for k in range(1, len(losses) + 1):
        learned = collapse.ever_learned(scores[:k], share, metric, n)
        if loss_only is None and convergence_rule.converged(losses[:k]):
            loss_only = (k, learned)
        if convergence_rule.converged(losses[:k], learned=learned):
            stop = k
            break
    kept = scores[: stop or len(scores)]
    # the budget's last step is the last evaluation's: a run trained to its budget evaluates at its end
    steps = dev.index.to_numpy()
    total, at = int(steps[-1]), int(steps[(stop or len(steps)) - 1])
    warmup = round(spec.get("warmup_ratio", 0.1) * total)
    return {
        "method": spec.get("method"),
        "evaluations": len(losses),
        "stops": stop is not None and stop < len(losses),
        "saved": 1 - (stop or len(losses)) / len(losses),
        "loss_rule_stops_unlearned": loss_only is not None and loss_only[1] is False,
        "learned_later": loss_only is not None
        and loss_only[1] is False
        and bool(collapse.ever_learned(scores, share, metric, n)),
        "best_lost": max(scores) - max(kept),
        "stop_share": at / total,
        "rate_at_stop": linear_lr_factor(at, warmup, total),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", type=Path, required=True)
    args = parser.parse_args()
    rows = [
        row for run in sorted(args.store.iterdir()) if (run / "manifest.json").exists() for row in [replay(run)] if row
    ]
    frame = pd.DataFrame(rows)
    table = frame.groupby("method").agg(
        runs=("stops", "size"),
        stopped_early=("stops", "sum"),
        evaluations_saved=("saved", "mean"),
        loss_rule_stops_unlearned=("loss_rule_stops_unlearned", "sum"),
        of_which_learned_later=("learned_later", "sum"),
        best_lost_mean=("best_lost", "mean"),
        best_lost_max=("best_lost", "max"),
        stop_share_median=("stop_share", "median"),
        rate_at_stop_median=("rate_at_stop", "median"),
    )
    table.loc["all"] = [
        len(frame),
        frame.stops.sum(),
        frame.saved.mean(),
        frame.loss_rule_stops_unlearned.sum(),
        frame.learned_later.sum(),
        frame.best_lost.mean(),
        frame.best_lost.max(),
        frame.stop_share.median(),
        frame.rate_at_stop.median(),
    ]
    columns = ["method", *table.columns]
    print("| " + " | ".join(columns) + " |\n" + "|---" * len(columns) + "|")
    for method, row in table.iterrows():
        cells = [f"{v:.3f}" if isinstance(v, float) and not float(v).is_integer() else f"{v:g}" for v in row]
        print(f"| {method} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
