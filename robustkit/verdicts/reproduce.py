"""One command per paper figure: train what a recipe needs, judge its claims, draw it.

``reproduce(["han2021/fig2"], scale="demo")`` collects the runs of every named recipe (see
:mod:`robustkit.verdicts.recipes`), trains the distinct ones that are not complete yet into the scale's
store in one sweep (a run two recipes need is trained once), judges each recipe's claims on
exactly its runs (:mod:`robustkit.verdicts.tally`), then draws each recipe's registered figure
(:mod:`robustkit.figures`) on those runs, with the model and task used as subtitle and the claims' verdicts under the
figure. Analyses are cached per run, so re-running only computes what is missing.
The figures folder (default beside the store, ``<store>-figures``; the project's own
``results/`` only when named) then holds the PDFs, ``claims.csv`` and a ``README.md`` that lists
per figure the model/task used, runs per group, collapsed runs, the verdicts and what differs
from the paper's settings.

This module runs the stages; each stage's own work is in its module: :mod:`robustkit.verdicts.swapping`
(the swap recorded in a store and the recipes ``claims`` judges), :mod:`robustkit.verdicts.drawing`
(the figures), :mod:`robustkit.verdicts.index` (``claims.csv`` and the index) and
:mod:`robustkit.verdicts.places` (the default folders). Their public names stay importable from here.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pandas as pd

from robustkit.progress import bar as progress_bar
from robustkit.store.folders import open_store
from robustkit.sweeps.grid import run_sweep
from robustkit.verdicts import tally

# the stages' public names, importable from here as before the split (the CLI, notebooks, tests)
from robustkit.verdicts.drawing import _draw, _titled, draw_recipe, footer, one_corpus, subtitle  # noqa: F401
from robustkit.verdicts.index import _verdict_cell, write_claims, write_index  # noqa: F401
from robustkit.verdicts.places import FIGURES_DIR, default_figures, default_store  # noqa: F401
from robustkit.verdicts.recipes import RECIPE_DIR, load_defaults, load_recipe, recipe_names  # noqa: F401
from robustkit.verdicts.swapping import (  # noqa: F401
    _record_swaps,
    claim_recipes,
    reproduce_command,
    swap_flags,
)
from robustkit.verdicts.verdict import VERDICT_COLUMNS

log = logging.getLogger(__name__)


def announce(stage: str) -> None:
    """Say that a stage of ``reproduce`` starts, so that no stage passes in silence (issue #57):
    a timestamped line in a redirected log (:func:`robustkit.progress.event`), a log line on a
    terminal (where no bar covers the stage); nothing when progress is turned off (``robustkit -q``,
    ``$TQDM_DISABLE``) or in a notebook."""
    from robustkit import progress

    if progress.silenced() or progress.in_notebook():
        return
    if progress.event_stream() is not None:
        progress.event(stage)
    else:
        log.info(stage)


def reproduce(
    recipes: list[str] | None = None,
    scale: str = "demo",
    store: str | Path | None = None,
    figures: str | Path | None = None,
    recipe_dir: str | Path = RECIPE_DIR,
    jobs: int = 2,
    device: str | None = None,
    executor: str = "local",
    slurm_options=None,
    train_only: bool = False,
    progress: bool = True,
    swap: dict | None = None,
) -> pd.DataFrame:
    """Train, analyse and draw the named recipes (all when ``recipes`` is None).

    Parameters
    ----------
    recipes : list of str, optional
        Recipe names (``["han2021/fig2"]``); None = every recipe in ``recipe_dir``.
    scale : str
        ``demo`` (minilm-l6 on the embedded tasks, CPU minutes) or ``paper`` (the papers' models,
        tasks and hyperparameters).
    store : path, optional
        Run store; default ``runs/<scale>``.
    figures : path, optional
        Folder the PDFs, ``claims.csv`` and their ``README.md`` index are written to; default
        :func:`default_figures`, beside the store (said once in the log). The project's own
        ``results/`` is :data:`FIGURES_DIR`.
    recipe_dir : path
        Folder of recipe files (default: the ``recipes/`` folder of this checkout).
    jobs, device, executor, slurm_options
        As in :func:`robustkit.sweeps.grid.run_sweep`; ``device`` is also where the analyses that run a
        model run it.
    train_only : bool
        Stop after training (e.g. to plot later, once cluster jobs are done).
    swap : dict, optional
        Settings put in place of the recipes' in every run (``model``, ``task``, ``data_dir``:
        :meth:`robustkit.verdicts.recipes.Recipe.swapped`): the claims re-judged on
        the user's model and data; the index says what was swapped.

    Returns
    -------
    DataFrame
        One row per recipe: ``recipe, figure`` (the registered figure), ``runs, failed_runs, pdf`` (the PDF path, or
        None),
        ``seconds`` (its claims, analysis and plotting), ``error`` and ``verdicts`` (one line
        per claim, see :func:`robustkit.verdicts.tally.summary_line`). Every claim's rows are written to
        ``<figures>/claims.csv`` (:data:`robustkit.verdicts.tally.TABLE_COLUMNS`: the verdict columns, then
        the replication reading's).
    """
    names = recipe_names(recipes, recipe_dir, scale)
    chosen = [load_recipe(name, recipe_dir).swapped(**(swap or {})) for name in names]
    announce(f"planning the runs of {len(names)} recipe(s)")  # after the names are checked: reads the user's data
    store = Path(store) if store is not None else default_store(scale)
    if figures is None:
        figures = default_figures(store)
        if not train_only:
            log.info(
                f"figures and verdicts go to {figures} (--figures to choose; `--figures {FIGURES_DIR}` "
                "updates the project's own)"
            )
    defaults = load_defaults(recipe_dir)  # read once: every recipe's specs, claims and subtitle use it
    needed = {recipe.name: recipe.specs(scale, defaults) for recipe in chosen}
    distinct = {spec.run_id: spec for specs in needed.values() for spec in specs}
    announce("loading torch and transformers")  # seconds of imports (robustkit.specs.preflight): said, not silent
    import robustkit.specs.preflight  # noqa: F401

    announce(f"checking which of the {len(distinct)} distinct run(s) {store} holds, and that the rest can train")
    try:
        results = run_sweep(
            list(distinct.values()),
            store,
            jobs=jobs,
            progress=progress,
            device=device,
            executor=executor,
            slurm_options=slurm_options,
        )
    finally:  # also of a sweep cut short (Ctrl-C, a failed run): `claims --store` then knows the runs there
        if swap:
            _record_swaps(store, chosen, scale, needed)
    failed = set(results.loc[results.status.isin(["failed", "damaged"]), "run_id"])  # damaged: not trained over
    rows, judged = [], []
    for recipe in progress_bar(chosen, desc="figures", unit="figure", show=progress and not train_only):
        run_ids = [spec.run_id for spec in needed[recipe.name]]
        row = {
            "recipe": recipe.name,
            "figure": recipe.figure,
            "runs": len(run_ids),
            "failed_runs": len(failed.intersection(run_ids)),
            "pdf": None,
            "seconds": 0.0,
            "error": None,
            "verdicts": "",
        }
        if not train_only:
            started = time.perf_counter()
            claims_n = len(recipe.claims)
            announce(f"{recipe.name}: judging its {claims_n} claim(s) on its {len(run_ids)} runs (analyses are cached)")
            verdicts = tally.verdicts(store, [recipe], scale, defaults=defaults, device=device)
            judged.append(verdicts)
            announce(f"{recipe.name}: drawing {recipe.figure} ({recipe.output})")  # the folder is said once
            row.update(
                _draw(
                    recipe,
                    scale,
                    store,
                    run_ids,
                    Path(figures) / recipe.output,
                    subtitle(recipe, scale, defaults),
                    footer(recipe, verdicts),
                    device,
                ),
                verdicts=tally.summary_line(verdicts),
            )
            row["seconds"] = time.perf_counter() - started  # claims and figure together
            log.info(
                f"{recipe.name}: "
                + (f"figure failed: {row['error']}" if row["error"] else "drawn")
                + "".join(f"\n  {line}" for line in row["verdicts"].splitlines())
            )
        rows.append(row)
    if not train_only:
        verdicts = pd.concat(judged, ignore_index=True) if judged else pd.DataFrame(columns=VERDICT_COLUMNS)
        verdicts = write_claims(figures, verdicts, [r.name for r in chosen])
        announce("writing claims.csv and the index README.md beside the figures")
        write_index(figures, scale, recipe_dir, store=store, verdicts=verdicts, swap=swap)
    return pd.DataFrame(rows)


def claims(
    store: str | Path | None = None,
    recipes: list[str] | None = None,
    scale: str = "demo",
    recipe_dir: str | Path = RECIPE_DIR,
    include_failed: bool = False,
    device: str | None = None,
    swap: dict | None = None,
) -> pd.DataFrame:
    """The verdict of every claim of the named recipes on their runs (nothing is trained).

    Parameters
    ----------
    store : path, optional
        Run store; default ``runs/<scale>``.
    recipes : list of str, optional
        Recipe names (``["han2021/fig2"]``); None = every recipe in ``recipe_dir`` that has
        runs at ``scale``.
    scale : str
        Whose runs: ``demo``, ``cpu`` or ``paper``.
    recipe_dir : path
        Folder of recipe files (default: the ``recipes/`` folder of this checkout).
    include_failed : bool
        Keep collapsed and diverged runs in the tests.
    device : str, optional
        Where the analyses that run a model run it (default: the GPU if there is one).
    swap : dict, optional
        ``model``, ``task``, ``data_dir`` in place of the recipes' (as :func:`reproduce`'s); default:
        the swap ``reproduce`` recorded in the store for each recipe (:func:`claim_recipes`).

    Returns
    -------
    DataFrame
        :data:`robustkit.verdicts.rules.VERDICT_COLUMNS`: one row per recipe x claim x cell, the claim's
        overall verdict last (cell ``all``).

    Raises
    ------
    StoreError
        The store does not exist (a mistyped path would judge every claim inconclusive).
    RobustkitError
        The store holds runs of two swaps of a recipe and ``swap`` does not say which.
    """
    store = store if store is not None else default_store(scale)
    chosen = claim_recipes(store, recipes, scale, recipe_dir, swap)  # a bad name is said before a missing store
    store = open_store(store, create=False)  # no verdicts on nothing
    return tally.verdicts(store, chosen, scale, include_failed, defaults=load_defaults(recipe_dir), device=device)
