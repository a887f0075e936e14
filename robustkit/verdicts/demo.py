"""The embedded-default demo: the first seeds of Han et al. 2021 figure 2's demo-scale runs.

minilm-l6 on ``rt`` with 1k training examples (He et al. 2021 low-resource setting: 1k train,
1k validation drawn from the rest, rt's validation split as test), ``houlsby`` adapters and
``full`` fine-tuning, seeds 0-1, each method at its demo learning rate. The settings are the
demo scale of ``recipes/defaults.toml`` (chosen by the calibration recorded in
``recipes/README.md``) and the grid is the recipe ``recipes/han2021/fig2.toml``'s, so the
demo's runs are runs of ``robustkit reproduce --scale demo`` and are never trained twice.
"""

from __future__ import annotations

from pathlib import Path

from robustkit.specs.spec import RunSpec
from robustkit.sweeps.grid import run_sweep
from robustkit.verdicts.recipes import load_recipe

DEMO_STORE = "runs/demo"
DEMO_RECIPE = "han2021/fig2"
DEMO_SEEDS = (0, 1)


def demo_specs() -> list[RunSpec]:
    """The demo's runs: both methods x :data:`DEMO_SEEDS`, from :data:`DEMO_RECIPE` at demo scale."""
    return [spec for spec in load_recipe(DEMO_RECIPE).specs("demo") if spec.seed in DEMO_SEEDS]


def run_demo(store: str | Path = DEMO_STORE, jobs: int = 2, device: str | None = None):
    """Train the demo grid into ``store``, skipping complete runs.

    Returns
    -------
    DataFrame
        One row per run: ``run_id, status, error`` (see :func:`robustkit.sweeps.grid.run_sweep`).
    """
    return run_sweep(demo_specs(), store, jobs=jobs, device=device)
