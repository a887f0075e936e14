"""A first run that learns (issue #28 item 5): ``--preset demo`` gives ``train`` and ``sweep`` the
calibrated demo settings of ``recipes/defaults.toml``, and grid files give each method its own
learning rate (``[lr] houlsby = 5e-4``)."""

from __future__ import annotations

import pytest

from robustkit.cli import main, parse_args
from robustkit.cli.train import specs_from_args
from robustkit.errors import RobustkitError, SweepError
from robustkit.sweeps.grid import expand_grid
from robustkit.verdicts.demo import demo_specs
from robustkit.verdicts.recipes import load_defaults, preset


def test_grid_lr_table_gives_each_method_its_rate(tmp_path):
    grid = {
        "base": {"model": "bert-tiny", "task": "rt", "train_size": 64},
        "grid": {"method": ["houlsby", "full", "lora"], "seed": [0, 1]},
        "lr": {"houlsby": 5e-4, "full": 1e-4},
    }
    lrs = {(s.method, s.seed): s.lr for s in expand_grid(grid)}
    assert lrs == {
        ("houlsby", 0): 5e-4,
        ("houlsby", 1): 5e-4,
        ("full", 0): 1e-4,
        ("full", 1): 1e-4,
        ("lora", 0): 5e-4,
        ("lora", 1): 5e-4,
    }  # lora: not in [lr], its own paper default
    # an lr axis or base value wins over the table
    assert {s.lr for s in expand_grid({**grid, "grid": {**grid["grid"], "lr": [2e-5]}})} == {2e-5}
    assert {s.lr for s in expand_grid({**grid, "base": {**grid["base"], "lr": 3e-5}})} == {3e-5}
    # a grid file's [lr] section
    path = tmp_path / "grid.toml"
    path.write_text('[base]\nmodel = "bert-tiny"\n[grid]\nmethod = ["houlsby", "full"]\n[lr]\nhoulsby = 5e-4\n')
    assert [s.lr for s in expand_grid(path)] == [5e-4, 2e-5]


@pytest.mark.parametrize(
    "table, named",
    [
        ({"hulsby": 1e-3}, "hulsby"),
        ({"full": 0}, "positive"),
        ({"full": "fast"}, "positive"),
        ({"full": True}, "positive"),
    ],
)
def test_bad_lr_tables_are_named(table, named):
    with pytest.raises(SweepError, match=named):
        expand_grid({"grid": {"method": ["full"]}, "lr": table})


def test_train_preset_demo_is_the_demo_runs():
    """``train --preset demo`` trains the very runs of `robustkit demo` (and so of the recipes):
    same ids, so nothing is trained twice."""
    for method in ("houlsby", "full"):
        args = parse_args(["train", "--preset", "demo", "--method", method, "--seed", "0,1", "--store", "x"])
        wanted = [s.run_id for s in demo_specs() if s.method == method]
        assert [s.run_id for s in specs_from_args(args)] == wanted
    demo = load_defaults()["demo"]
    spec = specs_from_args(parse_args(["train", "--preset", "demo", "--store", "x"]))[0]
    assert (spec.epochs, spec.max_length, spec.train_size, spec.batch_size, spec.lr) == (
        demo["base"]["epochs"],
        demo["base"]["max_length"],
        demo["base"]["train_size"],
        demo["base"]["batch_size"],
        demo["lr"]["houlsby"],
    )
    # flags given win over the preset
    spec = specs_from_args(
        parse_args(
            ["train", "--preset", "demo", "--method", "full", "--lr", "3e-5", "--batch-size", "32", "--store", "x"]
        )
    )[0]
    assert (spec.lr, spec.batch_size, spec.epochs) == (3e-5, 32, demo["base"]["epochs"])
    # without a preset: the papers' defaults, as before
    spec = specs_from_args(parse_args(["train", "--method", "full", "--store", "x"]))[0]
    assert (spec.model, spec.epochs, spec.max_length, spec.batch_size, spec.lr) == ("minilm-l6", 10, 128, 32, 2e-5)


def test_sweep_preset_demo(tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text('[grid]\nmethod = ["houlsby", "full"]\nseed = [0, 1]\n')
    specs = expand_grid(grid, preset("demo"))
    assert {s.run_id for s in specs} == {s.run_id for s in demo_specs()}
    with pytest.raises(RobustkitError, match="known presets: demo, cpu, paper"):
        preset("quick")
    with pytest.raises(SystemExit) as stop:  # argparse names the choices
        main(["sweep", str(grid), "--preset", "quick", "--store", str(tmp_path / "runs")])
    assert stop.value.code == 2
