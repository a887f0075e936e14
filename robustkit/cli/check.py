"""`robustkit check KIND NAME`: every rule of extending, run on one analysis, figure, attack or recipe."""

from __future__ import annotations

KINDS = ("analysis", "figure", "attack", "recipe")  # robustkit.checks.KINDS, without importing it for --help


def add_parser(commands) -> None:
    check = commands.add_parser(
        "check",
        help="check an analysis, figure, attack or recipe against every rule of extending",
        description="Runs every rule an extension must meet (CONTRIBUTING.md) on one registered object and prints "
        "one line per broken rule, naming the rule and how to meet it; exits 1 if any is broken.",
    )
    check.add_argument("kind", choices=KINDS, help="what to check")
    check.add_argument("name", help="its registered name (a recipe's <paper>/<figure>)")
    check.add_argument("--recipe-dir", help="the folder of recipe files (recipes only); default: this checkout's")
    check.set_defaults(func=run)


def run(args) -> int:
    from robustkit.checks import check, rules

    broken = check(args.kind, args.name, recipe_dir=args.recipe_dir)
    for line in broken:
        print(line)
    if not broken:
        print(f"{args.kind} {args.name!r} meets all {len(rules(args.kind))} {args.kind} rules")
    return 1 if broken else 0
