"""The ``robustkit assets fetch|list`` verbs: what they print (the library is robustkit.assets)."""

from __future__ import annotations

from robustkit import assets


def cli_fetch(names: list[str] | None) -> None:
    """Fetch the named assets (all when None), printing ``name<TAB>path`` as each is ready.

    Every name is checked before the first download starts. The path is what
    :func:`robustkit.assets.asset_path` returns: a model's folder, an NLTK resource's data root,
    a data set's file.
    """
    for name in assets.asset_names(names):
        print(f"{name}\t{assets.asset_path(name)}", flush=True)


def cli_list() -> None:
    """Print :func:`robustkit.assets.list_assets` as a table."""
    print(assets.list_assets().to_string(index=False))
