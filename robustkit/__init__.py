"""robustkit: robustness and stability of adapter-based tuning vs full fine-tuning.

Train into a run store (``robustkit.train``, ``robustkit.sweeps.grid``), then read it as tidy
DataFrames::

    import robustkit
    runs = robustkit.load_runs("runs/")        # one row per run
    history = robustkit.load_history("runs/")  # one row per run x eval step x metric

    verdicts = robustkit.claims("runs/demo")  # each paper claim: agrees / contradicts / inconclusive
    fig = robustkit.draw_recipe("han2021/fig2", "runs/demo")   # a recipe's figure, as reproduce draws it
    fig = robustkit.figures.draw("box-seeds", "runs/demo", select=["task=rt"], split="validation")

``import robustkit`` itself imports nothing heavy: every ``robustkit`` command imports this
package first, and ``robustkit --help`` must answer at once, so the notebook functions load
their modules (pandas, torch) on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from robustkit import lazy

if TYPE_CHECKING:  # for type checkers and IDEs only; at run time __getattr__ imports them
    from robustkit.store import load_gradnorms, load_history, load_runs

# Name -> module that defines it, imported on first access (PEP 562 module __getattr__).
_LAZY = {"load_runs": "robustkit.store", "load_history": "robustkit.store", "load_gradnorms": "robustkit.store"}


# Submodules a notebook reaches as attributes (``robustkit.figures.draw(...)``).
_SUBMODULES = {"figures"}


__getattr__, __dir__ = lazy.exports(__name__, _LAZY, globals(), frozenset(_SUBMODULES))


def claims(
    store=None,
    recipes=None,
    scale: str = "demo",
    include_failed: bool = False,
    recipe_dir=None,
    device: str | None = None,
):
    """The verdict of each paper claim on the runs behind its figure (nothing is trained).

    Parameters
    ----------
    store : path, optional
        Run store; default ``runs/<scale>``.
    recipes : list of str, optional
        Recipe *names* (``["han2021/fig2"]``); default: every recipe of ``recipe_dir``. A string
        is refused (it is not a list of names).
    scale : str
        ``demo`` or ``paper``: which of each recipe's runs are judged.
    include_failed : bool
        Keep collapsed and diverged runs in the tests.
    recipe_dir : path, optional
        The *folder* of recipe files; default: the ``recipes/`` folder of this checkout.
    device : str, optional
        Where the analyses that run a model run it (default: the GPU if there is one).

    Returns
    -------
    DataFrame
        One row per recipe x claim x cell (:data:`robustkit.verdicts.rules.VERDICT_COLUMNS`), each
        claim's overall verdict last (cell ``all``); see :func:`robustkit.verdicts.reproduce.claims`.
    """
    from robustkit.verdicts.recipes import RECIPE_DIR
    from robustkit.verdicts.reproduce import claims as judge

    return judge(
        store, recipes, scale=scale, include_failed=include_failed, recipe_dir=recipe_dir or RECIPE_DIR, device=device
    )


def draw_recipe(
    recipe: str, store=None, scale: str = "demo", verdicts: bool = False, recipe_dir=None, device: str | None = None
):
    """A recipe's figure on exactly its runs of ``store``, as ``robustkit reproduce`` draws it,
    without training anything. (A registered figure on any runs: :func:`robustkit.figures.draw`.)

    Parameters
    ----------
    recipe : str
        One recipe name, e.g. ``"han2021/fig2"`` (``robustkit reproduce --help`` lists them).
    store : path, optional
        Run store; default ``runs/<scale>``.
    scale : str
        ``demo`` or ``paper``: which of the recipe's runs are drawn.
    verdicts : bool
        Also judge the recipe's claims and write their verdicts under the figure.
    recipe_dir : path, optional
        The folder of recipe files; default: the ``recipes/`` folder of this checkout.
    device : str, optional
        Where an analysis that runs a model runs it (default: the GPU if there is one).

    Returns
    -------
    matplotlib.figure.Figure
        Laid out so that ``fig.savefig("fig.pdf")`` keeps its title, legend and notes; in a
        notebook it shows as the cell's result. Any registered figure on any runs:
        :func:`robustkit.figures.draw`.
    """
    from robustkit.verdicts import reproduce
    from robustkit.verdicts.recipes import RECIPE_DIR

    return reproduce.draw_recipe(
        recipe, store, scale=scale, recipe_dir=recipe_dir or RECIPE_DIR, verdicts=verdicts, device=device
    )


def check(kind: str, name: str, recipe_dir=None) -> list[str]:
    """Every rule of extending that the registered ``name`` of ``kind`` breaks, one line each
    naming the rule and how to meet it (empty: it meets them all); as ``robustkit check KIND NAME``.

    Parameters
    ----------
    kind : str
        ``analysis``, ``figure``, ``attack`` or ``recipe``.
    name : str
        Its registered name (a recipe's ``<paper>/<figure>``).
    recipe_dir : path, optional
        The folder of recipe files (recipes only); default: the ``recipes/`` folder of this checkout.
    """
    from robustkit.checks import check as run_check

    return run_check(kind, name, recipe_dir=recipe_dir)


__all__ = ["load_runs", "load_history", "load_gradnorms", "claims", "draw_recipe", "check"]
__version__ = "0.1.0"
