"""Adversarial attacks on trained runs, one object per attack behind one interface.

- :mod:`robustkit.attacks.base`: the interface (:class:`Attack`: ``predict(victim, sentence)
  -> int``, the target, and ``attack(victim, example, budget) -> AttackResult``),
  :class:`Example`, :class:`AttackResult`, per-example seeding;
- :mod:`robustkit.attacks.victim`: the shared victim (:class:`~robustkit.attacks.victim.Victim`,
  a run's model queried without gradients, memoized);
- :mod:`robustkit.attacks.offline`: OpenAttack offline, from an NLTK data tree;
- :mod:`robustkit.attacks.compat`: OpenAttack 2.1.1's import on Python 3.12+ (applied here, before
  any module of this package imports OpenAttack);
- the attacks, one module each: :mod:`~robustkit.attacks.pwws` (PWWS, Ren et al. 2019; OpenAttack's
  engine and a fast one with its results: certified float32 decisions, lazy scoring) and
  :mod:`~robustkit.attacks.deepwordbug` (DeepWordBug, Gao et al. 2018, by OpenAttack).

Adding an attack is one module with a class that has the interface, and one line in
:data:`ATTACKS`. The registry names classes by import path, imported only when an attack is
built: importing it (for command-line choices or the figure registry) loads neither torch's
models nor OpenAttack.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from robustkit.attacks.base import Attack, AttackResult, Example
from robustkit.attacks.compat import restore_find_loader
from robustkit.errors import RobustkitError

restore_find_loader()  # a no-op on Python 3.11; see robustkit.attacks.compat

# name -> the attack's class ("module:Class"), or any callable that builds it from keyword options.
ATTACKS: dict[str, str | Callable[..., Attack]] = {
    "pwws": "robustkit.attacks.pwws:PWWS",
    "deepwordbug": "robustkit.attacks.deepwordbug:DeepWordBug",
}


def _factory(name: str) -> Callable[..., Attack]:
    if name not in ATTACKS:
        raise RobustkitError(f"unknown attacker {name!r}; known: {', '.join(ATTACKS)}")
    factory = ATTACKS[name]
    if isinstance(factory, str):
        module, _, attribute = factory.partition(":")
        factory = getattr(importlib.import_module(module), attribute)
    return factory


def options_of(name: str) -> set[str]:
    """The options attacker ``name`` takes (its constructor's keywords; ``seed`` is robustkit's own,
    given by the analysis)."""
    return {key for key in inspect.signature(_factory(name)).parameters if key != "seed"}


def accepted_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """Those of ``options`` that attacker ``name`` takes."""
    return {key: value for key, value in options.items() if key in options_of(name)}


def parse_options(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``["engine=openattack", "power=3"]`` -> ``{"engine": "openattack", "power": 3}`` (numbers
    and true/false are converted; the rest stays text)."""
    options: dict[str, Any] = {}
    for item in items:
        key, eq, text = str(item).partition("=")
        if not eq or not key.strip():
            raise RobustkitError(f"an attack option is NAME=VALUE, got {item!r}")
        value: Any = text.strip()
        for convert in (int, float):
            try:
                value = convert(value)
                break
            except ValueError:
                continue
        if value in ("true", "false"):
            value = value == "true"
        options[key.strip()] = value
    return options


def create(name: str, seed: int | None = None, **options: Any) -> Attack:
    """The attack ``name``, built with ``options`` (and ``seed`` where the attacker is randomized).

    Raises
    ------
    RobustkitError
        ``name`` is not in :data:`ATTACKS`, or an option it does not take (the ones it takes are
        named): a misspelt option never vanishes.
    """
    factory = _factory(name)
    accepted = options_of(name)
    unknown = sorted(set(options) - accepted)
    if unknown:
        raise RobustkitError(
            f"attacker {name!r} takes no option(s) {unknown}; it takes: {', '.join(sorted(accepted)) or 'none'}"
        )
    if seed is not None and "seed" in inspect.signature(factory).parameters:
        options["seed"] = seed
    return factory(**options)


__all__ = ["ATTACKS", "Attack", "AttackResult", "Example", "accepted_options", "create", "options_of", "parse_options"]
