"""Each default is said once: in the Param's ``default``, which ``--help`` prints (issue #40).

A help string that restated its default in prose went stale when the default changed; the
words a default needs (where it comes from, what None means) are the Param's ``default_note``.
That no declared help restates its default is the rule "parameter help" of ``robustkit.check``
(robustkit/checks/parameters.py), run on every analysis and figure by tests/test_check.py.
"""

from __future__ import annotations

import pytest

from robustkit import figures
from robustkit.analysis import registry
from robustkit.params import Param


def declared_params() -> dict[str, Param]:
    found = {}
    for analysis in registry.ANALYSES.values():
        for param in analysis.params:
            found[f"{analysis.name} --{param.name}"] = param
        for statistic in analysis.statistics or ():
            for param in statistic.params or ():
                found[f"{analysis.name}.{statistic.name} --{param.name}"] = param
    for figure in figures.FIGURES.values():
        for param in figure.params or ():
            found[f"figure {figure.name} --{param.name}"] = param
    return found


def test_described_prints_the_default_and_its_note():
    assert Param("tokens", 5000, "tokens sampled").described == "tokens sampled; default: 5000"
    assert (
        Param("tokens", 5000, "tokens sampled", default_note="He et al. 2021").described
        == "tokens sampled; default: 5000 (He et al. 2021)"
    )
    assert Param("alphas", [0.5, 1.0], "points", kind=list).described == "points; default: 0.5,1"
    assert Param("metric", None, "metric", default_note="each task's main metric").described.endswith(
        "default: each task's main metric"
    )
    assert Param("limit", None, "cap").described == "cap"
    assert Param("options", [], "key=value options", kind=list).described == "key=value options"
    assert Param("aso", False, "add ASO (default: off)").described == "add ASO (default: off)"


@pytest.mark.parametrize("where", ["rsa --tokens", "tuning --confidence", "attack --attackers"])
def test_a_declared_default_is_printed_from_the_param(where):
    param = declared_params()[where]
    from robustkit.params import shown_value

    assert f"default: {shown_value(param.default)}" in param.described


def test_the_cli_prints_the_default_from_the_param(capsys):
    from robustkit.cli import main

    with pytest.raises(SystemExit):
        main(["analyze", "rsa", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: 5000 (He et al. 2021)" in text and "default: best" in text
