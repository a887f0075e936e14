"""Adversarial attacks on trained runs: PWWS by OpenAttack (reference) and a batched engine.

- :func:`configure_openattack`: OpenAttack offline, from an NLTK data tree;
- :class:`Victim`: a run's model queried without gradients, memoized; :func:`as_openattack`;
- :func:`attack_openattack`, :func:`attack_fast`: one untargeted PWWS attack -> :class:`AttackResult`.
"""

from robustkit.attack.offline import AttackDataError, configure_openattack
from robustkit.attack.pwws import (
    AttackResult,
    attack_fast,
    attack_openattack,
    pwws_attacker,
)
from robustkit.attack.victim import Victim, as_openattack

__all__ = [
    "AttackDataError",
    "AttackResult",
    "Victim",
    "as_openattack",
    "attack_fast",
    "attack_openattack",
    "configure_openattack",
    "pwws_attacker",
]
