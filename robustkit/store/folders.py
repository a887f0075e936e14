"""The store's layout: the file names of a run folder, the store folder and its run folders.

See :mod:`robustkit.store` for the layout of a run folder.
"""

from __future__ import annotations

from pathlib import Path

from robustkit.errors import StoreError

MANIFEST = "manifest.json"
HISTORY = "history.parquet"
GRADNORMS = "gradnorms.parquet"
CHECKPOINTS = "checkpoints"
MODEL_FILE = "model.safetensors"
# Where `robustkit verify --repair` moves damaged runs (hidden, like .cache: not a run folder).
DAMAGED_DIR = ".damaged"
# What can be computed again from the runs (analysis frames, the readers' verified hashes).
CACHE_DIR = ".cache"


def open_store(store: str | Path, create: bool = True) -> Path:
    """Check (and create) a store folder.

    Raises
    ------
    StoreError
        If the path is a file, or does not exist and ``create`` is False.
    """
    path = Path(store).expanduser()
    if path.exists() and not path.is_dir():
        raise StoreError(f"store path {str(store)!r} is a file, not a folder of runs")
    if not path.exists():
        if not create:
            raise StoreError(f"store {str(store)!r} does not exist")
        path.mkdir(parents=True)
    return path


def run_dirs(store: str | Path) -> list[Path]:
    """Every run folder (one holding a manifest) in the store, sorted by name."""
    root = open_store(store, create=False)
    return sorted(p.parent for p in root.glob(f"*/{MANIFEST}") if not p.parent.name.startswith("."))


# What a run folder holds besides its manifest: left without one, the folder is damaged.
RUN_FILES = (CHECKPOINTS, HISTORY, GRADNORMS)


def run_folders(store: str | Path) -> list[Path]:
    """Every folder of the store that holds a run or what is left of one (a manifest, or
    checkpoints or logs without it), sorted by name. Hidden folders (``.cache``, ``.damaged``,
    ``.slurm``) are not runs; a folder holding only a ``.lock`` (a run that never started) is
    not either."""
    root = open_store(store, create=False)
    return sorted(
        p for p in root.iterdir()
        if p.is_dir() and not p.name.startswith(".") and any((p / n).exists() for n in (MANIFEST, *RUN_FILES))
    )


def repair_hint(run_dir: Path) -> str:
    """What to do about a damaged run (the advice of :class:`DamagedRunError`)."""
    root = Path(run_dir).parent
    return (f"`robustkit verify {root} --repair` moves it to {root / DAMAGED_DIR}/ and the next sweep "
            "trains it again")
