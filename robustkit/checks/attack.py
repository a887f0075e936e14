"""The rules an attack meets (CONTRIBUTING.md, "Add an attack"): its declared attributes (which
the registry checks as it reads them) and the interface of ``robustkit.attacks.base.Attack``,
read from the class's source where it is written there (nothing imported: an attack's module may
import torch or OpenAttack), else from the imported class."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from robustkit.checks import Rule, source

# method -> the parameters after self, in order; the last ones with these defaults
INTERFACE = {"predict": (("victim", "sentence"), {}), "attack": (("victim", "example", "budget"), {"budget": None})}


def resolve(name: str, recipe_dir=None):
    from robustkit.attacks import registry

    return registry.get(name), {}


def _class_node(info) -> ast.ClassDef | None:
    module, _, name = info.source.rpartition(":")
    path = Path(module) if module.endswith(".py") else source.path_of(module)
    if path is None or not path.is_file():
        return None
    return next((n for n in source.tree(path).body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _members(info) -> dict[str, tuple[list[str], dict, bool]]:
    """name -> (parameters after self, their literal defaults, is a property) of the class's methods."""
    node = _class_node(info)
    if node is not None and not node.bases:
        found = {}
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = [*item.args.posonlyargs, *item.args.args][1:] + list(item.args.kwonlyargs)
                positional = [*item.args.posonlyargs, *item.args.args]
                defaults = dict(
                    zip([a.arg for a in positional[len(positional) - len(item.args.defaults) :]], item.args.defaults)
                )
                defaults |= {a.arg: d for a, d in zip(item.args.kwonlyargs, item.args.kw_defaults) if d is not None}
                shown = {k: (v.value if isinstance(v, ast.Constant) else v) for k, v in defaults.items()}
                is_property = any(isinstance(d, ast.Name) and d.id == "property" for d in item.decorator_list)
                found[item.name] = ([a.arg for a in args], shown, is_property)
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                found |= {t.id: ([], {}, True) for t in targets if isinstance(t, ast.Name)}
        return found
    from robustkit.attacks.registry import load_class  # a subclass: its inherited methods need the class

    cls, found = load_class(info.name), {}
    for name in ("__init__", "params", *INTERFACE):
        member = inspect.getattr_static(cls, name, None)
        if member is None:
            continue
        if isinstance(member, property) or not callable(member):
            found[name] = ([], {}, True)
            continue
        listed = list(inspect.signature(member).parameters.values())[1:]
        defaults = {p.name: p.default for p in listed if p.default is not inspect.Parameter.empty}
        found[name] = ([p.name for p in listed], defaults, False)
    return found


def _interface(info, context: dict) -> list[str]:
    members, found = _members(info), []
    if "params" not in members:
        found.append("it has no params (the options that change its results: the cache key)")
    for method, (wanted, defaults) in INTERFACE.items():
        if method not in members:
            found.append(f"it has no {method}({', '.join(wanted)})")
            continue
        taken, given, _ = members[method]
        if taken != list(wanted) or any(given.get(k, "missing") != v for k, v in defaults.items()):
            found.append(f"{method} takes ({', '.join(taken)}), not ({', '.join(wanted)}) with budget=None")
    return found


def _options(info, context: dict) -> list[str]:
    taken, given, _ = _members(info).get("__init__", ([], {}, False))
    return [f"its constructor's option {name!r} has no default" for name in taken if name not in given]


def _declaration(info, context: dict) -> list[str]:
    found = [] if info.label != info.name else ["its label is its name (how figures name it: say what it does)"]
    if _class_node(info) is None:
        found.append(f"{info.source} is not a class of that module")
    return found


RULES = (
    Rule(
        "declaration",
        "write name, label, success_unit, needs_openattack and nltk_data as literal class attributes of an "
        "@register_attack class",
        _declaration,
    ),
    Rule(
        "interface",
        "give it the interface of robustkit.attacks.base.Attack: a params property, predict(victim, sentence) and "
        "attack(victim, example, budget=None)",
        _interface,
    ),
    Rule(
        "options", "give every constructor keyword a default: `robustkit analyze attack` builds it from names", _options
    ),
)
