"""Second copies of a declared default in source: a signature default, an argparse ``default=``
or a ``Param(...)`` that gives a registered parameter its registered default again (a default
is declared once, in its Param: the rule "parameter help" of :mod:`robustkit.checks.analysis`
runs this on an analysis's module, ``tests/test_analysis_registry.py`` on the command line's)."""

from __future__ import annotations

import ast
from pathlib import Path


def _module_constants(tree: ast.Module) -> dict[str, object]:
    constants = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                constants[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return constants


def duplicated_defaults(files: list[Path], declared: dict[str, set], declarations: bool = True) -> list[str]:
    """Places in ``files`` (``file:line name=value``) that give a registered parameter its
    registered default a second time: a signature default, an argparse ``default=`` or a
    ``Param(...)`` (unless ``declarations`` is False: an analysis's own module declares them)."""
    places = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = _module_constants(tree)

        def value(node):
            if isinstance(node, ast.Name):
                return constants.get(node.id, None)
            try:
                return ast.literal_eval(node)
            except ValueError:
                return None

        for node in ast.walk(tree):
            pairs = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                positional = args.posonlyargs + args.args
                pairs += list(zip([a.arg for a in positional[len(positional) - len(args.defaults) :]], args.defaults))
                pairs += [(a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument" and node.args:
                flag = value(node.args[0])
                default = next((k.value for k in node.keywords if k.arg == "default"), None)
                if isinstance(flag, str) and default is not None:
                    pairs.append((flag.lstrip("-").replace("-", "_"), default))
            elif (
                declarations
                and isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "Param"
                and len(node.args) >= 2
            ):
                pairs.append((value(node.args[0]), node.args[1]))
            for name, default in pairs:
                found = value(default)
                if (
                    name in declared
                    and isinstance(found, (int, float, str))
                    and not isinstance(found, bool)
                    and found in declared[name]
                ):
                    places.append(f"{path.name}:{default.lineno} {name}={found!r}")
    return places
