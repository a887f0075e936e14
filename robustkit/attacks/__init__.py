"""Adversarial attacks on trained runs, one object per attack behind one interface.

- :mod:`robustkit.attacks.base`: the interface (:class:`Attack`: ``predict(victim, sentence)
  -> int``, the target, and ``attack(victim, example, budget) -> AttackResult``),
  :class:`Example`, :class:`AttackResult`, per-example seeding;
- :mod:`robustkit.attacks.victim`: the shared victim (:class:`~robustkit.attacks.victim.Victim`,
  a run's model queried without gradients, memoized);
- :mod:`robustkit.attacks.offline`: OpenAttack offline, from an NLTK data tree;
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
from robustkit.errors import RobustkitError

# name -> the attack's class ("module:Class"), or any callable that builds it from keyword options.
ATTACKS: dict[str, str | Callable[..., Attack]] = {
    "pwws": "robustkit.attacks.pwws:PWWS",
    "deepwordbug": "robustkit.attacks.deepwordbug:DeepWordBug",
}


def create(name: str, **options: Any) -> Attack:
    """The attack ``name``, built with those ``options`` its constructor takes.

    Options an attack does not take are not passed (a caller can give every attack the same
    options, e.g. PWWS's ``engine`` and a seed, whatever the attacker).

    Raises
    ------
    RobustkitError
        ``name`` is not in :data:`ATTACKS`.
    """
    if name not in ATTACKS:
        raise RobustkitError(f"unknown attacker {name!r}; known: {', '.join(ATTACKS)}")
    factory = ATTACKS[name]
    if isinstance(factory, str):
        module, _, attribute = factory.partition(":")
        factory = getattr(importlib.import_module(module), attribute)
    accepted = inspect.signature(factory).parameters
    return factory(**{key: value for key, value in options.items() if key in accepted})


__all__ = ["ATTACKS", "Attack", "AttackResult", "Example", "create"]
