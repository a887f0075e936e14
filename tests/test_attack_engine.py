"""PWWS engines: OpenAttack offline, the victim, and the batched engine's identity with OpenAttack's."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nltk
import numpy as np
import pytest
import torch

from robustkit.attacks.offline import DOWNLOAD_COMMAND, AttackDataError, configure_openattack
from robustkit.attacks.pwws import attack_fast, attack_openattack, pwws_attacker
from robustkit.attacks.victim import Victim, as_openattack
from robustkit.run_model import build_classifier
from robustkit.models import load_tokenizer
from robustkit.spec import RunSpec
from robustkit.tasks import load_splits

N_EXAMPLES = 30


@pytest.fixture(autouse=True)
def _nltk_data(monkeypatch, shared_nltk_data):
    """OpenAttack reads the tests' NLTK data (conftest); nltk.data.path changes are undone after each test."""
    monkeypatch.setenv("NLTK_DATA", shared_nltk_data)
    monkeypatch.setattr(nltk.data, "path", list(nltk.data.path))
    configure_openattack()


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """One torch thread: on a busy 2-core machine, two-thread passes over small batches stall."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _victim(method: str) -> Victim:
    """bert-tiny with its random head (seed 0): untrained, but its predictions can be flipped."""
    model, _, _ = build_classifier(RunSpec(model="bert-tiny", task="rt", method=method), num_labels=2)
    return Victim(model, load_tokenizer("bert-tiny"), max_length=64)


@pytest.fixture(scope="module")
def victims() -> dict[str, Victim]:
    return {method: _victim(method) for method in ("houlsby", "full")}


@pytest.fixture(scope="module")
def sentences() -> list[str]:
    return load_splits("rt")["test"]["sentence"][:N_EXAMPLES]


def test_default_pwws_components_work_offline(shared_nltk_data):
    attacker = pwws_attacker()
    tagged = attacker.tokenizer.tokenize("The film is good. It's not a masterpiece.")
    assert tagged[:4] == [("The", "other"), ("film", "noun"), ("is", "verb"), ("good", "adj")]
    assert "beneficial" in [word for word, _ in attacker.substitute("good", "adj")]
    configure_openattack(shared_nltk_data)  # idempotent: the loaded resources are kept
    assert pwws_attacker() is attacker


def test_missing_tagger_names_it_and_the_download_command(tmp_path, shared_nltk_data):
    punkt = tmp_path / "tokenizers" / "punkt_tab" / "english"  # a tree with Punkt only
    punkt.mkdir(parents=True)
    found = nltk.data.find("tokenizers/punkt_tab/english/", paths=shared_nltk_data.split(os.pathsep))
    for source in Path(found.path).iterdir():
        shutil.copyfile(source, punkt / source.name)
    for path in (tmp_path, *tmp_path.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)  # NLTK reads no group-writable file
    with pytest.raises(AttackDataError) as error:
        configure_openattack(tmp_path)
    message = str(error.value)
    assert "averaged_perceptron_tagger_eng" in message and "punkt_tab" not in message.split("Searched")[0]
    assert str(tmp_path) in message and DOWNLOAD_COMMAND in message
    configure_openattack(shared_nltk_data)  # still works after the failed attempt


def test_victim_memo_is_batch_independent_and_counted(victims):
    victim = victims["full"]
    victim.clear_cache()
    victim.reset_counters()
    alone = victim.get_prob(["a gripping , funny film ."])
    crowd = victim.get_prob(["a dull film .", "A  gripping, funny film.", "a gripping , funny film ."])
    assert crowd.shape == (3, 2) and np.allclose(crowd.sum(axis=1), 1.0)
    assert (crowd[1] == alone[0]).all() and (crowd[2] == alone[0]).all()  # same token ids, same bits
    assert victim.queries == 4 and victim.forwards == 2
    assert (victim.get_pred(["a dull film ."]) == crowd[:1].argmax(axis=1)).all()


def test_openattack_victim_takes_no_gradients(victims, sentences):
    victim = victims["houlsby"]
    for grad_enabled in (True, False):
        with torch.set_grad_enabled(grad_enabled):
            attack_openattack(victim, sentences[0], target=int(victim.get_pred(sentences[:1])[0]))
            assert torch.is_grad_enabled() is grad_enabled
    assert all(p.grad is None for p in victim.model.parameters())
    classifier = as_openattack(victim)
    classifier.set_context({"x": sentences[0]}, None)
    classifier.get_prob(sentences[:3])
    assert classifier.context.invoke == 3  # OpenAttack's own query counting sees our victim


@pytest.mark.slow
@pytest.mark.parametrize("method", ["houlsby", "full"])
def test_fast_engine_gives_openattacks_results(victims, sentences, method):
    victim = victims[method]
    targets = [int(t) for t in victim.get_pred(sentences)]
    victim.clear_cache()  # each engine computes its own probabilities, in its own batches
    reference = [attack_openattack(victim, s, t) for s, t in zip(sentences, targets)]
    victim.clear_cache()
    victim.reset_counters()
    fast = [attack_fast(victim, s, t) for s, t in zip(sentences, targets)]
    fields = ("adversarial", "success", "queries", "modified_words", "words", "target")
    for ref, new in zip(reference, fast):
        assert [getattr(new, f) for f in fields] == [getattr(ref, f) for f in fields], ref.original
    success = np.mean([r.success for r in reference])
    assert 0 < success < 1
    assert victim.forwards < sum(r.queries for r in fast)
    for result in fast:
        if result.success:
            assert result.modified_words >= 1 and victim.get_pred([result.adversarial])[0] != result.target


@pytest.mark.slow
@pytest.mark.parametrize("method", ["houlsby", "full"])
def test_screened_engine_gives_openattacks_results(victims, sentences, method):
    """float32 screening keeps the float64 results and spares most float64 substitute sentences."""
    victim = victims[method]
    screen = victim.screening()
    targets = [int(t) for t in victim.get_pred(sentences)]
    victim.clear_cache()
    reference = [attack_openattack(victim, s, t) for s, t in zip(sentences, targets)]
    fields = ("adversarial", "success", "queries", "modified_words")
    exact_sentences = {}
    for screened in (None, screen):
        victim.clear_cache()
        victim.reset_counters()
        results = [attack_fast(victim, s, t, screen=screened) for s, t in zip(sentences, targets)]
        for ref, new in zip(reference, results):
            assert [getattr(new, f) for f in fields] == [getattr(ref, f) for f in fields], ref.original
        exact_sentences[screened is not None] = victim.forwards
    assert screen.forwards > 0
    assert exact_sentences[True] < 0.6 * exact_sentences[False]


def test_screen_keeps_every_substitute_that_could_be_best(victims, sentences):
    """The float64 best substitute of each position is always among the screened leaders."""
    from robustkit.attacks import pwws

    victim = victims["full"]
    screen = victim.screening()
    attacker = pwws_attacker()
    kept = total = 0
    for sentence in sentences[:10]:
        target = int(victim.get_pred([sentence])[0])
        tagged = attacker.tokenizer.tokenize(sentence.lower())
        words = [w for w, _ in tagged]
        swaps = {i: [" ".join(words[:i] + [s] + words[i + 1 :]) for s in pwws._substitutes(attacker, w, pos)]
                 for i, (w, pos) in enumerate(tagged)}
        swaps = {i: group for i, group in swaps.items() if group}
        leaders = pwws._screen(screen, swaps, target)
        for i, group in swaps.items():
            exact = victim.get_prob(group)[:, target]
            assert group[exact.argmin()] in leaders[i]
            assert [s for s in group if s in leaders[i]] == leaders[i]  # order kept
            kept, total = kept + len(leaders[i]), total + len(group)
    assert 0 < kept < 0.5 * total


def test_query_budget_cuts_both_engines_alike(victims, sentences):
    victim = victims["houlsby"]
    attacks = ((s, int(victim.get_pred([s])[0])) for s in sentences)
    free = next(r for r in (attack_fast(victim, s, t) for s, t in attacks) if r.success)
    sentence, target = free.original, free.target
    # Cut during the saliency query, the substitute queries, the last greedy step; and no cut.
    budgets = [free.words, free.words + 1, free.queries - 1, free.queries]
    for budget in budgets:
        victim.clear_cache()
        reference = attack_openattack(victim, sentence, target, query_budget=budget)
        victim.clear_cache()
        fast = attack_fast(victim, sentence, target, query_budget=budget)
        outcome = (fast.adversarial, fast.success, fast.queries)
        assert outcome == (reference.adversarial, reference.success, reference.queries)
        assert fast.queries <= budget and fast.success == (budget >= free.queries)
    assert attack_fast(victim, sentence, target, query_budget=free.words).queries == 0
