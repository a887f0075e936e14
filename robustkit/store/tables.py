"""The run store as tidy DataFrames: one row per run (:func:`load_runs`), per logged value
(:func:`load_history`) and per gradient norm (:func:`load_gradnorms`), with the identity columns
(:data:`IDENTITY`) every analysis pools and refuses to pool by."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from robustkit.methods.registry import identity_columns, option_columns
from robustkit.specs.spec import SPEC_DEFAULTS, SPEC_FIELDS
from robustkit.store.collapse import recorded_outcomes
from robustkit.store.folders import GRADNORMS, HISTORY, run_folders
from robustkit.store.identity import _NAMING, IDENTITY, IMPORT_ID, OPTION_COLUMNS  # noqa: F401 (re-exported)
from robustkit.store.manifest import inspect_run
from robustkit.store.schema import DAMAGED, run_outcome, with_history

# What an identity column holds for a run stored before it existed (None: missing).
_COLUMN_DEFAULTS = {**SPEC_DEFAULTS, **dict.fromkeys(OPTION_COLUMNS), IMPORT_ID: None}


class DamagedRunWarning(UserWarning):
    """Damaged runs were left out of what was read (:func:`load_runs`, the analyses)."""


def load_runs(
    store: str | Path, include_tsp: bool = False, include_damaged: bool = False, all_options: bool = True
) -> pd.DataFrame:
    """One row per run: identity columns, status, trainable parameters and final metrics.

    Damaged runs (:func:`robustkit.store.manifest.inspect_run`: a missing, unreadable, misshapen
    or changed manifest, or a finished run whose checkpoint files or logs are missing or do not
    match the manifest's sha256) are left out with a :class:`DamagedRunWarning` naming them and
    the reason, so that one bad run never blocks the rest of the store; ``robustkit verify``
    lists and repairs them. Every file is looked at on every call, and hashed once per change of
    its size or times (:mod:`robustkit.store.integrity`).

    Parameters
    ----------
    store : path
        A run store.
    include_tsp : bool
        Also list task-specific pretraining runs (``kind == "tsp"``).
    include_damaged : bool
        List damaged runs too (no warning), as rows of status ``damaged`` with the ``problem``,
        their folder name as ``run_id`` and no settings.
    all_options : bool
        Keep the option columns of every registered method (what the analyses' identity
        columns, :data:`IDENTITY`, index); False keeps those of the methods present only (the
        notebook's table, :func:`robustkit.load_runs`).

    Returns
    -------
    DataFrame
        Columns ``run_id, kind`` + every field of the run's spec and one column per method
        option (:data:`IDENTITY`; ``lora.r`` holds r for LoRA runs, nothing for others) +
        ``status`` (``complete``, ``diverged``, ``running``, ``failed``: see :data:`robustkit.store.schema.FINISHED`),
        ``main_metric, trainable_params, path``, ``n_<split>`` (examples per split),
        one column per final metric, named ``<checkpoint>/<split>/<metric>`` (e.g.
        ``best/test/accuracy``; ``top_class_share`` is the share of the most predicted class),
        ``outcome/<checkpoint>/<split>`` (``ok``, ``not-learned``, ``collapsed``, ``undecided`` or
        ``diverged``, see :mod:`robustkit.store.collapse`, judged again by the current rule from
        the manifest's scores and baselines: :func:`~robustkit.store.collapse.recorded_outcomes`;
        absent for runs trained before outcomes were recorded), ``outcome`` (the run's one word,
        as ``robustkit runs`` prints it: :func:`robustkit.store.schema.run_outcome`),
        ``ever_learned`` (whether its validation score ever left the majority class; None where
        not recorded) and ``baseline/<split>/<metric>``
        (always predicting the majority training label, on the data the run was scored on). A
        diverged run's final metrics are those of the finite checkpoints it kept, and its
        outcome is ``diverged`` on every checkpoint and split. Runs put in the store by
        ``robustkit import`` have ``imported_from`` (the folder they came from; None for runs
        trained here), ``import_id`` (an identity column: ``<folder name> #<digest>``, so that no
        analysis pools an import with another run) and ``unknown`` (the settings nobody
        recorded, e.g. ``("seed", "lr")``), whose columns hold None for them (``seed``: <NA>).
    """
    rows, damaged = [], []
    for run_dir in run_folders(store):
        manifest, problem = inspect_run(run_dir)
        if problem:
            damaged.append(
                {"run_id": run_dir.name, "kind": None, "status": DAMAGED, "problem": problem, "path": str(run_dir)}
            )
            continue
        if manifest.get("kind") == "tsp" and not include_tsp:
            continue
        row = {"run_id": manifest["run_id"], "kind": manifest.get("kind")}
        spec = dict(manifest.get("spec", {}))
        row.update(identity_columns(spec.get("method"), spec.pop("method_options", None)))
        row.update(spec)
        row["unknown"] = tuple(manifest.get("unknown", ()))
        row["imported_from"] = manifest.get("import", {}).get("source")
        row[IMPORT_ID] = import_id(manifest["run_id"], row["imported_from"])
        row["status"] = manifest.get("status")
        row["main_metric"] = manifest.get("main_metric")
        row["trainable_params"] = manifest.get("trainable", {}).get("count")
        row.update({f"n_{split}": size for split, size in (manifest.get("splits") or {}).items()})
        row.update(_flatten_final(manifest.get("final", {})))
        learned = manifest.get("ever_learned")
        row["ever_learned"] = learned
        outcomes = recorded_outcomes(manifest)  # in the current rule's words: old stores lack undecided
        row.update(
            {
                f"outcome/{checkpoint}/{split}": with_history(value, learned)
                for checkpoint, splits in outcomes.items()
                for split, value in splits.items()
            }
        )
        row["outcome"] = run_outcome(outcomes, learned)
        row.update(
            {
                f"baseline/{split}/{metric}": value
                for split, values in (manifest.get("baselines") or {}).items()
                for metric, value in values.items()
                if metric != "n"
            }
        )
        row["path"] = str(run_dir)
        rows.append(row)
    frame = pd.DataFrame(rows)
    if damaged and not include_damaged:
        listed = "; ".join(f"{row['run_id']}: {row['problem']}" for row in damaged)
        warnings.warn(
            f"{len(damaged)} damaged run(s) of {store} left out ({listed}); `robustkit verify {store}` "
            "lists them and what to do",
            DamagedRunWarning,
            stacklevel=2,
        )
    if frame.empty:
        frame = pd.DataFrame(columns=["run_id", "kind", *IDENTITY[1:], "status", "trainable_params", "path"])
    else:
        # runs stored before a spec field existed hold its default (a None default stays missing)
        frame = frame.assign(
            **{
                f: frame[f].fillna(_COLUMN_DEFAULTS[f])
                if f in frame and _COLUMN_DEFAULTS[f] is not None
                else frame.get(f, _COLUMN_DEFAULTS[f])
                for f in IDENTITY[1:]
            }
        )
        for name in {name for unknown in frame["unknown"] for name in unknown}:  # not guessed: missing
            frame[name] = frame[name].mask(frame["unknown"].map(lambda u, n=name: n in u))
            if name == "seed":  # a replicate label: an integer where known, <NA> where not (not 1.0)
                frame[name] = frame[name].astype("Int64")
        frame = _flag_changed_data(frame, store)
    if not all_options and "method" in frame:
        present = set(frame["method"].dropna())
        frame = frame.drop(columns=[c for c in OPTION_COLUMNS if c.split(".", 1)[0] not in present])
    if damaged and include_damaged:  # after the defaults: a damaged run's settings are unknown
        frame = pd.concat([frame, pd.DataFrame(damaged)], ignore_index=True).sort_values("run_id", ignore_index=True)
    return frame


_WARNED: set[str] = set()


def _flag_changed_data(frame: pd.DataFrame, store) -> pd.DataFrame:
    """``frame`` + ``data_changed`` (None, or why the run's local data is not what it was trained
    on: :func:`robustkit.store.run_data.changed_data`), with one warning per changed source
    naming it and its runs. Only runs with a local ``data_dir`` are checked (the data modules are
    imported only then)."""
    local = frame.get("data_dir", pd.Series(dtype=object)).map(
        lambda d: isinstance(d, str) and not d.startswith("hub:")
    )
    if not local.any():
        return frame.assign(data_changed=None)
    from robustkit.store.run_data import DataChangedWarning, changed_data

    changed = changed_data(frame[local])
    for why in dict.fromkeys(changed.values()):
        if why in _WARNED:
            continue  # once per process: a command reads its store's table more than once
        _WARNED.add(why)
        ids = sorted(r for r, w in changed.items() if w == why)
        named = ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
        warnings.warn(
            f"{why}; run{'s' if len(ids) > 1 else ''} {named} of {store}: scores stand as recorded, analyses "
            "that read the data refuse them; restore the data to analyse them",
            DataChangedWarning,
            stacklevel=3,
        )
    return frame.assign(data_changed=frame["run_id"].map(changed).where(lambda c: c.notna(), None))


def import_id(run_id: str, source: str | None) -> str | None:
    """An imported run's :data:`IMPORT_ID`: ``<source folder name> #<digest of its files and
    settings>`` (``my-lora #3f9a2c1d``); None for a run trained here (no source)."""
    if source is None:
        return None
    return f"{Path(source).name} #{run_id.rsplit('-', 1)[-1]}"


def _flatten_final(final: dict) -> dict:
    return {
        f"{checkpoint}/{split}/{metric}": value
        for checkpoint, splits in final.items()
        for split, metrics in splits.items()
        for metric, value in metrics.items()
    }


def load_history(store: str | Path, include_tsp: bool = False) -> pd.DataFrame:
    """One row per run x step x split x metric: the training history of every run.

    Returns
    -------
    DataFrame
        Identity columns + ``step, epoch, split, metric, value``.
    """
    return _load_table(store, HISTORY, include_tsp)


def load_gradnorms(store: str | Path, include_tsp: bool = False) -> pd.DataFrame:
    """One row per run x step x layer group: L2 gradient norm before clipping.

    Returns
    -------
    DataFrame
        Identity columns + ``step, layer, value`` (``layer`` is ``embeddings``, ``layer.<i>``,
        ``pooler``, ``classifier`` or ``mlm_head``).
    """
    return _load_table(store, GRADNORMS, include_tsp)


def _load_table(store: str | Path, file_name: str, include_tsp: bool) -> pd.DataFrame:
    runs = load_runs(store, include_tsp=include_tsp)  # damaged logs of finished runs: left out there
    frames, damaged = [], []
    for _, run in runs.iterrows():
        path = Path(run["path"]) / file_name
        if not path.exists():
            continue
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError) as error:  # a run whose logs are not hashed (unfinished, or older): unreadable
            damaged.append(f"{run['run_id']}: {file_name} cannot be read ({type(error).__name__})")
            continue
        for column in reversed(IDENTITY):
            frame.insert(0, column, run.get(column))
        frames.append(frame)
    if damaged:
        warnings.warn(
            f"{len(damaged)} run(s) of {store} left out of the {file_name} read ({'; '.join(damaged)}); "
            f"`robustkit verify {store} --repair` moves them aside",
            DamagedRunWarning,
            stacklevel=3,
        )
    if not frames:
        return pd.DataFrame(columns=IDENTITY)
    return pd.concat(frames, ignore_index=True)
