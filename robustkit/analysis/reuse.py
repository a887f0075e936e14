"""Cached work reused: what each cache entry was computed at, and which entry a figure reads.

A cache file's name is a hash of everything it was computed from (:mod:`robustkit.analysis.cache`),
so it cannot say at which sample size (an attack's ``--n``, a similarity's ``--tokens``) it was
computed. Beside each entry, :func:`record` writes ``<cache file>.params.json``: the analysis,
its parameters as the user gave them (:meth:`robustkit.analysis.declare.Analysis.run`), the
checkpoint files it read and when it was computed. An entry computed before these records
existed gets its record (dated by the file) the next time the analysis runs at its parameters (a
cache read).

A figure drawn by ``robustkit plot`` (``figures.draw(..., any_size=True)``) whose sample-size
parameters (:data:`SAMPLE_SIZES`) were not given draws, for each run, the cached entry with the
largest sample size that matches its other parameters (:func:`plan`): ``robustkit analyze
attack --n 10`` followed by ``robustkit plot attack-boxes`` draws those 10 examples per run
instead of attacking 200 more, and says so in one line. A sample size that was given is
honoured (computed if no entry has it). ``reproduce`` and ``claims`` use the sizes they state.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# Parameters that set how many things an analysis samples (examples, tokens, Hutchinson samples,
# resamples): a larger value estimates the same quantity more precisely, so an entry computed at
# any of them answers a figure that did not ask for one. Not forgetting's head_texts: the glosses
# a head is trained on change what is measured (a better-fitted head), not how precisely.
SAMPLE_SIZES = frozenset({"n", "examples", "tokens", "samples", "resamples", "texts"})
RECORD_SUFFIX = ".params.json"

# (analysis name, its parameters as resolved) of the innermost Analysis.run: what record() writes
_COMPUTING: contextvars.ContextVar[tuple[str, dict] | None] = contextvars.ContextVar("computing", default=None)


@contextlib.contextmanager
def computing(analysis: str, values: dict[str, Any]) -> Iterator[None]:
    """Inside the block, cache entries written or read are recorded as ``analysis`` at ``values``
    (its resolved parameters, options left out)."""
    token = _COMPUTING.set((analysis, dict(values)))
    try:
        yield
    finally:
        _COMPUTING.reset(token)


def record_path(cache_file: Path) -> Path:
    """``<cache file>.params.json``."""
    return cache_file.with_name(cache_file.name + RECORD_SUFFIX)


def record(
    analysis: str, cache_file: Path, run_dir: str | Path, checkpoints: Sequence[str], pair: bool = False
) -> None:
    """Write the record of ``analysis``'s entry ``cache_file`` of run ``run_dir`` (its parameters
    from the enclosing :func:`computing` of the same analysis; nothing outside one, nor for
    another analysis's cache that one reads), keeping the first ``computed`` time; a store that
    cannot be written keeps no record (the entry is still read by its own key)."""
    current = _COMPUTING.get()
    if current is None or current[0] != analysis:
        return
    values = current[1]
    from robustkit.store.manifest import read_manifest  # here: the figure registry imports this module

    path = record_path(Path(cache_file))
    computed = _read(path).get("computed") or _written(Path(cache_file))
    saved = read_manifest(Path(run_dir)).get("checkpoints", {})
    content = {
        "analysis": analysis,
        "run_id": Path(run_dir).name,
        "params": values,
        "checkpoints": {name: saved.get(name, {}).get("files") for name in checkpoints},
        "computed": computed,
        "pair": pair,
    }
    text = json.dumps(content, sort_keys=True, default=str)
    with contextlib.suppress(OSError):
        if not path.exists() or path.read_text() != text:
            path.write_text(text)


def _written(cache_file: Path) -> str:
    """When the cache file was last written (an entry from before records existed: computed then)."""
    try:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(cache_file.stat().st_mtime))
    except OSError:
        return time.strftime("%Y-%m-%d %H:%M")


def _read(path: Path) -> dict:
    try:
        content = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return content if isinstance(content, dict) else {}


@dataclass(frozen=True)
class Entry:
    """One cached entry of a run: the parameters it was computed at and when."""

    run_id: str
    params: dict
    computed: str
    pair: bool = False


def entries(store: str | Path, analysis: str, run_paths: dict[str, str | Path]) -> dict[str, list[Entry]]:
    """The recorded cache entries of ``analysis`` for the runs of ``run_paths`` (run_id -> folder)
    whose file is still there and whose checkpoints are the run's current ones (a retrained run's
    entries are never offered)."""
    from robustkit.errors import RobustkitError
    from robustkit.store.folders import CACHE_DIR
    from robustkit.store.manifest import read_manifest

    found: dict[str, list[Entry]] = {}
    manifests: dict[str, dict] = {}
    for path in sorted(Path(store).joinpath(CACHE_DIR, analysis).glob(f"*{RECORD_SUFFIX}")):
        content = _read(path)
        run_id = content.get("run_id")
        if content.get("analysis") != analysis or run_id not in run_paths:
            continue
        if not path.with_name(path.name[: -len(RECORD_SUFFIX)]).exists():
            continue
        if run_id not in manifests:
            try:
                manifests[run_id] = read_manifest(Path(run_paths[run_id])).get("checkpoints", {})
            except RobustkitError:  # a damaged run: the analysis names it and leaves it out
                manifests[run_id] = {}
        saved = manifests[run_id]
        recorded = content.get("checkpoints") or {}
        if any(saved.get(name, {}).get("files") != files for name, files in recorded.items()):
            continue
        found.setdefault(run_id, []).append(
            Entry(run_id, content.get("params") or {}, str(content.get("computed", "")), bool(content.get("pair")))
        )
    return found


@dataclass
class Plan:
    """How a figure gets its frame: one analysis call per group of runs (``values``: the
    parameters; ``run_ids``: None for every selected run), and the line that says so ("" when
    nothing cached at another sample size is used)."""

    groups: list[tuple[dict, list[str] | None]]
    message: str = ""


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def plan(
    analysis: str,
    store: str | Path,
    run_paths: dict[str, str | Path],
    values: dict[str, Any],
    free: Sequence[str],
    flags: dict[str, str] | None = None,
) -> Plan:
    """Which sample sizes a figure reads for each run.

    Parameters
    ----------
    analysis : str
        The analysis's name.
    run_paths : dict
        The selected runs: run_id -> folder.
    values : dict
        The analysis's parameters as the figure resolved them (the defaults for those not given).
    free : sequence of str
        The sample-size parameters the caller did not give (:data:`SAMPLE_SIZES`): each run reads
        its entry that matches ``values`` on every other parameter with the largest of them (in
        ``free``'s order); a run with none is computed at ``values``.
    flags : dict, optional
        name -> command-line flag (``--n``), for the line; default ``--<name>``.

    Returns
    -------
    Plan
    """
    free = [name for name in free if name in values]
    if not free:
        return Plan([(values, None)])
    flags = flags or {}
    found = entries(store, analysis, run_paths)

    def matching(entry: Entry) -> bool:
        fixed = {k: v for k, v in values.items() if k not in free}
        return _same({k: entry.params.get(k) for k in fixed}, fixed) and all(
            isinstance(entry.params.get(k), int) for k in free
        )

    best: dict[str, Entry] = {}
    sizes: dict[str, dict[tuple, Entry]] = {}
    for run_id, listed in found.items():
        ok = [e for e in listed if matching(e)]
        sizes[run_id] = {tuple(e.params[k] for k in free): e for e in ok}
        if ok:
            best[run_id] = max(ok, key=lambda e: tuple(e.params[k] for k in free))
    if any(e.pair for e in best.values()):
        # pairs are cached under one run of each pair: every run must read the same sizes
        common = set.intersection(*(set(sizes[r]) for r in best))
        chosen = max(common) if common else None
        best = {r: sizes[r][chosen] for r in best} if chosen is not None else {}
    default = tuple(values[k] for k in free)
    chosen_of = {
        run_id: tuple(best[run_id].params[k] for k in free) if run_id in best else default for run_id in run_paths
    }
    if all(size == default for size in chosen_of.values()):
        return Plan([(values, None)])
    groups: dict[tuple, list[str]] = {}
    for run_id, size in chosen_of.items():
        groups.setdefault(size, []).append(run_id)
    whole = len(groups) == 1
    planned = [({**values, **dict(zip(free, size))}, None if whole else ids) for size, ids in sorted(groups.items())]

    def at(size: tuple) -> str:
        return ", ".join(f"{k}={v}" for k, v in zip(free, size))

    parts = []
    for size, ids in sorted(groups.items(), reverse=True):
        cached = [r for r in ids if r in best]
        if cached:
            runs = "" if whole else f" for {len(cached)} run(s)"
            dates = sorted({best[r].computed[:10] for r in cached if best[r].computed})
            when = f" (computed {dates[0]}{' to ' + dates[-1] if len(dates) > 1 else ''})" if dates else ""
            parts.append(f"using cached {analysis} frames at {at(size)}{runs}{when}")
        if len(cached) < len(ids):
            parts.append(f"computing {analysis} at {at(size)} for {len(ids) - len(cached)} run(s) with no cached frame")
    again = " / ".join(flags.get(k, "--" + k.replace("_", "-")) for k in free)
    return Plan(planned, f"{'; '.join(parts)}; pass {again} to recompute")
