"""Compact text tables of a store, for the terminal (`robustkit runs`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from robustkit.store import collapse
from robustkit.store.manifest import read_manifest
from robustkit.store.schema import DAMAGED
from robustkit.store.tables import OPTION_COLUMNS, load_runs

SHOWN = [
    "run_id",
    "model",
    "task",
    "method",
    "options",
    "seed",
    "tsp_step",
    "lr",
    "train_size",
    "status",
    "outcome",
    "trainable_params",
]
# What `robustkit runs` always shows, whether it varies or not (robustkit.cli.terminal.render).
ALWAYS = ("run_id", "model", "method", "seed", "status", "outcome")
# Its key columns, never cut for a narrow terminal: which run, how it ended, what it scored.
KEYS = ("run_id", "outcome", "best_val", "best_test")
# Settings besides the identity columns: cut first (a LoRA run's options are long).
SETTINGS = ("options",)


def runs_table(
    store: str | Path, include_tsp: bool = False, run_ids: Iterable[str] | None = None, select: list[str] | None = None
) -> pd.DataFrame:
    """One row per run: identity, status, trainable parameters and the main metric.

    Damaged runs (:func:`robustkit.store.manifest.damage`) are rows of status ``damaged`` with no
    settings; :func:`damaged_notes` says why.

    Parameters
    ----------
    run_ids : iterable of str, optional
        Only these runs, in this order (e.g. the runs a command just trained); ids without a
        manifest in the store (a run that failed before it started) have no row. Default: every
        run of the store.
    select : list of str, optional
        ``KEY=VALUE[,VALUE]`` filters on the store's columns (``run_id=...``), as ``--select``.

    Returns
    -------
    DataFrame
        :data:`SHOWN` columns (``options``: the method's options, ``r=8 alpha=8 ...``; empty
        for methods whose options are run-spec columns; ``outcome``: ``ok``, or every outcome
        other than ok among its checkpoints and splits, e.g. ``collapsed``: :mod:`robustkit.store.collapse`;
        empty where none was recorded) + ``metric`` (the task's main metric) and its value on the
        validation and test splits at the best checkpoint (``best_val``, ``best_test``) and on
        test at the last one (``last_test``); where runs have more than two classes, also the
        best checkpoint's test macro-F1 (``best_test_macro_f1``).
    """
    runs = load_runs(store, include_tsp=include_tsp, include_damaged=True)
    if select:
        from robustkit.analysis.select import parse_filters, selected

        runs = selected(runs, parse_filters(select), str(store))
    if run_ids is not None:
        order = {run_id: i for i, run_id in enumerate(run_ids)}
        runs = (
            runs[runs.run_id.isin(list(order))]
            .sort_values("run_id", key=lambda ids: ids.map(order))
            .reset_index(drop=True)
        )
    words = {
        row["run_id"]: row.get("outcome") if isinstance(row.get("outcome"), str) else None for _, row in runs.iterrows()
    }
    outcomes = _with_history(store, runs, words)  # runs trained before training recorded ever_learned
    table = (
        runs.assign(options=[_options(row) for _, row in runs.iterrows()], outcome=runs["run_id"].map(outcomes))
        .reindex(columns=SHOWN)
        .copy()
    )
    for column in ("seed", "tsp_step", "train_size", "trainable_params"):  # integers, though a damaged row has none
        values = pd.to_numeric(table[column], errors="coerce")
        if values.notna().any() and values.dropna().mod(1).eq(0).all():
            table[column] = values.astype("Int64")
    metric = runs.get("main_metric", pd.Series([None] * len(runs)))
    table["metric"] = metric.values
    for column, (checkpoint, split) in {
        "best_val": ("best", "validation"),
        "best_test": ("best", "test"),
        "last_test": ("last", "test"),
    }.items():
        table[column] = [
            round(float(row[f"{checkpoint}/{split}/{m}"]), 4)
            if m and f"{checkpoint}/{split}/{m}" in row and pd.notna(row[f"{checkpoint}/{split}/{m}"])
            else None
            for m, (_, row) in zip(metric, runs.iterrows())
        ]
    if "best/test/macro_f1" in runs and runs["best/test/macro_f1"].notna().any():  # more than two classes
        table["best_test_macro_f1"] = pd.to_numeric(runs["best/test/macro_f1"], errors="coerce").round(4).values
    # the scores before the parameter count: a table cut to the terminal's width keeps them
    return table[[c for c in table.columns if c != "trainable_params"] + ["trainable_params"]]


def _with_history(store: str | Path, runs: pd.DataFrame, outcomes: dict) -> dict:
    """run_id -> outcome text (a word, or words joined by ``/``: ``collapsed/diverged``) with
    ``collapsed`` made ``not-learned`` for runs that never left the majority class
    (:func:`robustkit.store.collapse.with_history`), as ``stats`` and the figures call them: training
    records the outcome before it knows."""
    learned = _ever_learned(
        store, runs, [r for r, o in outcomes.items() if isinstance(o, str) and collapse.COLLAPSED in o]
    )
    return {
        r: "/".join(sorted({collapse.with_history(w, learned.get(r)) for w in o.split("/")})) if r in learned else o
        for r, o in outcomes.items()
    }


def _ever_learned(store: str | Path, runs: pd.DataFrame | None, run_ids: list[str]) -> dict:
    """run_id -> whether each of ``run_ids`` ever left the majority class (NA: unknown); empty
    when none is asked for or the history cannot be read (the recorded words then stand).
    ``runs``: the store's runs (None: read here)."""
    if not run_ids:
        return {}
    try:
        from robustkit.analysis.scores import ever_learned

        runs = load_runs(store, include_tsp=True) if runs is None else runs
        return ever_learned(store, runs[runs["run_id"].isin(run_ids)]).to_dict()
    except Exception:  # noqa: BLE001 - no history or data to read
        return {}


def damaged_notes(store: str | Path) -> list[str]:
    """One line per damaged run of the store: its problem, then what to do."""
    runs = load_runs(store, include_tsp=True, include_damaged=True)
    damaged = runs[runs["status"] == DAMAGED] if "problem" in runs else runs.iloc[:0]
    lines = [f"DAMAGED {row.run_id}: {row.problem}" for row in damaged.itertuples()]
    if lines:
        lines.append(
            f"{len(lines)} damaged run{'' if len(lines) == 1 else 's'} left out of every analysis: `robustkit verify "
            f"{store}` checks every "
            f"checkpoint and says what to do; `robustkit verify {store} --repair` moves them aside so that "
            "the next sweep trains them again"
        )
    return lines


def _options(run: pd.Series) -> str:
    """A run's method options in one cell: ``r=8 alpha=8 dropout=0.0 matrices=q,v``."""
    prefix = f"{run.get('method')}."
    # a column holding other methods' missing values is float: 8.0 is the integer 8
    return " ".join(
        f"{c[len(prefix) :]}={run[c]:g}" if isinstance(run[c], float) else f"{c[len(prefix) :]}={run[c]}"
        for c in OPTION_COLUMNS
        if c.startswith(prefix) and pd.notna(run.get(c))
    )


def failed_outcomes(store: str | Path, run_ids: list[str]) -> list[str]:
    """One line per run in ``run_ids`` that ended not-learned, collapsed or diverged
    (:mod:`robustkit.store.collapse`), in the words ``runs`` and ``stats`` use for it.

    Returns
    -------
    list of str
        E.g. ``"not-learned rt-houlsby-...: last test accuracy 0.530, 70% of test predictions in
        one class (best/test not-learned, last/test not-learned)"``; runs without a recorded
        outcome (trained before it existed) are skipped.
    """
    manifests, lines = {}, []
    for run_id in run_ids:
        try:
            manifest = read_manifest(Path(store) / run_id)
        except Exception:  # noqa: BLE001 - a run that failed to start has no manifest
            continue
        outcome = collapse.recorded_outcomes(manifest)  # the current rule's words, undecided included
        bad = {
            f"{checkpoint}/{split}": value
            for checkpoint, splits in outcome.items()
            for split, value in splits.items()
            if value != "ok"
        }
        if bad:
            manifests[run_id] = (manifest, bad)
    learned = _ever_learned(store, None, [r for r, (m, _) in manifests.items() if "ever_learned" not in m])
    for run_id, (manifest, bad) in manifests.items():
        history = manifest.get("ever_learned", learned.get(run_id))
        bad = {k: collapse.with_history(v, history) for k, v in bad.items()}
        kinds = sorted(set(bad.values()))
        why = (
            f": too few test examples to tell a failed run from one that learned (all runs are decided from "
            f"about {_floor(manifest)}); not a result"
            if kinds == [collapse.UNDECIDED]
            else ""
        )
        lines.append(
            f"{'/'.join(kinds)} {run_id}: {_test_detail(manifest)} "
            f"({', '.join(f'{k} {v}' for k, v in sorted(bad.items()))}){why}"
        )
    return lines


def _last_test(manifest: dict) -> tuple[str, float, float, float, float | None]:
    """(main metric, its last test value, the test majority baseline, n, top-class share)."""
    metric = manifest.get("main_metric")
    test = manifest.get("final", {}).get("last", {}).get("test", {})
    base = (manifest.get("baselines") or {}).get("test", {})
    return (
        metric,
        test.get(metric, float("nan")),
        base.get(metric, float("nan")),
        base.get("n"),
        test.get("top_class_share"),
    )


def _test_detail(manifest: dict) -> str:
    """``last test accuracy 0.530 on 64 examples (majority baseline 0.549)``, and the share of the
    most predicted class where that is what made it collapsed."""
    metric, value, baseline, n, share = _last_test(manifest)
    detail = f"last test {metric} {value:.3f}"
    if n is not None:
        detail += f" on {n} examples (majority baseline {baseline:.3f})"
    if share is not None and share >= collapse.DEFAULT_RULE.max_class_share:
        detail += f", {share:.0%} of test predictions in one class"
    return detail


def _floor(manifest: dict) -> int:
    metric, _, baseline, _, _ = _last_test(manifest)
    return collapse.evaluation_floor(baseline, metric)
