"""What a swapped ``reproduce`` put in place of each recipe's settings, kept in its store.

``robustkit reproduce RECIPE --model M --data FILE --store S`` trains the recipe's runs on the
user's model and data; their run ids say so, but the recipe alone does not. ``S/swaps.json``
records, per recipe and scale, what was swapped, so that ``robustkit claims RECIPE --store S``
judges the same runs without being told again::

    {"version": 1, "swaps": [
      {"recipe": "houlsby2019/fig6-ablation", "scale": "demo",
       "swap": {"model": "bert-tiny", "task": "mine", "data_dir": "/home/me/mine.csv"},
       "data_fingerprint": "user:sha256:...",   # what the runs' ids hold (robustkit.data.tasks)
       "data_sha256": "...",                     # the data file's own sha256 (None: a folder or the hub)
       "run_ids": ["mine-houlsby-bert-tiny-s0-...", ...],
       "command": "robustkit reproduce houlsby2019/fig6-ablation --scale demo --model bert-tiny ..."}]}

One entry per recipe, scale and swap (model, task, data location): the same swap reproduced again
replaces its entry (new data in the same file: new runs, a new fingerprint); another swap of the
same recipe adds one, and then ``claims`` asks which. Written atomically
(:mod:`robustkit.store.atomic`); a store without the file holds no swapped runs.
"""

from __future__ import annotations

import json
from pathlib import Path

from robustkit.errors import StoreError
from robustkit.store.atomic import atomic_write_bytes

SWAP_FILE = "swaps.json"
VERSION = 1


def swap_file(store: str | Path) -> Path:
    """``<store>/swaps.json``."""
    return Path(store) / SWAP_FILE


def read_swaps(store: str | Path) -> list[dict]:
    """Every recorded swap of ``store`` (empty where none was recorded).

    Raises
    ------
    StoreError
        The file is there but is no swap record (edited by hand, or another tool's).
    """
    path = swap_file(store)
    if not path.is_file():
        return []
    try:
        raw = json.loads(path.read_text())
        entries = raw["swaps"]
        if not isinstance(entries, list) or not all(isinstance(e, dict) and "recipe" in e for e in entries):
            raise ValueError("'swaps' is not a list of entries with a recipe")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise StoreError(
            f"{path} is no swap record ({error}): remove it and run `robustkit reproduce` with your --model/--data "
            "again (it trains nothing that is complete)"
        ) from None
    return entries


def swaps_of(store: str | Path, recipe: str, scale: str) -> list[dict]:
    """The recorded swaps of one recipe at one scale, oldest first."""
    return [e for e in read_swaps(store) if e["recipe"] == recipe and e.get("scale") == scale]


def record_swap(
    store: str | Path,
    recipe: str,
    scale: str,
    swap: dict,
    run_ids: list[str],
    data_fingerprint: str | None = None,
    data_sha256: str | None = None,
    command: str = "",
) -> Path:
    """Record that ``recipe``'s runs at ``scale`` in ``store`` take ``swap`` (``model``, ``task``,
    ``data_dir``: :meth:`robustkit.verdicts.recipes.Recipe.swapped`), replacing an entry of the same
    recipe, scale and swap. Returns the record's path."""
    swap = {k: v for k, v in sorted(swap.items()) if v is not None and k != "data_fingerprint"}
    entries = [e for e in read_swaps(store) if (e["recipe"], e.get("scale"), e.get("swap")) != (recipe, scale, swap)]
    entries.append(
        {
            "recipe": recipe,
            "scale": scale,
            "swap": swap,
            "data_fingerprint": data_fingerprint,
            "data_sha256": data_sha256,
            "run_ids": list(run_ids),
            "command": command,
        }
    )
    path = swap_file(store)
    atomic_write_bytes(path, (json.dumps({"version": VERSION, "swaps": entries}, indent=1) + "\n").encode())
    return path
