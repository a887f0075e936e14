"""A claim's cells, built once: per cell, the per-run values of groups a and b the tests compare.

:func:`cells` turns a claim's observations into :class:`Cell` objects, one per value of its
``within`` columns (a trend's: per value of the others, with its two ends): the run is the unit
(a run's several observations in a cell are averaged), runs are in seed order, a spread claim's
runs are ordered into seed pairs within each pooled setting, a tuned claim's groups are split by
the setting they are tuned over, and each cell names the sets of runs the convergence guard
checks one by one. :mod:`robustkit.verdicts.rules` tests them. :func:`cell_names` and
:func:`groups_of` label each observation with its cell and group the same way, for what draws
runs per cell and group (:mod:`robustkit.verdicts.settle`, :mod:`robustkit.verdicts.budget`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from robustkit.verdicts.selection import matches as _is
from robustkit.verdicts.selection import text as _text
from robustkit.verdicts.spec import Claim


@dataclass(frozen=True, eq=False)
class Cell:
    """One cell of a claim and its compared groups.

    Attributes
    ----------
    name : str
        As a verdict names it: ``task=rte, layer=3``; ``all`` without ``within``; a trend's
        ``... train_size=300 vs 1000``.
    a, b : ndarray, shape (n_a,), (n_b,)
        Per-run values of group a and b (statistic units), runs in seed order; a trend's at the
        smallest value of ``along``. ``b`` is empty for a threshold.
    a_end, b_end : ndarray
        A trend's groups at the largest value of ``along`` (empty otherwise).
    ids_a, ids_b : list of str
        The run ids behind each group's values (a trend's: both ends).
    guarded : list of (str, list of str)
        The named sets of runs the convergence guard checks one by one (each method of a pooled
        group, each tuned configuration, each end of a trend).
    n_failed : int
        Failed runs among the cell's compared runs.
    averaged : bool
        Whether several observations of a run were averaged to one.
    configs_a, configs_b : tuple of ndarray
        A ``tuned`` claim's groups split by the setting they are tuned over, in value order.
    config_names_a, config_names_b : tuple of str
        Those settings' values.
    """

    name: str
    a: np.ndarray
    b: np.ndarray
    ids_a: list = field(default_factory=list)
    ids_b: list = field(default_factory=list)
    guarded: list = field(default_factory=list)
    n_failed: int = 0
    averaged: bool = False
    a_end: np.ndarray = field(default_factory=lambda: np.zeros(0))
    b_end: np.ndarray = field(default_factory=lambda: np.zeros(0))
    configs_a: tuple = ()
    configs_b: tuple = ()
    config_names_a: tuple = ()
    config_names_b: tuple = ()

    @property
    def n_a(self) -> int:
        """Runs of group a in the cell (a trend: both ends)."""
        return len(self.a) + len(self.a_end)

    @property
    def n_b(self) -> int:
        """Runs of group b in the cell (a trend: both ends)."""
        return len(self.b) + len(self.b_end)

    def configs(self, side: str) -> tuple:
        """``configs_a`` or ``configs_b``."""
        return self.configs_a if side == "a" else self.configs_b


def cells(claim: Claim, observations: pd.DataFrame, failed: pd.Series) -> list[Cell]:
    """The claim's cells, each with its groups a and b: per-run values (the run is the unit), runs
    in seed order; failed runs flagged by ``failed`` (observation index -> bool)."""
    frame = observations.assign(
        _failed=failed.reindex(observations.index, fill_value=False),
        _in_a=_is(observations[claim.by], claim.a) if claim.a else True,
        _in_b=_is(observations[claim.by], claim.b) if claim.b else False,
    )
    if claim.quantifier == "overall" and claim.within and "run_id" in frame:
        cells = frame.groupby(list(claim.within), dropna=False).ngroups
        frame = frame.assign(
            **{c: f"mean over {cells} cells" for c in claim.within if frame[c].nunique(dropna=False) > 1}
        )
    order = [c for c in ("seed", "run_id") if c in frame]
    if claim.compare == "trend":
        return _trend_cells(claim, frame, order)
    within = list(claim.within)
    codes = _cell_codes(frame, within)
    averaged = set()  # cells where a run has several observations
    if "run_id" in frame:
        averaged = set(codes[frame.duplicated([*within, "run_id"], keep=False).to_numpy()])
    if averaged:  # the run is the unit of replication: one mean per run and cell
        frame = _run_means(claim, frame, order)
        codes = _cell_codes(frame, within)  # the same cells, numbered the same way
    # positions in cell order, then seed order: one sort of the whole frame (speed: the
    # whole-path simulation judges thousands of small frames)
    ranked = [codes] + [_ranks(frame[c]) for c in order]
    positions = np.lexsort(ranked[::-1])
    value = frame["value"].to_numpy(float)
    in_a, in_b = frame["_in_a"].to_numpy(bool), frame["_in_b"].to_numpy(bool)
    failed = frame["_failed"].to_numpy(bool)
    run_ids = frame["run_id"].to_numpy(object) if "run_id" in frame else None
    ids = lambda rows: list(run_ids[rows]) if run_ids is not None else []
    keys = _guard_keys(claim, frame)
    groups = []
    for rows in np.split(positions, np.flatnonzero(np.diff(codes[positions])) + 1) if len(frame) else []:
        first = frame.iloc[rows[0]]
        name = ", ".join(f"{c}={_text(first[c])}" for c in within) or "all"
        known = ~np.isnan(value[rows])
        a, b = rows[in_a[rows] & known], rows[in_b[rows] & known]
        if claim.compare == "spread":  # seed pairs within one pooled setting (one rate), never across
            a, b = _paired(frame, a, claim.pooled), _paired(frame, b, claim.pooled)
        groups.append(
            Cell(
                name=name,
                a=value[a],
                b=value[b],
                ids_a=ids(a),
                ids_b=ids(b),
                guarded=_guarded(claim, frame, [("", a), ("", b)], keys),
                n_failed=int(failed[rows][in_a[rows] | in_b[rows]].sum()),
                averaged=codes[rows[0]] in averaged,
                **(_configurations(claim.tuned, frame.iloc[a], frame.iloc[b]) if claim.tuned else {}),
            )
        )
    return groups


def _cell_codes(frame: pd.DataFrame, within: list[str]) -> np.ndarray:
    """Each row's cell as a number, cells numbered in the sort order of their ``within`` values."""
    if not within:
        return np.zeros(len(frame), int)
    return frame.groupby(within, dropna=False, sort=True).ngroup().to_numpy()


def _run_means(claim: Claim, frame: pd.DataFrame, order: list[str]) -> pd.DataFrame:
    """One row per run and cell: its observations' mean value, failed if any is; the settings
    the cells are built from kept (a run's are the same in each of its observations)."""
    keep = {
        "value": "mean",
        "_failed": "max",
        "_in_a": "first",
        "_in_b": "first",
        claim.by: "first",
        **{c: "first" for c in order if c != "run_id"},
        **{c: "first" for c in claim.pooled if c in frame and c != claim.by},
        **({claim.tuned: "first"} if claim.tuned else {}),
    }
    keys = [*claim.within, "run_id"]
    return frame.groupby(keys, as_index=False, sort=False, dropna=False).agg(
        {c: how for c, how in keep.items() if c not in keys}
    )


def _ranks(column: pd.Series) -> np.ndarray:
    """Each row's rank in ``column``'s sort order, missing values last (as ``sort_values``)."""
    codes, _ = pd.factorize(column, sort=True)
    return np.where(codes < 0, len(codes), codes)  # len: past every code, and defined when empty


def _paired(frame: pd.DataFrame, rows: np.ndarray, pooled: Sequence[str]) -> np.ndarray:
    """A spread claim's runs (positions in ``frame``, in seed order) in the order
    :func:`robustkit.measures.exact.seed_pairs` pairs them (consecutive runs): within each value
    of the ``pooled`` settings, in seed order, the odd last run of each left out, so no pair joins
    two learning rates (he2021/fig4 pooled its rates, and its pairs were (2e-5, 2.5e-3) and (5e-4,
    1e-4)); where every pooled setting has one run, in the settings' order."""
    columns = [c for c in pooled if c in frame]
    if not columns or not len(rows):
        return rows
    setting = frame.iloc[rows].groupby(columns, dropna=False, sort=True).ngroup().to_numpy()
    settings = [rows[setting == k] for k in range(setting.max() + 1)]
    if all(len(runs) < 2 for runs in settings):
        # one run per pooled setting: the setting is what the replicates differ in (han2021/fig1
        # and fig4, one seed per TSP length), so its runs pair in the setting's order
        return np.concatenate(settings)
    return np.concatenate([runs[: len(runs) // 2 * 2] for runs in settings])


def _configurations(column: str, a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """A tuned claim's groups split by the ``column`` they are tuned over: per group the values
    of each configuration (a value of ``column`` with runs left to test), in value order."""
    found = {}
    for side, part in (("a", a), ("b", b)):
        # a run without a value (the setting left at its default) is a configuration of its own
        configs = list(part.groupby(part[column].map(_text), sort=True, dropna=False)["value"])
        found[f"configs_{side}"] = tuple(values.to_numpy(float) for _, values in configs)
        found[f"config_names_{side}"] = tuple(name for name, _ in configs)
    return found


def _trend_cells(claim: Claim, frame: pd.DataFrame, order: list[str]) -> list[Cell]:
    """A trend's cells (the ``within`` columns but ``along``), each with groups a and b at the
    smallest (``a``, ``b``) and the largest (``a_end``, ``b_end``) value of ``along``."""
    rest = [c for c in claim.within if c != claim.along]
    cells = frame.groupby(rest, dropna=False, sort=True) if rest else [((), frame)]
    groups = []
    for key, cell in cells:
        key = key if isinstance(key, tuple) else (key,)
        steps = sorted(pd.to_numeric(cell[claim.along]).dropna().unique())
        if len(steps) < 2:
            continue
        ends = []
        for step in (steps[0], steps[-1]):
            part = cell[pd.to_numeric(cell[claim.along]) == step]
            if "run_id" in part:
                part = part.groupby("run_id", as_index=False, sort=False).agg(
                    {
                        claim.by: "first",
                        "value": "mean",
                        "_failed": "max",
                        **{c: "first" for c in order if c != "run_id"},
                    }
                )
            ends.append(part)
        pick = lambda part, values: part[_is(part[claim.by], values) & part["value"].notna()]
        first, last = ends
        name = ", ".join(
            [f"{c}={_text(k)}" for c, k in zip(rest, key)] + [f"{claim.along}={_text(steps[0])} vs {_text(steps[-1])}"]
        )
        ids = lambda part: list(part["run_id"]) if "run_id" in part else []
        groups.append(
            Cell(
                name=name,
                a=pick(first, claim.a)["value"].to_numpy(float),
                b=pick(first, claim.b)["value"].to_numpy(float),
                a_end=pick(last, claim.a)["value"].to_numpy(float),
                b_end=pick(last, claim.b)["value"].to_numpy(float),
                ids_a=ids(pick(first, claim.a)) + ids(pick(last, claim.a)),
                ids_b=ids(pick(first, claim.b)) + ids(pick(last, claim.b)),
                guarded=[
                    guard
                    for step, part in ((steps[0], first), (steps[-1], last))
                    for picked in (pick(part, claim.a), pick(part, claim.b))
                    for guard in _guarded(claim, picked, [(f"{claim.along}={_text(step)}", np.arange(len(picked)))])
                ],
                n_failed=int(first["_failed"].sum() + last["_failed"].sum()),
            )
        )
    return groups


def _guard_keys(claim: Claim, frame: pd.DataFrame) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The columns the guard's sets are split by (``claim.by``, ``claim.tuned``), each as
    (name, each row's code, the values in sort order), computed once per frame."""
    found = []
    for column in (claim.by, claim.tuned):
        if column and column in frame:
            codes, uniques = pd.factorize(frame[column].to_numpy(object), sort=True, use_na_sentinel=False)
            found.append((column, codes, uniques))
    return found


def _guarded(
    claim: Claim, frame: pd.DataFrame, parts: list[tuple[str, np.ndarray]], keys: list | None = None
) -> list[tuple[str, list]]:
    """The sets of runs the convergence guard checks one by one: per named part of a cell (a
    group, or a trend's end: positions in ``frame``), each value of ``claim.by`` in it and each
    tuned configuration, in their sort order (``keys``: :func:`_guard_keys`, computed here if not
    given)."""
    if "run_id" not in frame:
        return []
    run_ids = frame["run_id"].to_numpy(object)
    keys = _guard_keys(claim, frame) if keys is None else keys
    found = []
    for name, rows in parts:
        if not len(rows):
            continue
        combined = np.zeros(len(rows), int)
        for _, codes, uniques in keys:
            combined = combined * len(uniques) + codes[rows]
        for code in np.unique(combined):
            members = rows[combined == code]
            what = ", ".join(
                f"{c}={_text(uniques[codes[members[0]]])}" if c == claim.tuned else _text(uniques[codes[members[0]]])
                for c, codes, uniques in keys
            )
            found.append((f"{name}: {what}" if name and what else name or what, list(run_ids[members])))
    return found


def cell_names(claim: Claim, frame: pd.DataFrame) -> pd.Series:
    """Each row's cell, named as a verdict names it (``task=rte, layer=3``; ``all`` without cells)."""
    within = [c for c in claim.within if c in frame]
    if not within or frame.empty:
        return pd.Series("all", index=frame.index)
    names = None
    for column in within:  # each distinct value named once (speed: the simulation's many frames)
        codes, uniques = pd.factorize(frame[column], use_na_sentinel=False)
        texts = np.array([f"{column}={_text(value)}" for value in uniques], dtype=object)[codes]
        names = texts if names is None else names + ", " + texts
    return pd.Series(names, index=frame.index)


def groups_of(claim: Claim, frame: pd.DataFrame) -> pd.Series:
    """Each row's group: ``"a"`` or ``"b"`` (a threshold claim without ``a``: every row is a)."""
    if not claim.a or claim.by not in frame:
        return pd.Series("a", index=frame.index)
    return pd.Series(np.where(_is(frame[claim.by], claim.a), "a", "b"), index=frame.index)
