"""Adversarial attacks on trained runs, one object per attack behind one interface.

- :mod:`robustkit.attacks.base`: the interface (:class:`Attack`: ``predict(victim, sentence)
  -> int``, the target, and ``attack(victim, example, budget) -> AttackResult``),
  :class:`Example`, :class:`AttackResult`, per-example seeding;
- :mod:`robustkit.attacks.registry`: the registry (:data:`ATTACKS`), :func:`register_attack`
  and what each attack declares (its figure label, the unit of its success rate, whether it
  needs OpenAttack and which NLTK data);
- :mod:`robustkit.attacks.victim`: the shared victim (:class:`~robustkit.attacks.victim.Victim`,
  a run's model queried without gradients, memoized);
- :mod:`robustkit.attacks.offline`: OpenAttack offline, from an NLTK data tree;
- :mod:`robustkit.attacks.compat`: OpenAttack 2.1.1's import on Python 3.12+ (applied here, before
  any module of this package imports OpenAttack);
- the attacks, one module each, found by the registry: :mod:`~robustkit.attacks.pwws` (PWWS, Ren
  et al. 2019; OpenAttack's engine and a fast one with its results: certified float32 decisions,
  lazy scoring) and :mod:`~robustkit.attacks.deepwordbug` (DeepWordBug, Gao et al. 2018, by
  OpenAttack).

Adding an attack is one module with a ``@register_attack`` class that has the interface: in
``robustkit/attacks/`` it is found on import, elsewhere ``load_attacks(path)`` (or
``$ROBUSTKIT_ATTACKS`` for the command line) registers it (see :mod:`robustkit.attacks.registry`).
The registry reads the attacks' sources, and imports an attack's module only when it is built:
importing this package (for command-line choices or the figure registry) loads neither torch's
models nor OpenAttack.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from robustkit.attacks import registry
from robustkit.attacks.base import Attack, AttackResult, Example
from robustkit.attacks.compat import restore_find_loader
from robustkit.attacks.registry import (
    ATTACKS,
    AttackInfo,
    label_of,
    load_attacks,
    register_attack,
    success_metric,
)
from robustkit.attacks.registry import get as info
from robustkit.errors import RobustkitError

restore_find_loader()  # a no-op on Python 3.11; see robustkit.attacks.compat

registry.discover()  # this package's attack modules, read from their source
registry.read_environment()  # the researcher's own, named in $ROBUSTKIT_ATTACKS


def _factory(name: str) -> Callable[..., Attack]:
    return registry.load_class(name)


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


def prepare(name: str) -> None:
    """Make the data attacker ``name`` declares it reads available: OpenAttack configured offline
    where it ``needs_openattack`` (:func:`robustkit.attacks.offline.configure_openattack`), folders
    holding its ``nltk_data`` on NLTK's path (:func:`robustkit.attacks.nltk_data.use`); nothing
    for an attack that declares neither (no NLTK data is looked up, no asset fetched).

    Raises
    ------
    RobustkitError
        ``name`` is unknown.
    AttackDataError
        Data it needs is missing; the message names the attacker, then what is missing and how
        to install it.
    """
    declared = info(name)
    if not declared.needs_openattack and not declared.nltk_data:
        return
    from robustkit.attacks import nltk_data, offline

    try:
        if declared.nltk_data:
            nltk_data.use(declared.nltk_data)
        if declared.needs_openattack:
            offline.configure_openattack()
    except nltk_data.AttackDataError as error:
        raise nltk_data.AttackDataError(f"attacker {name!r} ({declared.label}): {error}") from None


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


__all__ = [
    "ATTACKS",
    "Attack",
    "AttackInfo",
    "AttackResult",
    "Example",
    "accepted_options",
    "create",
    "info",
    "label_of",
    "load_attacks",
    "options_of",
    "parse_options",
    "prepare",
    "register_attack",
    "success_metric",
]
