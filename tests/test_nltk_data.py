"""Where the attacks' NLTK data comes from: a fresh clone (no ../shared) reads the embedded
WordNet, Punkt and stopwords, and the POS tagger from $NLTK_DATA or NLTK's folders.

The clone-without-shared case is simulated: $NLTK_DATA names a temporary folder that holds the
tagger alone (copied from wherever this machine has it), so everything else must come from the
embedded assets (pinned registry packages in the robustkit cache).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import nltk
import pytest

from robustkit.assets import asset_path
from robustkit.attacks import nltk_data
from robustkit.attacks.nltk_data import EMBEDDED, TAGGER_COMMAND, TAGGER_PATH, default_roots, tagger_root
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
    """$NLTK_DATA = a fresh folder holding only the POS tagger, as after
    `python -m nltk.downloader -d FOLDER averaged_perceptron_tagger_eng` on a fresh clone."""
    monkeypatch.setenv("NLTK_DATA", shared_nltk_data)
    source = Path(tagger_root(download=False), TAGGER_PATH)
    root = tmp_path / "nltk_data"
    root.mkdir(mode=0o755)
    (root / "taggers").mkdir(mode=0o755)
    _private_copy(source, root / TAGGER_PATH)
    root.chmod(0o755)
    monkeypatch.setenv("NLTK_DATA", str(root))
    return root


def test_fresh_clone_reads_the_embedded_assets_and_the_tagger_from_nltk_data(tagger_only):
    roots = default_roots(download=False)
    embedded = {str(asset_path(name)) for name in EMBEDDED.values()}
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

    stopwords = StopwordsCorpusReader(nltk.data.find("corpora/stopwords", paths=list(roots)),
                                      r"(?!README|\.).*", encoding="utf8")
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


def test_a_zipped_tagger_in_nltks_own_folders_is_found(tmp_path, monkeypatch, clean_nltk):
    zipped = tmp_path / "home" / "taggers" / "averaged_perceptron_tagger_eng.zip"
    zipped.parent.mkdir(parents=True)
    zipped.write_bytes(b"PK")
    monkeypatch.delenv("NLTK_DATA", raising=False)
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "empty"), str(tmp_path / "home")])
    assert tagger_root(download=False) == str((tmp_path / "home").resolve())


@pytest.fixture
def no_tagger(tmp_path, monkeypatch, clean_nltk) -> Path:
    """No tagger anywhere: empty $NLTK_DATA and NLTK folders, a fresh download folder."""
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "empty"))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "home")])
    monkeypatch.setattr(nltk_data, "tagger_download_dir", lambda: tmp_path / "cache" / "nltk_data")
    return tmp_path / "cache" / "nltk_data"


def _fake_downloader(monkeypatch, online: bool) -> list[tuple[list[str], dict]]:
    """Replace subprocess.run by an `nltk.downloader` that installs the tagger (or is offline)."""
    calls = []

    def run(command, **kwargs):
        calls.append((command, kwargs))
        if online:
            Path(command[command.index("-d") + 1], TAGGER_PATH).mkdir(parents=True)
            return subprocess.CompletedProcess(command, 0, stdout="[nltk_data] Unzipping ...")
        return subprocess.CompletedProcess(command, 1, stdout="[nltk_data] Error loading: <urlopen error>")

    monkeypatch.setattr(subprocess, "run", run)
    return calls


def test_missing_tagger_is_downloaded_when_online(no_tagger, monkeypatch):
    calls = _fake_downloader(monkeypatch, online=True)
    assert tagger_root() == str(no_tagger.resolve())
    command, kwargs = calls[0]
    assert command == [sys.executable, "-m", "nltk.downloader", "-e", "-d", str(no_tagger), "averaged_perceptron_tagger_eng"]
    assert kwargs["stdin"] == subprocess.DEVNULL  # its "Retry?" prompt must not wait for input
    assert tagger_root() == str(no_tagger.resolve()) and len(calls) == 1  # found there next time


def test_missing_tagger_offline_names_the_command(no_tagger, monkeypatch, tmp_path):
    _fake_downloader(monkeypatch, online=False)
    with pytest.raises(AttackDataError) as error:
        default_roots()
    message = str(error.value)
    assert TAGGER_COMMAND in message and "urlopen error" in message
    assert str(tmp_path / "empty") in message and str(tmp_path / "home") in message
    with pytest.raises(AttackDataError, match="downloads are off"):
        tagger_root(download=False)


def test_explicit_folders_are_the_only_place_searched(tagger_only, monkeypatch):
    # configure_openattack(FOLDERS) does not fill gaps from the embedded assets.
    with pytest.raises(AttackDataError, match="WordNet"):
        configure_openattack(tagger_only)
    embedded = os.pathsep.join(str(asset_path(name)) for name in EMBEDDED.values())
    configure_openattack(f"{tagger_only}{os.pathsep}{embedded}")
