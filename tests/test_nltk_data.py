"""Where the attacks' NLTK data comes from (issue #38 item 3): $NLTK_DATA first, then robustkit's
embedded assets for the rest, the POS tagger included (``nltk-tagger``, from a pinned registry
package); never NLTK's default folders, never ``nltk.downloader`` (which prompts ``Retry?``).

A user's own data is simulated by $NLTK_DATA naming a temporary folder that holds the tagger
alone (copied from wherever this machine has one), so everything else must come from the
embedded assets (pinned registry packages in the robustkit cache).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings
from pathlib import Path

import nltk
import pytest

from robustkit.assets import asset_path
from robustkit.attacks.nltk_data import EMBEDDED, TAGGER_ASSET, TAGGER_PATH, default_roots, tagger_root
from robustkit.attacks.offline import AttackDataError, configure_openattack


def _private_copy(source: Path, target: Path) -> None:
    """Copy a folder with NLTK-readable modes: NLTK 3.10 reads no group-writable file."""
    shutil.copytree(source, target)
    for path in (target, *target.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)


@pytest.fixture
def clean_nltk(monkeypatch):
    """Undo, after the test, what configure_openattack adds to nltk.data.path."""
    monkeypatch.setattr(nltk.data, "path", list(nltk.data.path))


@pytest.fixture
def tagger_only(tmp_path, monkeypatch, clean_nltk, shared_nltk_data) -> Path:
    """$NLTK_DATA = a fresh folder holding only a POS tagger: a user's own choice of tagger."""
    monkeypatch.setenv("NLTK_DATA", shared_nltk_data)
    source = Path(tagger_root(download=False), TAGGER_PATH)
    root = tmp_path / "nltk_data"
    root.mkdir(mode=0o755)
    (root / "taggers").mkdir(mode=0o755)
    _private_copy(source, root / TAGGER_PATH)
    root.chmod(0o755)
    monkeypatch.setenv("NLTK_DATA", str(root))
    return root


def test_nltk_data_tagger_wins_and_the_rest_is_embedded(tagger_only):
    roots = default_roots(download=False)
    embedded = {str(asset_path(name)) for name in EMBEDDED.values() if name != TAGGER_ASSET}
    assert roots[0] == str(tagger_only.resolve())
    assert set(roots[1:]) == embedded  # nothing from ../shared or NLTK's default folders

    # The lookups PWWS makes, on the data these roots hold.
    from nltk.corpus.reader import StopwordsCorpusReader, WordNetCorpusReader
    from nltk.tokenize.punkt import PunktSentenceTokenizer, load_punkt_params

    configure_openattack()  # puts the roots on nltk.data.path, which NLTK reads only below
    with warnings.catch_warnings():  # no Open Multilingual Wordnet: PWWS is English only
        warnings.filterwarnings("ignore", "The multilingual functions", UserWarning)
        wordnet = WordNetCorpusReader(nltk.data.find("corpora/wordnet", paths=list(roots)), None)
    assert wordnet.synsets("dog")[0].name() == "dog.n.01"
    # A seek by byte offset (NLTK's doctest): it fails if the CRLF line ends were kept.
    assert wordnet.synset_from_pos_and_offset("n", 4543158).name() == "wagon.n.01"
    assert "beneficial" in {lemma.name() for s in wordnet.synsets("good", "a") for lemma in s.lemmas()}

    punkt = nltk.data.find("tokenizers/punkt_tab/english/", paths=list(roots))
    split = PunktSentenceTokenizer(load_punkt_params(punkt)).tokenize
    assert split("Mr. Smith saw the film. It was good.") == ["Mr. Smith saw the film.", "It was good."]

    stopwords = StopwordsCorpusReader(
        nltk.data.find("corpora/stopwords", paths=list(roots)), r"(?!README|\.).*", encoding="utf8"
    )
    assert {"the", "not", "and"} <= set(stopwords.words("english")) and "french" in stopwords.fileids()


@pytest.mark.slow
def test_fresh_clone_runs_pwws_components(tagger_only):
    from robustkit.attacks.pwws import pwws_attacker

    configure_openattack()
    attacker = pwws_attacker()
    tagged = attacker.tokenizer.tokenize("The film is good. It's not a masterpiece.")
    assert tagged[:4] == [("The", "other"), ("film", "noun"), ("is", "verb"), ("good", "adj")]
    assert "beneficial" in [word for word, _ in attacker.substitute("good", "adj")]


def test_nltk_data_wins_resource_by_resource(tmp_path, monkeypatch, clean_nltk):
    root = tmp_path / "mine"
    for resource in ("corpora/wordnet", TAGGER_PATH):
        Path(root, resource).mkdir(parents=True)
    monkeypatch.setenv("NLTK_DATA", str(root))
    roots = default_roots(download=False)
    assert roots == (str(root.resolve()), str(asset_path("nltk-punkt-tab")), str(asset_path("nltk-stopwords")))


def test_fresh_clone_reads_everything_from_the_embedded_assets(tmp_path, monkeypatch, clean_nltk):
    """No $NLTK_DATA (an activated shell, `make`, CI alike): every resource, the tagger included,
    comes from the pinned assets; a tagger in NLTK's own folders (~/nltk_data) is not read, so
    what an attack reads does not depend on the machine."""
    from robustkit.attacks.offline import RESOURCES, _load_pos_tagger

    home = tmp_path / "home"
    Path(home, TAGGER_PATH).mkdir(parents=True)
    monkeypatch.delenv("NLTK_DATA", raising=False)
    monkeypatch.setattr(nltk.data, "path", [str(home)])
    roots = default_roots(download=False)
    assert roots == tuple(str(asset_path(name).resolve()) for name in EMBEDDED.values())
    assert tagger_root(download=False) == str(asset_path(TAGGER_ASSET).resolve())
    assert {r.package for r in RESOURCES} <= set(EMBEDDED.values())  # errors name fetchable assets
    # the embedded tagger loads with NLTK's own JSON loader and tags in Penn Treebank tags
    nltk.data.path.insert(0, roots[-1])
    tag = _load_pos_tagger(nltk.data.find(TAGGER_PATH + "/", paths=[roots[-1]]))
    tags = dict(tag("The actors tried hard , but the movie was a predictable mess .".split()))
    assert (tags["The"], tags["actors"], tags["tried"], tags["predictable"], tags["mess"]) == (
        "DT",
        "NNS",
        "VBD",
        "JJ",
        "NN",
    )


def test_tagger_asset_is_read_by_an_unpickler_that_runs_nothing():
    import pickle

    from robustkit.assets import perceptron_pickle_to_json
    from robustkit.errors import AssetError

    files = perceptron_pickle_to_json(pickle.dumps(({"bias": {"NN": 1.0}}, {"the": "DT"}, {"NN", "DT"}), protocol=2))
    assert files["averaged_perceptron_tagger_eng.classes.json"] == b'["DT", "NN"]'

    class Planted:
        def __reduce__(self):
            return (os.system, ("echo planted",))

    with pytest.raises(AssetError, match="refused: the pickle names"):
        perceptron_pickle_to_json(pickle.dumps(({}, {}, Planted())))


@pytest.fixture
def uncached(tmp_path, monkeypatch, clean_nltk) -> Path:
    """A fresh clone's cache: no asset fetched yet, $NLTK_DATA an empty folder."""
    monkeypatch.setenv("ROBUSTKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "empty"))
    return tmp_path


def test_offline_fetch_names_pips_error_not_a_warning_and_never_prompts(uncached, monkeypatch):
    import robustkit.assets as assets

    commands = []

    def offline_pip(command, **kwargs):
        commands.append(command)
        output = (
            "WARNING: Location 'file:///opt/pypi/simple/textblob-aptagger/' is ignored: it is neither a file "
            "nor a directory.\nERROR: Could not find a version that satisfies the requirement "
            "textblob-aptagger==0.2.0\n"
        )
        return subprocess.CompletedProcess(command, 1, stdout=output)

    monkeypatch.setattr(assets.subprocess, "run", offline_pip)
    with pytest.raises(AttackDataError) as error:
        tagger_root()
    message = str(error.value)
    assert "Could not find a version" in message and "WARNING" not in message and "exited with 0" not in message
    assert "robustkit assets fetch nltk-tagger" in message and str(uncached / "empty") in message
    assert len(message.splitlines()) == 1
    assert commands and all("nltk.downloader" not in command for command in commands)  # pip alone: no prompt
    with pytest.raises(AttackDataError, match="downloads are off"):
        tagger_root(download=False)


def test_explicit_folders_are_the_only_place_searched(tagger_only, monkeypatch):
    # configure_openattack(FOLDERS) does not fill gaps from the embedded assets.
    with pytest.raises(AttackDataError, match="WordNet"):
        configure_openattack(tagger_only)
    embedded = os.pathsep.join(str(asset_path(name)) for name in EMBEDDED.values())
    configure_openattack(f"{tagger_only}{os.pathsep}{embedded}")


def test_pip_failure_keeps_the_network_cause_and_drops_index_notes():
    from robustkit.assets import pip_failure

    output = """Looking in indexes: https://pypi.org/simple
WARNING: Location 'file:///opt/pypi/simple/x/' is ignored: it is neither a file nor a directory.
WARNING: Retrying (Retry(total=0)) after connection broken by 'NewConnectionError(Connection refused)': /simple/x/
ERROR: Could not find a version that satisfies the requirement x==1 (from versions: none)
ERROR: No matching distribution found for x==1"""
    cause = pip_failure(output)
    assert cause[0].startswith("WARNING: Retrying") and "Connection refused" in cause[0]
    assert cause[1:] == [
        "ERROR: Could not find a version that satisfies the requirement x==1 (from versions: none)",
        "ERROR: No matching distribution found for x==1",
    ]
    assert pip_failure("Collecting x\nsomething odd") == ["something odd"]


def test_a_different_tagger_is_a_different_attack_cache(tmp_path):
    """The tagger decides which synonyms PWWS tries, so PWWS results cached with one tagger must
    never be read as another's: the NLTK data's identity is part of the attack's cache key."""
    from robustkit.analysis.attack import _cache_params
    from robustkit.attacks import create
    from robustkit.attacks.offline import data_identity

    embedded = os.pathsep.join(str(asset_path(name)) for name in EMBEDDED.values())
    other = tmp_path / "other"
    shutil.copytree(Path(asset_path(TAGGER_ASSET)) / TAGGER_PATH, other / TAGGER_PATH)
    weights = sorted((other / TAGGER_PATH).glob("*weights*.json"))[0]
    weights.write_text(weights.read_text() + "\n")  # the same JSON, other bytes: another tagger file
    mine, theirs = data_identity(embedded), data_identity(f"{other}{os.pathsep}{embedded}")
    assert mine["tagger"] != theirs["tagger"] and mine["wordnet"] == theirs["wordnet"]
    assert data_identity(embedded) == mine  # deterministic
    attack = create("pwws")
    assert attack.params["nltk_data"] == data_identity()  # what this process's attacks read
    # the cache key (robustkit.analysis.cache.cache_key) hashes these parameters
    assert _cache_params(attack, "pwws", 8, 0, None, "best")["nltk_data"] == data_identity()
    assert create("deepwordbug").params["nltk_data"] == data_identity()
