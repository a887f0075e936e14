"""An attack is one module (issue #40): a throwaway attack (random character swaps), written to a
temporary folder, is registered and runs through the attack analysis, its figures and the command
line, with its own label and unit, and no file of the repository changed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt
import pytest

from robustkit import attacks
from robustkit.analysis import attack, attack_summary, attack_views
from robustkit.analysis.select import select_runs
from robustkit.attacks import nltk_data, offline, registry
from robustkit.errors import RobustkitError
from robustkit.figures import attack as attack_plots
from robustkit.figures import style, units

ROOT = Path(__file__).resolve().parents[1]
N = 8
LABEL = "Random char swaps"

# The whole attack: a researcher's module, outside robustkit.
CHARSWAP = textwrap.dedent(
    '''
    """Random character swaps: swap two adjacent letters in a few random words until the
    prediction moves (deterministic per seed and example)."""

    import random
    import time

    from robustkit.attacks import AttackResult, register_attack
    from robustkit.attacks.base import example_seed


    @register_attack
    class FixtureSwap:
        name = "fixtureswap"
        label = "Random char swaps"
        success_unit = "fraction"
        needs_openattack = False
        nltk_data = ()

        def __init__(self, seed: int = 0, swaps: int = 2, tries: int = 30) -> None:
            self.seed, self.swaps, self.tries = seed, swaps, tries

        @property
        def params(self) -> dict:
            return {"seed": self.seed, "swaps": self.swaps, "tries": self.tries}

        def predict(self, victim, sentence: str) -> int:
            return int(victim.get_pred([sentence])[0])

        def attack(self, victim, example, budget=None) -> AttackResult:
            started = time.perf_counter()
            rng = random.Random(example_seed(self.seed, example.index))
            words = example.sentence.split(" ")
            swappable = [i for i, word in enumerate(words) if len(word) > 1]
            queries = 0
            while swappable and queries < self.tries and (budget is None or queries < budget):
                text = list(words)
                for i in rng.sample(swappable, min(self.swaps, len(swappable))):
                    k = rng.randrange(len(text[i]) - 1)
                    text[i] = text[i][:k] + text[i][k + 1] + text[i][k] + text[i][k + 2 :]
                queries += 1
                if int(victim.get_pred([" ".join(text)])[0]) != example.target:
                    modified = sum(a != b for a, b in zip(words, text))
                    return AttackResult(
                        example.sentence, " ".join(text), True, example.target, queries, modified, len(words),
                        time.perf_counter() - started,
                    )
            return AttackResult(
                example.sentence, None, False, example.target, queries, 0, len(words), time.perf_counter() - started
            )
    '''
)


def _git_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture
def fixtureswap(tmp_path):
    """The throwaway attack's module, registered for this test only."""
    module = tmp_path / "attack-module" / "fixtureswap.py"
    module.parent.mkdir()
    module.write_text(CHARSWAP)
    assert attacks.load_attacks(module) == ["fixtureswap"]
    yield module
    del attacks.ATTACKS["fixtureswap"]


@pytest.fixture(scope="module")
def sentence_store(tmp_path_factory) -> Path:
    """One bert-tiny run on rt (the attacks take single-sentence tasks), trained in seconds."""
    from robustkit.specs.spec import RunSpec
    from robustkit.train import train

    root = tmp_path_factory.mktemp("extend-attack-store")
    train(
        RunSpec(model="bert-tiny", task="rt", method="full", train_size=64, epochs=1, batch_size=16, max_length=32),
        root,
        progress=False,
    )
    return root


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_an_attack_from_a_folder_of_its_own_runs_end_to_end(fixtureswap, sentence_store, monkeypatch):
    before = _git_status()

    def no_nltk(*args, **kwargs):
        raise AssertionError("an attack that declares no NLTK data or OpenAttack looked them up")

    # it declares neither: no POS tagger, no OpenAttack configuration, no NLTK data looked up
    for module, function in ((offline, "configure_openattack"), (nltk_data, "default_roots"), (nltk_data, "use")):
        monkeypatch.setattr(module, function, no_nltk)
    info = attacks.info("fixtureswap")
    assert (info.label, info.success_unit, info.needs_openattack) == (LABEL, "fraction", False)

    examples = attack.run(
        sentence_store,
        None,
        attackers=["fixtureswap"],
        n=N,
        seed=0,
        query_budget=None,
        checkpoint="best",
        attack_options=["tries=30"],
        progress=False,
    )
    assert len(examples) == N and set(examples.attacker) == {"fixtureswap"} and examples.queries.ge(1).all()
    fooled = examples[examples.success]
    assert len(fooled), "no example flipped: the units below would not show"
    assert (fooled.adversarial != fooled.original).all() and fooled.modified_words.between(1, 2).all()
    # deterministic per (seed, example): attacked again into another file, the same texts
    (run_dir,) = select_runs(sentence_store).path
    again = attack.attack_run(
        run_dir, n=N, seed=0, attacker="fixtureswap", progress=False, path=fixtureswap.parent / "again.jsonl"
    )
    assert list(again.adversarial) == list(examples.adversarial)

    rate = attack_summary.summarize(examples).set_index("convention").loc["openattack", "success_rate"]
    assert 0 < rate <= 1
    lines = attack_views.success_by_tsp(examples, sentence_store, "best", "openattack", include_failed=True)
    ax = attack_plots.attack_vs_tsp(**lines).axes[0]
    assert ax.get_title().startswith(f"{LABEL} attack success (openattack convention")
    # its unit: a fraction, as it declares (the default, %, would show 100 x the rate)
    assert ax.get_ylabel() == "attack success rate" and "fixtureswap success" not in units.PERCENT
    (line,) = [l for l in ax.get_lines() if l.get_marker() == "o"]
    assert list(line.get_ydata()) == pytest.approx([rate])
    side = attack_plots.attack_by_attacker(**lines)
    assert side.axes[0].get_title().startswith(LABEL)
    boxes = attack_plots.attack_boxes(**attack_views.attack_boxes(examples, sentence_store, "best", "openattack", True))
    assert f"{LABEL} attack success per method" in " ".join(style.figure_texts(boxes))
    assert _git_status() == before  # no file of the repository was edited or added


def test_the_environment_names_attacks_that_are_read_not_imported(tmp_path, monkeypatch):
    """``$ROBUSTKIT_ATTACKS`` (files or module names) registers attacks from their source, so the
    command line's choices hold them; the module is imported when the attack is built."""
    (tmp_path / "my_swaps.py").write_text(CHARSWAP)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(registry.ENV, "my_swaps")
    try:
        assert registry.read_environment() == ["fixtureswap"]
        info = attacks.info("fixtureswap")
        assert (info.source, info.label, info.success_unit) == ("my_swaps:FixtureSwap", LABEL, "fraction")
        assert "my_swaps" not in sys.modules and info.cls is None
        built = attacks.create("fixtureswap", seed=3, swaps=1)
        assert type(built).__module__ == "my_swaps" and built.params == {"seed": 3, "swaps": 1, "tries": 30}
        assert attacks.info("fixtureswap").cls is type(built)
    finally:
        attacks.ATTACKS.pop("fixtureswap", None)
        sys.modules.pop("my_swaps", None)
    monkeypatch.setenv(registry.ENV, str(tmp_path / "missing.py"))
    with pytest.raises(RobustkitError, match=r"ROBUSTKIT_ATTACKS names .*missing.py', which is not a file"):
        registry.read_environment()


@pytest.mark.slow
def test_the_command_line_takes_an_attack_named_in_its_environment(fixtureswap, sentence_store, tmp_path):
    before = _git_status()
    env = {**os.environ, "ROBUSTKIT_ATTACKS": str(fixtureswap)}
    help_text = subprocess.run(
        [sys.executable, "-m", "robustkit", "analyze", "attack", "--help"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "fixtureswap" in help_text
    figure = tmp_path / "fixtureswap.pdf"
    drawn = subprocess.run(
        [sys.executable, "-m", "robustkit", "plot", "attack-vs-tsp", str(sentence_store), "-o", str(figure)]
        + ["--attackers", "fixtureswap", "--n", str(N), "--include-failed"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert drawn.returncode == 0, drawn.stderr
    assert figure.read_bytes()[:4] == b"%PDF"
    unknown = subprocess.run(
        [sys.executable, "-m", "robustkit", "plot", "attack-vs-tsp", str(sentence_store), "-o", str(figure)]
        + ["--attackers", "fixtureswap"],
        env={k: v for k, v in os.environ.items() if k != "ROBUSTKIT_ATTACKS"},
        capture_output=True,
        text=True,
    )
    assert unknown.returncode != 0 and "fixtureswap" in unknown.stderr  # without it, an unknown attacker
    assert _git_status() == before
