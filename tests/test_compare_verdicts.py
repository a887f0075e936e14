"""tools/compare_verdicts.py: the before/after table lists exactly the claims that changed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

TOOL = Path(__file__).resolve().parents[1] / "tools" / "compare_verdicts.py"


def _tool():
    spec = importlib.util.spec_from_file_location("compare_verdicts", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _claims(rows: list[tuple[str, str, str, str]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["recipe", "claim", "verdict", "reason_class"])
    frame["reason"] = frame["reason_class"] + " because"
    return frame.set_index(["recipe", "claim"])


def test_changed_added_and_removed_claims_are_listed_and_unchanged_ones_are_not():
    tool = _tool()
    old = _claims(
        [
            ("r/a", "same", "agrees", "decided"),
            ("r/a", "flip", "agrees", "decided"),
            ("r/b", "gone", "inconclusive", "x"),
        ]
    )
    new = _claims(
        [
            ("r/a", "same", "agrees", "decided"),
            ("r/a", "flip", "inconclusive", "not converged"),
            ("r/c", "new", "contradicts", "decided"),
        ]
    )
    table = tool.changes(old, new).set_index("claim")
    assert list(table.index) == ["flip", "gone", "new"]
    assert table.loc["flip", "before"] == "agrees (decided)"
    assert table.loc["flip", "after"] == "inconclusive (not converged)"
    assert table.loc["flip", "reason"] == "not converged because"
    assert table.loc["gone", "after"] == "(absent)" and table.loc["new", "before"] == "(absent)"
    assert tool.markdown(table.reset_index()).splitlines()[1] == "|---|---|---|---|---|"


def test_reads_a_csv_and_prints_the_counts(tmp_path, capsys):
    tool = _tool()
    path = tmp_path / "claims.csv"
    _claims([("r/a", "c", "agrees", "decided")]).reset_index().to_csv(path, index=False)
    assert tool.main([str(path), str(path)]) == 0
    assert "before: 1 agrees; after: 1 agrees; 0 claim(s) changed" in capsys.readouterr().out
