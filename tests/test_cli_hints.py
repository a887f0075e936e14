"""Small things a user meets first (issue #46 item 8): a mistyped name gets the closest one, a
missing store is said before any heavy import, and a summary of fewer than 3 runs says its
interval is degenerate."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from robustkit.cli import main


@pytest.mark.parametrize(
    "argv, hint",
    [
        (["train", "--method", "loar", "--store", "x"], "(did you mean 'lora'?)"),
        (["plot", "box-sedes", "runs"], "(did you mean 'box-seeds'?)"),
        (["reproduce", "he2021/fig33", "--plan"], "(did you mean 'he2021/fig3'?)"),
        (["anlyze", "rsa", "runs"], "(did you mean 'analyze'?)"),
    ],
)
def test_a_mistyped_name_gets_the_closest_one(argv, hint, capsys):
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's errors exit; robustkit's return their status
        status = exit_.code
    err = capsys.readouterr().err
    assert status == 2 and hint in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "verb", [["stats"], ["analyze", "rsa"], ["plot", "box-seeds", "-o", "x.pdf"], ["runs"], ["verify"]]
)
def test_a_missing_store_is_said_before_heavy_imports(verb, tmp_path):
    code = (
        "import sys; from robustkit.cli import main; "
        f"rc = main({[*verb[:2], str(tmp_path / 'nowhere'), *verb[2:]]!r}); "
        "print(rc, 'torch' in sys.modules, 'transformers' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["2", "False", "False"], done.stderr
    assert "does not exist" in done.stderr and done.stderr.count("\n") == 1


def test_a_summary_of_fewer_than_3_runs_says_its_interval_is_degenerate():
    from robustkit.analysis.stability import summarize

    frame = pd.DataFrame({"method": ["a", "a", "b", "b", "b"], "value": [0.8, 0.8, 0.7, 0.75, 0.8]})
    summary = summarize(frame, n_resamples=99).set_index("method")
    assert summary.loc["a", "note"] == "n = 2: interval degenerate (fewer than 3 runs)"
    assert summary.loc["b", "note"] == ""
