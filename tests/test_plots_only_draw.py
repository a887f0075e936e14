"""Plots only draw (issue "One home per analysis", item 2): every module of robustkit/figures is
checked, from its source (``ast``), against one rule on what it may import.

The rule, with what a plot module may import and why, is written once: the docstring of
:mod:`robustkit.checks.drawing`, whose check this test runs on every figure module.
"""

from __future__ import annotations

import pytest

from robustkit.checks.drawing import module_violations, plot_modules, violations

# Plot modules that still compute, each with what is left to move into a view (strict: the
# entry must go once the module passes). Nothing may be added here.
PENDING: dict[str, str] = {}


def _checked(module: str):
    if module in PENDING:
        return pytest.param(module, marks=pytest.mark.xfail(strict=True, reason=PENDING[module]), id=module)
    return pytest.param(module, id=module)


@pytest.mark.parametrize("module", [_checked(m) for m in plot_modules()])
def test_plot_modules_only_draw(module):
    """Helpers too: the figure check (robustkit.checks.figure) runs the rule on declaring modules."""
    assert module_violations(module) == [], f"{module} computes: move it to robustkit/analysis (a view)"


def test_every_plot_module_is_checked():
    names = {m.rsplit(".", 1)[1] for m in plot_modules()}
    assert names >= {"stability", "tradeoff", "init_std", "curves", "style", "attack"}


@pytest.mark.parametrize(
    "source, flagged",
    [
        ("import scipy.stats", "import scipy.stats"),
        ("from scipy import stats", "from scipy import stats"),
        ("def f():\n    from deepsig import aso\n", "from deepsig import aso"),
        ("import opda.nonparametric", "import opda.nonparametric"),
        ("import statsmodels.api as sm", "import statsmodels.api"),
        ("from sklearn.metrics import accuracy_score", "from sklearn.metrics import accuracy_score"),
        ("import torch", "import torch"),
        ("from robustkit.analysis.tradeoff import select_best", "from robustkit.analysis.tradeoff import select_best"),
        (
            "from robustkit.analysis import stability\nstability.summarize(None)",
            "stability.summarize (robustkit.analysis.stability)",
        ),
        (
            "from robustkit.analysis import dominance as d\nd.aso_table(None)",
            "d.aso_table (robustkit.analysis.dominance)",
        ),
        ("import robustkit.analysis.tuning as t\nt.run(None)", "t.run (robustkit.analysis.tuning)"),
        ("from robustkit.store import collapse\ncollapse.marked(None)", "collapse.marked (robustkit.store.collapse)"),
        ("from robustkit.store.collapse import failure_rates", "from robustkit.store.collapse import failure_rates"),
        ("from robustkit.measures import significance", "from robustkit.measures import significance"),
        ("import robustkit.analysis.scores\nrobustkit.analysis.scores.outcomes(None)", "robustkit.analysis"),
        ("from ..analysis.tradeoff import select_best", "from robustkit.analysis.tradeoff import select_best"),
        # declaring a figure is allowed, running one or an analysis's statistic is not
        ("from robustkit import figures\nfigures.draw('box-seeds', 'runs')", "figures.draw (robustkit.figures)"),
        ("from robustkit.figures import data", "from robustkit.figures import data"),
        ("from robustkit.params import resolve", "from robustkit.params import resolve"),
        ("from robustkit.analysis.declare import load", "from robustkit.analysis.declare import load"),
        (
            "from robustkit.analysis.attack_summary import attack_success",
            "from robustkit.analysis.attack_summary import attack_success",
        ),
        ("from robustkit.analysis import attack_summary\nattack_summary.summarize(None)", "attack_summary.summarize"),
        # an attack's label and unit are allowed, building or running an attack is not
        ("from robustkit import attacks", "from robustkit import attacks"),
        ("from robustkit.attacks import create", "from robustkit.attacks import create"),
        ("from robustkit.attacks import registry\nregistry.load_class('pwws')", "registry.load_class"),
    ],
)
def test_the_rule_flags_computing_imports(source, flagged):
    found = violations(source)
    assert found and any(flagged in text for text in found), found


def test_the_rule_lets_drawing_imports_through():
    source = "\n".join(
        [
            "from __future__ import annotations",
            "import warnings",
            "from collections.abc import Sequence",
            "import numpy as np",
            "import pandas as pd",
            "import seaborn as sns",
            "import matplotlib.pyplot as plt",
            "from matplotlib.figure import Figure",
            "from robustkit.store import collapse",
            "from robustkit.figures import style",
            "from robustkit.figures.style import method_color",
            "from robustkit.analysis.tradeoff import POINT_COLUMN, POINT_SYMBOL",
            "from robustkit.analysis.pooling import mixed_settings",
            "from robustkit.methods import HOULSBY_INIT_STD",
            "x = collapse.kept(pd.DataFrame()); y = collapse.OK; z = collapse.label(1, 2)",
        ]
    )
    assert violations(source) == []


def test_the_rule_lets_a_figure_s_declaration_through():
    """A plot module declares its figures (issue #40) and names attackers by their registered
    label and unit: names, not computation."""
    source = "\n".join(
        [
            "from robustkit import figures",
            "from robustkit.params import Param",
            "from robustkit.analysis.declare import MATRICES, checkpoint_param",
            "from robustkit.attacks import registry as attack_registry",
            "from robustkit.attacks.registry import success_metrics",
            "DECLARED = figures.register_figure(",
            "    figures.Figure('x', 'h', 'a', ':p', (figures.ASO, Param('k', 1, 'k')), module=__name__)",
            ")",
            "label = attack_registry.label_of('pwws'); unit = attack_registry.get('pwws').success_unit",
            "known = 'pwws' in attack_registry.ATTACKS; percent = success_metrics('%')",
        ]
    )
    assert violations(source) == []
