"""Every input bounded, every error named (issue #39 item 6): inputs that used to say
"unexpected X", hang, read without limit or accept an empty value now exit 2 (1 for a missing
cluster) with one line, before any work and leaving no folder behind."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from cli_outcome import run_cli

GRID = (
    '[base]\nmodel = "bert-tiny"\ntask = "rt"\nepochs = 1\nbatch_size = 8\nmax_length = 32\ntrain_size = '
    '16\n[grid]\nmethod = ["full"]\n'
)
TRAIN = ["train", "--model", "bert-tiny", "--task", "rt", "--method", "full", "--train-size", "16"]


def _run(argv: list[str], capsys) -> tuple[int, list[str]]:
    code, err = run_cli(argv, capsys)
    assert "Traceback" not in err and "unexpected" not in err, err
    return code, err.strip("\n").splitlines()


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--seed", ""], "empty item"),
        (["--seed", "0,,1"], "empty item"),
        (["--tsp-steps", "0,"], "empty item"),
        (["--method", "adapterhub:lora[r=-1]"], "r=-1 must be positive"),
        (["--method", "adapterhub:seq_bn[reduction_factor=0]"], "reduction_factor=0 must be positive"),
    ],
)
def test_lenient_run_values_are_refused(argv, said, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, lines = _run([*TRAIN, "--store", str(tmp_path / "runs"), *argv], capsys)
    assert code == 2 and len(lines) == 1 and said in lines[0], lines
    assert not (tmp_path / "runs").exists()


def test_an_empty_store_name_is_not_the_current_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, lines = _run([*TRAIN, "--store", ""], capsys)
    assert code == 2 and len(lines) == 1 and "empty folder name" in lines[0], lines
    assert list(tmp_path.iterdir()) == []


def test_an_output_folder_is_refused_as_a_file(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    code, lines = _run(["runs", str(tmp_path), "-o", str(tmp_path / "out")], capsys)
    assert code == 2 and len(lines) == 1 and "is a folder" in lines[0], lines


def test_a_grid_nested_thousands_deep_is_refused(tmp_path, capsys):
    grid = tmp_path / "deep.toml"
    grid.write_text(GRID + "seed = " + "[" * 5000 + "0" + "]" * 5000 + "\n")
    code, lines = _run(["sweep", str(grid), "--store", str(tmp_path / "runs")], capsys)
    assert code == 2 and len(lines) == 1 and "5000 deep" in lines[0], lines


def test_a_huge_grid_file_is_not_read(tmp_path, capsys):
    grid = tmp_path / "huge.toml"
    grid.write_bytes(b"#" * (2 << 20))
    code, lines = _run(["sweep", str(grid), "--store", str(tmp_path / "runs")], capsys)
    assert code == 2 and len(lines) == 1 and "larger than 1024 KiB" in lines[0], lines


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero on this system")
def test_a_grid_from_dev_zero_is_refused_not_read_forever(tmp_path):
    """Under a 6 GiB address-space limit: reading without bound fails with MemoryError there
    instead of taking the machine's memory."""
    limit = 6 << 30

    def bounded():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    done = subprocess.run(
        [sys.executable, "-m", "robustkit", "sweep", "/dev/zero", "--store", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=bounded,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "not a grid file" in lines[0], done.stderr[-2000:]


def test_an_alpha_grid_of_a_hundred_million_points_is_refused(tmp_path, capsys):
    code, lines = _run(["analyze", "landscape", str(tmp_path), "--alphas", "0:1:100000000"], capsys)
    assert code == 2 and len(lines) == 1 and "100000000" in lines[0] and "10,000" in lines[0], lines


def test_slurm_without_a_cluster_says_so_and_leaves_nothing(tmp_path, monkeypatch):
    """Through the command as a user runs it: no controller answers ``scontrol ping`` (or no
    Slurm is installed at all), so nothing is submitted and no ``.slurm`` folder is made."""
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    tools = tmp_path / "bin"  # a Slurm client whose controller cannot be found, as on a laptop
    tools.mkdir()
    for tool in ("scontrol", "sbatch", "squeue"):
        (tools / tool).write_text(
            f"#!/bin/sh\necho '{tool}: error: fetch_config: DNS SRV lookup failed' >&2\n"
            f"echo '{tool}: fatal: Could not establish a configuration source' >&2\nexit 1\n"
        )
        (tools / tool).chmod(0o755)
    env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "robustkit",
            "sweep",
            str(grid),
            "--store",
            str(tmp_path / "runs"),
            "--executor",
            "slurm",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    errors = [line for line in done.stderr.splitlines() if "error" in line or "fatal" in line]
    assert done.returncode != 0 and len(errors) == 1 and "no Slurm controller" in errors[0], done.stderr[-2000:]
    assert "Could not establish a configuration source" in errors[0]  # the client's own last word, kept
    assert not (tmp_path / "runs" / ".slurm").exists()


def test_an_unknown_base_model_is_one_line(tmp_path):
    """transformers' own message spans lines; the error keeps it on one (offline: at once)."""
    from robustkit.models.pretrained import load_classifier

    load_classifier("bert-tiny", 2, seed=0).save_pretrained(tmp_path / "tuned")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "robustkit",
            "import",
            str(tmp_path / "tuned"),
            "--base",
            "bogus-xyz",
            "--task",
            "rt",
            "--store",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "bogus-xyz" in lines[0], done.stderr[-2000:]
