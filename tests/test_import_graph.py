"""The package's import graph has no cycles, and every module imports on its own (issue #12).

The graph is read from the source with ``ast``. Two graphs are checked: the imports that run when
a module is imported (module and class bodies), where a cycle can make an import fail depending
on which module comes first, and every import including those inside functions ("no import
cycles anywhere": a lazy cycle is two modules that each need the other, only hidden). Imports
under ``if TYPE_CHECKING:`` never run and are not counted.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "robustkit"


def package_modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name -> source file, for every ``.py`` file of the package."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        name = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_nodes(tree: ast.AST, lazy: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run: at import time only, or (``lazy``) inside functions too."""
    return _imports_in(ast.iter_child_nodes(tree), lazy)


def _imports_in(nodes: Iterable[ast.AST], lazy: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _imports_in(node.orelse, lazy)  # the body never runs; an else branch does
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if lazy:
                yield from _imports_in(ast.iter_child_nodes(node), lazy)
        else:
            yield from _imports_in(ast.iter_child_nodes(node), lazy)


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def module_graph(lazy: bool, root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package modules it imports.

    ``from robustkit.x import y`` imports ``robustkit.x.y`` when that is a module, else
    ``robustkit.x``; importing a module first runs its packages' ``__init__``, so those count
    too, except the importer's own packages (already being imported when it runs).
    """
    modules = package_modules(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        own = {*_ancestors(name), name}
        for node in import_nodes(ast.parse(path.read_text(), str(path)), lazy):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative: from the importer's package, up level - 1
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
                ]
            for target in targets:
                for module in (*_ancestors(target), target):
                    if module in modules and module not in own:
                        graph[name].add(module)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _describe(graph: dict[str, set[str]], component: list[str]) -> str:
    members = set(component)
    edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]
    return "{" + ", ".join(component) + "}: " + "; ".join(edges)


@pytest.mark.parametrize("lazy", [False, True], ids=["at-import-time", "including-lazy-imports"])
def test_import_graph_is_a_dag(lazy):
    graph = module_graph(lazy)
    assert len(graph) > 20  # the walk found the package
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(_describe(graph, c) for c in found)


def test_cycle_finder_finds_a_planted_cycle(tmp_path):
    # the checks above pass on an empty answer: make sure they can fail
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "b.py").write_text("def f():\n    from .. import c\n")
    (package / "c.py").write_text(
        "import pkg.a\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.d\n"
    )
    (package / "d.py").write_text("import pkg.c\n")
    (package / "e.py").write_text("class E:\n    from pkg import f\n")  # a class body runs at import time
    (package / "f.py").write_text("from . import e\n")
    assert cycles(module_graph(lazy=False, root=package)) == [["pkg.e", "pkg.f"]]
    assert cycles(module_graph(lazy=True, root=package)) == [["pkg.a", "pkg.c", "pkg.sub.b"], ["pkg.e", "pkg.f"]]


# Imports each module in a child forked from a process that has loaded the package's third-party
# dependencies but no robustkit module: each child imports its module into a robustkit-free
# interpreter (what a fresh `python -c "import robustkit.x"` does) without paying torch's import
# again per module.
_IMPORT_EACH = r"""
import importlib, json, os, sys, traceback
modules, dependencies = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for name in dependencies:
    try:
        importlib.import_module(name)
    except Exception:
        pass  # a broken dependency shows in the modules that import it
loaded = [m for m in sys.modules if m == "robustkit" or m.startswith("robustkit.")]
assert not loaded, "robustkit loaded before the fork"
failures = {}
for name in modules:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(name)
            message = ""
        except BaseException:
            message = traceback.format_exc()
        os.write(write, message.encode() or b"")
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        message = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    if message or status:
        failures[name] = message or f"child exited with status {status}"
print(json.dumps(failures))
"""


def _third_party(modules: dict[str, Path]) -> list[str]:
    """Top-level names the package imports at import time, other than itself and the stdlib."""
    names = set()
    for path in modules.values():
        for node in import_nodes(ast.parse(path.read_text()), lazy=False):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif not node.level and node.module:
                names.add(node.module.split(".")[0])
    return sorted(names - set(sys.stdlib_module_names) - {"robustkit", "__future__"})


def _import_each(modules: list[str], dependencies: list[str], cwd: Path) -> dict[str, str]:
    """Module -> traceback, for each module that fails to import on its own."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH, json.dumps(modules), json.dumps(dependencies)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_every_module_imports_on_its_own():
    modules = package_modules()
    failures = _import_each(sorted(modules), _third_party(modules), PACKAGE.parent)
    assert not failures, "modules that fail to import on their own:\n" + "\n".join(
        f"{n}:\n{m}" for n, m in failures.items()
    )


def test_import_check_catches_a_module_that_needs_another_imported_first(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("import json\nVALUE = 1\n")
    (package / "b.py").write_text("import pkg\nVALUE = pkg.a.VALUE  # works only after someone imported pkg.a\n")
    assert _third_party({"a": package / "a.py"}) == []  # json is the stdlib's
    failures = _import_each(["pkg.a", "pkg.b"], [], tmp_path)
    assert list(failures) == ["pkg.b"] and "AttributeError" in failures["pkg.b"]
