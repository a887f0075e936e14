"""PWWS (Ren et al. 2019), untargeted: OpenAttack's engine and a batched engine with its results.

PWWSAttacker.attack (OpenAttack 2.1.1), on the lowercased sentence tokenized into n words:

1. saliency: one query of n + 1 sentences (each word replaced by ``<UNK>``, then the original);
2. for each position whose word has k > 0 WordNet substitutes (other than itself): one query of
   k + 1 sentences (each substitute, then the original); the best substitute lowers the
   target's probability most (first minimum);
3. greedy: positions sorted by saliency softmax x probability drop (stable sort), replaced one
   after the other (filter words skipped), one query per step, until the prediction leaves
   ``target``.

:class:`PWWS` is the attack behind :mod:`robustkit.attacks`' interface; its ``engine`` option
picks :func:`attack_openattack`, which runs OpenAttack's own code, or :func:`attack_fast`, which
sends steps 1-2 as one deduplicated batch (skipping the substitutes of filter words, which step
3 never uses) and step 3 in growing chunks of prefixes, then replays OpenAttack's arithmetic on
the same numbers, so both return the same adversarial text, success and query count. A sentence
without words fails with 0 queries in both (OpenAttack's code would raise on its empty saliency
array).

Where the time goes: the k + 1 substitute sentences of every position must all be scored to
rank the positions exactly (bounding unscored positions by a probability drop <= p(target)
would skip only ~4% of them, measured on rt with a trained bert-tiny). Batching and dedup save
the repeated original sentences and ~4x of the forward passes, which on CPU, where a pass costs
in proportion to its sentences, gains little; it pays on GPUs.

Float32 screening (``screen=``): on CPU most of the remaining cost is the float64 arithmetic that
makes results batch-independent (see :mod:`robustkit.attacks.victim`), spent mostly on substitutes
that are not a position's best. With a float32 twin of the victim, :func:`attack_fast` scores
the substitutes in float32 only to rule out those that cannot be the best: a substitute is out
when, with every logit off by up to :data:`LOGIT_ERROR` (100x the largest float32 error
measured; ``bench/attack.py`` reports it), its probability stays above the leader's. The
candidates left (usually one) are scored in float64, and so is every number PWWS's arithmetic
uses (saliency, original and best-substitute probabilities, greedy checks): the engine's
decisions, texts and query counts are the float64 victim's, from about a third of its float64
sentences.

Query count (``AttackResult.queries``)
    The sentences PWWSAttacker.attack sends to the victim: (n + 1) + sum(k + 1 over positions
    with k > 0) + greedy steps taken. Not counted: the prediction of the original sentence
    that chooses ``target`` (the caller makes it) and the re-check of the adversarial text
    that OpenAttack's ``AttackEval`` adds. :func:`attack_fast` computes the count analytically;
    ``Victim.forwards`` shows what it really ran.

Query budget
    A call (a group of sentences, as above) that would take the count past ``query_budget`` is
    not made and the attack fails, with ``queries`` = the count before that call. OpenAttack's
    engine enforces it with OpenAttack's own ``invoke_limit`` (``Victim.set_context``), which
    raises ``InvokeLimitExceeded`` before such a call; :func:`attack_fast` applies the same rule
    to the analytic count.
"""

from __future__ import annotations

import time
import weakref
from typing import Any, ClassVar

import numpy as np
import torch
from OpenAttack.attack_assist.goal import ClassifierGoal
from OpenAttack.attackers import PWWSAttacker
from OpenAttack.exceptions import InvokeLimitExceeded, WordNotInDictionaryException

from robustkit.attacks import offline
from robustkit.attacks.base import AttackResult, Example
from robustkit.attacks.victim import Victim, as_openattack
from robustkit.errors import RobustkitError

# Greedy prefixes checked per victim call: 1, 2, 4, ... The first prefix is one of the substitute
# sentences already scored (a memo hit), and most attacks that succeed do so within a few steps.
FIRST_CHUNK = 1

# Largest |float32 logit - float64 logit| screening allows for: 100x the largest difference
# measured (9.9e-7 over 50 attacks on a trained minilm-l6 run; 5e-8 on random-head bert-tiny).
LOGIT_ERROR = 1e-4
PROB_FLOOR = 1e-12  # float64's own rounding and batch noise (< 3e-15), which float32 cannot see

_attackers: dict[tuple[str, ...], PWWSAttacker] = {}


ENGINES = ("fast", "openattack")


class PWWS:
    """Untargeted PWWS behind :class:`robustkit.attacks.Attack`'s interface.

    Parameters
    ----------
    engine : str
        ``fast``: :func:`attack_fast` with float32 screening by a twin of each victim (identical
        outputs); ``openattack``: :func:`attack_openattack`.
    """

    name: ClassVar[str] = "pwws"

    def __init__(self, engine: str = "fast") -> None:
        if engine not in ENGINES:
            raise RobustkitError(f"unknown attack engine {engine!r}; known: {', '.join(ENGINES)}")
        self.engine = engine
        # One float32 twin per victim, made on first use and dropped with the victim.
        self._screens: weakref.WeakKeyDictionary[Victim, Victim] = weakref.WeakKeyDictionary()

    @property
    def params(self) -> dict[str, Any]:
        return {"engine": self.engine}

    def attack(self, victim: Victim, example: Example, budget: int | None = None) -> AttackResult:
        if self.engine == "openattack":
            return attack_openattack(victim, example.sentence, example.target, query_budget=budget)
        if victim not in self._screens:
            self._screens[victim] = victim.screening()
        return attack_fast(victim, example.sentence, example.target, query_budget=budget, screen=self._screens[victim])


def pwws_attacker() -> PWWSAttacker:
    """OpenAttack's ``PWWSAttacker`` with its defaults (one per NLTK data configuration).

    Configures OpenAttack offline (:func:`robustkit.attacks.offline.configure_openattack`,
    ``$NLTK_DATA`` or NLTK's default folders) unless that was done already.
    """
    if offline.configured_roots() is None:
        offline.configure_openattack()
    roots = offline.configured_roots()
    if roots not in _attackers:
        _attackers[roots] = PWWSAttacker()
    return _attackers[roots]


def attack_openattack(victim: Victim, sentence: str, target: int, query_budget: int | None = None) -> AttackResult:
    """Untargeted PWWS by OpenAttack's own ``PWWSAttacker.attack``.

    Parameters
    ----------
    victim : Victim
    sentence : str
    target : int
        The label to move away from (usually the victim's prediction of ``sentence``).
    query_budget : int, optional
        Most queries allowed; see the module docstring.
    """
    started = time.perf_counter()
    attacker = pwws_attacker()
    words = _words(attacker, sentence)
    if not words:
        return _result(sentence, None, target, 0, words, started)
    classifier = as_openattack(victim)
    classifier.set_context({"x": sentence}, query_budget)
    try:
        with torch.no_grad():
            adversarial = attacker.attack(classifier, sentence, ClassifierGoal(target, targeted=False))
    except InvokeLimitExceeded:
        adversarial = None
    finally:
        queries = classifier.context.invoke
        classifier.clear_context()
    return _result(sentence, adversarial, target, queries, words, started)


def attack_fast(
    victim: Victim, sentence: str, target: int, query_budget: int | None = None, screen: Victim | None = None
) -> AttackResult:
    """Untargeted PWWS, batched; same results as :func:`attack_openattack` (see the module docstring).

    Parameters
    ----------
    victim : Victim
        The victim (float64 for batch-independent results).
    sentence, target, query_budget
        As in :func:`attack_openattack`.
    screen : Victim, optional
        A float32 twin of ``victim`` (:meth:`Victim.screening`) that rules out substitutes.
    """
    started = time.perf_counter()
    attacker = pwws_attacker()
    tagged = attacker.tokenizer.tokenize(sentence.lower())
    words = [word for word, _ in tagged]
    if not words:
        return _result(sentence, None, target, 0, words, started)
    substitutes = [_substitutes(attacker, word, pos) for word, pos in tagged]
    calls = [len(words) + 1] + [len(s) + 1 for s in substitutes if s]
    spent, calls_made = _spend(calls, query_budget)
    if calls_made < len(calls):
        return _result(sentence, None, target, spent, words, started)
    attackable = [i for i, word in enumerate(words) if word not in attacker.filter_words]
    best, scores = _scores(attacker, victim, words, substitutes, attackable, target, screen)
    steps = _greedy_sentences(attacker, words, attackable, best, scores)
    allowed = len(steps) if query_budget is None else min(len(steps), query_budget - spent)
    hit = _first_success(victim, steps[:allowed], target)
    if hit is None:
        return _result(sentence, None, target, spent + allowed, words, started)
    return _result(sentence, steps[hit], target, spent + hit + 1, words, started)


def _words(attacker: PWWSAttacker, sentence: str) -> list[str]:
    return attacker.tokenizer.tokenize(sentence.lower(), pos_tagging=False)


def _substitutes(attacker: PWWSAttacker, word: str, pos: str) -> list[str]:
    """The replacement candidates ``PWWSAttacker.get_wstar`` tries for one word, in its order."""
    try:
        candidates = [candidate for candidate, _ in attacker.substitute(word, pos)]
    except WordNotInDictionaryException:
        return []
    return [candidate for candidate in candidates if candidate != word]


def _spend(calls: list[int], budget: int | None) -> tuple[int, int]:
    """(queries spent, calls made) when calls of these sizes are made in order within ``budget``."""
    spent = 0
    for made, size in enumerate(calls):
        if budget is not None and spent + size > budget:
            return spent, made
        spent += size
    return spent, len(calls)


def _scores(
    attacker: PWWSAttacker,
    victim: Victim,
    words: list[str],
    substitutes: list[list[str]],
    attackable: list[int],
    target: int,
    screen: Victim | None = None,
) -> tuple[list[str], list]:
    """Best substitute and PWWS score of each attackable position, from batched queries.

    Returns
    -------
    best : list of str, length len(attackable)
        Per position, the substitute lowering the target's probability most (the word
        itself when it has none).
    scores : list of numpy scalars, length len(attackable)
        Per position, softmax(saliency) x probability drop, as OpenAttack computes it.
    """
    detokenize, unk = attacker.tokenizer.detokenize, attacker.token_unk
    original = detokenize(words)
    saliency = [detokenize(words[:i] + [unk] + words[i + 1 :]) for i in range(len(words))] + [original]
    swaps = {i: [detokenize(words[:i] + [s] + words[i + 1 :]) for s in substitutes[i]]
             for i in attackable if substitutes[i]}
    leaders = swaps if screen is None else _screen(screen, swaps, target)
    prob = _target_probs(victim, saliency + [s for group in leaders.values() for s in group], target)

    # Same numpy operations, on arrays of the same values and order, as PWWSAttacker.
    res = prob(saliency)
    salience = res[-1] - res[:-1]
    softmax = np.exp(salience - salience.max())
    softmax = softmax / softmax.sum()
    prob_orig = res[-1]
    best, scores = [], []
    for i in attackable:
        if i not in swaps:
            best.append(words[i])
            scores.append(softmax[i] * 0)
            continue
        # Screened out substitutes score above the leaders in any precision: the first minimum
        # over the leaders (kept in their order) is the first minimum over all.
        group = leaders[i]
        res = prob(group)
        best.append(substitutes[i][swaps[i].index(group[res.argmin()])])
        scores.append(softmax[i] * (prob_orig - res.min()))
    return best, scores


def _target_probs(victim: Victim, sentences: list[str], target: int):
    """Query the distinct sentences once; return ``lookup(list) -> probabilities of target``."""
    distinct = list(dict.fromkeys(sentences))
    row = {sentence: i for i, sentence in enumerate(distinct)}
    column = victim.get_prob(distinct)[:, target]
    return lambda group: column[[row[s] for s in group]]


def _screen(screen: Victim, swaps: dict[int, list[str]], target: int) -> dict[int, list[str]]:
    """Per position, the substitute sentences that could be its best (lowest target probability).

    A sentence stays when its float32 probability, lowered by its error bound, is at most the
    float32 minimum raised by the minimum's bound; the first-order bound on a probability p when
    every logit moves by up to e is 2 p (1 - p) e, doubled here for the float32 softmax input.
    """
    prob = _target_probs(screen, [s for group in swaps.values() for s in group], target)
    leaders = {}
    for i, group in swaps.items():
        res = prob(group)
        bound = 4 * res * (1 - res) * LOGIT_ERROR + PROB_FLOOR
        k = res.argmin()
        leaders[i] = [s for s, low in zip(group, res - bound) if low <= res[k] + bound[k]]
    return leaders


def _greedy_sentences(
    attacker: PWWSAttacker, words: list[str], positions: list[int], best: list[str], scores: list
) -> list[str]:
    """The texts PWWS's greedy phase checks, in order: each adds one more replacement.

    OpenAttack sorts every position and skips filter words while replacing; sorting only the
    others gives them the same relative order (``sorted`` is stable).
    """
    order = sorted(zip(positions, best, scores), key=lambda entry: -entry[2])
    current = list(words)
    steps = []
    for position, word, _ in order:
        current[position] = word
        steps.append(attacker.tokenizer.detokenize(current))
    return steps


def _first_success(victim: Victim, steps: list[str], target: int) -> int | None:
    """Index of the first text not predicted as ``target``, checked in growing chunks."""
    start, size = 0, FIRST_CHUNK
    while start < len(steps):
        hits = np.flatnonzero(victim.get_pred(steps[start : start + size]) != target)
        if hits.size:
            return start + int(hits[0])
        start, size = start + size, 2 * size
    return None


def _result(
    sentence: str, adversarial: str | None, target: int, queries: int, words: list[str], started: float
) -> AttackResult:
    # The default tokenizer detokenizes with " ".join, and neither its tokens nor WordNet's
    # substitutes hold spaces: the adversarial text splits back into aligned words.
    modified = 0 if adversarial is None else sum(a != b for a, b in zip(words, adversarial.split(" ")))
    return AttackResult(
        original=sentence,
        adversarial=adversarial,
        success=adversarial is not None,
        target=target,
        queries=queries,
        modified_words=modified,
        words=len(words),
        seconds=time.perf_counter() - started,
    )
