"""The package layout follows the flow: each stage imports only itself and the stages below it.

Stages, lowest first (README.md, its paragraph "How it fits together"): the foundation every stage
uses (errors, parameters, progress, a user's module files, the embedded assets), then data,
models, methods, specs, store, train, sweeps, measures and attacks, analysis, figures, verdicts
(recipes and claims), checks (the rules of extending, robustkit.check), cli. An import of a later
stage from an earlier one (at module level or inside a function) would hide the flow and invite
cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "robustkit"

FOUNDATION = {"errors", "params", "progress", "user_modules", "assets", "lazy"}
STAGES = [
    FOUNDATION,
    {"data"},
    {"models"},
    {"methods"},
    {"specs"},
    {"store"},
    {"train"},
    {"sweeps"},
    {"measures", "attacks"},
    {"analysis"},
    {"figures"},
    {"verdicts"},
    {"checks"},
    {"cli", "__main__"},
]


def stage(module: str) -> int:
    """Stage index of the dotted ``module`` (``robustkit.<part>...``)."""
    part = module.split(".")[1]
    for index, members in enumerate(STAGES):
        if part in members:
            return index
    raise AssertionError(f"{module}: in no stage of tests/test_layout.py (a new top-level module or package?)")


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name != "robustkit":  # the notebook facade: lazy re-exports of every stage
            found.append((name, path))
    return found


def imported(path: Path, name: str) -> set[str]:
    """robustkit modules ``path`` imports anywhere in it (``from robustkit import x`` names x)."""
    targets = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names if alias.name.startswith("robustkit.")}
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([module] if module else []))
            if module == "robustkit":
                targets |= {f"robustkit.{alias.name}" for alias in node.names}
            elif module.startswith("robustkit."):
                targets.add(module)
    return targets


def test_every_module_is_in_a_stage():
    for name, _ in modules():
        stage(name)


def test_the_top_level_holds_only_the_foundation_and_the_stage_packages():
    top = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    assert top == FOUNDATION, f"top-level modules outside the foundation: {sorted(top - FOUNDATION)}"


@pytest.mark.parametrize("name, path", modules(), ids=lambda value: str(value) if isinstance(value, str) else "")
def test_a_module_imports_no_later_stage(name, path):
    upward = sorted(target for target in imported(path, name) if stage(target) > stage(name))
    assert not upward, f"{name} (stage {stage(name)}) imports later stages: {upward}"


def test_the_check_finds_an_upward_import(tmp_path):
    """The check can fail: a store module importing the claims is caught."""
    module = tmp_path / "bad.py"
    module.write_text("def f():\n    from robustkit.verdicts import recipes\n")
    targets = imported(module, "robustkit.store.bad")
    assert [t for t in targets if stage(t) > stage("robustkit.store.bad")] == ["robustkit.verdicts"]


def test_no_stage_package_shadows_a_notebook_function():
    """``robustkit.claims(...)`` is a function: a package of that name would replace it on the
    ``robustkit`` module as soon as one of its modules is imported (why the stage is verdicts/)."""
    import importlib
    import types

    import robustkit

    for path in sorted(PACKAGE.glob("*/__init__.py")):
        importlib.import_module(f"robustkit.{path.parent.name}")
    shadowed = [name for name in robustkit.__all__ if isinstance(getattr(robustkit, name), types.ModuleType)]
    assert not shadowed, shadowed
