"""``robustkit.check`` (issue #58 item 1): every registered analysis, figure, attack and recipe
meets every rule of extending, and each rule can fail, in one line naming it and how to meet it.

The rules live in :mod:`robustkit.checks`; this file runs them on everything registered (a new
object is checked with no list to edit) and on objects made to break them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest

import robustkit
from robustkit import figures
from robustkit.analysis.registry import ANALYSES
from robustkit.attacks import registry as attack_registry
from robustkit.checks import CheckError, failures, rules
from robustkit.verdicts.recipes import RECIPE_DIR, list_recipes

REGISTERED = [
    *(("analysis", n) for n in ANALYSES),
    *(("figure", n) for n in figures.FIGURES),
    *(("attack", n) for n in attack_registry.ATTACKS),
    *(("recipe", n) for n in list_recipes()),
]


@pytest.mark.parametrize("kind, name", REGISTERED, ids=[f"{k}:{n}" for k, n in REGISTERED])
def test_every_registered_object_meets_every_rule(kind, name):
    assert robustkit.check(kind, name) == []


def broken(kind: str, name: str, **given) -> set[str]:
    """The names of the rules ``name`` breaks; each failure is one line ending in how to meet it."""
    found = failures(kind, name, **given)
    for failure in found:
        line = str(failure)
        assert "\n" not in line and line.startswith(f"{kind} {name!r} breaks rule '{failure.rule.name}': ")
        assert line.endswith(failure.rule.how)
    return {f.rule.name for f in found}


@pytest.fixture
def module_dir(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_an_analysis_breaking_the_rules_is_told_each(module_dir, monkeypatch):
    """A model analysis written against the guide: a positional parameter with its own default,
    no DEVICE, no per-run loop, tqdm, and a help that restates its default."""
    from robustkit.analysis.declare import Analysis, Param, Statistic

    (module_dir / "zz_check_analysis.py").write_text(
        textwrap.dedent(
            """
            from tqdm import tqdm

            from robustkit.train.run_model import load_run


            def run(store, select=None, kinds="all", device=None):
                return [load_run(r) for r in tqdm(store)]


            def mean(frame, level):
                return frame


            def one_run(path, kinds="all"):
                return path
            """
        )
    )
    analysis = Analysis(
        "zz-check",
        "h",
        "d",
        "zz_check_analysis:run",
        (Param("kinds", "all", "matrix kinds kept; default: all"), Param("limit", None, "cap")),
        statistics=(Statistic("mean", "zz_check_analysis:mean", "h", (Param("level", 1, "l"),), unit="pairs"),),
        summary="zz_check_analysis:nowhere",
    )
    monkeypatch.setitem(ANALYSES, "zz-check", analysis)
    assert broken("analysis", "zz-check") == {
        "computation",
        "statistics",
        "summary and views",
        "device",
        "per-run loop",
        "progress bar",
        "parameter help",
    }
    assert set(rules("analysis")) >= {r for r in rules("analysis")}  # a tuple of Rule records
    lines = robustkit.check("analysis", "zz-check")
    assert any("'kinds'" in line and "default" in line for line in lines)
    assert any("imports tqdm" in line for line in lines)
    assert any("kinds='all' again" in line for line in lines)  # a helper's second default


def test_a_figure_breaking_the_rules_is_told_each(module_dir, monkeypatch):
    (module_dir / "zz_check_figure.py").write_text(
        "import matplotlib.pyplot as plt\n\n\ndef plot(frame, marker='o', checkpoint='best'):\n"
        "    fig, ax = plt.subplots()\n    return fig\n"
    )
    from robustkit.params import Param

    figure = figures.Figure(
        "zz-check",
        "h",
        "scores",
        "zz_check_figure:plot",
        (Param("marker", "o", "marker; default: o"), Param("metric", None, "m")),
        view="robustkit.analysis.curves:nowhere",
        defaults={"nosuch": 1},
    )
    monkeypatch.setitem(figures.FIGURES, "zz-check", figure)
    assert broken("figure", "zz-check") == {"analysis and view", "parameter help", "into the user's Axes"}


def test_the_plot_rule_reads_a_robustkit_plot_module():
    from robustkit.checks.drawing import violations

    assert violations("import scipy.stats\n", "robustkit.figures.zz") == ["line 1: import scipy.stats"]


def test_an_attack_breaking_the_interface_is_told(module_dir, monkeypatch):
    (module_dir / "zz_check_attack.py").write_text(
        "class Drop:\n    name = 'zz-drop'\n    label = 'zz-drop'\n\n"
        "    def __init__(self, seed, tries=3):\n        self.seed = seed\n\n"
        "    def attack(self, victim, example):\n        return None\n"
    )
    info = attack_registry.AttackInfo("zz-drop", "zz-drop", "zz_check_attack:Drop")
    monkeypatch.setitem(attack_registry.ATTACKS, "zz-drop", info)
    assert broken("attack", "zz-drop") == {"declaration", "interface", "options"}
    lines = robustkit.check("attack", "zz-drop")
    assert any("no predict(victim, sentence)" in line for line in lines)
    assert any("'seed' has no default" in line for line in lines)


RECIPE = """\
title = "t"
figure = "box-seeds"
output = "o.pdf"

[[claim]]
id = "c"
says = "adapters are more stable"
statistic = "scores.score"
compare = "location"
a = "houlsby"
b = "full"
direction = "less"

[demo.grid]
method = ["houlsby", "full"]
seed = [0, 1, 2]

[paper.base]
model = "bert-base-uncased"
task = "rt"
[paper.grid]
method = ["houlsby", "full"]
seed = [0, 1, 2, 3, 4]
"""


def test_a_recipe_breaking_the_rules_is_told_each(tmp_path):
    shutil.copy(RECIPE_DIR / "defaults.toml", tmp_path / "defaults.toml")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "bad.toml").write_text(RECIPE)
    assert broken("recipe", "mine/bad", recipe_dir=tmp_path) == {
        "scales",
        "paper cited",
        "claim words",
        "paper effect and n",
        "judged scales",
    }


def test_an_unknown_kind_or_name_is_one_line():
    with pytest.raises(CheckError, match="unknown kind 'plot' to check; known: analysis, figure, attack, recipe"):
        robustkit.check("plot", "rsa")
    with pytest.raises(robustkit.errors.RobustkitError, match="unknown analysis 'nosuch'"):
        robustkit.check("analysis", "nosuch")


def test_the_command_checks_without_torch():
    """``robustkit check`` in a fresh process: all rules met, said in one line, torch never imported."""
    code = (
        "import sys\nfrom robustkit.cli import main\ncode = main(['check', 'analysis', 'rsa'])\n"
        "assert 'torch' not in sys.modules, 'torch imported'\nsys.exit(code)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"analysis 'rsa' meets all {len(rules('analysis'))} analysis rules\n"
