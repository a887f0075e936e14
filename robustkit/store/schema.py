"""Run statuses and the manifest's schema: the shape every reader of a manifest relies on."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np

from robustkit.specs.spec import RunSpec, TspSpec

# A run's ``status`` in its manifest. ``running`` (or interrupted: resumable), ``failed`` (an
# exception; resumable), ``complete`` (trained to the end), ``diverged`` (stopped at a non-finite
# loss, gradient norm or weights: its last finite state kept, its outcome ``diverged``,
# :mod:`robustkit.store.collapse`). Complete and diverged runs are finished: never trained again, and
# analysed (a diverged run is counted as such, never averaged in as a result).
COMPLETE, DIVERGED = "complete", "diverged"
FINISHED = (COMPLETE, DIVERGED)
RUNNING = "running"
STATUSES = (RUNNING, "failed", COMPLETE, DIVERGED)
# A run folder that cannot be trusted (robustkit.analysis.verify): shown with this status, never analysed.
DAMAGED = "damaged"

# A run's **outcome** on a scored split (:mod:`robustkit.store.collapse` decides it): the one
# vocabulary of tables, figures and the CLI. Here, below the training code, so that the store's
# tables speak it too. ``undecided``: the scored split is too small to tell a failed run from one
# that learned; never ``ok`` (issue #55).
OK, NOT_LEARNED, COLLAPSED, UNDECIDED = "ok", "not-learned", "collapsed", "undecided"
OUTCOMES = (OK, NOT_LEARNED, COLLAPSED, UNDECIDED, DIVERGED)


def with_history(outcome: str, ever_learned) -> str:
    """``outcome`` given whether the run ever left the majority class during training:
    ``not-learned`` for a collapsed run that never did (``ever_learned`` False), else ``outcome``
    as it is (``ever_learned`` None / NA: history unknown).

    Parameters
    ----------
    outcome : str
        One of :data:`OUTCOMES`, judged on the scored split alone (as training records it).
    ever_learned : bool or None
        Whether its validation score was ever significantly above the majority baseline.
    """
    if outcome != COLLAPSED or not isinstance(ever_learned, (bool, np.bool_)):
        return outcome  # None, NaN, pandas.NA: the history is unknown
    return outcome if bool(ever_learned) else NOT_LEARNED


def run_outcome(outcomes: dict, ever_learned=None) -> str | None:
    """One word for a run from its manifest's ``outcome`` (``{checkpoint: {split: word}}``):
    ``ok`` when every recorded outcome is, else the failed words joined by ``/``
    (``collapsed/diverged``), made ``not-learned`` where the run never learned; None when
    nothing is recorded."""
    words = {with_history(w, ever_learned) for splits in (outcomes or {}).values() for w in splits.values()}
    if not words:
        return None
    return OK if words == {OK} else "/".join(sorted(words - {OK}))


_SHA256 = re.compile(r"[0-9a-f]{64}")
_SPECS = {"finetune": RunSpec, "tsp": TspSpec}
_JSON_TYPES = {"str": (str,), "int": (int,), "float": (int, float), "bool": (bool,), "None": (type(None),)}


def _field_types(spec_class) -> dict[str, tuple[type, ...] | None]:
    """The JSON types each spec field may hold, from its annotation (None: not checked)."""
    types = {}
    for f in dataclasses.fields(spec_class):
        names = [part.strip() for part in str(f.type).split("|")]
        types[f.name] = (
            tuple(t for name in names for t in _JSON_TYPES[name])
            if all(name in _JSON_TYPES for name in names)
            else None
        )
    return types


_SPEC_TYPES = {kind: _field_types(spec_class) for kind, spec_class in _SPECS.items()}
_SPEC_ANNOTATIONS = {kind: {f.name: str(f.type) for f in dataclasses.fields(c)} for kind, c in _SPECS.items()}


def _is(value, types: tuple[type, ...]) -> bool:
    """isinstance, with JSON's true/false not counting as numbers."""
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def _nested(value, depth: int) -> bool:
    """A dict of dicts ``depth`` levels deep (final: checkpoint -> split -> metric -> value)."""
    return isinstance(value, dict) and (depth == 1 or all(_nested(v, depth - 1) for v in value.values()))


# Optional top-level keys that the store's readers rely on: key -> (check, expected).
_OPTIONAL = {
    "status": (lambda v: v in STATUSES, f"one of {', '.join(STATUSES)}"),
    "main_metric": (lambda v: v is None or isinstance(v, str), "a metric name"),
    "trainable": (
        lambda v: isinstance(v, dict) and (v.get("count") is None or _is(v["count"], (int,))),
        "an object whose count is an integer",
    ),
    "splits": (
        lambda v: v is None or (isinstance(v, dict) and all(_is(n, (int,)) for n in v.values())),
        "split -> number of examples",
    ),
    "final": (lambda v: _nested(v, 3), "checkpoint -> split -> metric -> value"),
    "outcome": (lambda v: v is None or _nested(v, 2), "checkpoint -> split -> outcome"),
    "data": (lambda v: isinstance(v, dict) and isinstance(v.get("fingerprint"), str), "an object with a fingerprint"),
    "tsp_run": (lambda v: v is None or isinstance(v, str), "a run id"),
    "error": (lambda v: v is None or isinstance(v, str), "a message"),
}


def manifest_problem(manifest, folder: str | None = None) -> str | None:
    """What is wrong with a manifest's shape, or None: the schema every reader relies on.

    Required: ``run_id`` (the folder's name when ``folder`` is given), ``kind`` (``finetune`` or
    ``tsp``) and ``spec`` (an object of the kind's spec fields, each of its annotated type);
    where present, ``status`` is a known status, ``checkpoints`` maps names to ``{"step": int,
    "files": {file: sha256}}``, and the keys of :data:`_OPTIONAL` have their shapes. Other keys
    are free (newer robustkit versions may add some). ``unknown`` lists the spec fields of an
    imported run that nobody recorded (:mod:`robustkit.train.importing`): those hold null.
    """
    if not isinstance(manifest, dict):
        return f"a JSON {type(manifest).__name__} ({json.dumps(manifest)[:40]}), not an object"
    for key in ("run_id", "kind", "spec"):
        if key not in manifest:
            return f"no {key!r}"
    run_id, kind, spec = manifest["run_id"], manifest["kind"], manifest["spec"]
    if not isinstance(run_id, str) or not run_id:
        return f"run_id is {run_id!r}, not a run id"
    if folder is not None and run_id != folder:
        return f"run_id {run_id!r} is not the name of its folder {folder!r}"
    if kind not in _SPECS:
        return f"kind is {kind!r}, expected 'finetune' or 'tsp'"
    if not isinstance(spec, dict):
        return f"spec is {spec!r}, not an object of run settings"
    types = _SPEC_TYPES[kind]
    unknown = manifest.get("unknown", [])
    if not (isinstance(unknown, list) and all(name in types for name in unknown)):
        return f"unknown is {json.dumps(unknown, default=str)[:60]}, expected a list of spec fields"
    for name, value in spec.items():
        if name not in types:
            return f"spec has an unknown field {name!r}"
        if value is None and name in unknown:  # an imported run's setting nobody recorded
            continue
        if types[name] is not None and not _is(value, types[name]):
            return f"spec field {name!r} is {value!r}, expected {_SPEC_ANNOTATIONS[kind][name]}"
    for key, (check, expected) in _OPTIONAL.items():
        if key in manifest and not check(manifest[key]):
            return f"{key} is {json.dumps(manifest[key], default=str)[:60]}, expected {expected}"
    checkpoints = manifest.get("checkpoints", {})
    if not isinstance(checkpoints, dict):
        return f"checkpoints is {checkpoints!r}, not an object"
    for name, entry in checkpoints.items():
        if not (
            isinstance(entry, dict)
            and _is(entry.get("step"), (int,))
            and isinstance(entry.get("files"), dict)
            and entry["files"]
        ):
            return f"checkpoint {name!r} is {json.dumps(entry, default=str)[:60]}, expected {{step, files}}"
        for file_name, digest in entry["files"].items():
            if (
                "/" in file_name
                or file_name in ("", ".", "..")
                or not (isinstance(digest, str) and _SHA256.fullmatch(digest))
            ):
                return f"checkpoint {name!r} lists file {file_name!r} with {digest!r}, not a sha256"
    return None
