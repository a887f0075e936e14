"""The embedded-default demo: a small grid on minilm-l6 / rt that runs on a laptop CPU.

minilm-l6 on ``rt`` with 1k training examples (He et al. 2021 low-resource setting: 1k train,
1k validation drawn from the rest, rt's validation split as test), ``houlsby`` and ``full``,
seeds 0-2, each from the pretrained model and from 200 TSP steps: 12 runs and 2 masked-LM runs.

To finish in minutes on 2 CPU cores it trains 1 epoch with batch size 16 (He et al.'s batch
size) and higher learning rates than the papers' defaults: 3e-3 for adapters (the top of
Houlsby et al.'s sweep {3e-5, 3e-4, 3e-3}) and 1e-4 for full fine-tuning. With the defaults
(1e-4, 2e-5) one epoch of 63 steps leaves both methods at the majority-class baseline (57.4%);
with 1e-3 most adapter seeds still do. Paper-scale settings are the CLI defaults.
"""

from __future__ import annotations

from pathlib import Path

from robustkit.spec import RunSpec
from robustkit.sweep import run_sweep

DEMO_STORE = "runs/demo"
DEMO_LR = {"houlsby": 3e-3, "full": 1e-4}
DEMO_SEEDS = (0, 1, 2)
DEMO_TSP_STEPS = (0, 200)
DEMO_SETTINGS = dict(
    model="minilm-l6", task="rt", train_size=1000, epochs=1, batch_size=16, max_length=64,
    eval_every=32, tsp_batch_size=16,
)


def demo_specs() -> list[RunSpec]:
    """The demo's 12 runs (methods x seeds x TSP steps)."""
    return [
        RunSpec(method=method, lr=lr, seed=seed, tsp_step=tsp_step, **DEMO_SETTINGS).resolved()
        for method, lr in DEMO_LR.items()
        for seed in DEMO_SEEDS
        for tsp_step in DEMO_TSP_STEPS
    ]


def run_demo(store: str | Path = DEMO_STORE, jobs: int = 2, device: str | None = None):
    """Train the demo grid into ``store``, skipping complete runs.

    Returns
    -------
    DataFrame
        One row per run: ``run_id, status, error`` (see :func:`robustkit.sweep.run_sweep`).
    """
    return run_sweep(demo_specs(), store, jobs=jobs, device=device)
