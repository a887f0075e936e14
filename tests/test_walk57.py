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


def test_the_closing_line_counts_failed_runs_as_runs_and_stats_do(tmp_path):
    """A run that trained without error but ended not-learned is a failed run in `runs`, `stats`
    and the figures; `train`/`sweep`'s closing line said "0 failed" beside it. Two complete runs
    written as training leaves them (one at the majority baseline, one learned), then `sweep` of
    their grid in a fresh process: nothing to train, the closing line names the not-learned run."""
    import json

    from test_read_only_imports import write_finished_run

    from robustkit.specs.spec import RunSpec

    store = tmp_path / "runs"
    store.mkdir()
    for seed, accuracy in ((0, 0.5), (1, 0.9)):
        spec = RunSpec(task="rt", method="full", model="minilm-l6", seed=seed, epochs=1).to_dict()
        write_finished_run(store, spec, accuracy)
    base = {k: v for k, v in spec.items() if v is not None and v != {} and k != "seed"}
    grid = tmp_path / "grid.toml"
    grid.write_text(
        "[base]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in base.items()) + "[grid]\nseed = [0, 1]\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "robustkit", "sweep", str(grid), "--store", str(store)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    closing = done.stdout.strip().splitlines()[-1]
    assert closing.startswith("2 runs: 0 trained, 2 already complete"), closing
    assert "0 failed with an error; failed runs, not results: not-learned 1 (the lines above)" in closing, closing
