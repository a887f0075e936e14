"""The attack interface and its registry, and DeepWordBug through it (OpenAttack's, seeded)."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import nltk
import numpy as np
import pytest
from OpenAttack.attack_assist.goal import ClassifierGoal

from robustkit import attacks
from robustkit.attacks import nltk_data, offline, registry
from robustkit.attacks.base import Example, example_seed, seeded
from robustkit.attacks.deepwordbug import DeepWordBug, deepwordbug_attacker
from robustkit.attacks.offline import configure_openattack, data_identity
from robustkit.attacks.pwws import PWWS, attack_openattack
from robustkit.attacks.victim import Victim, as_openattack
from robustkit.data.tasks import load_splits
from robustkit.errors import RobustkitError
from robustkit.figures import units
from robustkit.models.pretrained import load_tokenizer
from robustkit.specs.spec import RunSpec
from robustkit.train.run_model import build_classifier

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
    with pytest.raises(
        RobustkitError, match=re.escape(f"unknown attacker 'nope'; known: {', '.join(attacks.ATTACKS)}")
    ):
        attacks.create("nope")
    with pytest.raises(RobustkitError, match="unknown attack engine 'slow'"):
        attacks.create("pwws", engine="slow")


@pytest.fixture
def registered():
    """Attacks a test registers leave the registry with it."""
    before = dict(attacks.ATTACKS)
    yield
    attacks.ATTACKS.clear()
    attacks.ATTACKS.update(before)


def _echo(**attributes):
    """An attack class that changes nothing, with the given class attributes."""

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

    for key, value in attributes.items():
        setattr(Echo, key, value)
    return Echo


def test_an_attack_registers_itself_with_what_it_declares(registered):
    echo_class = attacks.register_attack(_echo(label="Echo!", success_unit="fraction"))
    echo = attacks.create("echo", seed=7)
    assert echo.params == {"seed": 7} and isinstance(echo, echo_class)
    assert echo.attack(None, Example("a film .", 1)).target == 1
    info = attacks.info("echo")
    assert (info.label, info.success_unit, info.needs_openattack, info.nltk_data) == ("Echo!", "fraction", False, ())
    # its success is shown as it declares, wherever figures look units up
    assert "echo success" not in units.PERCENT and units.scale("echo success") == 1.0
    with pytest.raises(RobustkitError, match="attacker 'echo' is registered already"):
        attacks.register_attack(type("Impostor", (), {"name": "echo"}))  # another class, the same name
    for bad in ({"success_unit": "percent"}, {"needs_openattack": "yes"}, {"nltk_data": ["corpora/wordnet"]}):
        with pytest.raises(RobustkitError, match=f"attribute {next(iter(bad))} = .* is not valid"):
            attacks.register_attack(_echo(name="bad", **bad))
    with pytest.raises(RobustkitError, match="attribute name = None"):
        attacks.register_attack(type("Nameless", (), {}))


def test_an_attack_registered_later_is_a_choice_of_the_analysis_and_its_figures(registered, monkeypatch, tmp_path):
    """The attack analysis's declaration was read before this attack registered: its attackers
    are the registry's as it is now (the analysis, its figures and its statistic take it), and its
    help names the attacks registered when it was read, with their labels."""
    import pandas as pd

    from robustkit import figures
    from robustkit.analysis import attack
    from robustkit.analysis.registry import AnalysisError, get

    analysis = get("attack")
    listed = ", ".join(f"{name} ({info.label})" for name, info in attacks.ATTACKS.items())
    (attackers,) = [p for p in analysis.params if p.name == "attackers"]
    assert listed in attackers.help and "echo" not in attackers.help
    with pytest.raises(AnalysisError, match="must be one of"):
        analysis.resolve(attackers="pwws,echo")

    attacks.register_attack(_echo(label="Echo!"))
    assert analysis.resolve(attackers="pwws,echo")["attackers"] == ["pwws", "echo"]
    assert figures.get("attack-vs-tsp").resolve(attackers="echo")["attackers"] == ["echo"]
    (statistic,) = analysis.statistics
    assert [p for p in statistic.params if p.name == "attacker"][0].coerce("echo") == "echo"
    ran = []

    def run(store, select=None, attacker=None, **kwargs):  # what the analysis calls per attacker
        from robustkit.analysis.each_run import record_provenance

        ran.append(attacker)
        record_provenance(f"run/{attacker}", {"device": "cpu"})  # as each run's attack does (the device contract)
        return pd.DataFrame({"attacker": [attacker]})

    monkeypatch.setattr(attack, "run_attacker", run)
    frame = analysis.run(tmp_path, attackers="echo,pwws", progress=False)
    assert ran == ["echo", "pwws"] and list(frame.attacker) == ["echo", "pwws"]
    with pytest.raises(AnalysisError, match="must be one of"):
        analysis.run(tmp_path, attackers="nope")


@pytest.mark.parametrize("name", sorted(attacks.ATTACKS))
def test_each_attack_declares_in_its_source_what_its_class_has(name):
    """The registry reads an attack's attributes from its module's source (the command line's
    choices import no attack); built, the class has the same attributes, and figures read them."""
    info = attacks.info(name)
    cls = registry.load_class(name)
    assert cls.name == name and attacks.info(name) == info
    assert (cls.label, cls.success_unit, cls.needs_openattack, cls.nltk_data) == (
        info.label,
        info.success_unit,
        info.needs_openattack,
        info.nltk_data,
    )
    assert (attacks.success_metric(name) in units.PERCENT) == (info.success_unit == "%")
    if info.needs_openattack:  # OpenAttack's configuration provides what they read
        assert set(info.nltk_data) <= {r.nltk_path.rstrip("/") for r in offline.RESOURCES}


def test_listing_the_attacks_imports_none_of_them():
    code = (
        "import sys, json; from robustkit import attacks; "
        "print(json.dumps([sorted(attacks.ATTACKS), "
        "sorted(m for m in sys.modules if m.startswith('robustkit.attacks.')), "
        "[m for m in ('torch', 'OpenAttack', 'nltk') if m in sys.modules]]))"
    )
    names, modules, heavy = json.loads(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )
    assert names == sorted(attacks.ATTACKS) and len(names) >= 2
    assert not {f"robustkit.attacks.{n}" for n in names} & set(modules) and heavy == []


def test_a_declared_attribute_must_be_a_literal(tmp_path, registered):
    module = tmp_path / "dynamic.py"
    module.write_text(
        "from robustkit.attacks import register_attack\nLABEL = 'x'\n\n@register_attack\nclass Dynamic:\n"
        "    name = 'dynamic'\n    label = LABEL\n"
    )
    with pytest.raises(RobustkitError, match=r"dynamic.py:7: Dynamic.label must be a literal"):
        registry.read_source(module)


def test_prepare_sets_up_only_what_an_attack_declares(registered, monkeypatch):
    """OpenAttack is configured for the attacks that run it; an attack that reads NLTK data
    without OpenAttack gets that data on NLTK's path; errors name the attacker."""

    def refuse(*args, **kwargs):
        raise offline.AttackDataError("OpenAttack's attacks need NLTK data that is missing")

    monkeypatch.setattr(offline, "configure_openattack", refuse)
    monkeypatch.setattr(nltk.data, "path", [])
    attacks.register_attack(_echo())
    attacks.prepare("echo")  # declares nothing: nothing looked up
    assert nltk.data.path == []
    attacks.register_attack(_echo(name="wordy", label="Wordy", nltk_data=("corpora/wordnet",)))
    attacks.prepare("wordy")
    assert nltk.data.find("corpora/wordnet")  # found on the path prepare set
    for name, info in attacks.ATTACKS.items():
        if info.needs_openattack:
            with pytest.raises(offline.AttackDataError, match=rf"^attacker '{name}' \({re.escape(info.label)}\): "):
                attacks.prepare(name)
    attacks.register_attack(_echo(name="odd", label="Odd", nltk_data=("corpora/nothing-here",)))
    with pytest.raises(nltk_data.AttackDataError, match=r"^attacker 'odd' \(Odd\): NLTK resource corpora/nothing-here"):
        attacks.prepare("odd")


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
