"""The attack registry: every attack is one module, found without importing it.

An attack is a class with :class:`robustkit.attacks.base.Attack`'s interface, decorated with
:func:`register_attack`, whose class attributes (literals) say what the rest of robustkit needs
to know: ``name`` (required: the ``--attackers`` value, the ``attacker`` column), ``label`` (how
figures name it), ``success_unit`` (``"%"`` or ``"fraction"``, :func:`success_metric`),
``needs_openattack`` and ``nltk_data`` (what the analysis sets up before attacking).

The registry reads those literals from the module's source (:func:`discover`), so listing the
attacks imports neither the attack nor what it imports (torch, OpenAttack); :func:`load_class`
imports the module when the attack is built, and the decorator then checks the class has what
its source said. Attacks come from this package's modules (adding one is one module in
``robustkit/attacks/``), from a module of your own once imported
(``robustkit.attacks.load_attacks("path/to/charswap.py")``) and, for the command line, from the
modules named in ``$ROBUSTKIT_ATTACKS``.

Each attribute and each source in full: ``docs/reference.md``, "robustkit/attacks/registry.py".
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from robustkit.errors import RobustkitError
from robustkit.user_modules import import_file

ENV = "ROBUSTKIT_ATTACKS"
DECORATOR = "register_attack"
SUCCESS_UNITS = ("%", "fraction")
# attribute -> (default, check of a value): what register_attack reads from a class
_ATTRIBUTES: dict[str, tuple[Any, Callable[[Any], bool]]] = {
    "name": (None, lambda v: isinstance(v, str) and bool(v) and "," not in v and "/" not in v),
    "label": (None, lambda v: isinstance(v, str) and bool(v)),
    "success_unit": ("%", lambda v: v in SUCCESS_UNITS),
    "needs_openattack": (False, lambda v: isinstance(v, bool)),
    "nltk_data": ((), lambda v: isinstance(v, tuple) and all(isinstance(p, str) and p for p in v)),
}

C = TypeVar("C", bound=type)


@dataclass(frozen=True)
class AttackInfo:
    """What the registry knows about one attack, before (or without) importing it.

    Attributes
    ----------
    name, label, success_unit, needs_openattack, nltk_data
        The class's attributes (module docstring); ``label`` defaults to ``name``.
    source : str
        ``"module:Class"`` or ``"/path/to/file.py:Class"``: where :func:`load_class` finds it.
    cls : type, optional
        The class, once imported (set by :func:`register_attack`).
    """

    name: str
    label: str
    source: str
    success_unit: str = "%"
    needs_openattack: bool = False
    nltk_data: tuple[str, ...] = ()
    cls: type | None = field(default=None, compare=False, repr=False)


# name -> the attack, in the order found: this package's modules by file name, then $ROBUSTKIT_ATTACKS's.
ATTACKS: dict[str, AttackInfo] = {}


def register_attack(cls: C) -> C:
    """Register an attack class (a decorator; calling it on a class works the same).

    Its class attributes (module docstring) are checked and recorded under its ``name``. A class
    whose module the registry already read is matched against what its source declared.

    Raises
    ------
    RobustkitError
        A missing ``name``, an attribute of the wrong kind, or another class registered already
        under that name.
    """
    values = {key: getattr(cls, key, default) for key, (default, _) in _ATTRIBUTES.items()}
    info = _info(values, f"{cls.__module__}:{cls.__qualname__}", where=f"attack class {cls.__qualname__}")
    known = ATTACKS.get(info.name)
    if known is not None and known.cls is not cls and not _same_source(known, cls):
        raise RobustkitError(f"attacker {info.name!r} is registered already, by {known.source}")
    if known is not None and _same_source(known, cls) and known != _with_source(info, known.source):
        raise RobustkitError(f"{known.source}: its attributes at import {info} differ from its source's {known}")
    ATTACKS[info.name] = AttackInfo(**{**info.__dict__, "source": known.source if known else info.source, "cls": cls})
    return cls


def get(name: str) -> AttackInfo:
    """The attack registered as ``name``.

    Raises
    ------
    RobustkitError
        No such attack (the known ones are named).
    """
    if name not in ATTACKS:
        raise RobustkitError(f"unknown attacker {name!r}; known: {', '.join(ATTACKS)}")
    return ATTACKS[name]


def label_of(name: str) -> str:
    """How figures name attacker ``name``: its ``label``, or the name itself for an attacker not
    registered in this process (rows read from an older cache)."""
    return ATTACKS[name].label if name in ATTACKS else name


def success_metric(name: str) -> str:
    """The score name of attacker ``name``'s success rate in per-run score frames: ``"<name> success"``."""
    return f"{name} success"


def success_metrics(unit: str) -> set[str]:
    """The success scores (:func:`success_metric`) of the registered attacks shown in ``unit``."""
    return {success_metric(name) for name, info in ATTACKS.items() if info.success_unit == unit}


def load_class(name: str) -> type:
    """The class of attacker ``name``, importing its module on first use."""
    info = get(name)
    if info.cls is None:
        module, _, attribute = info.source.rpartition(":")
        loaded = _import_file(Path(module)) if module.endswith(".py") else importlib.import_module(module)
        cls = getattr(loaded, attribute)
        if ATTACKS[name].cls is None:  # a class that does not decorate itself: register it now
            register_attack(cls)
    if ATTACKS[name].cls is None:
        raise RobustkitError(f"{info.source}: its class registered under another name than {name!r}")
    return ATTACKS[name].cls


def load_attacks(source: str | Path) -> list[str]:
    """Import a module of attacks of your own (a ``.py`` file or an importable module name);
    its ``@register_attack`` classes register themselves.

    Returns
    -------
    list of str
        The names of the attacks it registered.
    """
    before = set(ATTACKS)
    text = str(source)
    if text.endswith(".py"):
        _import_file(Path(text))
    else:
        importlib.import_module(text)
    return [name for name in ATTACKS if name not in before]


def discover(folder: str | Path | None = None, package: str | None = None) -> list[str]:
    """Register the attacks declared in the modules of ``folder`` (default: this package's),
    from their source: nothing is imported.

    Parameters
    ----------
    folder : path, optional
        Where to look (its ``*.py`` files, sorted by name); default: ``robustkit/attacks``.
    package : str, optional
        The folder's import name (``robustkit.attacks``): sources are ``"package.module:Class"``;
        None: the files' paths.

    Returns
    -------
    list of str
        The names registered.
    """
    if folder is None:
        folder, package = Path(__file__).parent, __package__
    found = []
    for path in sorted(Path(folder).glob("*.py")):
        module = f"{package}.{path.stem}" if package else None
        found += read_source(path, module)
    return found


def read_source(path: str | Path, module: str | None = None) -> list[str]:
    """Register the ``@register_attack`` classes of one module's source file, without importing it.

    Parameters
    ----------
    path : path
        The ``.py`` file.
    module : str, optional
        Its import name (then the attacks' source is ``"module:Class"``); None: imported from
        the file itself when built.

    Raises
    ------
    RobustkitError
        A declared attribute that is not a literal, or of the wrong kind (file and line named).
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if DECORATOR not in text:  # most modules of the package are not attacks: not parsed
        return []
    names = []
    for node in ast.parse(text, filename=str(path)).body:
        if isinstance(node, ast.ClassDef) and any(_is_decorator(d) for d in node.decorator_list):
            values = {key: default for key, (default, _) in _ATTRIBUTES.items()}
            values.update(_class_literals(node, path))
            where = f"{path}:{node.lineno}"
            info = _info(values, f"{module or path.resolve()}:{node.name}", where)
            known = ATTACKS.get(info.name)
            if known is not None and known.source != info.source:
                raise RobustkitError(f"{where}: attacker {info.name!r} is registered already, by {known.source}")
            ATTACKS[info.name] = info
            names.append(info.name)
    return names


def read_environment() -> list[str]:
    """Register the attacks of the modules named in ``$ROBUSTKIT_ATTACKS`` (module docstring).

    Raises
    ------
    RobustkitError
        A file that does not exist or a module that cannot be found.
    """
    names = []
    for item in filter(None, (part.strip() for part in os.environ.get(ENV, "").split(os.pathsep))):
        if item.endswith(".py"):
            path = Path(item).expanduser()
            if not path.is_file():
                raise RobustkitError(f"${ENV} names {item!r}, which is not a file")
            names += read_source(path)
            continue
        spec = importlib.util.find_spec(item)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            raise RobustkitError(f"${ENV} names module {item!r}, which is not an importable .py module")
        names += read_source(spec.origin, item)
    return names


def _info(values: dict[str, Any], source: str, where: str) -> AttackInfo:
    for key, (_, check) in _ATTRIBUTES.items():
        value = values[key]
        if key == "label" and value is None:
            continue
        if not check(value):
            allowed = f" (one of {', '.join(SUCCESS_UNITS)})" if key == "success_unit" else ""
            raise RobustkitError(f"{where}: attribute {key} = {value!r} is not valid{allowed}")
    return AttackInfo(**{**values, "label": values["label"] or values["name"], "source": source})


def _same_source(known: AttackInfo, cls: type) -> bool:
    """Whether ``known`` (read from a source) is ``cls``: same class name in the same module or file."""
    module, _, attribute = known.source.rpartition(":")
    if attribute != cls.__qualname__:
        return False
    if module == cls.__module__:
        return True
    file = getattr(sys.modules.get(cls.__module__), "__file__", None)
    return module.endswith(".py") and file is not None and Path(file).resolve() == Path(module).resolve()


def _with_source(info: AttackInfo, source: str) -> AttackInfo:
    return AttackInfo(**{**info.__dict__, "source": source, "cls": None})


def _is_decorator(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == DECORATOR) or (
        isinstance(node, ast.Attribute) and node.attr == DECORATOR
    )


def _class_literals(node: ast.ClassDef, path: Path) -> dict[str, Any]:
    """The class body's assignments of :data:`_ATTRIBUTES` names, as literals."""
    values = {}
    for statement in node.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in _ATTRIBUTES:
            try:
                values[target.id] = ast.literal_eval(value)
            except ValueError:
                raise RobustkitError(
                    f"{path}:{statement.lineno}: {node.name}.{target.id} must be a literal (the registry reads it "
                    "without importing the module)"
                ) from None
    return values


def _import_file(path: Path):
    """Import a ``.py`` file as a module of its own (once per file; named after its path)."""
    path = path.expanduser().resolve()
    name = f"robustkit_user_attacks.{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    return import_file(path, name)
