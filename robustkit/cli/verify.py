"""`robustkit verify`: re-hash every checkpoint of a store; list damaged runs and what to do."""

from __future__ import annotations


def add_parser(commands) -> None:
    verify = commands.add_parser(
        "verify",
        help="re-hash every checkpoint of a store; list damaged runs and what to do",
        description="Check every run folder of a store: its manifest's shape and own sha256, and every checkpoint file "
        "and training log against the sha256 in the manifest (every file hashed, not loaded; other commands hash a "
        "file again only when its size or times change). Damaged runs (a missing or broken manifest, a missing, "
        "corrupt or truncated checkpoint or log) are listed with what to do, as are cached analysis frames that do not "
        "match their sha256 (never read: computed again); so are folders this user may not read (unreadable: never "
        "moved) and runs whose manifest says running while no process trains them (stale: the next sweep resumes "
        "them). The exit status is 1 if a damaged or unreadable run or a damaged frame is left.",
    )
    verify.add_argument("store", help="run store folder")
    verify.add_argument("runs", nargs="*", metavar="RUN", help="only these runs (ids as any table prints them)")
    verify.add_argument(
        "--repair",
        action="store_true",
        help="move each damaged run to <store>/.damaged/<run_id>-<time> (nothing is deleted), so that the next sweep "
        "trains it again; remove damaged cached frames",
    )
    verify.set_defaults(func=run)


def run(args) -> int:
    from robustkit.analysis.verify import summary, verify_cache, verify_store

    table = verify_store(args.store, repair=args.repair, run_ids=args.runs or None)
    frames = verify_cache(args.store, repair=args.repair)
    for row in table[table.status != "ok"].itertuples():
        print(f"{row.status.upper()} {row.run_id}" + (f": {row.problem}" if row.problem else ""))
        print(f"    {row.advice}" + (f" ({row.moved_to})" if row.moved_to else ""))
    for row in frames.itertuples():
        print(
            f"{row.status.upper()} cached frame {row.file}: {row.problem}"
            + ("" if row.status == "removed" else " (never read: computed again; `--repair` removes it)")
        )
    print(
        f"{summary(table)}; {int(table['files'].sum())} checkpoint files hashed; {frames.attrs['checked']} cached "
        f"frames checked, {len(frames)} damaged. Store: {args.store}"
    )
    return 1 if table.status.isin(["damaged", "unreadable"]).any() or (frames.status == "damaged").any() else 0
