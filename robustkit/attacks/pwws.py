"""PWWS (Ren et al. 2019), untargeted: OpenAttack's engine and a fast engine with its results.

PWWSAttacker.attack (OpenAttack 2.1.1), on the lowercased sentence tokenized into n words, with
``p(x)`` the victim's probability of the target class for a text ``x``:

1. saliency: one query of n + 1 sentences (each word replaced by ``<UNK>``, then the original);
   ``S_i = p(x) - p(x with <UNK> at i)``, ``softmax(S)``;
2. for each position whose word has k > 0 WordNet substitutes (other than itself): one query of
   k + 1 sentences (each substitute, then the original); the best substitute lowers ``p`` most
   (first minimum), ``dP_i = p(x) - min p(substitute)``;
3. greedy: positions sorted by ``H_i = softmax(S)_i x dP_i`` (descending, stable sort; a position
   without substitutes scores ``softmax(S)_i x 0``), replaced one after the other (filter words
   skipped), one query per step, until the prediction (first argmax) leaves ``target``.

:class:`PWWS` is the attack behind :mod:`robustkit.attacks`' interface; its ``engine`` option
picks :func:`attack_openattack`, which runs OpenAttack's own code on the float64 victim
(``--engine openattack``), or :func:`attack_fast`, which takes every decision of steps 1-3 that
OpenAttack takes, on the same float64 numbers, but mostly without computing them:

How: certified float32 decisions (each float32 probability turned into an interval that holds the
float64 one; overlapping decisions taken on float64), the bound, and the other savings are written
out in ``docs/analyses.md``, "PWWS's fast engine". ``tests/test_attacks.py`` checks that both
engines give identical adversarial texts, success, queries and modified words.
"""

from __future__ import annotations

import math
import time
import warnings
import weakref
from typing import Any, ClassVar

import numpy as np
import torch
from OpenAttack.attack_assist.goal import ClassifierGoal
from OpenAttack.attackers import PWWSAttacker
from OpenAttack.exceptions import InvokeLimitExceeded, WordNotInDictionaryException

from robustkit.attacks import offline
from robustkit.attacks.base import AttackResult, Example
from robustkit.attacks.registry import register_attack
from robustkit.attacks.victim import Victim, as_openattack
from robustkit.errors import RobustkitError

# Greedy prefixes checked per victim call: 1, 2, 4, ... The first prefix is one of the substitute
# sentences already scored (a memo hit), and most attacks that succeed do so within a few steps.
FIRST_CHUNK = 1

# Smallest bound D on |log-odds(float32) - log-odds(float64)| (see the module docstring): 100x the
# largest error measured (9.9e-7 over 50 attacks on a trained minilm-l6 run; 5e-8 on bert-tiny).
MARGIN_ERROR = 1e-4
SAFETY = 100  # D >= SAFETY x the largest error measured (calibration) or seen (audits)
ROUNDING = 1e-12  # relative slack for float64 roundoff and batch noise (module docstring)
# Lazy evaluation: substitute sentences of the first scoring round. Smaller first rounds score
# fewer sentences in all (polarity, minilm-l6 full, 20 examples: 92.4 per example scoring all
# first, 89.4 with 64, 81.6 with 8, 80.0 with 1) for a few more, smaller batches (3.9, 4.3,
# 4.5, 4.6 per example).
SCORE_CHUNK = 8

_attackers: dict[tuple[str, ...], PWWSAttacker] = {}


ENGINES = ("fast", "openattack")


@register_attack
class PWWS:
    """Untargeted PWWS behind :class:`robustkit.attacks.Attack`'s interface.

    Parameters
    ----------
    engine : str
        ``fast``: :func:`attack_fast` with certified float32 decisions by a twin of each victim
        (identical outputs); ``openattack``: :func:`attack_openattack`.
    lazy : bool
        The fast engine's lazy evaluation of positions (identical outputs either way).
    certify : bool
        The fast engine's float32 twin; without it every number is float64.
    onednn : bool
        The twin's linear layers on oneDNN's kernel where a probe shows the same logits
        (:mod:`robustkit.attacks.onednn`); else on PyTorch's BLAS.
    """

    name: ClassVar[str] = "pwws"
    label: ClassVar[str] = "PWWS"
    success_unit: ClassVar[str] = "%"
    needs_openattack: ClassVar[bool] = True
    # its tokenizer (Punkt, the tagger) and its substitutes (WordNet): offline.RESOURCES
    nltk_data: ClassVar[tuple[str, ...]] = (
        "tokenizers/punkt_tab/english",
        "taggers/averaged_perceptron_tagger_eng",
        "corpora/wordnet",
    )

    def __init__(self, engine: str = "fast", lazy: bool = True, certify: bool = True, onednn: bool = True) -> None:
        if engine not in ENGINES:
            raise RobustkitError(f"unknown attack engine {engine!r}; known: {', '.join(ENGINES)}")
        self.engine = engine
        self.lazy = lazy
        self.certify = certify
        self.onednn = onednn
        # One float32 twin per victim, made on first use and dropped with the victim.
        self._screens: weakref.WeakKeyDictionary[Victim, Screen] = weakref.WeakKeyDictionary()

    @property
    def params(self) -> dict[str, Any]:
        # lazy, certify and onednn change costs, never results; the NLTK data (the tagger
        # above all) changes which words are tried
        return {"engine": self.engine, "nltk_data": offline.data_identity()}

    def predict(self, victim: Victim, sentence: str) -> int:
        """The float64 prediction (first argmax); the fast engine takes it from the float32 twin
        where the twin's intervals certify it, else from the float64 victim."""
        if self.engine == "openattack" or not self.certify:
            return int(victim.get_pred([sentence])[0])
        return certified_prediction(self._screen(victim, sentence), victim, sentence)

    def attack(self, victim: Victim, example: Example, budget: int | None = None) -> AttackResult:
        if self.engine == "openattack":
            return attack_openattack(victim, example.sentence, example.target, query_budget=budget)
        screen = self._screen(victim, example.sentence) if self.certify else None
        result = attack_fast(
            victim, example.sentence, example.target, query_budget=budget, screen=screen, lazy=self.lazy
        )
        if screen is not None:  # the first example attacked pays for measuring the twin's error
            result.forward_passes += screen.uncharged
            screen.uncharged = 0
        return result

    def _screen(self, victim: Victim, sentence: str) -> Screen:
        """The victim's float32 twin, made and calibrated on ``sentence``'s saliency query at first use."""
        if victim not in self._screens:
            before = victim.forwards
            screen = Screen.calibrated(victim, _saliency_sentences(pwws_attacker(), sentence), onednn=self.onednn)
            screen.uncharged = victim.forwards - before + screen.victim.forwards
            self._screens[victim] = screen
        return self._screens[victim]


class BoundViolation(Exception):
    """A float64 probability fell outside the interval its float32 twin certified."""


class Screen:
    """A float32 twin of a victim and the bound ``D`` on its log-odds error (module docstring).

    Attributes
    ----------
    victim : Victim
        The twin (:meth:`Victim.screening`).
    margin_error : float
        ``D``.
    largest_error : float
        The largest log-odds error measured or audited so far.
    audited : int
        Sentences checked in both precisions (calibration and fallbacks).
    """

    def __init__(self, twin: Victim, margin_error: float = MARGIN_ERROR) -> None:
        self.victim = twin
        self.margin_error = margin_error
        self.largest_error = 0.0
        self.audited = 0
        self.uncharged = 0  # sentences run to calibrate, not yet counted in an attack's forward passes

    @classmethod
    def calibrated(cls, victim: Victim, sentences: list[str], onednn: bool = True) -> Screen:
        """A twin of ``victim`` (:meth:`Victim.screening`) with
        ``D = max(MARGIN_ERROR, SAFETY x error measured on sentences)``."""
        screen = cls(victim.screening(onednn=onednn))
        if sentences:
            measured = max(
                log_odds_error(r, e) for r, e in zip(screen.victim.get_prob(sentences), victim.get_prob(sentences))
            )
            screen.largest_error = measured
            screen.audited = len(sentences)
            screen.margin_error = max(MARGIN_ERROR, SAFETY * measured)
        return screen

    def bounds(self, row: np.ndarray, cls: int) -> tuple[float, float]:
        """Interval certain to hold the float64 probability of class ``cls`` (float32 ``row``)."""
        p = float(row[cls])
        others = float(row[:cls].sum() + row[cls + 1 :].sum())  # no 1 - p: it cancels near 1
        grow = math.exp(self.margin_error)
        low = p / (p + grow * others)
        high = p / (p + others / grow)
        return low * (1 - ROUNDING), min(1.0, high * (1 + ROUNDING) + 1e-300)

    def audit(self, rough: np.ndarray, exact: np.ndarray) -> None:
        """Check the bound's assumption on one sentence run in both precisions: its log-odds
        error is at most ``D`` (then every interval :meth:`bounds` gives it holds the float64 value)."""
        error = log_odds_error(rough, exact)
        self.largest_error = max(self.largest_error, error)
        self.audited += 1
        if error > self.margin_error:
            self.margin_error = max(self.margin_error, SAFETY * error)
            raise BoundViolation(f"float32 log-odds error {error:.2e} beyond the bound; now {self.margin_error:.2e}")


def certified_prediction(screen: Screen, victim: Victim, sentence: str) -> int:
    """The float64 victim's prediction of ``sentence`` (first argmax), from the twin's row where
    its intervals certify it: the twin's argmax is the float64 one when a greedy check with it
    as the target (:meth:`_Probs.flipped`) is certain the prediction stays. Else the float64 row
    decides, and the twin's row is audited against it (:meth:`_Probs.refine`)."""
    (rough,) = screen.victim.get_prob([sentence])
    probs = _Probs(victim, screen, int(rough.argmax()))
    probs.look([sentence])
    if probs.flipped(sentence) is False:
        return probs.target
    try:
        probs.refine([sentence])
    except BoundViolation as violation:  # D is widened; this prediction is float64 anyway
        warnings.warn(f"PWWS: {violation}", RuntimeWarning, stacklevel=2)
    return int(victim.get_pred([sentence])[0])  # a memo hit: refine ran it


def log_odds_error(rough: np.ndarray, exact: np.ndarray) -> float:
    """max over classes c of |log r_c(rough) - log r_c(exact)|, r_c = sum_{k != c} p_k / p_c."""
    worst = 0.0
    for c in range(len(exact)):
        odds = []
        for row in (rough, exact):
            others = float(row[:c].sum() + row[c + 1 :].sum())
            odds.append(math.log(others) - math.log(row[c]) if others > 0 and row[c] > 0 else None)
        if None not in odds:
            worst = max(worst, abs(odds[0] - odds[1]))
    return worst


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
    before = victim.forwards
    attacker = pwws_attacker()
    words = _words(attacker, sentence)
    if not words:
        return _result(sentence, None, target, 0, words, started, 0)
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
    return _result(sentence, adversarial, target, queries, words, started, victim.forwards - before)


def attack_fast(
    victim: Victim,
    sentence: str,
    target: int,
    query_budget: int | None = None,
    screen: Screen | Victim | None = None,
    lazy: bool = True,
) -> AttackResult:
    """Untargeted PWWS; same results as :func:`attack_openattack` (see the module docstring).

    Parameters
    ----------
    victim : Victim
        The victim (float64 for batch-independent results).
    sentence, target, query_budget
        As in :func:`attack_openattack`.
    screen : Screen or Victim, optional
        A float32 twin that takes the decisions it can certify (a bare :class:`Victim` twin gets
        ``D`` = :data:`MARGIN_ERROR`); None: every number is float64.
    lazy : bool
        Score positions only as the greedy order needs them (module docstring).
    """
    started = time.perf_counter()
    if isinstance(screen, Victim):
        screen = Screen(screen)
    models = [victim] + ([screen.victim] if screen is not None else [])
    before = sum(model.forwards for model in models)
    attacker = pwws_attacker()
    tagged = attacker.tokenizer.tokenize(sentence.lower())
    words = [word for word, _ in tagged]
    if not words:
        return _result(sentence, None, target, 0, words, started, 0)
    substitutes = [_substitutes(attacker, word, pos) for word, pos in tagged]
    calls = [len(words) + 1] + [len(s) + 1 for s in substitutes if s]
    spent, calls_made = _spend(calls, query_budget)
    if calls_made < len(calls):
        return _result(sentence, None, target, spent, words, started, 0)
    attackable = [i for i, word in enumerate(words) if word not in attacker.filter_words]
    allowed = len(attackable) if query_budget is None else min(len(attackable), query_budget - spent)
    try:
        hit = _Search(attacker, victim, screen, words, substitutes, attackable, target, lazy).run(allowed)
    except BoundViolation as violation:
        warnings.warn(f"PWWS: {violation}; this example is redone in float64", RuntimeWarning, stacklevel=2)
        hit = _Search(attacker, victim, None, words, substitutes, attackable, target, lazy).run(allowed)
    forwards = sum(model.forwards for model in models) - before
    if hit is None:
        return _result(sentence, None, target, spent + allowed, words, started, forwards)
    step, text = hit
    return _result(sentence, text, target, spent + step + 1, words, started, forwards)


def _words(attacker: PWWSAttacker, sentence: str) -> list[str]:
    return attacker.tokenizer.tokenize(sentence.lower(), pos_tagging=False)


def _saliency_sentences(attacker: PWWSAttacker, sentence: str) -> list[str]:
    """Step 1's query: each word replaced by ``<UNK>``, then the original."""
    words = _words(attacker, sentence)
    detokenize = attacker.tokenizer.detokenize
    return [detokenize(words[:i] + [attacker.token_unk] + words[i + 1 :]) for i in range(len(words))] + (
        [detokenize(words)] if words else []
    )


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


class _Probs:
    """The probabilities of one attack's sentences: float64 rows, or float32 rows with intervals."""

    def __init__(self, victim: Victim, screen: Screen | None, target: int) -> None:
        self.victim, self.screen, self.target = victim, screen, target
        self.exact: dict[str, np.ndarray] = {}
        self.rough: dict[str, np.ndarray] = {}
        self.version = 0  # changes whenever a number becomes exact

    def look(self, sentences: list[str]) -> None:
        """Make sure every sentence has a row (float32 with a screen, else float64)."""
        missing = [s for s in dict.fromkeys(sentences) if s not in self.exact and s not in self.rough]
        if not missing:
            return
        if self.screen is None:
            self.exact.update(zip(missing, self.victim.get_prob(missing)))
            self.version += 1
        else:
            self.rough.update(zip(missing, self.screen.victim.get_prob(missing)))

    def refine(self, sentences: list[str]) -> None:
        """Run in float64 the sentences that are not yet, auditing their float32 intervals."""
        missing = [s for s in dict.fromkeys(sentences) if s not in self.exact]
        if not missing:
            return
        for sentence, row in zip(missing, self.victim.get_prob(missing)):
            if sentence in self.rough:
                self.screen.audit(self.rough[sentence], row)
            self.exact[sentence] = row
        self.version += 1

    def is_exact(self, sentence: str) -> bool:
        return sentence in self.exact

    def bounds(self, sentence: str, cls: int | None = None) -> tuple[float, float]:
        cls = self.target if cls is None else cls
        if sentence in self.exact:
            value = float(self.exact[sentence][cls])
            return value, value
        return self.screen.bounds(self.rough[sentence], cls)

    def flipped(self, sentence: str) -> bool | None:
        """Whether the prediction (first argmax) is not the target; None when not certain."""
        if sentence in self.exact:
            return bool(self.exact[sentence].argmax() != self.target)
        y = self.target
        low_y, high_y = self.bounds(sentence, y)
        certain_fail = True
        for c in range(len(self.rough[sentence])):
            if c == y:
                continue
            low, high = self.bounds(sentence, c)
            if low > high_y or (c < y and low >= high_y):
                return True
            if not (high < low_y or (c > y and high <= low_y)):
                certain_fail = False
        return False if certain_fail else None


class _Search:
    """One attack's steps 2-3 on certified numbers (module docstring)."""

    def __init__(self, attacker, victim, screen, words, substitutes, attackable, target, lazy) -> None:
        self.detokenize = attacker.tokenizer.detokenize
        unk = attacker.token_unk
        self.words = words
        self.probs = _Probs(victim, screen, target)
        self.saliency = [self.detokenize(words[:i] + [unk] + words[i + 1 :]) for i in range(len(words))]
        self.original = self.detokenize(words)
        self.positions = np.array(attackable, dtype=int)
        self.substitutes = substitutes
        self.swaps = {
            i: [self.detokenize(words[:i] + [s] + words[i + 1 :]) for s in substitutes[i]]
            for i in attackable
            if substitutes[i]
        }
        self.best: dict[int, int] = {}  # position -> index of its best substitute
        self.lazy = lazy
        self._cache: tuple | None = None

    # -- scoring (step 2) ------------------------------------------------------------------------

    def _score(self, positions: list[int]) -> None:
        """Best substitute of each position: certified from intervals, float64 where they overlap."""
        self.probs.look([s for i in positions for s in self.swaps[i]])
        contested = {}
        for i in positions:
            bounds = [self.probs.bounds(s) for s in self.swaps[i]]
            lowest_high = min(high for _, high in bounds)
            leaders = [k for k, (low, _) in enumerate(bounds) if low <= lowest_high]
            if len(leaders) == 1:
                self.best[i] = leaders[0]
            else:
                contested[i] = leaders
        if contested:
            self.probs.refine([self.swaps[i][k] for i, leaders in contested.items() for k in leaders])
            for i, leaders in contested.items():
                values = np.array([self.probs.exact[self.swaps[i][k]][self.probs.target] for k in leaders])
                self.best[i] = leaders[int(values.argmin())]  # first minimum, in substitute order

    def _best_sentence(self, i: int) -> str:
        return self.swaps[i][self.best[i]]

    def _round(self, positions: list[int]) -> list[int]:
        """The positions to score next among unscored ``positions``: the largest upper bounds
        first, until SCORE_CHUNK sentences (at least one position)."""
        _, high, _ = self._bounds()
        index = {int(i): k for k, i in enumerate(self.positions)}
        chosen, size = [], 0
        for i in sorted(positions, key=lambda i: (-high[index[i]], i)):
            if size >= SCORE_CHUNK:
                break
            chosen.append(i)
            size += len(self.swaps[i])
        return chosen

    # -- the greedy order (step 3) ---------------------------------------------------------------

    def _bounds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per attackable position: bounds of K_i (widened by ROUNDING), and OpenAttack's H_i where
        it is known exactly (NaN elsewhere)."""
        key = (self.probs.version, len(self.probs.rough), len(self.best))
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        probs, count = self.probs, len(self.positions)
        # Only the <UNK> sentences of positions with substitutes run (the others' K is 0).
        sal = np.array(
            [probs.bounds(self.saliency[i]) if i in self.swaps else (0.0, 0.0) for i in self.positions]
        ).reshape(count, 2)
        orig_low, orig_high = probs.bounds(self.original)
        e_low, e_high = np.exp(-sal[:, 1]), np.exp(-sal[:, 0])
        m_low, m_high, scored, no_swap = np.zeros(count), np.ones(count), np.zeros(count, bool), np.zeros(count, bool)
        for k, i in enumerate(self.positions):
            if i not in self.swaps:
                no_swap[k] = True
            elif i in self.best:
                m_low[k], m_high[k] = probs.bounds(self._best_sentence(i))
                scored[k] = True
        d_low, d_high = orig_low - m_high, orig_high - m_low
        low = np.where(d_low >= 0, e_low * d_low, e_high * d_low)
        high = np.where(d_high >= 0, e_high * d_high, e_low * d_high)
        low, high = low - np.abs(low) * ROUNDING, high + np.abs(high) * ROUNDING
        low[no_swap], high[no_swap] = 0.0, 0.0
        exact = np.full(count, np.nan)
        exact[no_swap] = 0.0  # softmax(S)_i x 0, whatever softmax(S)
        if all(probs.is_exact(s) for s in self.saliency) and probs.is_exact(self.original):
            # Same numpy operations, on arrays of the same values and order, as PWWSAttacker.
            res = np.array([probs.exact[s][probs.target] for s in self.saliency + [self.original]])
            salience = res[-1] - res[:-1]
            softmax = np.exp(salience - salience.max())
            softmax = softmax / softmax.sum()
            prob_orig = res[-1]
            for k, i in enumerate(self.positions):
                if scored[k] and probs.is_exact(self._best_sentence(i)):
                    exact[k] = softmax[i] * (prob_orig - probs.exact[self._best_sentence(i)][probs.target])
        result = (low, high, exact)
        self._cache = (key, result)
        return result

    def _blockers(self, c: int, remaining: np.ndarray) -> np.ndarray:
        """Indices of remaining positions that ``c`` does not certainly precede."""
        low, high, exact = self._bounds()
        both = ~np.isnan(exact[c]) & ~np.isnan(exact)
        by_exact = (exact[c] > exact) | ((exact[c] == exact) & (c < np.arange(len(exact))))
        by_bounds = (low[c] > high) | ((low[c] >= high) & (c < np.arange(len(low))))
        precedes = np.where(both, by_exact, by_bounds)
        return np.flatnonzero(remaining & ~precedes & (np.arange(len(low)) != c))

    def _next(self, remaining: np.ndarray) -> int:
        """Index (into the attackable positions) of the first remaining position of the greedy order."""
        local_done: set = set()
        while True:
            low, _, _ = self._bounds()
            c = int(np.flatnonzero(remaining)[np.argmax(low[remaining])])  # first maximum: lowest index
            blockers = self._blockers(c, remaining)
            if not len(blockers):
                return c
            group = [c] + [int(b) for b in blockers]
            positions = [int(self.positions[k]) for k in group]
            unscored = [i for i in positions if i in self.swaps and i not in self.best]
            if unscored:
                self._score(unscored)  # capping this round saves no sentences, costs batches
                continue
            _, _, exact = self._bounds()
            if np.isnan(exact[group]).any():
                sentences = [self._best_sentence(i) for i in positions if i in self.swaps]
                if frozenset(group) not in local_done:
                    local_done.add(frozenset(group))
                    self.probs.refine([self.saliency[i] for i in positions] + [self.original] + sentences)
                else:
                    self.probs.refine(self.saliency + [self.original] + sentences)  # all: OpenAttack's softmax
                continue
            # Every position involved has OpenAttack's own H: the first of them by the stable sort
            # precedes c, which precedes every other remaining position.
            return min(group, key=lambda k: (-exact[k], k))

    def _first_success(self, texts: list[str]) -> int | None:
        """Index of the first text not predicted as the target, certified or checked in float64."""
        self.probs.look(texts)
        verdicts = [self.probs.flipped(t) for t in texts]
        first = next((k for k, v in enumerate(verdicts) if v is True), len(texts))
        unsure = [t for t, v in zip(texts[:first], verdicts) if v is None]
        if unsure:
            self.probs.refine(unsure)
            verdicts = [self.probs.flipped(t) for t in texts[: first + 1]]
        return next((k for k, v in enumerate(verdicts) if v), None)

    def run(self, allowed: int) -> tuple[int, str] | None:
        """(greedy step, text) of the first success within ``allowed`` steps, or None."""
        if allowed <= 0:
            return None
        needed = [self.saliency[i] for i in self.swaps] + [self.original]  # the rest only for exact H
        if self.lazy:
            self.probs.look(needed)
            first = self._round([i for i in self.swaps if i not in self.best])
            if first:
                self._score(first)
        else:
            self.probs.look(needed + [s for group in self.swaps.values() for s in group])
            self._score(list(self.swaps))
        remaining = np.ones(len(self.positions), bool)
        current = list(self.words)
        step, size = 0, FIRST_CHUNK
        while step < allowed:
            texts = []
            for _ in range(min(size, allowed - step)):
                k = self._next(remaining)
                remaining[k] = False
                i = int(self.positions[k])
                current[i] = self.substitutes[i][self.best[i]] if i in self.swaps else self.words[i]
                texts.append(self.detokenize(current))
            hit = self._first_success(texts)
            if hit is not None:
                return step + hit, texts[hit]
            step, size = step + len(texts), 2 * size
        return None


def _result(
    sentence: str,
    adversarial: str | None,
    target: int,
    queries: int,
    words: list[str],
    started: float,
    forward_passes: int | None = None,
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
        forward_passes=forward_passes,
    )
