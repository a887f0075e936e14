"""Write the generated tables of docs/analyses.md and docs/recipes.md from the registries and the
recipe schema, and the registries' tables of their modules, so that no one edits them by hand.

    python tools/docs_tables.py            # rewrite the tables between the pages' markers
    python tools/docs_tables.py --check    # exit 1 when a page's table is stale

- docs/analyses.md: every registered analysis (its description, the statistics claims test) and
  the figures that draw it (the analysis and figure registries);
- ``BUILTIN`` of robustkit/analysis/registry.py and robustkit/figures/__init__.py: the module
  that registers each analysis and figure of robustkit (found by importing every module of the
  two packages), which the registries import;
- docs/recipes.md: a recipe file's keys and a scale section's (robustkit.verdicts.recipes), a
  claim table's keys (the attributes :class:`robustkit.verdicts.spec.Claim` documents, every key
  its parser takes), and every shipped recipe with its figure and claims.

tests/test_docs_tables.py fails until a change to any of them is regenerated here.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # tools/markers.py, also when a test loads this file
from markers import between  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PAGES = {"analyses": ROOT / "docs" / "analyses.md", "recipes": ROOT / "docs" / "recipes.md"}
BEGIN = "<!-- generated: python tools/docs_tables.py ({name}) -->\n"
END = "<!-- end of generated {name} -->"


def _cell(text: str) -> str:
    """One table cell: one line, reStructuredText's roles and literals as Markdown code."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", " ".join(str(text).split()))
    return text.replace("``", "`").replace("|", "\\|")


def analyses_table() -> str:
    """Every registered analysis, its statistics and the figures drawn from it."""
    from robustkit import figures
    from robustkit.analysis.registry import ANALYSES

    lines = ["| analysis (`analyze ...`) | what it computes | statistics (claims test them) | figures (`plot ...`) |"]
    lines.append("|---|---|---|---|")
    for analysis in ANALYSES.values():
        drawn = [f"`{f.name}`" for f in figures.FIGURES.values() if f.analysis == analysis.name]
        statistics = [f"`{analysis.name}.{s.name}`" for s in analysis.statistics]
        lines.append(f"| `{analysis.name}` | {_cell(analysis.help)} | {', '.join(statistics)} | {', '.join(drawn)} |")
    return "\n".join(lines) + "\n"


def claim_keys() -> list[tuple[str, str, str]]:
    """(keys, type, meaning) of each attribute :class:`~robustkit.verdicts.spec.Claim`'s docstring
    documents, in its order (a numpydoc ``Attributes`` section: ``names : type`` then the
    indented meaning)."""
    from robustkit.verdicts.spec import Claim

    text = Claim.__doc__.split("Attributes\n    ----------\n", 1)[1]
    found, current = [], None
    for line in text.splitlines():
        entry = re.match(r"^    (\w[\w, ]*) : (.+)$", line)
        if entry:
            current = [entry.group(1), entry.group(2), ""]
            found.append(current)
        elif current and line.startswith("        "):
            current[2] = f"{current[2]} {line.strip()}".strip()
    return [tuple(item) for item in found]


def recipes_tables() -> str:
    """A recipe file's keys, a scale section's, a claim's, and every shipped recipe."""
    from robustkit.verdicts.recipes import RECIPE_KEYS, SCALE_KEYS, list_recipes, load_recipe

    lines = ["**A recipe file** (`recipes/<paper>/<figure>.toml`):", "", "| key | holds |", "|---|---|"]
    lines += [f"| `{key}` | {_cell(text)} |" for key, text in RECIPE_KEYS.items()]
    lines += ["", "**A scale section** (`[demo]`, `[cpu]`, `[paper]`):", "", "| key | holds |", "|---|---|"]
    lines += [f"| `{key}` | {_cell(text)} |" for key, text in SCALE_KEYS.items()]
    lines += ["", "**A claim** (`[[claim]]`):", "", "| key | type | meaning |", "|---|---|---|"]
    for keys, kind, text in claim_keys():
        names = ", ".join(f"`{k.strip()}`" for k in keys.split(","))
        lines.append(f"| {names} | {_cell(kind)} | {_cell(text)} |")
    lines += [
        "",
        "**The recipes:**",
        "",
        "| recipe | what it shows | figure | scales | claims |",
        "|---|---|---|---|---|",
    ]
    for name in list_recipes():
        recipe = load_recipe(name)
        claims = ", ".join(f"`{c.id}`" for c in recipe.claims) or "none"
        lines.append(
            f"| `{name}` | {_cell(recipe.title)} | `{recipe.figure}` | {', '.join(recipe.scales)} | {claims} |"
        )
    return "\n".join(lines) + "\n"


TABLES = {"analyses": analyses_table, "recipes": recipes_tables}


def with_table(page: str, name: str, text: str) -> str:
    """``page`` with ``text`` between its markers for table ``name``."""
    return between(page, BEGIN.format(name=name), END.format(name=name), text, name=str(PAGES[name]))


# package -> the file holding its registry's BUILTIN table (name -> the module that registers it)
REGISTRIES = {
    "robustkit.analysis": ROOT / "robustkit" / "analysis" / "registry.py",
    "robustkit.figures": ROOT / "robustkit" / "figures" / "__init__.py",
}
TABLE_START = "BUILTIN: dict[str, str] = {\n"


def registered_modules(package: str) -> dict[str, str]:
    """name -> module of each analysis or figure a module of ``package`` registers, every module
    of the package imported (a new one is found before it is in the table)."""
    import importlib
    import pkgutil

    from robustkit import figures
    from robustkit.analysis.registry import ANALYSES

    for info in pkgutil.iter_modules(importlib.import_module(package).__path__):
        importlib.import_module(f"{package}.{info.name}")
    table = ANALYSES if package == "robustkit.analysis" else figures.FIGURES
    return {name: e.module for name, e in table.items() if e.module and e.module.startswith(package + ".")}


def with_builtin(text: str, modules: dict[str, str]) -> str:
    """A registry's source ``text`` with its BUILTIN table holding ``modules``, by module."""
    start = text.index(TABLE_START) + len(TABLE_START)
    end = text.index("\n}\n", start)
    rows = [f'    "{name}": "{module}",' for name, module in sorted(modules.items(), key=lambda kv: (kv[1], kv[0]))]
    return text[:start] + "\n".join(rows) + text[end:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 when a page's table is stale; write nothing")
    args = parser.parse_args()
    stale = []
    for package, path in REGISTRIES.items():  # first: the pages' tables read the registries
        source = path.read_text()
        updated = with_builtin(source, registered_modules(package))
        if updated != source:
            stale.append(str(path))
            if not args.check:
                path.write_text(updated)
    for name, path in PAGES.items():
        page = path.read_text()
        updated = with_table(page, name, TABLES[name]())
        if updated != page:
            stale.append(str(path))
            if not args.check:
                path.write_text(updated)
    if args.check:
        print(f"stale: {', '.join(stale)} (run python tools/docs_tables.py)" if stale else "up to date")
        return int(bool(stale))
    print(f"wrote {', '.join(stale) or 'nothing: up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
