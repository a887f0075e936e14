"""docs/analyses.md and docs/recipes.md's tables are generated (tools/docs_tables.py, issue #48
item 1): from the analysis and figure registries, the recipe schema and the recipes, and checked
here, so a new analysis, figure, recipe or claim key shows in the docs or fails this test."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("docs_tables", ROOT / "tools" / "docs_tables.py")
docs_tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(docs_tables)


def test_the_generated_tables_are_up_to_date():
    for name, path in docs_tables.PAGES.items():
        page = path.read_text()
        assert docs_tables.with_table(page, name, docs_tables.TABLES[name]()) == page, (
            f"{path} is stale: run python tools/docs_tables.py"
        )


def test_every_claim_key_the_parser_takes_is_documented_once():
    from robustkit.verdicts.spec import _KEYS

    documented = [key.strip() for keys, _, _ in docs_tables.claim_keys() for key in keys.split(",")]
    assert sorted(documented) == sorted(_KEYS)  # within, quantifier and every other key, none twice


def test_every_analysis_figure_and_recipe_is_in_the_docs():
    from robustkit import figures
    from robustkit.analysis.registry import ANALYSES
    from robustkit.verdicts.recipes import RECIPE_KEYS, SCALE_KEYS, list_recipes

    analyses = (ROOT / "docs" / "analyses.md").read_text()
    recipes = (ROOT / "docs" / "recipes.md").read_text()
    assert all(f"| `{name}` |" in analyses for name in ANALYSES)
    assert all(f"`{name}`" in analyses for name in figures.FIGURES)
    assert all(f"| `{name}` |" in recipes for name in list_recipes())
    assert all(f"| `{key}` |" in recipes for key in (*RECIPE_KEYS, *SCALE_KEYS))


def test_a_stale_table_is_found(tmp_path, monkeypatch):
    page = tmp_path / "recipes.md"
    page.write_text(
        "# Recipes\n\n<!-- generated: python tools/docs_tables.py (recipes) -->\nSTALE TABLE\n"
        "<!-- end of generated recipes -->\n"
    )
    monkeypatch.setitem(docs_tables.PAGES, "recipes", page)
    analyses = tmp_path / "analyses.md"  # a copy: the test writes nothing in the checkout
    analyses.write_text(docs_tables.PAGES["analyses"].read_text())
    monkeypatch.setitem(docs_tables.PAGES, "analyses", analyses)
    monkeypatch.setattr("sys.argv", ["docs_tables.py", "--check"])
    assert docs_tables.main() == 1 and "STALE TABLE" in page.read_text()  # --check writes nothing
    monkeypatch.setattr("sys.argv", ["docs_tables.py"])
    docs_tables.main()
    assert "STALE TABLE" not in page.read_text() and "| `han2021/fig2` |" in page.read_text()
