"""Recipes: one TOML file per paper figure or table, in ``recipes/<paper>/<figure>.toml``.

A recipe names the runs a figure needs at each scale, the registered figure that draws it
(:mod:`robustkit.figures`) and that figure's parameters::

    title = "Score over 10 random seeds, RTE, with vs without adapters"
    figure = "box-seeds"                 # a registered figure (robustkit.figures.FIGURES)
    params = { split = "validation" }    # its parameters (store and run selection are added)
    output = "han2021_fig2.pdf"

    [demo.base]                          # RunSpec fields; on top of recipes/defaults.toml
    tsp_step = 0
    [demo.grid]                          # axes (or [[demo.grid]]: several grids, one list)
    method = ["houlsby", "full"]
    seed = [0, 1, 2, 3, 4]

    [paper]                              # the same at the paper's scale; say which table
    params = { n = 1000 }                # optional per-scale parameters, over the recipe's

A recipe may name the user's own data (:mod:`robustkit.data.user_data`) as its task: ``task =
"reviews"`` and ``data_dir = "reviews.csv"`` in ``[<scale>.base]``, a relative path being
relative to the recipe file's folder (or the recipe folder).

``recipes/defaults.toml`` holds each scale's shared settings: ``[<scale>.base]`` (fields every
run of that scale starts from) and ``[<scale>.lr]`` (learning rate per method where a grid sets
none). Runs are identified by their settings alone (:attr:`robustkit.specs.spec.RunSpec.run_id`), so
recipes that need the same run share it: it is trained once in the scale's store.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from robustkit import figures
from robustkit.errors import RobustkitError, did_you_mean
from robustkit.specs.spec import RunSpec
from robustkit.sweeps.grid import expand_grid
from robustkit.verdicts.scales import SCALES

if TYPE_CHECKING:  # claims import the analyses (torch); recipes are read by `--help`
    from robustkit.verdicts.spec import Claim

RECIPE_DIR = Path(__file__).resolve().parents[2] / "recipes"
RECIPE_KEYS = {
    "title": "what the figure shows: its heading",
    "figure": "the registered figure that draws it (`robustkit plot --help` lists them)",
    "params": 'the figure\'s parameters at every scale (`{ split = "validation" }`)',
    "output": "the PDF's file name",
    "claim": "one `[[claim]]` table per paper claim the figure illustrates (its keys: the next table)",
    **{scale: f"the runs at the {scale} scale: a `[{scale}]` section (its keys: the table after)" for scale in SCALES},
}
"""A recipe file's top-level keys and what each holds (docs/recipes.md is generated from it)."""
SCALE_KEYS = {
    "base": "settings every run of the scale starts from, over `defaults.toml`'s `[<scale>.base]`",
    "grid": "`[<scale>.grid]` (or several `[[<scale>.grid]]`): run setting -> values; the runs are each grid's product",
    "params": "the figure's parameters at this scale, over the recipe's `params`",
}
"""A scale section's keys."""


class RecipeError(RobustkitError):
    """A recipe that does not exist or does not parse (the message names the file and key)."""


@dataclass(frozen=True)
class Recipe:
    """One paper figure or table.

    Attributes
    ----------
    name : str
        ``<paper>/<figure>``, e.g. ``han2021/fig2``: the file ``recipes/<name>.toml``.
    title : str
        What the figure shows.
    figure : str
        The registered figure that draws it (:func:`robustkit.figures.get`).
    output : str
        PDF file name (in the figures folder).
    scales : dict
        Scale -> ``{"base": {...}, "grids": [{axis: values}], "params": {...}}``.
    params : dict
        The figure's parameters at every scale.
    claims : tuple of Claim
        The paper's claims the figure illustrates, as checkable hypotheses
        (:class:`robustkit.verdicts.spec.Claim`, from the recipe's ``[[claim]]`` tables).
    swap : tuple of (str, object)
        Settings put in place of the recipe's in every run (``model``, ``task``, ``data_dir``:
        :meth:`swapped`); empty for the recipe as written.
    """

    name: str
    title: str
    figure: str
    output: str
    scales: dict
    params: dict = field(default_factory=dict)
    claims: tuple[Claim, ...] = ()
    swap: tuple = ()

    def swapped(self, **settings) -> Recipe:
        """This recipe with ``settings`` in place of its own in every run at every scale: the
        paper's claims re-judged on another model or on the user's data (``reproduce RECIPE
        --model M --data FILE``). A swapped task's data is fingerprinted anew."""
        given = {k: v for k, v in settings.items() if v is not None}
        if "data_dir" in given:  # spelt as a resolved spec spells it, so the data is read once, not per run
            from robustkit.specs.spec import located

            given["data_dir"] = located(given["data_dir"])
        return dataclasses.replace(self, swap=tuple(sorted({**dict(self.swap), **given}.items())))

    def figure_params(self, scale: str) -> dict:
        """The figure's parameters at ``scale``: the recipe's, overridden by the scale's own."""
        return {**self.params, **self._scale(scale).get("params", {})}

    def specs(self, scale: str, defaults: dict | None = None) -> list[RunSpec]:
        """Every run the figure needs at ``scale`` (distinct, in grid order).

        Parameters
        ----------
        defaults : dict, optional
            Parsed ``defaults.toml`` (default: the one next to the recipes).
        """
        defaults = (load_defaults() if defaults is None else defaults).get(scale, {})
        section = self._scale(scale)
        base = {**defaults.get("base", {}), **section.get("base", {})}
        specs: dict[str, RunSpec] = {}
        for grid in section["grids"]:
            # method by method, each at its [<scale>.lr] rate where the recipe sets none (the
            # grid files' [lr] rule, robustkit.sweeps.grid.expand_grid)
            for method in grid.get("method", [base.get("method", RunSpec.method)]):
                axes = {**grid, "method": [method]}
                for spec in expand_grid({"base": base, "grid": axes}, {"lr": defaults.get("lr", {})}):
                    spec = self._swap(spec)
                    specs.setdefault(spec.run_id, spec)
        return list(specs.values())

    def _swap(self, spec: RunSpec) -> RunSpec:
        if not self.swap:
            return spec
        changes = dict(self.swap)
        if "task" in changes or "data_dir" in changes:
            changes.setdefault("data_fingerprint", None)  # the new data's own, found as it resolves
            # a size larger than the user's data trains on all of it, as a preset's does
            changes["train_size"] = _scaled_train_size({**dataclasses.asdict(spec), **changes})
        return dataclasses.replace(spec, **changes).resolved()

    def _scale(self, scale: str) -> dict:
        if scale not in self.scales:
            raise RecipeError(f"recipe {self.name!r} has no {scale!r} scale; it has: {', '.join(self.scales)}")
        return self.scales[scale]


def list_recipes(folder: str | Path = RECIPE_DIR) -> list[str]:
    """Names of the recipes in ``folder`` (``<paper>/<figure>``), sorted."""
    folder = Path(folder)
    return sorted(str(p.relative_to(folder).with_suffix("")) for p in folder.glob("*/*.toml"))


def recipe_names(recipes, folder: str | Path = RECIPE_DIR, scale: str | None = None) -> list[str]:
    """The recipe names a notebook function was given (``recipes``), or every recipe of
    ``folder`` when it is None (with ``scale``: every recipe that has runs at it, as the cpu
    scale's six).

    ``recipes`` always means names (``["han2021/fig2"]``) and ``recipe_dir`` always the folder
    they are read from, across the notebook API.

    Raises
    ------
    RecipeError
        ``recipes`` is a string or a path (it would be read one character at a time), or holds
        something that is not a string.
    """
    if recipes is None:
        names = list_recipes(folder)
        return names if scale is None else [name for name in names if scale in load_recipe(name, folder).scales]
    if isinstance(recipes, (str, Path)):
        hint = (
            "a folder of recipe files is recipe_dir=" if Path(recipes).is_dir() else f"one recipe is [{str(recipes)!r}]"
        )
        raise RecipeError(
            f"recipes takes a list of recipe names such as ['han2021/fig2'], got the "
            f"{type(recipes).__name__} {str(recipes)!r}; {hint}"
        )
    names = list(recipes)
    bad = [name for name in names if not isinstance(name, str)]
    if bad:
        raise RecipeError(f"recipes takes recipe names (strings such as 'han2021/fig2'), got {bad[0]!r}")
    return names


def load_recipe(name: str, folder: str | Path = RECIPE_DIR) -> Recipe:
    """Read and check ``<folder>/<name>.toml``.

    Raises
    ------
    RecipeError
        Unknown recipe (the known ones are listed), invalid TOML, or a missing/unknown key.
    """
    path = Path(folder) / f"{name}.toml"
    if not path.is_file():
        names = list_recipes(folder)
        known = ", ".join(names) or "none"
        raise RecipeError(f"unknown recipe {name!r}{did_you_mean(name, names)} (no {path}); known recipes: {known}")
    raw = _read_toml(path)
    unknown = sorted(set(raw) - set(RECIPE_KEYS))
    missing = sorted({"title", "figure", "output"} - set(raw))
    if unknown or missing:
        raise RecipeError(f"recipe {path}: unknown key(s) {unknown}, missing key(s) {missing}")
    scales = {scale: _scale_section(path, scale, raw[scale]) for scale in SCALES if scale in raw}
    for section in scales.values():  # the user's data next to the recipe: found from any working folder
        section["base"] = _data_beside(section["base"], path.parent, Path(folder))
    if not scales:
        raise RecipeError(f"recipe {path} defines no scale; expected a [demo] and/or [paper] section")
    claims = raw.get("claim", [])
    claims = [claims] if isinstance(claims, dict) else claims
    from robustkit.verdicts.spec import Claim
    from robustkit.verdicts.tally import parameters as claim_parameters

    parsed = tuple(Claim.from_table(table, f"recipe {path}") for table in claims)
    if len({c.id for c in parsed}) != len(parsed):
        raise RecipeError(f"recipe {path}: claim ids must be unique, got {[c.id for c in parsed]}")
    recipe = Recipe(
        name=name,
        title=raw["title"],
        figure=raw["figure"],
        output=raw["output"],
        scales=scales,
        params=dict(raw.get("params", {})),
        claims=parsed,
    )
    try:  # a misspelt figure or parameter fails now, not after hours of training
        figure = figures.get(recipe.figure)
        for scale in scales:
            figure.resolve(**recipe.figure_params(scale))
            for item in parsed:
                claim_parameters(item, recipe.figure, recipe.figure_params(scale))
    except RobustkitError as error:
        raise RecipeError(f"recipe {path}: {error}") from None
    return recipe


def load_defaults(folder: str | Path = RECIPE_DIR) -> dict:
    """``defaults.toml`` of a recipe folder (empty when there is none)."""
    path = Path(folder) / "defaults.toml"
    return _read_toml(path) if path.is_file() else {}


def preset(name: str, folder: str | Path | None = None) -> dict:
    """A scale of ``defaults.toml`` as the settings ``train --preset`` and ``sweep --preset``
    start from: ``{"base": {field: value}, "lr": {method: rate}}``.

    ``demo`` is the calibrated demo scale (minilm-l6 on rt, 1k examples, 3 epochs, length 64,
    each method at its calibrated rate: ``recipes/README.md``), minutes per run on a CPU;
    ``paper`` the papers' model, every other setting the papers' defaults.

    Raises
    ------
    RecipeError
        ``name`` is no scale of ``defaults.toml`` (the known ones are named).
    """
    folder = RECIPE_DIR if folder is None else folder  # read now: a notebook (or a test) may point it elsewhere
    scales = load_defaults(folder)
    if name not in scales:
        raise RecipeError(
            f"unknown preset {name!r}; known presets: {', '.join(scales) or 'none'} "
            f"(the scales of {Path(folder) / 'defaults.toml'})"
        )
    return {"base": dict(scales[name].get("base", {})), "lr": dict(scales[name].get("lr", {}))}


def preset_spec(name: str, recipe_dir: str | Path | None = None, **fields) -> RunSpec:
    """A run at preset ``name`` with ``fields`` over it: what ``robustkit train --preset`` trains.

    ``preset_spec("demo", method="lora", seed=2)`` is minilm-l6 on rt at the calibrated demo
    settings, LoRA at its calibrated rate (:func:`preset`); a field given wins over the preset,
    and a method without a preset rate (and no ``lr`` given) takes its paper default. On the
    user's own data the preset's ``train_size`` is capped at the data: smaller data trains on
    all of it (:func:`_scaled_train_size`).

    Raises
    ------
    RecipeError
        An unknown preset.
    """
    from robustkit.errors import MethodError
    from robustkit.methods.registry import get_method

    chosen = preset(name, recipe_dir)
    given = fields
    fields = {**chosen["base"], **fields}
    if "train_size" not in given:
        fields["train_size"] = _scaled_train_size(fields)
    try:
        method = get_method(fields.get("method", RunSpec.method)).name
    except MethodError:
        method = None  # the spec names it when it is resolved
    if "lr" not in fields and method in chosen["lr"]:
        fields["lr"] = chosen["lr"][method]
    return RunSpec(**fields)


def _data_beside(base: dict, *folders: Path) -> dict:
    """``base`` with a relative ``data_dir`` (a recipe naming the user's own data, e.g.
    ``data_dir = "reviews.csv"``) taken relative to the first of ``folders`` (the recipe file's
    folder, then the recipe folder) where it exists; else as it is (the working folder).
    Column choices (``#text=...``) and ``hub:`` names are kept as they are."""
    data_dir = base.get("data_dir")
    if not isinstance(data_dir, str) or data_dir.startswith("hub:") or Path(data_dir).is_absolute():
        return base
    location, sep, choices = data_dir.partition("#")
    for folder in folders:
        if (folder / location).exists():
            return {**base, "data_dir": str(folder / location) + sep + choices}
    return base


def _scaled_train_size(fields: dict):
    """A preset's ``train_size`` scaled to the data: the user's own data (a task of
    :mod:`robustkit.data.user_data`) with fewer training examples than the preset's N trains on all
    of them. Built-in tasks keep the preset's N (their data is known to hold it)."""
    size = fields.get("train_size")
    if not isinstance(size, int) or isinstance(size, bool):
        return size
    from robustkit.data import tasks, user_data

    task = tasks.get_task(fields.get("task", RunSpec.task), fields.get("data_dir"))
    if task.source != "user":
        return size
    available = len(user_data.ensure(task.name, fields.get("data_dir")).splits["train"])
    return None if size >= available else size


def _scale_section(path: Path, scale: str, section: dict) -> dict:
    unknown = sorted(set(section) - set(SCALE_KEYS))
    if unknown:
        raise RecipeError(f"recipe {path}: unknown key(s) {unknown} in [{scale}]; known: {sorted(SCALE_KEYS)}")
    grids = section.get("grid", [{}])
    grids = [grids] if isinstance(grids, dict) else grids
    return {"base": section.get("base", {}), "grids": grids, "params": dict(section.get("params", {}))}


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as error:
        raise RecipeError(f"{path} is not valid TOML: {error}") from None
