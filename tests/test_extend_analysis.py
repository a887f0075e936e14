"""Issue #40's "done when": a new analysis with a statistic, a view and a figure is one analysis
module, one plot module and one recipe TOML, and nothing else of the checkout changes.

The test writes a throwaway "fixture-change" analysis (each layer matrix's relative change from
step-0, cached per run through each_run), its plot and a recipe with one claim into tmp_path,
registers the two modules from there (robustkit.analysis.registry.register_module,
robustkit.figures.register_module), and runs them end to end on the tiny bert-tiny store: the
`analyze` verb, the `plot` verb, the statistic, and the recipe's figure with its claim judged.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from robustkit import figures
from robustkit.analysis import registry

ROOT = Path(__file__).resolve().parents[1]

ANALYSIS_MODULE = '''"""A throwaway analysis: each layer matrix's relative change ||W - W_0|| / ||W_0|| from step-0."""

from __future__ import annotations

import pandas as pd

from robustkit.analysis.declare import Analysis, Param, Statistic, checkpoint_param
from robustkit.analysis.each_run import each_run
from robustkit.analysis.registry import register_analysis
from robustkit.analysis.select import select_runs
from robustkit.progress import bar
from robustkit.store.tables import IDENTITY

DECLARED = register_analysis(Analysis(
    "fixture-change",
    "relative change of each layer matrix from step-0",
    "Per layer weight matrix of each run (LoRA updates merged), ||W - W_0|| / ||W_0|| (Frobenius).",
    ":run",
    (
        checkpoint_param("the tuned checkpoint (the start is step-0)", default="last"),
        Param("kinds", "all", "matrix kinds kept (q, v, ...) or all; default: all"),
    ),
    summary=":summarize",
    statistics=(
        Statistic("mean", ":mean_change", "mean relative change over a run's matrices (fraction)"),
    ),
    output="the tidy result (per run x matrix)",
    views=(":per_layer",),
    module=__name__,
))


def one_run(run_dir, checkpoint: str, kinds: str) -> pd.DataFrame:
    from robustkit.analysis.weights import start_and_end

    matrices, start, end = start_and_end(run_dir, checkpoint)
    rows = [
        {"layer": m.layer, "kind": m.kind, "value": float((end[n] - start[n]).norm() / start[n].norm())}
        for n, m in matrices.items()
        if kinds == "all" or m.kind in kinds.split(",")
    ]
    return pd.DataFrame(rows, columns=["layer", "kind", "value"])


def run(store, select=None, *, checkpoint: str, kinds: str, progress: bool = True) -> pd.DataFrame:
    runs = select_runs(store, select)
    with bar(total=len(runs), desc=DECLARED.name, unit="run", show=progress) as shown:
        return each_run(
            runs,
            DECLARED.name,
            {"kinds": kinds},
            ["step-0", checkpoint],
            lambda row: one_run(row["path"], checkpoint, kinds),
            on_done=shown.update,
        )


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.groupby(["run_id", "method"], as_index=False)["value"].mean()


def per_layer(frame: pd.DataFrame) -> pd.DataFrame:
    """The view the figure draws: each run's mean relative change per layer."""
    return frame.groupby(["run_id", "layer"], as_index=False)["value"].mean()


def mean_change(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run's mean relative change over its matrices (fraction)."""
    return frame.groupby(IDENTITY, dropna=False, as_index=False)["value"].mean()
'''

PLOT_MODULE = '''"""The throwaway analysis's figure: each run's relative change per layer."""

from __future__ import annotations

import pandas as pd

from robustkit import figures
from robustkit.figures.style import plt

DECLARED = figures.register_figure(figures.Figure(
    "fixture-change",
    "relative change of each layer's weights, one line per run",
    "fixture-change",
    ":fixture_change_figure",
    view="robustkit_test_fixture_change:per_layer",
    module=__name__,
))


def fixture_change_figure(means: pd.DataFrame):
    fig, ax = plt.subplots(figsize=(4, 3))
    for run_id, group in means.groupby("run_id"):
        ax.plot(group["layer"], group["value"], marker="o", label=run_id)
    ax.set_title("Relative weight change")
    ax.set_xlabel("layer")
    ax.set_ylabel("||W - W_0|| / ||W_0||")
    return fig
'''

RECIPE = """title = "Weight change: full fine-tuning moves its weights"
figure = "fixture-change"
params = { checkpoint = "last" }
output = "extension/fixture-change.pdf"

[[claim]]
id = "full-moves-more"
paper_effect_source = "not reported: a throwaway claim of the extension test"
says = "full fine-tuning changes its query and value matrices more than LoRA does"
statistic = "fixture-change.mean"
compare = "location"
by = "method"
a = "full"
b = "lora"
direction = "greater"

[demo.grid]
method = ["full", "lora"]
seed = [0, 1]
tsp_step = [0]
"""


def _status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def extension(tmp_path):
    """The three files in tmp_path, registered from there; unregistered afterwards."""
    (tmp_path / "fixture_change.py").write_text(ANALYSIS_MODULE)
    (tmp_path / "fixture_change_plot.py").write_text(PLOT_MODULE)
    recipes = tmp_path / "recipes"
    (recipes / "extension").mkdir(parents=True)
    (recipes / "extension" / "fixture-change.toml").write_text(RECIPE)
    analyses, shown = dict(registry.ANALYSES), dict(figures.FIGURES)
    try:
        analysis = registry.register_module(tmp_path / "fixture_change.py", "robustkit_test_fixture_change")
        (figure,) = figures.register_module(tmp_path / "fixture_change_plot.py", "robustkit_test_fixture_change_plot")
        yield analysis, figure, recipes
    finally:
        for table, before in ((registry.ANALYSES, analyses), (figures.FIGURES, shown)):
            table.clear()
            table.update(before)
        sys.modules.pop("robustkit_test_fixture_change", None)
        sys.modules.pop("robustkit_test_fixture_change_plot", None)


@pytest.mark.slow  # loads 5 bert-tiny runs' checkpoints twice and judges a claim (~a minute on 2 cores)
def test_an_analysis_its_figure_and_its_recipe_work_from_three_files(extension, lora_store, tmp_path, capsys):
    from robustkit.cli import main
    from robustkit.figures.style import figure_texts
    from robustkit.store.folders import run_dirs
    from robustkit.store.manifest import read_spec
    from robustkit.verdicts.recipes import load_defaults, load_recipe
    from robustkit.verdicts.rules import NO_DATA
    from robustkit.verdicts.tally import verdicts

    before = _status()
    analysis, figure, recipes = extension
    store = tmp_path / "runs"
    shutil.copytree(lora_store, store, ignore=shutil.ignore_patterns(".cache"))
    data_dir = read_spec(run_dirs(store)[0]).data_dir  # the recipe's demo scale: the tiny store's runs
    (recipes / "defaults.toml").write_text(
        '[demo.base]\nmodel = "bert-tiny"\ntask = "rte"\nepochs = 2\nbatch_size = 8\nmax_length = 32\n'
        f'adapter_size = 16\neval_every = 2\ndata_dir = "{data_dir}"\n'
    )

    # analyze: the verb, its flags and summary come from the declaration alone
    assert main(["analyze", "fixture-change", str(store), "--kinds", "q,v", "--format", "csv"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("run_id,method,value") and printed.count("\n") == 6  # header + 5 runs
    frame = analysis.run(store, progress=False, kinds="q,v")
    moved = frame.groupby("method")["value"].min()
    assert moved["full"] > 0 and moved["houlsby"] == 0 and set(frame["kind"]) == {"q", "v"}  # adapters add modules
    assert list((store / ".cache" / "fixture-change").glob("*.parquet"))  # cached by each_run

    # the statistic, as a notebook names it
    means = registry.per_run("fixture-change.mean", store, kinds="q,v")
    assert len(means) == 5 and {"value", "outcome"} <= set(means.columns)

    # plot: the verb comes from the plot module's declaration
    pdf = tmp_path / "fixture-change.pdf"
    assert main(["plot", "fixture-change", str(store), "-o", str(pdf)]) == 0
    assert pdf.stat().st_size > 0

    # the recipe: its figure drawn with its claim judged on the tiny store's runs
    import robustkit

    recipe = load_recipe("extension/fixture-change", recipes)
    table = verdicts(store, [recipe], "demo", defaults=load_defaults(recipes))
    assert list(table["claim"]) == ["full-moves-more"]
    assert not (table["reason_class"] == NO_DATA).any(), table[["claim", "reason"]].to_string()
    fig = robustkit.draw_recipe("extension/fixture-change", store, recipe_dir=recipes, verdicts=True)
    text = " ".join(figure_texts(fig))
    assert recipe.title in text and "Verdict" in text

    assert _status() == before  # no file of the checkout was written or needed


def test_an_external_declaration_is_the_modules_own(extension):
    """What was registered is what the module's register_* call returned, its functions named in its own module."""
    analysis, figure, _ = extension
    assert registry.get("fixture-change") is analysis and figures.get("fixture-change") is figure
    assert analysis.compute == "robustkit_test_fixture_change:run"
    assert analysis.get_statistic("mean").function == "robustkit_test_fixture_change:mean_change"
    assert figure.plot == "robustkit_test_fixture_change_plot:fixture_change_figure"
    assert figure.view in analysis.views == ("robustkit_test_fixture_change:per_layer",)
    assert list(registry.ANALYSES)[-1] == "fixture-change"  # listed after the shipped analyses
    from robustkit.cli.analyze import negative_value_options

    assert "--kinds" in negative_value_options()  # free text: derived, not listed
