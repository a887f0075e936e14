"""The figures of ``reproduce``: each recipe's registered figure (:mod:`robustkit.figures`) on
exactly its runs, with the model and task used as subtitle and its claims' verdicts under it
(:func:`draw_recipe` in a notebook, :func:`_draw` into a PDF)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pandas as pd

from robustkit import figures as registry
from robustkit.store.folders import open_store
from robustkit.verdicts import tally
from robustkit.verdicts.places import default_store
from robustkit.verdicts.recipes import RECIPE_DIR, Recipe, RecipeError, load_defaults
from robustkit.verdicts.swapping import claim_recipes


def subtitle(recipe: Recipe, scale: str, defaults: dict | None = None) -> str:
    """The model and task(s) the figure's runs use, and what they stand in for at paper scale:
    ``"minilm-l6 on rt (stand-in for bert-base-uncased on rte)"``."""
    specs = recipe.specs(scale, defaults)
    used = _model_task(specs)
    if recipe.swap:  # the user's setting, in place of the recipe's
        original = _model_task(dataclasses.replace(recipe, swap=()).specs(scale, defaults))
        return used if original == used else f"{used} (in place of {original})"
    if scale != "paper" and "paper" in recipe.scales:
        paper = _model_task(recipe.specs("paper", defaults))
        if paper != used:
            used = f"{used} (stand-in for {paper})"
    return used + one_corpus(sorted({spec.task for spec in specs}))


def one_corpus(names: list[str]) -> str:
    """``"; rt and polarity are one corpus (...)"`` where tasks of a figure share their texts."""
    from robustkit.data.tasks import get_task

    shared: dict[str, list[str]] = {}
    for name in names:
        try:
            corpus = get_task(name).corpus
        except Exception:  # noqa: BLE001 - a task unknown here names no corpus
            corpus = None
        if corpus:
            shared.setdefault(corpus, []).append(name)
    return "".join(
        f"; {' and '.join(tasks)} are one corpus ({corpus})" for corpus, tasks in shared.items() if len(tasks) > 1
    )


def footer(recipe: Recipe, verdicts: pd.DataFrame) -> str:
    """Each claim of the recipe, how it is tested and its verdict, one paragraph per claim."""
    lines = tally.summary_line(verdicts).splitlines()
    texts = []
    for item, line in zip(recipe.claims, lines):
        texts.append(f"Claim: {item.says} Tested as {item.hypothesis}. Verdict {line.split(': ', 1)[1]}")
    return "\n".join(texts) or "No claim stated for this figure."


def _model_task(specs) -> str:
    models = sorted({spec.model for spec in specs})
    tasks = sorted({spec.task for spec in specs})
    return f"{', '.join(models)} on {', '.join(tasks)}"


PAPERS = {
    "han2021": "Han et al. 2021",
    "he2021": "He et al. 2021",
    "houlsby2019": "Houlsby et al. 2019",
    "mohebbi": "Mohebbi (course report)",
}


def _paper_label(name: str) -> str:
    """``han2021/fig9-10`` -> ``Han et al. 2021, fig 9-10``."""
    paper, item = name.split("/", 1)
    authors = PAPERS.get(paper, paper)
    return f"{authors}, {item.replace('fig', 'figure ').replace('table', 'table ')}"


def draw_recipe(
    name: str,
    store: str | Path | None = None,
    scale: str = "demo",
    recipe_dir: str | Path = RECIPE_DIR,
    verdicts: bool = False,
    device: str | None = None,
    swap: dict | None = None,
):
    """Recipe ``name``'s figure (a matplotlib Figure) on exactly its runs of ``store``, as
    ``robustkit reproduce`` draws it, without training anything: for notebooks,
    ``robustkit.draw_recipe("han2021/fig2", "runs/demo")``.

    Parameters
    ----------
    store : path, optional
        Run store; default ``runs/<scale>``.
    verdicts : bool
        Also judge the recipe's claims and print their verdicts under the figure.
    device : str, optional
        Where an analysis that runs a model runs it (default: the GPU if there is one).
    swap : dict, optional
        ``model``, ``task``, ``data_dir`` in place of the recipe's; default: the swap ``reproduce``
        recorded in the store (:func:`claim_recipes`), as ``claims`` applies it.
    """
    if not isinstance(name, str):
        raise RecipeError(f"draw_recipe takes one recipe name such as 'han2021/fig2', got {name!r}")
    store = store if store is not None else default_store(scale)
    (recipe,) = claim_recipes(store, [name], scale, recipe_dir, swap)  # a bad name is said before a missing store
    store = open_store(store, create=False)
    defaults = load_defaults(recipe_dir)
    run_ids = [spec.run_id for spec in recipe.specs(scale, defaults)]
    text = (
        footer(recipe, tally.verdicts(store, [recipe], scale, defaults=defaults, device=device)) if verdicts else None
    )
    fig = registry.draw(
        recipe.figure,
        store,
        [f"run_id={','.join(run_ids)}"],
        subtitle=subtitle(recipe, scale, defaults),
        footer=text,
        device=device,
        **recipe.figure_params(scale),
    )
    return _titled(fig, recipe)


def _titled(fig, recipe: Recipe):
    """A recipe of no paper (``peft/``, ``beyond/``) reuses a paper figure's plot; its title is the
    recipe's own, so that the figure is never taken for the paper's."""
    if recipe.name.split("/", 1)[0] not in PAPERS:
        from robustkit.figures.style import set_title

        set_title(fig, recipe.title)
    return fig


def _draw(
    recipe: Recipe,
    scale: str,
    store: Path,
    run_ids: list[str],
    output: Path,
    subtitle_text: str,
    footer_text: str,
    device: str | None = None,
) -> dict:
    """Render one recipe's figure on exactly its runs to ``output``; a failure is reported, not
    raised, so one broken figure does not cost the others."""
    from robustkit.figures.style import save_pdf

    started = time.perf_counter()
    try:
        fig = registry.draw(
            recipe.figure,
            store,
            [f"run_id={','.join(run_ids)}"],
            subtitle=subtitle_text,
            footer=footer_text,
            device=device,
            **recipe.figure_params(scale),
        )
        save_pdf(_titled(fig, recipe), output)
    except Exception as error:  # noqa: BLE001 - reported per recipe
        return {"error": f"{type(error).__name__}: {error}", "seconds": time.perf_counter() - started}
    return {"pdf": str(output), "seconds": time.perf_counter() - started}
