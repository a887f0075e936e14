"""A swap between ``reproduce`` and ``claims``: the record ``reproduce --model/--data/--task``
leaves in a store (:mod:`robustkit.store.swaps`), the recipes ``claims`` judges on a store with
the swap their runs were trained with, and the ``reproduce`` command that makes a swap's figures.
"""

from __future__ import annotations

import logging
from pathlib import Path

from robustkit.errors import RobustkitError
from robustkit.verdicts.recipes import RECIPE_DIR, Recipe, load_defaults, load_recipe, recipe_names

log = logging.getLogger(__name__)


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
