"""The store's layout: the file names of a run folder, the store folder and its run folders.

See :mod:`robustkit.store` for the layout of a run folder.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

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


@contextlib.contextmanager
def new_store(store: str | Path) -> Iterator[Path]:
    """The store folder (:func:`open_store`, created if missing) for a block that may be refused:
    a store that this block created is removed again if the block fails while it is still empty,
    so that a rejected command leaves no folder behind.

    Yields
    ------
    Path
        The store folder.
    """
    path = Path(store).expanduser()
    created = [p for p in (path, *path.parents) if not p.exists()]  # the store first, then its parents
    root = open_store(path)
    try:
        yield root
    except BaseException:
        for folder in created:
            with contextlib.suppress(OSError):  # not empty (runs, or another process's): kept
                folder.rmdir()
        raise


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
    not either. A folder this process may not look into is listed: readers report it
    (:func:`unreadable`) instead of skipping it silently."""
    root = open_store(store, create=False)
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and _may_hold_run(p))


def _may_hold_run(folder: Path) -> bool:
    try:
        return any((folder / n).exists() for n in (MANIFEST, *RUN_FILES))
    except PermissionError:
        return True


def unreadable(run_dir: str | Path) -> str | None:
    """What of a run folder this process may not read (a folder or file without read
    permission for it), or None. Files are opened, not read: a permission check, not a hash.

    Returns
    -------
    str or None
        E.g. ``"cannot read checkpoints/best/model.safetensors: permission denied"``.
    """
    run_dir = Path(run_dir)
    denied: list[str] = []

    def note(error: OSError) -> None:
        if isinstance(error, PermissionError):
            denied.append(error.filename)

    for parent, _, files in os.walk(run_dir, onerror=note):
        for name in files:
            path = os.path.join(parent, name)
            try:
                os.close(os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)))
            except PermissionError:
                denied.append(path)
            except OSError:  # gone since it was listed: a live writer's temporary file
                pass
        if denied:
            break
    if not denied:
        return None
    where = os.path.relpath(denied[0], run_dir)
    return f"cannot read {'the run folder' if where == '.' else where}: permission denied"


def repair_hint(run_dir: Path) -> str:
    """What to do about a damaged run (the advice of :class:`DamagedRunError`)."""
    root = Path(run_dir).parent
    if unreadable(run_dir):  # nothing is wrong with it that moving it aside would mend
        return (
            f"give this user read access to it (e.g. `chmod -R u+rwX {run_dir}` as its owner) or run as its "
            "owner; `robustkit verify --repair` leaves it where it is"
        )
    return f"`robustkit verify {root} --repair` moves it to {root / DAMAGED_DIR}/ and the next sweep trains it again"
