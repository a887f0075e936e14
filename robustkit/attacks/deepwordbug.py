"""DeepWordBug (Gao et al. 2018), untargeted, by OpenAttack's own ``DeepWordBugAttacker``.

DeepWordBugAttacker.attack (OpenAttack 2.1.1, defaults: ``replaceone`` scoring, ``homoglyph``
transform, ``power`` 5), on the sentence as given (not lowercased) tokenized into n words:

1. scoring: n queries of one sentence each, word i replaced by ``<UNK>``; a word's score is the
   target's probability without it (lower = more important);
2. the ``power`` most important words each get one character, drawn at random, replaced by a
   look-alike Unicode character (``homoglyph``);
3. one query of the modified sentence: the attack succeeds when its prediction is not the
   target.

:class:`DeepWordBug` seeds NumPy's global generator per example from (seed, example index), so
a result depends on the example only; ``AttackResult.queries`` counts n + 1, under OpenAttack's
``invoke_limit`` as the query budget; step 1's sentences are prefetched as one batch (the
decisions stay OpenAttack's). It needs only OpenAttack's default tokenizer, whose NLTK resources
:mod:`robustkit.attacks.offline` supplies.

Randomness, query count, query budget and batching in full: ``docs/analyses.md``,
"robustkit/attacks/deepwordbug.py".
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from OpenAttack.attack_assist.goal import ClassifierGoal
from OpenAttack.attackers import DeepWordBugAttacker
from OpenAttack.exceptions import InvokeLimitExceeded

from robustkit.attacks import offline
from robustkit.attacks.base import AttackResult, Example, seeded
from robustkit.attacks.registry import register_attack
from robustkit.attacks.victim import Victim, as_openattack

_attackers: dict[tuple[tuple[str, ...], int], DeepWordBugAttacker] = {}


@register_attack
class DeepWordBug:
    """Untargeted DeepWordBug behind :class:`robustkit.attacks.Attack`'s interface.

    Parameters
    ----------
    seed : int
        With each example's index, seeds the choice of the characters replaced.
    power : int
        Most words modified (OpenAttack's default: 5).
    prefetch : bool
        Score the ``<UNK>`` sentences in one batch before OpenAttack asks for them one by one
        (see the module docstring); the results do not depend on it beyond float64 rounding.
    """

    name: ClassVar[str] = "deepwordbug"
    label: ClassVar[str] = "DeepWordBug"
    success_unit: ClassVar[str] = "%"
    needs_openattack: ClassVar[bool] = True
    nltk_data: ClassVar[tuple[str, ...]] = ("tokenizers/punkt_tab/english", "taggers/averaged_perceptron_tagger_eng")

    def __init__(self, seed: int = 0, power: int = 5, prefetch: bool = True) -> None:
        self.seed = seed
        self.power = power
        self.prefetch = prefetch

    @property
    def params(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "power": self.power,
            "nltk_data": offline.data_identity(),
        }  # its tokenizer reads Punkt

    def predict(self, victim: Victim, sentence: str) -> int:
        return int(victim.get_pred([sentence])[0])

    def attack(self, victim: Victim, example: Example, budget: int | None = None) -> AttackResult:
        started = time.perf_counter()
        before = victim.forwards
        attacker = deepwordbug_attacker(self.power)
        words = attacker.tokenizer.tokenize(example.sentence, pos_tagging=False)
        if not words:
            return _result(example, None, 0, words, started)
        if self.prefetch and (budget is None or budget >= len(words)):
            victim.get_prob(_scoring_sentences(attacker, words))
        classifier = as_openattack(victim)
        classifier.set_context({"x": example.sentence}, budget)
        try:
            with seeded(self.seed, example.index):
                adversarial = attacker.attack(
                    classifier, example.sentence, ClassifierGoal(example.target, targeted=False)
                )
        except InvokeLimitExceeded:
            adversarial = None
        finally:
            queries = classifier.context.invoke
            classifier.clear_context()
        result = _result(example, adversarial, queries, words, started)
        result.forward_passes = victim.forwards - before
        return result


def deepwordbug_attacker(power: int = 5) -> DeepWordBugAttacker:
    """OpenAttack's ``DeepWordBugAttacker`` with its defaults but ``power`` (one per NLTK data
    configuration); configures OpenAttack offline unless that was done already."""
    if offline.configured_roots() is None:
        offline.configure_openattack()
    key = (offline.configured_roots(), power)
    if key not in _attackers:
        _attackers[key] = DeepWordBugAttacker(power=power)
    return _attackers[key]


def _scoring_sentences(attacker: DeepWordBugAttacker, words: list[str]) -> list[str]:
    """The sentences ``DeepWordBugAttacker.replaceone`` scores, in its order."""
    return [attacker.tokenizer.detokenize(words[:i] + [attacker.token_unk] + words[i + 1 :]) for i in range(len(words))]


def _result(example: Example, adversarial: str | None, queries: int, words: list[str], started: float) -> AttackResult:
    # The default tokenizer detokenizes with " ".join; neither its tokens nor the homoglyphs hold
    # spaces, so the adversarial text splits back into aligned words.
    modified = 0 if adversarial is None else sum(a != b for a, b in zip(words, adversarial.split(" ")))
    return AttackResult(
        original=example.sentence,
        adversarial=adversarial,
        success=adversarial is not None,
        target=example.target,
        queries=queries,
        modified_words=modified,
        words=len(words),
        seconds=time.perf_counter() - started,
    )
