"""The embedded-default demo: a small grid on minilm-l6 / rt that runs on a laptop CPU.

minilm-l6 on ``rt`` with 1k training examples (He et al. 2021 low-resource setting), ``houlsby``
and ``full``, seeds 0-2, starting from the pretrained model and from 300 TSP steps: 12 runs and
2 masked-LM runs. Epochs and max length are cut from the paper defaults so that it finishes in
minutes on 2 CPU cores; everything else (learning rates, warmup, batch size) is the papers'.
"""

from __future__ import annotations

import time
from pathlib import Path

from robustkit.report import runs_table
from robustkit.sweep import expand_grid, run_sweep

DEMO_GRID = {
    "base": {
        "model": "minilm-l6",
        "task": "rt",
        "train_size": 1000,
        "epochs": 3,
        "max_length": 64,
        "eval_every": 16,
    },
    "grid": {"method": ["houlsby", "full"], "seed": [0, 1, 2], "tsp_step": [0, 300]},
}


def run_demo(store: str | Path = "runs/demo", jobs: int = 1):
    """Train the demo grid (skipping complete runs), print the runs table and the store path.

    Returns
    -------
    DataFrame
        The runs table (see :func:`robustkit.report.runs_table`).
    """
    started = time.time()
    results = run_sweep(expand_grid(DEMO_GRID), store, jobs=jobs)
    table = runs_table(store)
    print(table.to_string(index=False))
    failed = results[results.status == "failed"]
    for _, row in failed.iterrows():
        print(f"FAILED {row.run_id}: {row.error}")
    print(f"\n{len(results)} runs ({len(failed)} failed) in {time.time() - started:.0f} s.")
    print(f"Store: {Path(store).resolve()}")
    print("In a notebook: robustkit.load_runs(store), robustkit.load_history(store)")
    return table
