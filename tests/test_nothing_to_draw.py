"""A plot given nothing to draw says so as a robustkit error (one line from the CLI), not as a
bare ValueError that the CLI reports as unexpected."""

from __future__ import annotations

import pandas as pd
import pytest

from robustkit import figures
from robustkit.errors import RobustkitError

EMPTY = pd.DataFrame()

CASES = {
    "forgetting": lambda: figures.forgetting.forgetting_figure(EMPTY, EMPTY, "all", "effective"),
    "gradnorm": lambda: figures.gradnorm.gradnorm_curves(EMPTY),
    "intruders": lambda: figures.intruders.intruders_figure(EMPTY, EMPTY, "all", 0.5),
    "curvature": lambda: figures.curvature.curvature_figure(EMPTY),
    "lora-space": lambda: figures.lora_space.lora_space_figure(EMPTY, EMPTY),
    "tuning": lambda: figures.tuning.tuning_curves(EMPTY),
    "similarity-ci": lambda: figures.similarity_ci.similarity_panels(EMPTY),
    "stability-length": lambda: figures.stability_length.stability_length_figure(EMPTY, EMPTY),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_empty_frame_is_a_robustkit_error(case):
    import importlib

    importlib.import_module(f"robustkit.figures.{case.replace('-', '_')}")
    with pytest.raises(figures.NothingToDraw) as error:
        CASES[case]()
    assert isinstance(error.value, RobustkitError) and isinstance(error.value, ValueError)


def test_the_cli_says_it_in_one_line(monkeypatch, tmp_path, capsys):
    """Raised while drawing, it is one line and a failing exit code, never the CLI's 'unexpected error'."""
    from robustkit.cli import main

    def nothing(*args, **kwargs):
        raise figures.NothingToDraw("no runs to draw")

    monkeypatch.setattr(figures.Figure, "draw", nothing)
    code = main(["plot", "forgetting", str(tmp_path), "-o", str(tmp_path / "f.pdf")])
    err = capsys.readouterr().err
    assert code != 0 and "no runs to draw" in err and "unexpected" not in err, err
    assert len(err.strip().splitlines()) == 1, err
