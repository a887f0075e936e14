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
    cells = frame.groupby(list(claim.within), dropna=False, sort=True) if claim.within else [((), frame)]
    ids = lambda part: list(part["run_id"]) if "run_id" in part else []
    groups = []
    for key, cell in cells:
        key = key if isinstance(key, tuple) else (key,)
        name = ", ".join(f"{c}={_text(k)}" for c, k in zip(claim.within, key)) or "all"
        averaged = "run_id" in cell and bool(cell["run_id"].duplicated().any())
        if averaged:  # the run is the unit of replication
            cell = cell.groupby("run_id", as_index=False, sort=False).agg(
                {
                    "value": "mean",
                    "_failed": "max",
                    "_in_a": "first",
                    "_in_b": "first",
                    claim.by: "first",
                    **{c: "first" for c in order if c != "run_id"},
                    **{c: "first" for c in claim.pooled if c in cell and c != claim.by},
                    **({claim.tuned: "first"} if claim.tuned else {}),
                }
            )
        cell = cell.sort_values(order, kind="stable") if order else cell
        known = cell["value"].notna()
        a, b = cell[cell["_in_a"] & known], cell[cell["_in_b"] & known]
        if claim.compare == "spread":  # seed pairs within one pooled setting (one rate), never across
            a, b = _paired(a, claim.pooled), _paired(b, claim.pooled)
        groups.append(
            Cell(
                name=name,
                a=a["value"].to_numpy(float),
                b=b["value"].to_numpy(float),
                ids_a=ids(a),
                ids_b=ids(b),
                guarded=_guarded(claim, [("", a), ("", b)]),
                n_failed=int(cell.loc[cell["_in_a"] | cell["_in_b"], "_failed"].sum()),
                averaged=averaged,
                **(_configurations(claim.tuned, a, b) if claim.tuned else {}),
            )
        )
    return groups


def _paired(part: pd.DataFrame, pooled: Sequence[str]) -> pd.DataFrame:
    """A spread claim's runs in the order :func:`robustkit.measures.exact.seed_pairs` pairs them
    (consecutive runs): within each value of the ``pooled`` settings, in seed order, the odd last
    run of each left out, so no pair joins two learning rates (he2021/fig4 pooled its rates, and
    its pairs were (2e-5, 2.5e-3) and (5e-4, 1e-4)); where every pooled setting has one run, in
    the settings' order."""
    columns = [c for c in pooled if c in part]
    if not columns or part.empty:
        return part
    settings = list(part.groupby(columns, dropna=False, sort=True))
    if all(len(runs) < 2 for _, runs in settings):
        # one run per pooled setting: the setting is what the replicates differ in (han2021/fig1
        # and fig4, one seed per TSP length), so its runs pair in the setting's order
        return pd.concat([runs for _, runs in settings])
    kept = []
    for _, runs in settings:
        kept.append(runs.iloc[: len(runs) // 2 * 2])
    return pd.concat(kept)


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
                guarded=_guarded(
                    claim,
                    [
                        (f"{claim.along}={_text(step)}", pick(part, values))
                        for step, part in ((steps[0], first), (steps[-1], last))
                        for values in (claim.a, claim.b)
                    ],
                ),
                n_failed=int(first["_failed"].sum() + last["_failed"].sum()),
            )
        )
    return groups


def _guarded(claim: Claim, parts: list[tuple[str, pd.DataFrame]]) -> list[tuple[str, list]]:
    """The sets of runs the convergence guard checks one by one: per named part of a cell (a
    group, or a trend's end), each value of ``claim.by`` in it and each tuned configuration."""
    found = []
    for name, part in parts:
        if "run_id" not in part or part.empty:
            continue
        keys = [c for c in (claim.by, claim.tuned) if c and c in part]
        if not keys:
            found.append((name, list(part["run_id"])))
            continue
        for key, runs_of in part.groupby(keys, dropna=False, sort=True)["run_id"]:
            key = key if isinstance(key, tuple) else (key,)
            what = ", ".join(f"{c}={_text(k)}" if c == claim.tuned else _text(k) for c, k in zip(keys, key))
            found.append((f"{name}: {what}" if name else what, list(runs_of)))
    return found


def cell_names(claim: Claim, frame: pd.DataFrame) -> pd.Series:
    """Each row's cell, named as a verdict names it (``task=rte, layer=3``; ``all`` without cells)."""
    within = [c for c in claim.within if c in frame]
    if not within or frame.empty:
        return pd.Series("all", index=frame.index)
    return frame[within].apply(lambda row: ", ".join(f"{c}={_text(v)}" for c, v in row.items()), axis=1)


def groups_of(claim: Claim, frame: pd.DataFrame) -> pd.Series:
    """Each row's group: ``"a"`` or ``"b"`` (a threshold claim without ``a``: every row is a)."""
    if not claim.a or claim.by not in frame:
        return pd.Series("a", index=frame.index)
    return pd.Series(np.where(_is(frame[claim.by], claim.a), "a", "b"), index=frame.index)
