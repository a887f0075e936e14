"""Terminal tables keep what matters (issue #38 item 7): each command declares its key columns (claims:
verdict and reason; runs and train: scores and outcome; analyze: results and outcome), and a
table cut to a narrow terminal drops settings columns first, never a key."""

from __future__ import annotations

import pandas as pd
import pytest

from robustkit.cli import main, terminal


def _header(text: str, first: str) -> str:
    return next(line for line in text.splitlines() if line.lstrip().startswith(first))


def test_a_narrow_table_cuts_settings_first_and_never_a_key():
    frame = pd.DataFrame(
        {
            "run_id": ["run-a", "run-b"],
            "lr": [1e-4, 5e-4],
            "tsp_step": [0, 200],
            "train_size": [100, 1000],
            "options": ["r=8 alpha=8 dropout=0.1 matrices=q,v", "r=16 alpha=16 dropout=0.1 matrices=q,k,v,o"],
            "best_val": [0.81234, 0.5],
            "best_test": [0.79, 0.51],
            "last_test": [0.78, 0.5],
            "outcome": ["ok", "collapsed"],
        }
    )
    text = terminal.render(frame, width=60, keys=("run_id", "outcome", "best_val", "best_test"), settings=("options",))
    header = _header(text, "run_id")
    assert all(len(line) <= 60 for line in text.splitlines()), text
    for key in ("run_id", "outcome", "best_val", "best_test"):
        assert key in header, text
    # the other value goes in before any setting; the long options cell goes first
    assert "last_test" in header and "options" not in header and "options" in text.split(header)[1], text
    assert "collapsed" in text and "0.8123" in text


def test_keys_wider_than_the_terminal_are_shortened_not_dropped():
    reason = "p = 0.0712 is above alpha = 0.05 at n = 5 vs 5 after dropping one failed run, " * 2
    frame = pd.DataFrame(
        {
            "claim": ["spread", "failures"],
            "verdict": ["inconclusive", "agrees"],
            "effect": [0.41234, 0.2],
            "reason": [reason, "n = 5 vs 5; one-sided p = 0.01"],
        }
    )
    text = terminal.render(frame, width=50, keys=("claim", "verdict", "reason"), identity=(), cell_width=200)
    assert all(len(line) <= 50 for line in text.splitlines()), text
    header = _header(text, "claim")
    assert "reason" in header and "effect" not in header and "p = 0.0712 is" in text and "…" in text
    assert "reason shortened to fit 50 characters" in " ".join(text.split()), text


def test_an_empty_table_says_why():
    assert terminal.render(pd.DataFrame({"a": []}), empty="no test: one group") == "(no test: one group)"


def _claims(recipe: str) -> pd.DataFrame:
    """Claims rows as robustkit.verdicts.reproduce.claims returns them, each claim's last row its verdict."""
    return pd.DataFrame(
        [
            {
                "recipe": recipe,
                "claim": claim,
                "cell": "all",
                "verdict": verdict,
                "n_a": 5,
                "n_b": 5,
                "n_failed": 0,
                "effect_name": "std ratio a/b",
                "effect": 0.4123456,
                "ci_low": 0.2,
                "ci_high": 0.9,
                "p_value": 0.0712345,
                "compare": "spread",
                "failures": "excluded",
                "reason": reason,
            }
            for claim, verdict, reason in (
                ("spread", "inconclusive", "not converged: houlsby has 4 of 5 runs still improving"),
                ("tsp-spread", "agrees", "n = 5 vs 5; one-sided p = 0.0312"),
            )
        ]
    )


def test_claims_keeps_verdict_and_reason_at_80_columns(tmp_path, capsys, monkeypatch):
    import robustkit.verdicts.tally

    monkeypatch.setattr(robustkit.verdicts.tally, "verdicts", lambda *args, **kwargs: _claims("han2021/fig2"))
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["claims", "han2021/fig2", "--store", str(tmp_path), "--no-settle"]) == 0
    out = capsys.readouterr().out
    header = _header(out, "recipe")
    assert "verdict" in header and "reason" in header, out
    assert "not converged: houlsby" in out and "inconclusive" in out
    assert all(len(line) <= 80 for line in out.splitlines()), out


def test_runs_and_train_keep_scores_and_outcome_past_long_options(tmp_path, capsys, monkeypatch):
    # a LoRA run's options cell is wide: at 80 columns it used to push best_val and best_test off
    import robustkit.cli.report
    import robustkit.store.folders

    table = pd.DataFrame(
        {
            "run_id": ["rt-lora-minilm-l6-s0-tsp0-5fcff8f2", "rt-lora-minilm-l6-s1-tsp0-2974a49d"],
            "model": "minilm-l6",
            "task": "rt",
            "method": "lora",
            "options": ["r=8 alpha=16 dropout=0.1 matrices=q,k,v,o", "r=16 alpha=32 dropout=0.1 matrices=q,v"],
            "seed": [0, 1],
            "tsp_step": 0,
            "lr": [2.5e-3, 5e-4],
            "train_size": 1000,
            "status": "complete",
            "outcome": ["ok", "not-learned"],
            "trainable_params": [73728, 147456],
            "metric": "accuracy",
            "best_val": [0.7713, 0.5777],
            "best_test": [0.7601, 0.5781],
            "last_test": [0.75, 0.578],
        }
    )
    monkeypatch.setattr(robustkit.cli.report, "runs_table", lambda *args, **kwargs: table)
    monkeypatch.setattr(robustkit.cli.report, "damaged_notes", lambda store: [])
    monkeypatch.setattr(robustkit.store.folders, "open_store", lambda *args, **kwargs: None)
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["runs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    header = _header(out, "run_id")
    for key in ("outcome", "best_val", "best_test"):
        assert key in header, out
    assert "options" not in header and "not-learned" in out and "0.5781" in out


def test_analyze_keeps_the_outcome_of_a_collapsed_import(tmp_path, capsys, monkeypatch):
    # an import's unknown settings make many columns vary: the outcome must stay on screen
    import robustkit.analysis.registry as registry

    frame = pd.DataFrame(
        {
            "run_id": [
                "rt-full-minilm-l6-s0-tsp0-25f68115",
                "rt-full-minilm-l6-s1-tsp200-4b0d8966",
                "imported-rt-full-3f9a0c1d7e",
            ],
            "import_id": [None, None, "my-model@3f9a0c1d"],
            "model": "minilm-l6",
            "task": "rt",
            "method": "full",
            "seed": [0, 1, None],
            "tsp_step": [0, 200, None],
            "lr": [1e-4, 5e-4, None],
            "epochs": [3, 5, None],
            "batch_size": [16, 32, None],
            "max_length": [64, 128, None],
            "value": [0.78, 0.77, 0.5781],
            "baseline": 0.5777,
            "n_eval": 1281,
            "eval_loss": [0.51, 0.5, 0.69],
            "top_class_share": [0.55, 0.6, 1.0],
            "outcome": ["ok", "ok", "collapsed"],
        }
    )

    real = registry.get

    class Scores:
        """The scores analysis, its flags and all, returning ``frame`` as its summary."""

        def __getattr__(self, name):
            return getattr(real("scores"), name)

        def run(self, store, select, **given):
            return frame

        def summarize(self, found):
            return found

    monkeypatch.setattr(registry, "get", lambda name: Scores() if name == "scores" else real(name))
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["analyze", "scores", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    header = _header(out, "run_id")
    assert "value" in header and "outcome" in header and "collapsed" in out, out


@pytest.mark.parametrize("width", [80, 120])
def test_every_line_fits_when_the_keys_do(width):
    frame = pd.DataFrame(
        {
            "run_id": [f"run-{i}" for i in range(3)],
            "outcome": ["ok"] * 3,
            "value": [0.5, 0.6, 0.7],
            **{f"setting_{i}": [f"v{i}-{j}" * 4 for j in range(3)] for i in range(12)},
        }
    )
    text = terminal.render(
        frame, width=width, keys=("run_id", "outcome", "value"), identity=[f"setting_{i}" for i in range(12)]
    )
    assert all(len(line) <= width for line in text.splitlines()) and "outcome" in _header(text, "run_id")


def test_counts_under_a_table_take_the_right_plural():
    frame = pd.DataFrame(
        {"run_id": ["a", "b"], "value": [0.5, 0.6], "wide": ["x" * 30, "y" * 30], "lr": [1e-4, 1e-4], "seed": [0, 0]}
    )
    one = terminal.render(frame, width=45, keys=("run_id", "value"))
    assert "1 more column past" in one and "column(s)" not in one, one
    two = terminal.render(frame.assign(other=["z" * 30, "w" * 30]), width=45, keys=("run_id", "value"))
    assert "2 more columns past" in two, two
    assert terminal.plural(1, "other setting") == "1 other setting" and terminal.plural(2, "run") == "2 runs"


def test_stats_keeps_the_cells_that_tell_its_groups_apart(tiny_store, capsys, monkeypatch):
    # at 32 columns the summary keeps the group, its n, mean and failures; the spread's other
    # statistics go first
    monkeypatch.setenv("COLUMNS", "32")
    assert main(["stats", str(tiny_store), "--no-aso", "--include-failed"]) == 0
    out = capsys.readouterr().out
    header = _header(out, "method")
    for key in ("method", "n", "mean", "n_failed"):
        assert f" {key}" in f" {header}", out
    assert "median" not in header and "failed_rate" in _header(out.split("exact binomial interval")[1], "method")
