"""The rules a recipe meets (CONTRIBUTING.md, "Add a recipe and its claims"; recipes/README.md has
the reasons): its scales, its runs' budget, the paper it cites and its claims' words."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from robustkit.checks import Rule

DEMO = ("minilm-l6", ("rt", "polarity"))  # the demo scale: this model on the embedded corpus
PAPER_MODEL = "bert-base-uncased"
CITED = ("table", "§", "section")  # what the comment above [paper] names
SOURCE_WORDS = ("et al.", "report")  # a claim's says quotes its source ...
WHERE_WORDS = ("§", "table", "figure", "abstract")  # ... and where in it
LOCATION_RUNS = 5  # a location test holds when spreads differ from 5 runs a group (recipes/README.md)
# Demo runs a recipe family may add beyond the papers' recipes (tests/test_recipes.py says why)
EXTRA_RUNS = {"peft/": 20, "beyond/": 5}


def resolve(name: str, recipe_dir=None):
    from robustkit.verdicts.recipes import RECIPE_DIR, load_recipe

    folder = Path(recipe_dir or RECIPE_DIR)
    recipe = load_recipe(name, folder)
    return recipe, {"folder": folder, "text": (folder / f"{name}.toml").read_text(encoding="utf-8"), "specs": {}}


def _specs(recipe, scale: str, context: dict) -> list:
    """``recipe.specs(scale)``, expanded once per check (the grid's expansion is what costs)."""
    if scale not in context["specs"]:
        context["specs"][scale] = recipe.specs(scale)
    return context["specs"][scale]


def _scales(recipe, context: dict) -> list[str]:
    from robustkit import figures

    if "paper" not in recipe.scales:
        return ["it has no [paper] scale"]
    found = []
    demo, paper = _specs(recipe, "demo", context), _specs(recipe, "paper", context)
    if {s.model for s in demo} != {DEMO[0]} or not {s.task for s in demo} <= set(DEMO[1]):
        found.append(f"its demo runs are {sorted({(s.model, s.task) for s in demo})}")
    if {s.model for s in paper} != {PAPER_MODEL} or {s.task for s in paper} & set(DEMO[1]):
        found.append(f"its paper runs are {sorted({(s.model, s.task) for s in paper})}")
    for scale in recipe.scales:
        try:
            figures.get(recipe.figure).resolve(**recipe.figure_params(scale))
        except figures.FigureError as error:
            found.append(f"at {scale} scale: {error}")
    return found


def _paper_cited(recipe, context: dict) -> list[str]:
    text = context["text"]
    if "\n[paper" not in text:
        return []  # said by the scales rule
    comment = []
    for line in reversed(text[: text.index("\n[paper")].splitlines()):
        if not line.startswith("#"):
            break
        comment.append(line)
    if any(word in " ".join(comment) for word in CITED):
        return []
    return ["no comment just above [paper] names the paper's table or section"]


def _claim_words(recipe, context: dict) -> list[str]:
    if not recipe.claims and not re.search(r"^# No \[\[claim\]\]: (.+)$", context["text"], re.M):
        return ["it states no [[claim]] and no '# No [[claim]]: <why>' comment"]
    found = []
    for claim in recipe.claims:
        if not any(word in claim.says for word in SOURCE_WORDS):
            found.append(f"claim {claim.id!r}: says names no source ({' or '.join(map(repr, SOURCE_WORDS))})")
        if not any(word in claim.says for word in WHERE_WORDS):
            found.append(f"claim {claim.id!r}: says names no place in it ({', '.join(WHERE_WORDS)})")
    return found


# How a source may write its n: the papers write both "10 random seed restarts" and "five runs".
_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 10: "ten", 20: "twenty", 100: "hundred"}


def paper_effect_problems(recipe) -> list[str]:
    """What its claims leave unsaid of the paper's effect, one phrase each (empty: all is said)."""
    from robustkit.verdicts.spec import NOT_REPORTED

    found = []
    for claim in recipe.claims:
        where = f"claim {claim.id!r}"
        if not claim.paper_effect_source:
            found.append(f"{where} has no paper_effect_source")
        elif claim.paper_effect is None and not claim.paper_effect_source.startswith(NOT_REPORTED):
            found.append(f"{where}: no paper_effect, and its source does not begin {NOT_REPORTED!r}")
        elif claim.paper_effect is not None and not any(ch.isdigit() for ch in claim.paper_effect_source):
            found.append(f"{where}: its paper_effect_source quotes no number")
    return found


def paper_n_problems(recipe) -> list[str]:
    """What its claims leave unsaid of the paper's runs per group (issue #56): a claim carries
    ``paper_n_source``; one that gives ``paper_n`` writes that number in its source (a numeral or
    a word), so that the n is quoted from the paper, not put there."""
    from robustkit.verdicts.spec import NOT_STATED

    found = []
    for claim in recipe.claims:
        where, source = f"claim {claim.id!r}", claim.paper_n_source
        if not source:
            found.append(f"{where}: no paper_n_source (the paper's n and where, or 'not stated: ...')")
        elif claim.paper_n is None and not source.startswith(NOT_STATED):
            found.append(f"{where}: no paper_n, but its source does not begin {NOT_STATED!r}")
        elif claim.paper_n is not None:
            said = re.search(rf"(?<![\d.]){claim.paper_n}(?![\d.])", source) or re.search(
                rf"\b{_WORDS.get(claim.paper_n, '-')}\b", source, flags=re.IGNORECASE
            )
            if not said:
                found.append(f"{where}: paper_n = {claim.paper_n}, which its source does not write")
    return found


def _paper_numbers(recipe, context: dict) -> list[str]:
    return paper_effect_problems(recipe) + paper_n_problems(recipe)


def _groups(recipe, context: dict) -> list[str]:
    if "paper" not in recipe.scales:
        return []
    specs, found = _specs(recipe, "paper", context), []
    for claim in recipe.claims:
        if not specs or claim.by not in vars(specs[0]):
            continue
        values = {_number(getattr(s, claim.by)) for s in specs}
        for group in filter(None, (claim.a, claim.b)):
            if not {_number(v) for v in group} & values:
                found.append(f"claim {claim.id!r}: no paper run has {claim.by} in {list(group)}")
    return found


def _judged_scales(recipe, context: dict) -> list[str]:
    from robustkit.verdicts.decidability import claim_sizes

    found = []
    scales_lines = re.findall(r"^scales = \[.*$", context["text"], re.M)
    for claim in recipe.claims:
        left_out = set(recipe.scales) - set(claim.scales)
        if left_out and not all("#" in line for line in scales_lines):
            found.append(f"claim {claim.id!r} is not judged at {sorted(left_out)} and its scales line says not why")
        if claim.compare == "location" and "demo" in claim.scales and "demo" in recipe.scales and _tested(claim):
            small = [(cell, a, b) for cell, a, b in claim_sizes(recipe, claim, "demo") if min(a, b) < LOCATION_RUNS]
            if small:
                found.append(f"claim {claim.id!r} tests location on {small[0][1]} vs {small[0][2]} demo runs")
    return found


def _budget(recipe, context: dict) -> list[str]:
    family = next((f for f in EXTRA_RUNS if recipe.name.startswith(f)), None)
    if family is None or "demo" not in recipe.scales:
        return []
    shared = _runs_of(str(context["folder"]), tuple(f for f in EXTRA_RUNS if f != family and f != "beyond/"))
    extra = _runs_of(str(context["folder"]), (family,)) - shared
    if len(extra) <= EXTRA_RUNS[family]:
        return []
    return [f"{family} recipes add {len(extra)} demo runs to the papers' ({EXTRA_RUNS[family]} at most)"]


def _tested(claim) -> bool:
    """Is the claim's statistic tested (independent observations), not only shown?"""
    from robustkit.analysis.registry import statistic_of

    return statistic_of(claim.statistic)[1].independent


@lru_cache(maxsize=8)
def _runs_of(folder: str, families: tuple[str, ...]) -> frozenset[str]:
    """Demo run ids of the recipes of ``folder`` in ``families``, and of the papers' recipes (no family)."""
    from robustkit.verdicts.recipes import list_recipes, load_recipe

    names = [n for n in list_recipes(folder) if n.startswith(families) or not n.startswith(tuple(EXTRA_RUNS))]
    return frozenset(s.run_id for n in names for s in load_recipe(n, folder).specs("demo"))


def _number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return value


RULES = (
    Rule(
        "scales",
        f"give a [demo] scale on {DEMO[0]} and rt, and a [paper] scale on {PAPER_MODEL} with the paper's task "
        "(not rt), whose figure parameters the figure takes",
        _scales,
    ),
    Rule("paper cited", "write a '# ...' comment just above [paper] naming the paper's table or section", _paper_cited),
    Rule(
        "claim words",
        "quote the paper in says, with its source ('He et al. 2021', or 'reports') and where ('§5', 'table 2', "
        "'figure 6')",
        _claim_words,
    ),
    Rule(
        "paper effect and n",
        "give paper_effect with a paper_effect_source quoting it (or one beginning 'not reported:') and paper_n with "
        "a paper_n_source that writes it (or one beginning 'not stated:')",
        _paper_numbers,
    ),
    Rule("groups", "name groups a and b by values the paper scale's runs take in the 'by' column", _groups),
    Rule(
        "judged scales",
        f"train {LOCATION_RUNS} runs a group for a location claim at demo scale, or judge it at paper scale only "
        '(scales = ["paper"]  # why), with the why on the scales line',
        _judged_scales,
    ),
    Rule(
        "budget",
        "reuse the papers' demo runs (same settings, same run ids): peft/ adds at most 20, beyond/ at most 5 "
        "(tests/test_recipes.py says why)",
        _budget,
    ),
)
