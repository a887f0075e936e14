"""One interface for every attack: ``attack(victim, example, budget) -> AttackResult``.

An attack is an object built from keyword options (:func:`create` routes them by name, so an
option one attack does not take, e.g. PWWS's ``engine`` for DeepWordBug, is not passed to it)
that attacks one :class:`Example` on a :class:`~robustkit.attacks.victim.Victim` within a
query budget. Its :attr:`Attack.params` are the options that change its results: the analysis
puts them in its cache key.

Attacks are untargeted: each moves away from ``Example.target`` (the victim's own prediction
in :mod:`robustkit.analysis.attack`), so one attack per example serves both of the analysis's
success conventions.

Randomized attacks draw from a generator seeded by (seed, example index) (:func:`seeded`): an
example's result does not depend on which examples were attacked before it, so an interrupted
analysis resumes with the results an uninterrupted one would have given.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

# NumPy is imported where used: the registry (this package) is read by `robustkit --help`,
# which imports no heavy library.
if TYPE_CHECKING:  # the victim imports torch and OpenAttack
    from robustkit.attacks.victim import Victim


@dataclass(frozen=True)
class Example:
    """One input to attack.

    Attributes
    ----------
    sentence : str
        The text as given.
    target : int
        The label the attack moves away from (usually the victim's prediction of ``sentence``).
    index : int
        The example's position in its split: with the attack's seed, it seeds randomized attacks.
    """

    sentence: str
    target: int
    index: int = 0


@dataclass
class AttackResult:
    """One untargeted attack on one example.

    Attributes
    ----------
    original : str
        The sentence as given.
    adversarial : str or None
        The attack's adversarial text (as its tokenizer detokenizes it); None on failure.
    success : bool
        The victim's prediction of ``adversarial`` is not ``target``.
    target : int
        The label the attack moves away from.
    queries : int
        Victim queries the attack made (each attack's module says which it counts).
    modified_words : int
        Words of ``adversarial`` that differ from the original's (0 on failure).
    words : int
        Words of the original, as the attack's tokenizer splits it.
    seconds : float
        Wall time of the attack.
    forward_passes : int or None
        Sentences the attack really ran through a model (every precision; memo hits and repeats
        not counted), where ``queries`` counts what the attack asked for. None: not counted.
    """

    original: str
    adversarial: str | None
    success: bool
    target: int
    queries: int
    modified_words: int
    words: int
    seconds: float
    forward_passes: int | None = None


class Attack(Protocol):
    """What :mod:`robustkit.analysis.attack` needs from an attack.

    Its class also declares, as literals, what the registry, the analysis and the figures read
    (:mod:`robustkit.attacks.registry`): ``name``, and optionally ``label``, ``success_unit``,
    ``needs_openattack`` and ``nltk_data``.
    """

    name: ClassVar[str]

    @property
    def params(self) -> dict[str, Any]:
        """The options that change results (JSON-serialisable): part of the analysis's cache key."""
        ...

    def predict(self, victim: Victim, sentence: str) -> int:
        """The victim's prediction of ``sentence`` (first argmax of its float64 probabilities):
        the target the attack moves away from."""
        ...

    def attack(self, victim: Victim, example: Example, budget: int | None = None) -> AttackResult:
        """Attack ``example`` on ``victim`` with at most ``budget`` queries (None: no limit)."""
        ...


def example_seed(seed: int, index: int) -> int:
    """A 32-bit seed for one example, from the attack's seed and the example's index.

    ``SeedSequence`` mixes the pair so that neighbouring examples (or seeds) get unrelated streams.
    """
    import numpy as np

    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


@contextmanager
def seeded(seed: int, index: int) -> Iterator[None]:
    """Seed Python's and NumPy's global generators for one example; restore them afterwards.

    OpenAttack's attackers draw from the global ``random`` and ``numpy.random`` state; restoring
    it keeps the attack from shifting the random streams of whatever runs after it.
    """
    import numpy as np

    python_state, numpy_state = random.getstate(), np.random.get_state()
    value = example_seed(seed, index)
    random.seed(value)
    np.random.seed(value)
    try:
        yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
