"""PWWS engines: OpenAttack offline, the victim, and the fast engine's identity with OpenAttack's
(its certified float32 decisions, its lazy evaluation, its fallbacks and audits)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nltk
import numpy as np
import pytest
import torch

from robustkit.attacks import pwws
from robustkit.attacks.base import Example
from robustkit.attacks.offline import DOWNLOAD_COMMAND, AttackDataError, configure_openattack, data_identity
from robustkit.attacks.pwws import PWWS, Screen, attack_fast, attack_openattack, pwws_attacker
from robustkit.attacks.victim import Victim, as_openattack
from robustkit.data.tasks import load_splits
from robustkit.models.pretrained import load_tokenizer
from robustkit.specs.spec import RunSpec
from robustkit.train.run_model import build_classifier

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


def _victim(method: str, task: str = "rt") -> Victim:
    """bert-tiny with its random head (seed 0): untrained, but its predictions can be flipped."""
    model, _, _ = build_classifier(RunSpec(model="bert-tiny", task=task, method=method), num_labels=2)
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


FIELDS = ("adversarial", "success", "queries", "modified_words", "words", "target")


def _outcomes(results) -> list[tuple]:
    return [tuple(getattr(r, f) for f in FIELDS) for r in results]


def _identical_to_openattack(victim: Victim, sentences: list[str]) -> Screen:
    """The fast engine, lazy or eager, certified float32 (twin on oneDNN or on BLAS) or float64
    only, gives OpenAttack's results on every sentence (each engine from an empty memo); returns
    the (oneDNN) screen it used."""
    targets = [int(t) for t in victim.get_pred(sentences)]
    victim.clear_cache()
    reference = _outcomes(attack_openattack(victim, s, t) for s, t in zip(sentences, targets))
    screen, blas = Screen(victim.screening()), Screen(victim.screening(onednn=False))
    assert screen.victim.onednn and not blas.victim.onednn
    for twin, lazy in ((screen, True), (screen, False), (blas, True), (None, True)):
        victim.clear_cache()
        screen.victim.clear_cache()
        blas.victim.clear_cache()
        results = [attack_fast(victim, s, t, screen=twin, lazy=lazy) for s, t in zip(sentences, targets)]
        for ref, new in zip(reference, _outcomes(results)):
            assert new == ref, (twin is not None, lazy, ref)
    success = np.mean([r[1] for r in reference])
    assert 0 < success < 1
    return screen


@pytest.mark.slow
@pytest.mark.parametrize("method", ["houlsby", "full"])
def test_fast_engine_gives_openattacks_results(victims, sentences, method):
    victim = victims[method]
    screen = _identical_to_openattack(victim, sentences)
    assert screen.audited > 0 and screen.largest_error < screen.margin_error  # fallbacks ran and were audited


@pytest.mark.slow
def test_fast_engine_gives_openattacks_results_on_a_third_task():
    """polarity, a task no other attack test uses, on a victim with polarity's head."""
    victim = _victim("full", task="polarity")
    # function words alone: nothing to substitute, so a failure is compared whatever the tagger
    _identical_to_openattack(victim, [*load_splits("polarity")["test"]["sentence"][:20], "it is ."])


@pytest.mark.slow
def test_lazy_and_eager_paths_agree_on_every_polarity_test_example(victims):
    """Lazy evaluation skips positions only when they cannot reach the greedy prefix used: the
    same result on each of polarity's 400 test sentences (one memo: the same numbers for both)."""
    victim = victims["full"]
    screen = Screen(victim.screening())
    sentences = list(load_splits("polarity")["test"]["sentence"])
    targets = [int(t) for t in victim.get_pred(sentences)]
    lazy_sentences = 0
    for sentence, target in zip(sentences, targets):
        lazy = attack_fast(victim, sentence, target, screen=screen, lazy=True)
        # runs second on the shared memo, so its forward passes are memo hits: only outcomes compare
        eager = attack_fast(victim, sentence, target, screen=screen, lazy=False)
        assert _outcomes([lazy]) == _outcomes([eager]), sentence
        lazy_sentences += lazy.forward_passes
    assert len(sentences) == 400 and lazy_sentences > 0


def test_fast_engine_runs_fewer_sentences_mostly_float32(victims, sentences):
    victim = victims["full"]
    screen = Screen(victim.screening())
    victim.clear_cache()
    victim.reset_counters()
    results = [attack_fast(victim, s, int(victim.get_pred([s])[0]), screen=screen) for s in sentences[:8]]
    float64 = victim.forwards - len(results)  # less the target predictions
    assert sum(r.forward_passes for r in results) == float64 + screen.victim.forwards
    assert sum(r.forward_passes for r in results) < sum(r.queries for r in results)
    assert float64 < 0.1 * screen.victim.forwards


def test_bounds_hold_the_float64_probability():
    """[1/(1 + r e^D), 1/(1 + r e^-D)] holds p whenever every log-odds moves by at most D."""
    rng = np.random.default_rng(0)
    screen = Screen(None, margin_error=1e-3)  # bounds and audits need no twin
    for _ in range(200):
        logits = rng.normal(scale=rng.choice([0.1, 3, 30]), size=3)
        moved = logits + rng.uniform(-0.5e-3, 0.5e-3, size=3)  # differences move by < 1e-3
        rough, exact = (np.exp(z - z.max()) / np.exp(z - z.max()).sum() for z in (logits, moved))
        for c in range(3):
            low, high = screen.bounds(rough, c)
            assert low <= exact[c] <= high
        screen.audit(rough, exact)
    assert screen.largest_error < 1e-3
    wrong = np.exp(moved + [0.5, 0, 0]) / np.exp(moved + [0.5, 0, 0]).sum()
    assert not all(low <= p <= high for p, (low, high) in zip(wrong, (screen.bounds(rough, c) for c in range(3))))
    with pytest.raises(pwws.BoundViolation):
        screen.audit(rough, wrong)
    assert screen.margin_error > 1e-3  # widened to SAFETY x the error seen


def test_a_violated_bound_is_caught_and_the_example_redone_in_float64(victims, sentences):
    """A bound too small for the twin's real error: the first fallback's audit sees it, the
    example is redone in float64, and the result is still OpenAttack's."""
    victim = victims["houlsby"]
    sentence = sentences[1]
    target = int(victim.get_pred([sentence])[0])
    victim.clear_cache()
    reference = attack_openattack(victim, sentence, target)
    screen = Screen(victim.screening(), margin_error=1e-13)  # float32 is not that close to float64
    screen.bounds = lambda row, cls: (0.0, 1.0)  # nothing certain: every decision falls back, and is audited
    victim.clear_cache()
    with pytest.warns(RuntimeWarning, match="redone in float64"):
        result = attack_fast(victim, sentence, target, screen=screen, lazy=False)
    assert _outcomes([result]) == _outcomes([reference])


def test_pwws_calibrates_its_twin_once_per_victim(victims, sentences):
    victim = victims["full"]
    attack = PWWS("fast")
    first = attack.attack(victim, Example(sentences[0], int(victim.get_pred(sentences[:1])[0])))
    (screen,) = attack._screens.values()
    assert screen.audited >= first.words + 1 and pwws.MARGIN_ERROR <= screen.margin_error < 1e-2
    attack.attack(victim, Example(sentences[1], int(victim.get_pred(sentences[1:2])[0])))
    assert list(attack._screens.values()) == [screen]
    assert screen.victim.onednn
    assert (
        PWWS("fast", lazy=False, certify=False, onednn=False).params
        == attack.params
        == {"engine": "fast", "nltk_data": data_identity()}
    )
    blas = PWWS("fast", onednn=False)
    blas.attack(victim, Example(sentences[0], int(victim.get_pred(sentences[:1])[0])))
    assert not next(iter(blas._screens.values())).victim.onednn


@pytest.mark.parametrize("method", ["houlsby", "full"])
def test_the_target_prediction_is_the_float64_one_mostly_from_float32(victims, sentences, method):
    """PWWS.predict: the float64 argmax on every sentence (the test sentences and their <UNK>
    variants, where the random head is often unsure), certified from the twin where it can be."""
    victim = victims[method]
    texts = list(dict.fromkeys(t for s in sentences[:12] for t in pwws._saliency_sentences(pwws_attacker(), s)))
    attack = PWWS("fast")
    attack.predict(victim, texts[0])  # makes the twin
    victim.clear_cache()
    before = victim.forwards
    predictions = [attack.predict(victim, t) for t in texts]
    float64_runs = victim.forwards - before
    assert predictions == victim.get_pred(texts).tolist()
    assert float64_runs < len(texts) / 4, (float64_runs, len(texts))  # mostly certified from float32
    # nothing certain (bounds [0, 1]): every prediction is the float64 row's, audited
    (screen,) = attack._screens.values()
    screen.bounds = lambda row, cls: (0.0, 1.0)
    victim.clear_cache()
    audited = screen.audited
    assert [attack.predict(victim, t) for t in texts[:10]] == predictions[:10]
    assert screen.audited == audited + 10
    assert PWWS("openattack").predict(victim, texts[0]) == predictions[0]


def test_query_budget_cuts_both_engines_alike(victims, sentences):
    victim = victims["houlsby"]
    screen = Screen(victim.screening())
    attacks = ((s, int(victim.get_pred([s])[0])) for s in sentences)
    free = next(r for r in (attack_fast(victim, s, t) for s, t in attacks) if r.success and r.queries > r.words + 3)
    sentence, target = free.original, free.target
    # Cut during the saliency query, the substitute queries, the last greedy step; and no cut.
    budgets = [free.words, free.words + 1, free.queries - 1, free.queries]
    for budget in budgets:
        victim.clear_cache()
        reference = attack_openattack(victim, sentence, target, query_budget=budget)
        for twin, lazy in ((None, False), (screen, True)):
            victim.clear_cache()
            fast = attack_fast(victim, sentence, target, query_budget=budget, screen=twin, lazy=lazy)
            outcome = (fast.adversarial, fast.success, fast.queries)
            assert outcome == (reference.adversarial, reference.success, reference.queries)
            assert fast.queries <= budget and fast.success == (budget >= free.queries)
    assert attack_fast(victim, sentence, target, query_budget=free.words).queries == 0


def _readme_route(method: str):
    """OpenAttack as its README runs it: TransformersClassifier on the float32 model, AttackEval."""
    import OpenAttack

    model, _, _ = build_classifier(RunSpec(model="bert-tiny", task="rt", method=method), num_labels=2)
    classifier = OpenAttack.classifiers.TransformersClassifier(
        model.eval(), load_tokenizer("bert-tiny"), model.get_input_embeddings(), max_length=64
    )
    return model, classifier, OpenAttack.AttackEval(pwws_attacker(), classifier)


def test_readme_route_fails_silently_on_an_adapter_victim(victims, sentences, caplog):
    """Frozen word embeddings: TransformersClassifier's hook raises on every sentence, AttackEval
    logs it and reports an attack success rate of 0. robustkit's victim takes no gradients."""
    model, _, evaluation = _readme_route("houlsby")
    assert not model.get_input_embeddings().weight.requires_grad
    summary = evaluation.eval([{"x": s, "y": 0} for s in sentences[:2]])
    assert summary["Attack Success Rate"] == 0.0
    assert "can't retain_grad on Tensor that has requires_grad=False" in caplog.text
    victim = victims["houlsby"]
    results = [attack_fast(victim, s, int(victim.get_pred([s])[0])) for s in sentences[:2]]
    assert any(r.success for r in results)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["houlsby", "full"])
def test_readme_route_gives_the_fast_engines_results(victims, sentences, method):
    """Float32 with gradients, batches of 8, no memo: the same texts, successes and PWWS queries
    (AttackEval's own count less its target prediction and re-check) as the fast engine."""
    model, classifier, evaluation = _readme_route(method)
    model.get_input_embeddings().weight.requires_grad_(True)  # the adapter run's, else it fails (above)
    victim = victims[method]
    for sentence in sentences[:10]:
        (record,) = evaluation.ieval([{"x": sentence, "y": 0}])
        adversarial = record["result"]
        queries = record["metrics"]["Victim Model Queries"] - 1 - (adversarial is not None)
        target = int(victim.get_pred([sentence])[0])
        assert int(classifier.get_pred([sentence])[0]) == target
        fast = attack_fast(victim, sentence, target, screen=victim.screening())
        assert (fast.adversarial, fast.queries) == (adversarial, queries), sentence
