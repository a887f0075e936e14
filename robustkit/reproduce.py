"""One command per paper figure: train what a recipe needs, run its analysis, draw it.

``reproduce(["han2021/fig2"], scale="demo")`` collects the runs of every named recipe (see
:mod:`robustkit.recipes`), trains the distinct ones that are not complete yet into the scale's
store in one sweep (a run two recipes need is trained once), then renders each figure with its
``robustkit plot`` verb on exactly the recipe's runs. Analyses are cached per run, so re-running
only computes what is missing.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from robustkit.recipes import RECIPE_DIR, Recipe, RecipeError, list_recipes, load_defaults, load_recipe
from robustkit.sweep import run_sweep

FIGURES_DIR = Path("figures")


def default_store(scale: str) -> Path:
    """Where a scale's runs live unless told otherwise: ``runs/<scale>``."""
    return Path("runs") / scale


def reproduce(
    names: list[str] | None = None,
    scale: str = "demo",
    store: str | Path | None = None,
    figures: str | Path = FIGURES_DIR,
    recipes: str | Path = RECIPE_DIR,
    jobs: int = 2,
    device: str | None = None,
    executor: str = "local",
    slurm_options=None,
    train_only: bool = False,
    progress: bool = True,
) -> pd.DataFrame:
    """Train, analyse and draw the named recipes (all when ``names`` is None).

    Parameters
    ----------
    names : list of str, optional
        Recipe names (``han2021/fig2``); None = every recipe in ``recipes``.
    scale : str
        ``demo`` (minilm-l6 on the embedded tasks, CPU minutes) or ``paper`` (the papers' models,
        tasks and hyperparameters).
    store : path, optional
        Run store; default ``runs/<scale>``.
    figures : path
        Folder the PDFs are written to.
    jobs, device, executor, slurm_options
        As in :func:`robustkit.sweep.run_sweep`.
    train_only : bool
        Stop after training (e.g. to plot later, once cluster jobs are done).

    Returns
    -------
    DataFrame
        One row per recipe: ``recipe, plot, runs, failed_runs, figure`` (the PDF path, or None),
        ``seconds`` (its analysis and plotting) and ``error``.
    """
    chosen = [load_recipe(name, recipes) for name in (names or list_recipes(recipes))]
    store = Path(store) if store is not None else default_store(scale)
    # A recipe with bad plot flags fails now, not after hours of training.
    commands = {recipe.name: _plot_args(recipe, scale, store, Path(figures) / recipe.output) for recipe in chosen}
    needed = {recipe.name: recipe.specs(scale, load_defaults(recipes)) for recipe in chosen}
    distinct = {spec.run_id: spec for specs in needed.values() for spec in specs}
    results = run_sweep(list(distinct.values()), store, jobs=jobs, progress=progress, device=device,
                        executor=executor, slurm_options=slurm_options)
    failed = set(results.loc[results.status == "failed", "run_id"])
    rows = []
    for recipe in tqdm(chosen, desc="figures", unit="figure", disable=not progress or train_only):
        run_ids = [spec.run_id for spec in needed[recipe.name]]
        row = {"recipe": recipe.name, "plot": recipe.plot, "runs": len(run_ids),
               "failed_runs": len(failed.intersection(run_ids)), "figure": None, "seconds": 0.0, "error": None}
        if not train_only:
            row.update(_draw(commands[recipe.name], run_ids))
            if row["error"]:
                tqdm.write(f"{recipe.name}: figure failed: {row['error']}")
        rows.append(row)
    if not train_only:
        write_index(figures, scale, recipes)
    return pd.DataFrame(rows)


def write_index(figures: str | Path, scale: str, recipes: str | Path = RECIPE_DIR) -> Path:
    """``<figures>/README.md``: every recipe whose PDF is in ``figures``, with its paper figure,
    what it shows, the runs behind it and the command that made it.

    Returns
    -------
    Path
        The index file.
    """
    figures = Path(figures)
    lines = [
        "# Figures",
        "",
        f"Made by `robustkit reproduce --all --scale {scale}` from the recipes in `analyses/` "
        "(each file cites the paper's table its settings come from). Re-running the command only "
        "trains and analyses what is missing.",
        "",
        "| file | paper | what it shows | runs | command |",
        "|---|---|---|---|---|",
    ]
    defaults = load_defaults(recipes)
    for name in list_recipes(recipes):
        recipe = load_recipe(name, recipes)
        if scale in recipe.scales and (figures / recipe.output).is_file():
            runs = len(recipe.specs(scale, defaults))
            lines.append(f"| [{recipe.output}]({recipe.output}) | {_paper_label(name)} | {recipe.title} | {runs} "
                         f"| `robustkit reproduce {name} --scale {scale}` |")
    path = figures / "README.md"
    figures.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def _paper_label(name: str) -> str:
    """``han2021/fig9-10`` -> ``Han et al. 2021, fig 9-10``."""
    paper, item = name.split("/", 1)
    authors = {"han2021": "Han et al. 2021", "he2021": "He et al. 2021", "houlsby2019": "Houlsby et al. 2019",
               "mohebbi": "Mohebbi (course report)"}.get(paper, paper)
    return f"{authors}, {item.replace('fig', 'figure ').replace('table', 'table ')}"


def plot_command(recipe: Recipe, scale: str, store: str | Path, output: str | Path) -> list[str]:
    """The ``robustkit plot`` arguments that draw ``recipe`` (without the run selection)."""
    return ["plot", recipe.plot, str(store), "-o", str(output), *recipe.plot_args(scale)]


def _plot_args(recipe: Recipe, scale: str, store: Path, output: Path):
    """The parsed plot command of ``recipe``; bad flags raise :class:`RecipeError` (argparse
    would exit the process)."""
    from robustkit.cli import parse_args

    command = plot_command(recipe, scale, store, output)
    try:
        return parse_args(command)
    except SystemExit:
        raise RecipeError(f"recipe {recipe.name!r}: invalid plot command: robustkit {' '.join(command)}") from None


def _draw(args, run_ids: list[str]) -> dict:
    """Render one figure (its parsed plot command) on exactly the recipe's runs; a failure is
    reported, not raised, so one broken figure does not cost the others."""
    args.select = [f"run_id={','.join(run_ids)}"]
    started = time.perf_counter()
    try:
        args.func(args)
    except Exception as error:  # noqa: BLE001 - reported per recipe
        return {"error": f"{type(error).__name__}: {error}", "seconds": time.perf_counter() - started}
    return {"figure": str(args.output), "seconds": time.perf_counter() - started}
