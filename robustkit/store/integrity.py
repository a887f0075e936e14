"""Whether a run's files are the files its manifest lists: every checkpoint file and training log.

Two ways to check, one rule (:func:`run_problems`):

- ``robustkit verify`` hashes every file (:func:`robustkit.store.atomic.sha256_file`);
- every reader (:func:`robustkit.store.manifest.inspect_run`, hence ``load_runs``, ``runs``,
  ``stats`` and every analysis) looks at every listed file's presence and size on every read,
  and hashes it once per change of its ``(size, mtime_ns, ctime_ns)``, through a
  :class:`VerificationCache`: a store of minilm runs (~0.5 GB of checkpoints each) is hashed
  once, not on every listing. ``ctime_ns`` is there because no tool can set it: a file
  rewritten with its old size and mtime put back is hashed again all the same.

What the cache cannot see is a byte that changes on disk with no write at all (bit rot): that
is what ``verify`` is for, and :func:`robustkit.store.checkpoints.read_checkpoint_file` checks
every byte it loads anyway (and makes the cache forget a file it found damaged).

The cache is ``<store>/.cache/verified/<run_id>.json``: ``{"entries": {path in the run folder:
[size, mtime_ns, ctime_ns, sha256]}, "sha256": <of the entries>}``. A cache file that does not
match its own sha256, cannot be read or has the wrong shape is ignored (every file is hashed
again); a store that cannot be written keeps no cache (every read hashes). It may be deleted at
any time.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

from robustkit.store.atomic import atomic_write_json, sha256_file
from robustkit.store.folders import CACHE_DIR, CHECKPOINTS
from robustkit.store.schema import FINISHED

# <store>/.cache/<VERIFIED>/<run_id>.json
VERIFIED = "verified"

Hasher = Callable[[Path], str]


class VerificationCache:
    """The sha256 of a run's files, remembered with the stat they were hashed under.

    Parameters
    ----------
    run_dir : path
        The run's folder (its store is its parent).
    """

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.path = cache_file(self.run_dir)
        self.entries = self._read()
        self.changed = False

    def _read(self) -> dict[str, list]:
        try:
            stored = json.loads(self.path.read_bytes())
            entries = stored["entries"]
            if stored["sha256"] != _digest(entries):
                return {}
        except (OSError, ValueError, KeyError, TypeError):  # none yet, unreadable, not JSON, another shape
            return {}
        return {key: entry for key, entry in entries.items() if _is_entry(entry)}

    def sha256(self, path: Path) -> str:
        """The file's sha256 (hex): the remembered one while its stat is unchanged, else hashed now.

        Raises
        ------
        OSError
            The file cannot be read (missing, a folder, no permission).
        """
        stat, key = os.stat(path), self._key(path)
        entry = self.entries.get(key)
        if entry is not None and entry[:3] == _mark(stat):
            return entry[3]
        return self._record(key, stat, path)

    def rehash(self, path: Path) -> str:
        """The file's sha256 hashed now (``verify``), remembered for the readers."""
        return self._record(self._key(path), os.stat(path), path)

    def forget(self, path: Path) -> None:
        """Hash the file again at the next read (it was found damaged by a reader of its bytes)."""
        if self.entries.pop(self._key(path), None) is not None:
            self.changed = True

    def save(self) -> None:
        """Write the cache if anything changed; a store that cannot be written keeps none."""
        if not self.changed:
            return
        try:
            atomic_write_json(self.path, {"entries": self.entries, "sha256": _digest(self.entries)})
        except OSError:
            pass  # a read-only store: the files were still checked, the next read hashes them again
        self.changed = False

    def _key(self, path: Path) -> str:
        return os.path.relpath(path, self.run_dir)

    def _record(self, key: str, stat: os.stat_result, path: Path) -> str:
        # the stat is taken before hashing: a file replaced meanwhile has another stat next time
        digest = sha256_file(path)
        self.entries[key] = [*_mark(stat), digest]
        self.changed = True
        return digest


def cache_file(run_dir: str | Path) -> Path:
    """Where the verification cache of ``run_dir`` is: ``<store>/.cache/verified/<run_id>.json``."""
    run_dir = Path(run_dir)
    return run_dir.parent / CACHE_DIR / VERIFIED / f"{run_dir.name}.json"


def _mark(stat: os.stat_result) -> list[int]:
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _is_entry(entry) -> bool:
    return (
        isinstance(entry, list)
        and len(entry) == 4
        and all(type(v) is int for v in entry[:3])
        and isinstance(entry[3], str)
    )


def _digest(entries) -> str:
    return hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()


def file_problems(folder: Path, files: dict[str, str], sha256: Hasher = sha256_file) -> list[str]:
    """One line per file of ``files`` (name -> sha256) missing from ``folder`` or hashing to
    another sha256 (by ``sha256``: a plain hash, or a :class:`VerificationCache`'s)."""
    problems = []
    for file_name, expected in files.items():
        path = Path(folder) / file_name
        if not path.is_file():
            problems.append(f"{file_name} is missing")
            continue
        try:
            actual = sha256(path)
        except OSError as error:  # unreadable: no permission
            problems.append(f"{file_name} cannot be read ({error.strerror or error})")
            continue
        if actual != expected:
            problems.append(
                f"{file_name} is corrupt or truncated (sha256 {actual[:12]}... is not the manifest's "
                f"{expected[:12]}...)"
            )
    return problems


def checkpoint_problems(
    run_dir: Path, manifest: dict, names: list[str] | None = None, sha256: Hasher = sha256_file
) -> list[str]:
    """Checkpoint files against the manifest's sha256 (nothing is loaded).

    A checkpoint whose save is under way or was killed is read from its backup ``.<name>.old``
    (:func:`robustkit.store.checkpoints.read_checkpoint_file`): it is intact while that matches.

    Parameters
    ----------
    names : list of str, optional
        Checkpoints to check (one the manifest lacks is a problem); default: every one listed.

    Returns
    -------
    list of str
        One line per missing checkpoint, missing file or file whose sha256 differs.
    """
    entries = manifest.get("checkpoints", {})
    problems = []
    for name in entries if names is None else names:
        if name not in entries:
            problems.append(f"checkpoint {name!r} is not in the manifest (has: {', '.join(sorted(entries)) or 'none'})")
            continue
        folder = Path(run_dir) / CHECKPOINTS
        found = file_problems(folder / name, entries[name]["files"], sha256)
        backup = folder / f".{name}.old"
        if found and not (backup.is_dir() and not file_problems(backup, entries[name]["files"], sha256)):
            problems += [f"{CHECKPOINTS}/{name}/{line}" for line in found]
    return problems


def log_problems(run_dir: str | Path, manifest: dict, sha256: Hasher = sha256_file) -> list[str]:
    """Why the logs of a finished run do not match its manifest (empty: they do, or are unchecked:
    see :mod:`robustkit.store.logs`)."""
    listed = manifest.get("logs")
    if not isinstance(listed, dict) or manifest.get("status") not in FINISHED:
        return []
    problems = []
    for name, expected in listed.items():
        path = Path(run_dir) / name
        if not path.is_file():
            problems.append(f"{name} is missing")
            continue
        try:
            if sha256(path) != expected:
                problems.append(f"{name} does not match its sha256 in the manifest")
        except OSError as error:
            problems.append(f"{name} cannot be read ({error.strerror or error})")
    return problems


def resume_log_problems(
    run_dir: str | Path, manifest: dict, last_logs: dict | None = None, sha256: Hasher = sha256_file
) -> list[str]:
    """Why the logs of an interrupted run cannot be resumed from (empty: they can, or are unchecked).

    Training records the logs' new sha256 in the manifest *before* it writes them, and keeps the
    ones it wrote in its ``last`` checkpoint (``state.json``'s ``logs``): whatever a kill
    interrupts, each log on disk hashes to one of the two. A log that hashes to neither was
    edited, swapped in from another run or damaged; one that is missing while a sha256 is
    recorded was deleted. Resuming from either would finish the run with values it never
    computed (:meth:`robustkit.train.loop._Loop.resume` refuses it).

    Parameters
    ----------
    last_logs : dict, optional
        ``{file: sha256}`` of the ``last`` checkpoint's ``state.json`` (as resuming has read and
        checked it); None: read here from ``checkpoints/last`` (or its backup ``.last.old``).

    Returns
    -------
    list of str
        One line per log, naming the file; empty for a run written before logs were hashed
        (no ``logs`` in its manifest).
    """
    listed = manifest.get("logs")
    if not isinstance(listed, dict):
        return []
    if last_logs is None:
        last_logs = _last_logs(Path(run_dir))
    problems = []
    for name in sorted(set(listed) | set(last_logs)):
        accepted = {listed.get(name), last_logs.get(name)} - {None}
        path = Path(run_dir) / name
        if not path.is_file():
            problems.append(f"{name} is missing (the manifest records its sha256)")
            continue
        try:
            if sha256(path) not in accepted:
                problems.append(
                    f"{name} does not match the sha256 recorded at its last write "
                    "(edited, swapped in from another run, or damaged)"
                )
        except OSError as error:
            problems.append(f"{name} cannot be read ({error.strerror or error})")
    return problems


def _last_logs(run_dir: Path) -> dict:
    """The logs' sha256 kept in the ``last`` checkpoint's ``state.json`` (or its backup's), or {}."""
    for folder in ("last", ".last.old"):
        try:
            logs = json.loads((run_dir / CHECKPOINTS / folder / "state.json").read_bytes()).get("logs")
        except (OSError, ValueError, AttributeError):
            continue
        return logs if isinstance(logs, dict) else {}
    return {}


def run_problems(run_dir: str | Path, manifest: dict, sha256: Hasher = sha256_file, complete: bool = True) -> list[str]:
    """Every problem of a run's files against its (readable) manifest: every checkpoint it lists,
    the logs (of a finished run, or those an interrupted one would resume from:
    :func:`resume_log_problems`) and, with ``complete``, ``best`` and ``last`` of a finished
    fine-tuning run (it has both).

    Parameters
    ----------
    sha256 : callable
        ``path -> sha256`` (hex): :func:`robustkit.store.atomic.sha256_file`, or a
        :class:`VerificationCache`'s.
    complete : bool
        A finished fine-tuning run lacking ``best`` or ``last`` is a problem (``verify``, the
        sweeps); the readers check what the manifest lists, whose own sha256 says it is the one
        training wrote.

    Returns
    -------
    list of str
        One line per problem, each naming the file (``checkpoints/best/model.safetensors is
        corrupt or truncated (...)``, ``history.parquet is missing``).
    """
    listed = manifest.get("checkpoints", {})
    names = list(listed)
    if complete and manifest.get("kind") == "finetune" and manifest.get("status") in FINISHED:
        names += [name for name in ("best", "last") if name not in listed]
    logs = (
        log_problems(run_dir, manifest, sha256)
        if manifest.get("status") in FINISHED
        else resume_log_problems(run_dir, manifest, sha256=sha256)
    )  # what a resume would read
    return checkpoint_problems(Path(run_dir), manifest, names, sha256) + logs


def cached_run_problems(run_dir: str | Path, manifest: dict) -> list[str]:
    """The files a finished run's manifest lists, through its :class:`VerificationCache`: what
    every reader checks (:func:`run_problems` without ``complete``). Unfinished runs are not
    checked (their files may be being written; resuming checks ``last`` itself)."""
    if manifest.get("status") not in FINISHED:
        return []
    cache = VerificationCache(run_dir)
    problems = run_problems(run_dir, manifest, cache.sha256, complete=False)
    cache.save()
    return problems


def verified_run_problems(run_dir: str | Path, manifest: dict) -> list[str]:
    """:func:`run_problems` with every file hashed now (``robustkit verify``); the hashes are
    remembered for the readers."""
    cache = VerificationCache(run_dir)
    problems = run_problems(run_dir, manifest, cache.rehash)
    cache.save()
    return problems


def forget_file(run_dir: str | Path, path: Path) -> None:
    """Make the readers hash ``path`` again (a reader of its bytes found it damaged)."""
    cache = VerificationCache(run_dir)
    cache.forget(path)
    cache.save()


def forget_run(run_dir: str | Path) -> None:
    """Drop the run's verification cache (its folder was moved aside)."""
    try:
        cache_file(run_dir).unlink()
    except OSError:
        pass
