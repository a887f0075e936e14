"""`robustkit claims`: the verdict of each paper claim on the runs behind its figure, or (--plan)
what each claim's test can decide."""

from __future__ import annotations

from robustkit.cli.common import swap_from_args
from robustkit.errors import RobustkitError
from robustkit.verdicts.scales import SCALES


def add_parser(commands) -> None:
    claims = commands.add_parser(
        "claims",
        help="verdict of each paper claim on the runs behind its figure",
        description="For each recipe's claims (recipes/*/*.toml, [[claim]] tables): compute the per-run statistic "
        "on the recipe's runs in the store, test the claim and print agrees / contradicts / "
        "inconclusive with n, effect size, CI and p. Collapsed runs are left out (see "
        "robustkit/store/collapse.py). Trains nothing: run `robustkit reproduce` first. Evidence is "
        "counted once (robustkit.verdicts.evidence): n counts runs (a claim tested in several cells, e.g. "
        "7 layers of the same 5 runs per group, says 'n = 5 vs 5 runs, 7 cells'); claims that share at "
        "least one run form one evidence unit (column unit; run_set: claims on the identical runs), "
        "since one unlucky seed moves all their verdicts; same_as names an earlier claim that reads the "
        "same observations (same runs, statistic, groups and cells), a second look at one piece of "
        "evidence. The tally under the table counts claims and evidence units, and the line after it how "
        "many decisions chance alone would give; survives_family says whether a decision survives "
        "Benjamini-Yekutieli at 5% within its figure (valid however its claims share runs). For each inconclusive "
        "claim, would_settle says what would decide it (robustkit.verdicts.settle): where the runs still "
        "improve (not converged), how much longer to train, from a power-law fit of their dev loss "
        "extrapolated to where the convergence guard's rule passes; otherwise the runs per group at "
        "which the observed effect is decided with 80% power, simulated by drawing runs from the "
        "observed ones (a bootstrap) and judging each simulated store by the claim's own verdict path. "
        "Both are estimates from the observed runs, not promises. replication reads the effect against the "
        "paper's (robustkit.verdicts.replication): consistent with it, smaller, opposite or too imprecise to say "
        "(with the runs and hours that would say), in SDs over seeds, against the paper's effect or else the "
        "effect its n had 33% power to detect (d33, Simonsohn 2015).",
    )
    claims.add_argument(
        "recipes", nargs="*", metavar="RECIPE", help="recipe names, e.g. han2021/fig2; default: every recipe"
    )
    claims.add_argument(
        "--scale", choices=SCALES, help="which runs of each recipe; default: demo (with --plan: every scale)"
    )
    claims.add_argument("--store", help="run store folder; default: runs/<scale>")
    claims.add_argument("--recipe-dir", help="folder of recipe files; default: the recipes/ folder of this checkout")
    claims.add_argument(
        "--include-failed",
        action="store_true",
        help="keep failed runs (not-learned, collapsed or diverged) in the tests",
    )
    from robustkit.cli.terminal import add_format_arguments

    add_format_arguments(claims, "write every row (per claim and cell) to this file (.csv, .json, else parquet)")
    claims.add_argument(
        "--device",
        help="where the analyses that run a model run it: cpu, cuda, cuda:N; default: the GPU if there is one (not "
        "part of any cache key)",
    )
    claims.add_argument(
        "--plan",
        action="store_true",
        help="needs no runs: per claim and cell, the runs per group its recipe trains at each scale, the smallest p "
        "its test can reach, the smallest effect it detects with 80%% power and its power at the effect the "
        "paper reports (robustkit.verdicts.decidability); with --store, also (column observed) the runs per "
        "group at which the effect observed in the store's runs is decided with 80%% power "
        "(robustkit.verdicts.settle: a bootstrap of those runs, judged by the claim's own path)",
    )
    claims.add_argument(
        "--no-settle",
        action="store_true",
        help="leave out the would_settle column (the simulations behind it take seconds per inconclusive claim)",
    )
    swap = claims.add_argument_group(
        "a swapped reproduce",
        "The runs `reproduce RECIPE --model/--data/--task --store S` trained: claims --store S applies the swap that "
        "reproduce recorded in S/swaps.json by itself (and says so); these name one where S holds several, or "
        "override the record (said in the line)",
    )
    swap.add_argument("--model", help="the model reproduce put in place of the recipes'")
    swap.add_argument("--data", metavar="FILE_OR_DIR", help="the data reproduce put in place of the recipes' task")
    swap.add_argument("--task", help="the built-in task reproduce put in place of the recipes'")
    claims.add_argument(
        "--markdown",
        action="store_true",
        help="with --plan: print the summary per claim that recipes/README.md shows, as markdown",
    )
    claims.set_defaults(func=run)


def run(args) -> int:
    import pandas as pd

    from robustkit.cli import terminal
    from robustkit.verdicts.recipes import RECIPE_DIR

    if args.plan:
        return _plan(args)
    if args.markdown:
        raise RobustkitError("--markdown prints the plan's summary: use it with --plan")
    scale, folder = args.scale or "demo", args.recipe_dir or RECIPE_DIR
    from robustkit.store.folders import open_store
    from robustkit.verdicts.reproduce import claim_recipes, default_store
    from robustkit.verdicts.tally import verdicts

    store = args.store or default_store(scale)
    judged = claim_recipes(
        store, args.recipes or None, scale, folder, swap_from_args(args)
    )  # bad names before the store
    store = open_store(store, create=False)  # no verdicts on nothing
    from robustkit.verdicts.evidence import by_chance, chance_line, n_text, tally_line, units
    from robustkit.verdicts.recipes import load_defaults

    defaults = load_defaults(folder)
    table = verdicts(store, judged, scale, args.include_failed, defaults=defaults, device=args.device)
    evidence = units(judged, scale, defaults)
    groups = table.groupby(["recipe", "claim"], sort=False)
    # n as runs (and cells): "5 vs 5 runs, 7 cells", not 35 vs 35 observations
    n = pd.DataFrame(
        [{"recipe": recipe, "claim": name, "n": n_text(rows).removeprefix("n = ")} for (recipe, name), rows in groups],
        columns=["recipe", "claim", "n"],
    )
    overall = (
        groups.tail(1)
        .merge(n, on=["recipe", "claim"], how="left")
        .merge(evidence[["recipe", "claim", "unit", "run_set", "same_as"]], on=["recipe", "claim"], how="left")
        .merge(by_chance(table, evidence)[["recipe", "claim", "survives_family"]], on=["recipe", "claim"], how="left")
    )
    overall = overall.assign(would_settle=_would_settle(args, table, judged, defaults, overall))
    from robustkit.verdicts.replication import short

    overall = overall.assign(replication=[short(row) for _, row in overall.iterrows()])
    shown = overall[
        [
            "recipe",
            "claim",
            "verdict",
            "unit",
            "run_set",
            "same_as",
            "n",
            "n_failed",
            "effect_name",
            "effect",
            "ci_low",
            "ci_high",
            "p_value",
            "survives_family",
            "reason",
            "would_settle",
            "replication",
        ]
    ]
    # a verdict's reason is its explanation: shown up to the 90 characters it always had
    print(
        terminal.render(shown, args.format, keys=("recipe", "claim", "verdict", "reason"), identity=(), cell_width=90)
    )
    terminal.note("\n" + tally_line(table, evidence), args.format)
    chance = chance_line(table, evidence)
    if chance:
        terminal.note(chance, args.format)
    if args.output:
        # every row of a claim carries the claim's own columns too (n, unit, would_settle, ...)
        own = ["recipe", "claim"] + [c for c in overall.columns if c not in table.columns]
        written = table.merge(overall[own], on=["recipe", "claim"], how="left")
        terminal.note(f"wrote {len(written)} rows to {terminal.write(written, args.output)}", args.format)
    return 0


def _plan(args) -> int:
    import pandas as pd

    from robustkit.cli import terminal
    from robustkit.verdicts.decidability import plan
    from robustkit.verdicts.recipes import RECIPE_DIR, list_recipes, load_defaults, load_recipe

    folder = args.recipe_dir or RECIPE_DIR
    names = args.recipes or list_recipes(folder)
    if args.store:  # its runs are those of the swap reproduce recorded there (or the one given)
        from robustkit.verdicts.reproduce import claim_recipes

        recipes = claim_recipes(args.store, names, args.scale or "demo", folder, swap_from_args(args))
    else:
        if swap_from_args(args):
            raise RobustkitError("--model/--data/--task name the runs of a store: give --store with them")
        recipes = [load_recipe(name, folder) for name in names]
    table = plan(recipes, scales=(args.scale,) if args.scale else SCALES, defaults=load_defaults(folder))
    if args.output:
        terminal.write(table, args.output)
    if args.markdown:
        from robustkit.verdicts.decidability import markdown

        print(markdown(table, recipes), end="")
        return 1 if (table["judged"] & ~table["decidable"]).any() else 0
    shown = table.assign(
        detectable=table["detectable_effect"].map(lambda v: "never" if pd.isna(v) else f"{v:g}")
        + " ("
        + table["effect_unit"]
        + ")",
        paper=[
            ("" if pd.isna(e) else f"{e:g}" if pd.isna(d) else f"margin {e:g}, difference {d:g}")
            for e, d in zip(table["paper_effect"], table["paper_difference"])
        ],
    )
    columns = [
        "recipe",
        "scale",
        "claim",
        "cell",
        "n_a",
        "n_b",
        "judged",
        "smallest_p",
        "decidable",
        "cells",
        "level",
        "detectable",
        "paper",
        "paper_power",
    ]
    if args.store:  # beside the normal-theory detectable effect: the runs the observed effect needs
        from robustkit.verdicts.settle import plan_observed

        observed = plan_observed(
            args.store,
            recipes,
            (args.scale,) if args.scale else SCALES,
            load_defaults(folder),
            args.device,
            simulations=SETTLE_SIMULATIONS,
        )
        shown = shown.merge(observed, on=["recipe", "scale", "claim"], how="left").fillna({"observed": ""})
        columns.insert(columns.index("detectable") + 1, "observed")
    print(terminal.render(shown[columns], args.format, keep=("recipe", "claim", "cell"), identity=(), cell_width=60))
    undecidable = table[table["judged"] & ~table["decidable"]]
    terminal.note(
        f"{len(table)} claim cells; {int(table['judged'].sum())} judged at their scale; "
        f"{len(undecidable)} that can never reach alpha at their n (level: alpha over the claim's cells, Holm with "
        "Tarone's rule)",
        args.format,
    )
    return 1 if len(undecidable) else 0


SETTLE_SIMULATIONS = 100  # simulated stores per candidate n behind the claims table's would_settle


def _would_settle(args, table, recipes, defaults, overall) -> list[str]:
    """The would_settle text of each row of ``overall`` (robustkit.verdicts.settle; "" unless inconclusive)."""
    if args.no_settle or table.empty:
        return [""] * len(overall)
    from robustkit.verdicts.reproduce import default_store
    from robustkit.verdicts.settle import settle

    scale = args.scale or "demo"
    try:
        found = settle(
            args.store or default_store(scale),
            recipes,
            table,
            scale,
            defaults,
            args.device,
            simulations=SETTLE_SIMULATIONS,
        )
    except Exception as error:  # noqa: BLE001 - the verdicts stand without it
        return [f"not estimated: {error}" if v == "inconclusive" else "" for v in overall["verdict"]]
    texts = {(r, c): t for r, c, t in zip(found["recipe"], found["claim"], found["would_settle"])}
    return [texts.get((r, c), "") for r, c in zip(overall["recipe"], overall["claim"])]
