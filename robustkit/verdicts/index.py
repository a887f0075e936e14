"""What ``reproduce`` writes beside the figures: ``claims.csv`` (:func:`write_claims`, its columns
:data:`robustkit.verdicts.tally.TABLE_COLUMNS`) and the ``README.md`` index (:func:`write_index`)
that lists per figure the model/task used, runs per group, collapsed runs, the verdicts and what
differs from the paper's settings."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from robustkit import figures as registry
from robustkit.store import collapse
from robustkit.store.tables import load_runs
from robustkit.verdicts.drawing import _paper_label, subtitle
from robustkit.verdicts.places import default_store
from robustkit.verdicts.recipes import RECIPE_DIR, Recipe, list_recipes, load_defaults, load_recipe
from robustkit.verdicts.spec import Claim
from robustkit.verdicts.swapping import reproduce_command
from robustkit.verdicts.verdict import VERDICT_COLUMNS


def write_claims(figures: str | Path, verdicts: pd.DataFrame, recipes: list[str]) -> pd.DataFrame:
    """``<figures>/claims.csv``: ``verdicts`` (:func:`robustkit.verdicts.tally.verdicts` rows) and
    the rows already there of the recipes not among ``recipes`` (the names judged this time).

    Returns
    -------
    DataFrame
        The rows written.
    """
    path = Path(figures) / "claims.csv"
    if path.is_file():  # keep the verdicts of the recipes not drawn this time
        earlier = pd.read_csv(path)
        verdicts = pd.concat([earlier[~earlier["recipe"].isin(recipes)], verdicts], ignore_index=True)
    Path(figures).mkdir(parents=True, exist_ok=True)
    verdicts.to_csv(path, index=False)
    return verdicts


def _given(swap: dict | None) -> bool:
    return any(v is not None for v in (swap or {}).values())


def _swapped_text(swap: dict | None) -> list[str]:
    """The index's line saying what was put in place of the recipes' settings, if anything."""
    given = {k: v for k, v in (swap or {}).items() if v is not None}
    if not given:
        return []
    said = ", ".join(f"{k} = {v}" for k, v in sorted(given.items()))
    return [
        f"**Swapped:** every run here has {said} in place of the recipe's settings (`reproduce --model/--data/"
        "--task`): the papers' claims re-judged on this setting, not on the papers'.",
        "",
    ]


def write_index(
    figures: str | Path,
    scale: str,
    recipe_dir: str | Path = RECIPE_DIR,
    store: str | Path | None = None,
    verdicts: pd.DataFrame | None = None,
    swap: dict | None = None,
) -> Path:
    """``<figures>/README.md``: every recipe whose PDF is in ``figures``, with its paper figure,
    what it shows, the model/task used, the runs per group, the collapsed runs, the verdict of
    each claim, what differs from the paper's settings and the command that made it.

    Parameters
    ----------
    store : path, optional
        The scale's run store, for the collapsed runs (default ``runs/<scale>``).
    verdicts : DataFrame, optional
        :func:`robustkit.verdicts.tally.verdicts` rows of the recipes (default: ``<figures>/claims.csv``).
    swap : dict, optional
        The settings put in place of the recipes' (:func:`reproduce`'s ``swap``): said at the top.

    Returns
    -------
    Path
        The index file.
    """
    figures = Path(figures)
    store = Path(store) if store is not None else default_store(scale)
    if verdicts is None:
        path = figures / "claims.csv"
        verdicts = pd.read_csv(path) if path.is_file() else pd.DataFrame(columns=VERDICT_COLUMNS)
    runs = load_runs(store) if store.is_dir() else pd.DataFrame(columns=["run_id"])
    units = _units(recipe_dir, scale)
    repeats = {(r, c): same for r, c, same in zip(units["recipe"], units["claim"], units["same_as"]) if same}
    defaults = load_defaults(recipe_dir)
    path = figures / "README.md"
    shown = []  # (recipe as drawn, its specs): the index's rows
    for name in list_recipes(recipe_dir):
        recipe = load_recipe(name, recipe_dir).swapped(**(swap or {}))
        if scale in recipe.scales and (figures / recipe.output).is_file():
            shown.append((recipe, recipe.specs(scale, defaults)))
    # a swap's figures are remade by naming them and the swap (--all would draw every recipe)
    made = (
        reproduce_command([r.name for r, _ in shown], scale, swap, store, figures)
        if _given(swap)
        else f"robustkit reproduce --all --scale {scale} --figures {figures}"
    )
    lines = [
        "# Figures",
        "",
        f"Made by `{made}` from the recipes in `recipes/` "
        "(each file cites the paper's table its settings come from). Re-running the command only "
        f"trains and analyses what is missing. Failed runs ({collapse.FAILED_WORDS}, see "
        "`robustkit/store/collapse.py`) are marked in every figure and never plotted as results; each "
        "claim says whether its test leaves them out or, for claims about failing, counts them as "
        "data (the `failures` column of claims.csv). Each "
        "claim's verdict (agrees / contradicts / inconclusive) is computed from the figure's runs "
        "by `robustkit claims`; every row is in [claims.csv](claims.csv). Each verdict gives its "
        "reason class when inconclusive, the runs per group (n; a claim tested in several cells, "
        "such as layers of the same runs, gives its runs and its cells), and the effect its test detects "
        'with 80% power at those runs ("detects", in the unit `robustkit claims --plan` prints: '
        "a shift or margin in SDs over seeds, an SD ratio, or a failure rate). Evidence is counted "
        "once (`robustkit/verdicts/evidence.py`): claims that share a run are one evidence unit, and a claim "
        "that re-tests an earlier claim's observations (same runs, statistic, groups and cells) says so.",
        "",
        *_swapped_text(swap),
        *_tally(verdicts, recipe_dir, scale, units),
        "| file | paper | what it shows | model / task used | runs per group | collapsed | verdicts | differs from "
        "the paper | command |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    before = _index_rows(path)
    for recipe, specs in shown:
        name = recipe.name
        judged = verdicts[verdicts["recipe"] == name] if len(verdicts) else verdicts
        collapsed = _collapsed(recipe, scale, specs, runs)
        stored = len({spec.run_id for spec in specs} & set(runs["run_id"]))
        if stored < len({spec.run_id for spec in specs}):
            if recipe.output in before:  # drawn from a store that held its runs: keep its count
                collapsed = before[recipe.output][COLLAPSED_CELL]
            elif stored:
                collapsed += f"; only {stored} of its {len(specs)} runs are in {store}"
        cells = [
            f"[{recipe.output}]({recipe.output})",
            _paper_label(name),
            recipe.title,
            subtitle(recipe, scale, defaults),
            _per_group(specs),
            collapsed,
            _verdict_cell(
                judged,
                {c.id: c.alpha for c in recipe.claims},
                {c: s for (r, c), s in repeats.items() if r == name},
                {c.id: c.quantifier for c in recipe.claims},
            ),
            _differences(recipe, scale, defaults),
            f"`{reproduce_command([name], scale, swap, store)}`",
        ]
        lines.append("| " + " | ".join(c.replace("|", "/").replace("\n", "<br>") for c in cells) + " |")
    figures.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


COLLAPSED_CELL = 5  # the index's "collapsed" column


def _units(recipe_dir: str | Path, scale: str) -> pd.DataFrame:
    """:func:`robustkit.verdicts.evidence.units` of every recipe of ``recipe_dir`` that has ``scale``."""
    from robustkit.verdicts import evidence

    chosen = [load_recipe(name, recipe_dir) for name in list_recipes(recipe_dir)]
    return evidence.units([r for r in chosen if scale in r.scales], scale, load_defaults(recipe_dir))


def _tally(verdicts: pd.DataFrame, recipe_dir: str | Path, scale: str, frame: pd.DataFrame | None = None) -> list[str]:
    """The tally paragraph of the index: how many claims, in how many evidence units
    (:mod:`robustkit.verdicts.evidence`), and which claims re-test another's observations.

    ``frame``: :func:`_units` of the recipes, when already computed.
    """
    from robustkit.verdicts import evidence

    if not len(verdicts) or "recipe" not in verdicts:
        return []
    frame = _units(recipe_dir, scale) if frame is None else frame
    known = verdicts[verdicts["recipe"].isin(set(frame["recipe"]))]
    if not len(known):
        return []
    lines = [evidence.tally_line(known, frame) + "."]
    chance = evidence.chance_line(known, frame)
    if chance:
        lines.append(chance + ".")
    judged = set(zip(known["recipe"], known["claim"]))
    repeats = [
        f"{recipe}/{name} re-tests {same}"
        for recipe, name, same in zip(frame["recipe"], frame["claim"], frame["same_as"])
        if same and (recipe, name) in judged
    ]
    if repeats:
        lines.append("Same observations (same runs, statistic, groups and cells): " + "; ".join(repeats) + ".")
    return [" ".join(lines), ""]


def _index_rows(path: Path) -> dict[str, list[str]]:
    """The cells of an existing index's figure rows, by figure file (empty when there is none)."""
    rows = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.startswith("| [") and "](" in line:
                cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
                rows[cells[0][1 : cells[0].index("]")]] = cells
    return rows


def _per_group(specs) -> str:
    """``"houlsby 5, full 5"``: runs per method."""
    counts = pd.Series([spec.method for spec in specs]).value_counts(sort=False)
    return ", ".join(f"{method} {n}" for method, n in counts.items())


def _scored(recipe: Recipe, scale: str) -> tuple[str, str]:
    """The checkpoint and split a recipe's figure scores (its parameters; default best, test)."""
    values = registry.get(recipe.figure).resolve(**recipe.figure_params(scale))
    return values.get("checkpoint", "best"), values.get("split", "test")


def _collapsed(recipe: Recipe, scale: str, specs, runs: pd.DataFrame) -> str:
    """``"houlsby 0/5, full 2/5 (last/validation)"`` from the runs' recorded outcomes."""
    checkpoint, split = _scored(recipe, scale)
    column = f"outcome/{checkpoint}/{split}"
    mine = runs[runs["run_id"].isin([spec.run_id for spec in specs])]
    if mine.empty or column not in mine:
        return "not recorded"
    failed = (mine[column].notna() & (mine[column] != "ok")).groupby(mine["method"]).agg(["sum", "size"])
    order = [m for m in dict.fromkeys(spec.method for spec in specs) if m in failed.index]  # as in _per_group
    return (
        ", ".join(f"{m} {int(failed.loc[m, 'sum'])}/{int(failed.loc[m, 'size'])}" for m in order)
        + f" ({checkpoint}/{split})"
    )


def _verdict_cell(
    judged: pd.DataFrame,
    alpha: dict[str, float] | None = None,
    same_as: dict[str, str] | None = None,
    quantifiers: dict[str, str | None] | None = None,
) -> str:
    """Per claim: the verdict, its reason class, the runs per group (and cells:
    :func:`robustkit.verdicts.evidence.n_text`), the effect the test detects with 80% power at the
    claim's level after Holm's correction over its cells
    (:func:`robustkit.verdicts.decidability.cells_detectable_effect`), the reason and the
    replication reading against the paper's effect (:func:`robustkit.verdicts.replication.short`).

    ``alpha``: each claim's alpha by claim id (default: :class:`robustkit.verdicts.spec.Claim`'s);
    ``quantifiers``: each claim's quantifier by id (default ``any``: the level after Holm).
    ``same_as``: claim id -> the earlier ``recipe/claim`` whose observations it re-tests
    (:func:`robustkit.verdicts.evidence.units`); said after the reason.
    """
    from robustkit.verdicts.decidability import UNITS, cells_detectable_effect
    from robustkit.verdicts.evidence import n_text
    from robustkit.verdicts.replication import short

    alpha, same_as, quantifiers = alpha or {}, same_as or {}, quantifiers or {}

    if judged.empty:
        return "no claim"
    texts = []
    for name, rows in judged.groupby("claim", sort=False):
        row = rows.iloc[-1]
        kind = row["compare"]  # not row.compare: that is pandas' Series.compare method
        cells = rows if len(rows) == 1 else rows.iloc[:-1]
        sizes = [(int(a), int(b)) for a, b in zip(cells["n_a"], cells["n_b"])]
        detectable = (
            cells_detectable_effect(kind, sizes, alpha.get(name, Claim.alpha), quantifiers.get(name, "any"))
            if kind in UNITS
            else float("nan")
        )
        effect = f"; detects {detectable:g} {UNITS[kind]}" if pd.notna(detectable) else ""
        reason_class = row.get("reason_class", "") if isinstance(row.get("reason_class", ""), str) else ""
        n = n_text(rows)  # runs, and the cells where there are several
        again = f"; same observations as {same_as[name]}" if same_as.get(name) else ""
        read = short(row)  # against the paper's effect (robustkit.verdicts.replication)
        texts.append(
            f"**{row['verdict']}** ({name}: {f'{reason_class}; ' if reason_class else ''}{n}{effect}; "
            f"{row['reason']}{again}){f'; replication: {read}' if read else ''}"
        )
    return "<br>".join(texts)


_COMPARED = ("model", "task", "train_size", "epochs", "batch_size", "max_length", "lr")


def _differences(recipe: Recipe, scale: str, defaults: dict) -> str:
    """Run settings that differ between ``scale`` and the recipe's paper scale (derived from the
    specs, so it cannot drift from them), and the number of seeds per group."""
    if scale == "paper" or "paper" not in recipe.scales:
        return ""
    ours, paper = recipe.specs(scale, defaults), recipe.specs("paper", defaults)
    texts = []

    def shown(value) -> str:
        return (
            "all" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
        )  # None: the whole set

    def ordered(values: set) -> list[str]:  # numbers by value, then text
        return [
            shown(v)
            for v in sorted(
                values, key=lambda v: (not isinstance(v, (int, float)), v if isinstance(v, (int, float)) else 0, str(v))
            )
        ]

    for field in _COMPARED:
        mine = ordered({getattr(s, field) for s in ours})
        theirs = ordered({getattr(s, field) for s in paper})
        if mine != theirs:
            texts.append(f"{field} {', '.join(mine)} (paper {', '.join(theirs)})")
    seeds = (len({s.seed for s in ours}), len({s.seed for s in paper}))
    if seeds[0] != seeds[1]:
        texts.append(f"{seeds[0]} seed{'s' * (seeds[0] > 1)} (paper {seeds[1]})")
    return "; ".join(texts)
