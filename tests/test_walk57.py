"""Defects the issue #57 walk found on a user's own data, each checked as a user meets it: in a
fresh process, with the command's own arguments."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd

# stops `train` where it would start training: the lines before it are what is checked
_NO_TRAINING = (
    "import sys, robustkit.sweeps.grid as grid\n"
    "def stop(*args, **kwargs):\n"
    "    raise SystemExit(0)\n"
    "grid.run_sweep = stop\n"
    "from robustkit.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def _three_class_csv(path):
    rng = np.random.default_rng(0)
    labels = rng.choice(["pos", "neg", "meh"], size=120, p=[0.55, 0.25, 0.20])
    pd.DataFrame({"text": [f"text {i} about {x}" for i, x in enumerate(labels)], "label": labels}).to_csv(
        path, index=False
    )
    return path


def test_train_lr_note_names_the_users_data_in_the_grid_command(tmp_path):
    """`train --data F --preset demo --model M`: the calibration command the note suggests runs on F,
    not on the embedded task (which would choose rates for data the user is not training on)."""
    data = _three_class_csv(tmp_path / "mine.csv")
    argv = ["train", "--data", str(data), "--preset", "demo", "--model", "bert-tiny", "--method", "full"]
    done = subprocess.run(
        [sys.executable, "-c", _NO_TRAINING, *argv, "--store", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    [line] = [x for x in done.stderr.splitlines() if "learning rates" in x]
    assert f"`robustkit reproduce he2021/fig4 --model bert-tiny --data {data} --store S`" in line
