"""The attack interface and its registry, and DeepWordBug through it (OpenAttack's, seeded)."""

from __future__ import annotations

import random

import nltk
import numpy as np
import pytest
from OpenAttack.attack_assist.goal import ClassifierGoal

from robustkit import attacks
from robustkit.attacks.base import Example, example_seed, seeded
from robustkit.attacks.deepwordbug import DeepWordBug, deepwordbug_attacker
from robustkit.attacks.offline import configure_openattack, data_identity
from robustkit.attacks.pwws import PWWS, attack_openattack
from robustkit.attacks.victim import Victim, as_openattack
from robustkit.errors import RobustkitError
from robustkit.models import load_tokenizer
from robustkit.run_model import build_classifier
from robustkit.spec import RunSpec
from robustkit.tasks import load_splits

N_EXAMPLES = 12


@pytest.fixture(autouse=True)
def _nltk_data(monkeypatch, shared_nltk_data):
    monkeypatch.setenv("NLTK_DATA", shared_nltk_data)
    monkeypatch.setattr(nltk.data, "path", list(nltk.data.path))
    configure_openattack()


@pytest.fixture(scope="module")
def victim() -> Victim:
    """bert-tiny with its random head (seed 0): untrained, but its predictions can be flipped."""
    model, _, _ = build_classifier(RunSpec(model="bert-tiny", task="rt", method="full"), num_labels=2)
    return Victim(model, load_tokenizer("bert-tiny"), max_length=64)


@pytest.fixture(scope="module")
def examples(victim) -> list[Example]:
    sentences = load_splits("rt")["test"]["sentence"][:N_EXAMPLES]
    return [Example(s, int(t), index=i) for i, (s, t) in enumerate(zip(sentences, victim.get_pred(sentences)))]


def _outcome(result) -> tuple:
    return result.adversarial, result.success, result.queries, result.modified_words, result.words


def test_registry_builds_each_attack_with_the_options_it_takes():
    pwws = attacks.create("pwws", engine="openattack", seed=3)
    assert (
        isinstance(pwws, PWWS)
        and pwws.name == "pwws"
        and pwws.params == {"engine": "openattack", "nltk_data": data_identity()}
    )
    bug = attacks.create("deepwordbug", seed=3)
    assert isinstance(bug, DeepWordBug) and bug.params == {"seed": 3, "power": 5, "nltk_data": data_identity()}
    # engine is PWWS's only: given to another attacker it is an error, never dropped
    with pytest.raises(
        RobustkitError, match=r"attacker 'deepwordbug' takes no option\(s\) \['engine'\]; it takes: power, prefetch"
    ):
        attacks.create("deepwordbug", engine="openattack", seed=3)
    assert attacks.options_of("pwws") >= {"engine"} and attacks.parse_options(["engine=openattack", "power=3"]) == {
        "engine": "openattack",
        "power": 3,
    }
    with pytest.raises(RobustkitError, match="unknown attacker 'nope'; known: pwws, deepwordbug"):
        attacks.create("nope")
    with pytest.raises(RobustkitError, match="unknown attack engine 'slow'"):
        attacks.create("pwws", engine="slow")


def test_an_attack_is_one_registry_line(monkeypatch):
    class Echo:
        name = "echo"

        def __init__(self, seed: int = 0) -> None:
            self.seed = seed

        @property
        def params(self):
            return {"seed": self.seed}

        def predict(self, victim, sentence):
            return 0

        def attack(self, victim, example, budget=None):
            return attacks.AttackResult(example.sentence, None, False, example.target, 0, 0, 0, 0.0)

    monkeypatch.setitem(attacks.ATTACKS, "echo", Echo)
    echo = attacks.create("echo", seed=7)
    assert echo.params == {"seed": 7}
    assert echo.attack(None, Example("a film .", 1)).target == 1


@pytest.mark.slow
def test_pwws_through_the_interface_is_openattacks_pwws(victim, examples):
    for engine in ("fast", "openattack"):
        pwws = PWWS(engine)
        for example in examples[:4]:
            victim.clear_cache()
            reference = attack_openattack(victim, example.sentence, example.target)
            victim.clear_cache()
            assert _outcome(pwws.attack(victim, example)) == _outcome(reference), (engine, example.sentence)


@pytest.mark.slow
def test_deepwordbug_is_openattacks_attack_under_the_example_seed(victim, examples):
    """The wrapper adds a seed, a prefetch batch and counting; the texts are OpenAttack's own."""
    attacker = deepwordbug_attacker()
    results = []
    for example in examples:
        victim.clear_cache()
        with seeded(0, example.index):
            reference = attacker.attack(as_openattack(victim), example.sentence, ClassifierGoal(example.target, False))
        victim.clear_cache()
        result = DeepWordBug(seed=0).attack(victim, example)
        assert result.adversarial == reference, example.sentence
        results.append(result)
    success = np.mean([r.success for r in results])
    assert 0 < success < 1
    for result in results:
        assert result.queries == result.words + 1
        if result.success:
            assert 1 <= result.modified_words <= 5
            assert victim.get_pred([result.adversarial])[0] != result.target


@pytest.mark.slow
def test_deepwordbug_is_reproducible_whatever_ran_before(victim, examples):
    """Seeded per (seed, example index): the same result alone, after other examples, or with a
    cold memo, so an interrupted analysis resumes with the results it would have had."""
    attack = DeepWordBug(seed=1)
    forward = [_outcome(attack.attack(victim, e)) for e in examples]
    victim.clear_cache()
    backward = [_outcome(attack.attack(victim, e)) for e in reversed(examples)][::-1]
    assert forward == backward
    unbatched = DeepWordBug(seed=1, prefetch=False)
    victim.clear_cache()
    assert [_outcome(unbatched.attack(victim, e)) for e in examples] == forward
    other = [_outcome(DeepWordBug(seed=2).attack(victim, e)) for e in examples]
    assert [o[0] for o in other] != [f[0] for f in forward]  # the seed does choose the characters


def test_deepwordbug_leaves_the_global_generators_as_it_found_them(victim, examples):
    np.random.seed(123)
    random.seed(123)
    expected = (np.random.random(), random.random())
    np.random.seed(123)
    random.seed(123)
    DeepWordBug(seed=0).attack(victim, examples[0])
    assert (np.random.random(), random.random()) == expected
    assert example_seed(0, 1) != example_seed(1, 0)


def test_deepwordbug_query_budget_and_empty_text(victim, examples):
    example = examples[0]
    free = DeepWordBug().attack(victim, example)
    assert free.queries == free.words + 1
    assert _outcome(DeepWordBug().attack(victim, example, budget=free.queries)) == _outcome(free)
    cut = DeepWordBug().attack(victim, example, budget=free.words)  # no query left for the check
    assert (cut.success, cut.adversarial, cut.queries) == (False, None, free.words)
    early = DeepWordBug().attack(victim, example, budget=3)  # stops while scoring words
    assert not early.success and early.queries == 3
    empty = DeepWordBug().attack(victim, Example("", 0))
    assert (empty.success, empty.queries, empty.words) == (False, 0, 0)
