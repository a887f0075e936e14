"""Where ``reproduce`` and ``claims`` read a scale's runs and write its figures unless told otherwise."""

from __future__ import annotations

from pathlib import Path

# The project's own rendered figures (tracked in git): written only when asked for by name
# (``reproduce --figures results``); every other run of reproduce writes beside its store.
FIGURES_DIR = Path("results")


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
