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
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

import pandas as pd

from robustkit import figures as registry
from robustkit.errors import RobustkitError
from robustkit.progress import bar as progress_bar
from robustkit.store import collapse
from robustkit.store.folders import open_store
from robustkit.store.tables import load_runs
from robustkit.sweeps.grid import run_sweep
from robustkit.verdicts import tally
from robustkit.verdicts.recipes import (
    RECIPE_DIR,
    Recipe,
    RecipeError,
    list_recipes,
    load_defaults,
    load_recipe,
    recipe_names,
)
from robustkit.verdicts.rules import VERDICT_COLUMNS
from robustkit.verdicts.spec import Claim

# The project's own rendered figures (tracked in git): written only when asked for by name
# (``reproduce --figures results``); every other run of reproduce writes beside its store.
FIGURES_DIR = Path("results")
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


def default_store(scale: str) -> Path:
    """Where a scale's runs live unless told otherwise: ``runs/<scale>``."""
    return Path("runs") / scale


def default_figures(store: str | Path) -> Path:
    """Where reproduce writes a store's figures and verdicts unless told otherwise: beside the
    store, ``<store>-figures`` (``runs/demo`` -> ``runs/demo-figures``), so that a checkout's
    tracked ``results/`` changes only when a command names it."""
    store = Path(store)
    name = store.name or store.resolve().name  # "runs/" and "." have a name too
    return store.parent / f"{name}-figures"


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
        path = Path(figures) / "claims.csv"
        if path.is_file():  # keep the verdicts of the recipes not drawn this time
            earlier = pd.read_csv(path)
            verdicts = pd.concat(
                [earlier[~earlier["recipe"].isin([r.name for r in chosen])], verdicts], ignore_index=True
            )
        Path(figures).mkdir(parents=True, exist_ok=True)
        verdicts.to_csv(path, index=False)
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


def claim_recipes(
    store: str | Path,
    recipes: list[str] | None = None,
    scale: str = "demo",
    recipe_dir: str | Path = RECIPE_DIR,
    swap: dict | None = None,
) -> list[Recipe]:
    """The recipes ``claims`` judges on ``store``, each with the swap its runs there were trained
    with: the one ``reproduce --model/--data/--task`` recorded in the store
    (:mod:`robustkit.store.swaps`), or ``swap`` (``model``, ``task``, ``data_dir``) where given.
    Says in one logged line per swap which one it applied.

    A given ``swap`` that agrees with a recorded one (same settings; a data file that moved counts
    as the same where its content is) applies the record; one that agrees with none overrides the
    record, said in the line.

    Raises
    ------
    RobustkitError
        Two recorded swaps of a recipe that ``swap`` does not tell apart (no silent pick), or a
        recorded data file that is not there any more.
    """
    from robustkit.specs.spec import located
    from robustkit.store import swaps

    given = {k: v for k, v in (swap or {}).items() if v is not None}
    chosen, said = [], {}
    for name in recipe_names(recipes, recipe_dir, scale):
        recipe = load_recipe(name, recipe_dir)
        records = swaps.swaps_of(store, name, scale) if scale in recipe.scales else []
        matching = [r for r in records if _agrees(r, given)] if given else records
        if len(matching) > 1:
            options = "; ".join(f"({i}) {_swap_words(r['swap'])}" for i, r in enumerate(matching, 1))
            raise RobustkitError(
                f"{store} holds runs of {name} at {scale} scale from {len(matching)} swaps: {options}; "
                f"say which with claims --model/--data/--task (recorded in {swaps.swap_file(store)})"
            )
        if matching:
            record = matching[0]
            settings = {**record["swap"], "data_fingerprint": record.get("data_fingerprint")}
            note = f"applied the swap `reproduce` recorded in {swaps.swap_file(store)}: {_swap_words(record['swap'])}"
            if "data_dir" in given and located(given["data_dir"]) != record["swap"].get("data_dir"):
                settings["data_dir"] = given["data_dir"]  # the same content, moved: read where it is now
                note += f", its data now at {given['data_dir']}"
            else:
                note += _data_changed(record)
        elif given:
            settings = {**(records[0]["swap"] if len(records) == 1 else {}), **given}
            note = f"applied {_swap_words(settings)} as given" + (
                f", over the swap `reproduce` recorded ({_swap_words(records[0]['swap'])})"
                if len(records) == 1
                else f": it is none of the {len(records)} swaps recorded in {swaps.swap_file(store)}"
                if records
                else f" ({store} records no swap of {name})"
            )
        else:
            chosen.append(recipe)
            continue
        if settings.get("data_dir"):
            _data_there(settings["data_dir"], name, store)
        recipe = recipe.swapped(**settings)
        if not matching:  # a swap no record names: its runs must be there, or each claim would say "no data"
            _runs_there(recipe, scale, recipe_dir, store, records, settings)
        chosen.append(recipe)
        said.setdefault(note, []).append(name)
    for note, names in said.items():
        log.info(f"{', '.join(names)}: {note}")
    return chosen


def _agrees(record: dict, given: dict) -> bool:
    """Whether the settings ``given`` to ``claims`` name the recorded swap: every given setting
    equal, a data file by its place or, once moved, by its content (sha256)."""
    from robustkit.specs.spec import located

    recorded = record["swap"]
    for key, value in given.items():
        if key == "data_dir":
            if located(value) == recorded.get("data_dir"):
                continue
            if record.get("data_sha256") and _file_sha256(value) == record["data_sha256"]:
                continue
            return False
        elif key == "task" and "data_dir" in given:
            continue  # the task of given data is the file's name; its data decides
        elif recorded.get(key) != value:
            return False
    return True


def _file_sha256(data_dir: str) -> str | None:
    """The sha256 of a data file (``#column`` choices left out); None for a folder, the hub or nothing."""
    from robustkit.store.atomic import sha256_file

    location = str(data_dir).partition("#")[0]
    return sha256_file(Path(location)) if not location.startswith("hub:") and Path(location).is_file() else None


def _runs_there(recipe: Recipe, scale: str, recipe_dir, store, records: list[dict], settings: dict) -> None:
    """Refuse a swap given to ``claims`` of which ``store`` holds no run (a mistyped model or task)."""
    from robustkit.store.folders import MANIFEST

    if scale not in recipe.scales:
        return
    run_ids = [spec.run_id for spec in recipe.specs(scale, load_defaults(recipe_dir))]
    if any((Path(store) / run_id / MANIFEST).is_file() for run_id in run_ids):
        return
    recorded = "; ".join(_swap_words(r["swap"]) for r in records)
    raise RobustkitError(
        f"{store} holds no run of {recipe.name} with {_swap_words(settings)} "
        + (f"(its runs of it have: {recorded})" if records else "(it records no swap of it)")
        + f": check --model/--data/--task, or train them with `robustkit reproduce {recipe.name}"
        f"{swap_flags(settings)} --store {store}`"
    )


def _data_there(data_dir: str, name: str, store: str | Path) -> None:
    location = str(data_dir).partition("#")[0]
    if not location.startswith("hub:") and not Path(location).exists():
        raise RobustkitError(
            f"{location}, the data {name}'s runs in {store} were trained on, is not there any more (moved or "
            "deleted?): give its new place with claims --data FILE"
        )


def _data_changed(record: dict) -> str:
    """``"; but mine.csv changed since ..."`` where the recorded data file's content is not what the runs read."""
    data_dir = record["swap"].get("data_dir")
    if not data_dir or not record.get("data_sha256"):
        return ""
    now = _file_sha256(data_dir)
    if now is None or now == record["data_sha256"]:
        return ""
    return (
        f"; {data_dir.partition('#')[0]} changed since these runs trained on it: judged on the runs as trained "
        "(`reproduce` again trains on the new data)"
    )


def _swap_words(swap: dict) -> str:
    """``"model bert-tiny, data /home/me/mine.csv (task mine)"``: a swap in one phrase."""
    parts = [f"model {swap['model']}"] if swap.get("model") else []
    if swap.get("data_dir"):
        parts.append(f"data {swap['data_dir']}" + (f" (task {swap['task']})" if swap.get("task") else ""))
    elif swap.get("task"):
        parts.append(f"task {swap['task']}")
    return ", ".join(parts) or "no swap"


def swap_flags(swap: dict | None) -> str:
    """The ``reproduce`` options that make ``swap``: ``" --model bert-tiny --data /home/me/mine.csv"``
    (a data file's task is its name, so ``--task`` only for a built-in task); "" for none."""
    import shlex

    from robustkit.specs.spec import located

    swap = {k: v for k, v in (swap or {}).items() if v is not None}
    flags = [f"--model {shlex.quote(str(swap['model']))}"] if "model" in swap else []
    if "data_dir" in swap:
        flags.append(f"--data {shlex.quote(located(swap['data_dir']))}")
    elif "task" in swap:
        flags.append(f"--task {shlex.quote(str(swap['task']))}")
    return "".join(" " + flag for flag in flags)


def reproduce_command(names: list[str], scale: str, swap: dict | None = None, store=None, figures=None) -> str:
    """The ``robustkit reproduce`` command that makes ``names``' figures with ``swap`` into ``store``
    (named where there is a swap: swapped runs need their own store) and ``figures``."""
    import shlex

    where = f" --store {shlex.quote(str(store))}" if store is not None and swap else ""
    where += f" --figures {shlex.quote(str(figures))}" if figures is not None else ""
    return f"robustkit reproduce {' '.join(names)} --scale {scale}{swap_flags(swap)}{where}"


def _record_swaps(store: Path, chosen: list[Recipe], scale: str, needed: dict) -> None:
    """Record each swapped recipe's swap in the store (:mod:`robustkit.store.swaps`) for ``claims``,
    where the store holds a run of it (a swap refused before training, a model that is not there,
    records nothing)."""
    from robustkit.store import swaps
    from robustkit.store.folders import MANIFEST

    for recipe in chosen:
        specs = needed[recipe.name]
        if not any((store / spec.run_id / MANIFEST).is_file() for spec in specs):
            continue
        swap = dict(recipe.swap)
        fingerprints = {spec.data_fingerprint for spec in specs}
        swaps.record_swap(
            store,
            recipe.name,
            scale,
            swap,
            [spec.run_id for spec in specs],
            data_fingerprint=fingerprints.pop() if len(fingerprints) == 1 else None,
            data_sha256=_file_sha256(swap["data_dir"]) if swap.get("data_dir") else None,
            command=reproduce_command([recipe.name], scale, swap, store),
        )


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
