"""The attack's per-example cache: one resumable JSON-lines file per run, attacker and key.

Results are appended per example to ``<store>/.cache/attack/<run_id>-<attacker>-<key>.jsonl``
as they finish, so an interrupted attack resumes where it stopped; the key hashes the attacker,
its options (:attr:`robustkit.attacks.Attack.params`), the other parameters and the
checkpoint's sha256, so two attackers' results never mix. Each line carries the sha256 of its own
content with the file's name (the run id and the cache key:
:func:`robustkit.analysis.cache.bound_sha256`) (:data:`LINE_SHA256`): a line that does not match
it (a changed byte, a line cut short by a kill, a line or a whole file copied from another run's
or key's cache, a line without one) is dropped and its example attacked again, never read. A
store that cannot be written keeps its results in a temporary copy for the process
(:func:`writable`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from robustkit.analysis.cache import bound_sha256, cannot_cache
from robustkit.store.atomic import atomic_write_bytes

EXAMPLE_COLUMNS = [
    "attacker",
    "example",
    "idx",
    "label",
    "prediction",
    "original",
    "adversarial",
    "success",
    "queries",
    "forward_passes",
    "modified_words",
    "words",
    "seconds",
]
# A cache line's own sha256 (first 16 hex digits, of the file's name and the rest of its JSON
# object with sorted keys: :func:`line_sha256`).
LINE_SHA256 = "sha256"


def writable(path: Path, legacy: Path) -> Path:
    """``path``, or where a store that cannot be written (a read-only store) has its results
    kept for this process instead: a copy of its cache file (or legacy file) in a temporary
    folder, said once (:func:`robustkit.analysis.cache.cannot_cache`)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a"):
            return path
    except OSError as error:
        cannot_cache(path, error)
    elsewhere = Path(tempfile.mkdtemp(prefix="robustkit-attack-")) / path.name
    source = path if path.exists() else legacy
    if source.exists():
        # the lines are bound to their file's name (its run and key): kept, so they still match
        elsewhere.write_bytes(source.read_bytes())
    return elsewhere


def done_examples(path: Path) -> set[int]:
    """The examples whose intact lines the cache file holds."""
    return {record["example"] for record in records(path)}


def records(path: Path) -> list[dict]:
    """The intact lines of a cache file, in order: JSON objects of known columns (and the
    ``device`` the example ran on, provenance, not a column) whose
    :data:`LINE_SHA256` matches, bound to this file's name. A line cut short by a kill, changed on
    disk, copied from another run's or key's file or without a sha256 (written before lines were
    hashed, or with their file's name) is left out: its example is attacked again."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict) or "example" not in record:
            continue
        recorded = record.pop(LINE_SHA256, None)
        if set(record) - set(EXAMPLE_COLUMNS) - {"device"} or recorded != line_sha256(record, path):
            continue
        records.append(record)
    return records


def line_sha256(record: dict, path: Path) -> str:
    """A cache line's :data:`LINE_SHA256`: of its record bound to the file's name (run id, key)."""
    return bound_sha256(Path(path).name, json.dumps(record, sort_keys=True).encode())[:16]


def keep_intact_lines(path: Path) -> None:
    """Rewrite the cache file with its intact lines only (:func:`records`), so that appends
    stay one JSON object per line and each example is in it once."""
    if path.exists():
        lines = [json.dumps({**record, LINE_SHA256: line_sha256(record, path)}) + "\n" for record in records(path)]
        if "".join(lines) != path.read_text(errors="replace"):
            atomic_write_bytes(path, "".join(lines).encode())
