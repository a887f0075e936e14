"""Run robustkit's command line in this process and read what a user would see."""

from __future__ import annotations

from robustkit.cli import main


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    """``robustkit ARGV``: its exit status (argparse's SystemExit included) and its stderr."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    return code, capsys.readouterr().err
