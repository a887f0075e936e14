"""The attack frame's rows explained (issue #38 item 3): ``robustkit analyze attack --help`` and
the README say what the two ``convention`` rows (``openattack``, ``gold``) of each run count, and
the README no longer sends a fresh clone to ``nltk.downloader``, which prompts where it is
offline."""

from __future__ import annotations

from pathlib import Path

import pytest

from robustkit.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"


def test_attack_help_explains_the_convention_rows(capsys):
    with pytest.raises(SystemExit):
        main(["analyze", "attack", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "two rows per run and attacker, one per success convention" in text
    assert "gold counts only the examples the run classified correctly" in text
    assert "1 - accuracy_under_attack / accuracy_before" in text
    assert "nltk.downloader" not in text


def test_readme_explains_the_rows_and_the_tagger():
    # the README's reference pages (issue #40): the attack frame, the assets
    pages = [README, README.parent / "docs" / "analyses.md", README.parent / "docs" / "install.md"]
    text = " ".join(" ".join(page.read_text(encoding="utf-8").split()) for page in pages)
    assert "one per success `convention`" in text and "`gold` counts only the examples" in text
    assert "python -m nltk.downloader" not in text and "textblob-aptagger" in text
