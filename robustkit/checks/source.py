"""What a module's source says, read with ``ast`` (nothing is imported): the rules that can only
be read from source (which module a name is imported from, what a module calls)."""

from __future__ import annotations

import ast
import importlib.util
import inspect
from functools import lru_cache
from pathlib import Path


def path_of(module: str) -> Path | None:
    """The source file of the importable ``module`` (None where it has none)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    return Path(spec.origin) if spec is not None and spec.origin and spec.origin.endswith(".py") else None


@lru_cache(maxsize=None)
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


@lru_cache(maxsize=None)
def names(path: Path) -> frozenset[str]:
    """Every name and attribute the module at ``path`` uses."""
    nodes = list(ast.walk(tree(path)))
    return frozenset(
        {n.id for n in nodes if isinstance(n, ast.Name)} | {n.attr for n in nodes if isinstance(n, ast.Attribute)}
    )


@lru_cache(maxsize=None)
def imports(path: Path) -> frozenset[tuple[str, str | None]]:
    """(module, name) of each import in the module at ``path``, at any depth (``import m``: name None)."""
    found: set[tuple[str, str | None]] = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            found |= {(alias.name, None) for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {(node.module, alias.name) for alias in node.names}
    return frozenset(found)


def calls(path: Path) -> set[str]:
    """The dotted names the module at ``path`` calls (``plt.subplots``, ``Figure``)."""
    found = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Call):
            parts, func = [], node.func
            while isinstance(func, ast.Attribute):
                parts.append(func.attr)
                func = func.value
            if isinstance(func, ast.Name):
                found.add(".".join([func.id, *reversed(parts)]))
    return found


def uses_transitively(module: str, wanted: set[str], package: str, seen: set[str] | None = None) -> set[str]:
    """Which of ``wanted`` names ``module`` uses, itself or through the modules of ``package`` it
    imports (transitively)."""
    seen = set() if seen is None else seen
    path = path_of(module)
    if module in seen or path is None:
        return set()
    seen.add(module)
    found = wanted & names(path)
    for imported, name in imports(path):
        if imported.startswith(package):
            found |= wanted & {name} if name else set()
            found |= uses_transitively(imported, wanted, package, seen)
    return found


_UNREAD = object()  # a default that is not a literal: present, value unknown


def signature(reference: str) -> dict[str, inspect.Parameter]:
    """The parameters of ``"module:function"``, read from the module's source where it defines
    the function (nothing imported: a model analysis's module imports torch), else from the
    imported function; empty where there is no such function (the rule that names the function
    says so). A default that is not a literal reads as a sentinel object."""
    module, _, name = reference.partition(":")
    path = path_of(module)
    found = None
    if path is not None:
        found = next(
            (n for n in tree(path).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name),
            None,
        )
    if found is None:
        from robustkit.analysis.declare import load

        try:
            return dict(inspect.signature(load(reference)).parameters)
        except (ImportError, AttributeError, TypeError, ValueError):
            return {}
    args = found.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    kinds = [inspect.Parameter.POSITIONAL_ONLY] * len(args.posonlyargs)
    kinds += [inspect.Parameter.POSITIONAL_OR_KEYWORD] * len(args.args)
    listed = list(zip(positional, defaults, kinds))
    if args.vararg:
        listed.append((args.vararg, None, inspect.Parameter.VAR_POSITIONAL))
    listed += [(a, d, inspect.Parameter.KEYWORD_ONLY) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        listed.append((args.kwarg, None, inspect.Parameter.VAR_KEYWORD))
    return {
        arg.arg: inspect.Parameter(
            arg.arg,
            kind,
            default=inspect.Parameter.empty if default is None else _literal(default),
            annotation=ast.unparse(arg.annotation) if arg.annotation is not None else inspect.Parameter.empty,
        )
        for arg, default, kind in listed
    }


def _literal(node: ast.expr):
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _UNREAD


def defines(reference: str) -> bool:
    """Does ``"module:name"``'s module bind ``name`` at its top level (a def, a class, an
    assignment or an import), read from its source?"""
    module, _, name = reference.partition(":")
    path = path_of(module)
    if path is None:
        return False
    for node in tree(path).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name.split(".")[0]) == name for a in node.names
        ):
            return True
    return False
