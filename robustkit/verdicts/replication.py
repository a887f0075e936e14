"""A replication reading beside every verdict: our effect against the paper's, in one unit.

A verdict says whether the runs decide the claim's direction; it cannot tell "no effect" from
"the paper's effect, unseen at this n". The reading (:func:`reading`) places our effect's
``1 - 2 alpha`` interval (L, U), in the claimed direction and standardised, against 0 and a
reference effect:

- ``opposite`` when U < 0;
- ``smaller than the paper's effect`` when 0 <= U < reference (the published equivalence-style
  test against the original effect: our upper bound excludes it, Simonsohn 2015's "small
  telescopes" reading when the reference is his d33);
- ``consistent with the paper's effect`` when L > 0 and U >= reference;
- ``too imprecise to say`` otherwise (L <= 0 <= reference <= U), with the runs per group at which
  the interval would be narrower than the reference (:func:`runs_to_say`) and what they cost.

Each reading's false rate is bounded by a one-sided bound's coverage: P(consistent | effect 0)
<= P(L > 0 | 0) = alpha, P(smaller | effect = reference) <= P(U < reference) = alpha, and
P(opposite | effect >= 0) <= alpha; ``tests/test_replication.py`` checks them by simulation.

**The reference** (:func:`reference`): the claim's ``paper_effect`` in the cell where the paper
prints one; else the small-telescopes d33 (Simonsohn 2015, *Psychological Science* 26:559): the
effect the paper's own study (``paper_n`` runs per group) had 33% power to detect at alpha 0.05
two-sided, by the noncentral t of a two-sample (or, for a threshold, one-sample) t test, and for
a spread claim by the F test of two variances (d33 as a log SD ratio); else no reading.

**Units** (how an effect transfers from the paper's model and task to ours): an effect in SDs
of the seed-to-seed spread of each study's own setting. Location and mean claims: Hedges' g
(the mean difference over the pooled SD over seeds, bias-corrected) with the exact interval of
the standardised difference from the noncentral t (Steiger & Fouladi 1997; Hedges & Olkin
1985), by ``scipy.stats.nct``. Spread claims: the log SD ratio (natural log, claimed direction:
log of the more spread group's SD over the less spread one's) with the exact interval of
:func:`robustkit.measures.exact.spread_interval` (inverting the claim's own seed-pair rank
test; distribution-free under a scale model). The paper's effects are in these units already
(:attr:`robustkit.verdicts.spec.Claim.paper_effect`: its source says how they were
standardised); a spread paper effect r (< 1) becomes -log r. No reading for ``threshold`` (a
claim about a median: neither the one-sample t nor the sign test's median interval over the SD
held its level on skewed runs, :data:`WHY_NOT`), ``rate`` (a failure rate has no seed-to-seed
spread to standardise by, and the paper's is a rate against none), ``equivalence`` (its paper
effect is a margin, not an effect ours could be smaller than), ``trend`` (a difference of two
shifts, which the papers report as curves) and ``tuned`` claims (each group at its best
setting: no single standardised difference without selecting on the runs tested).

Written by hand on scipy: ReplicationSuccess (Held 2020's sceptical p-value) is an R package,
and its reading needs the original study's estimate and standard error, which the papers do
not print. The reading is computed once, over a claim's verdict rows and observations
(:func:`replicate`), by :func:`robustkit.verdicts.tally.verdicts`; claims.csv, the index and
``robustkit claims`` only show it (:func:`short`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import optimize, stats

from robustkit.measures import exact
from robustkit.verdicts.spec import Claim

CONSISTENT = "consistent with the paper's effect"
SMALLER = "smaller than the paper's effect"
SMALLER_D33 = "smaller than the paper's study could detect (d33)"
OPPOSITE = "opposite"
IMPRECISE = "too imprecise to say"
NO_READING = "no reading"
PAPER, D33, NONE = "paper effect", "d33", "none"
TELESCOPE_POWER = 1 / 3  # Simonsohn 2015: the effect the original study had 33% power to detect
TELESCOPE_ALPHA = 0.05  # ... at the conventional two-sided level the papers' studies used
REPLICATION_COLUMNS = [
    "our_effect_sd",
    "our_low_sd",
    "our_high_sd",
    "replication_unit",
    "paper_reference",
    "reference_kind",
    "replication",
    "paper_power",
    "replication_settles",
]
STANDARDISED = ("location", "mean", "spread")
UNIT = {"location": "SD", "mean": "SD", "threshold": "SD", "spread": "log SD ratio"}
# the variance of the effect's estimate times the runs per group, normal theory: two groups'
# standardised difference 1/n + 1/n; one group's 1/n; the log SD ratio from n/2 seed pairs per
# group, each log |pair difference| of variance pi^2 / 8 (the log of a half-normal), two groups
PER_RUN_VARIANCE = {"location": 2.0, "mean": 2.0, "threshold": 1.0, "spread": math.pi**2 / 2}
WHY_NOT = {
    "rate": "a failure rate has no seed-to-seed spread to standardise by (its power at the paper's rate is shown)",
    "equivalence": "an equivalence claim's paper effect is a margin, not an effect ours could be smaller than",
    "trend": "a trend is a difference of two shifts, which the papers report as curves, not as one effect",
    # measured (tests/test_replication.py's skewed runs, skewness -1.75): the one-sample t's bounds
    # read "consistent" at a true effect of 0 12% of the time at 5 runs; the sign test's median
    # interval over the runs' SD read "smaller" at the paper's effect 10% of the time at 18 runs
    "threshold": "a threshold claim is about a median, and no interval of a median in SD units held its level "
    "on runs skewed like accuracies (0.10-0.12 at alpha 0.05)",
}


# ---------------------------------------------------------------------------------------------
# our effect, standardised


def standardised_difference(
    a: np.ndarray, b: np.ndarray | None, alpha: float, value: float = 0.0
) -> tuple[float, float, float]:
    """Hedges' g of a over b (b None: of a over ``value``, one sample) and the exact ``1 - 2 alpha``
    interval of the standardised difference, inverting the noncentral t (Steiger & Fouladi 1997).

    Parameters
    ----------
    a, b : ndarray, shape (n_a,), (n_b,)
        Per-run values (statistic units).

    Returns
    -------
    (float, float, float)
        g (bias-corrected), low, high, in SDs (pooled over seeds); NaN where a group has under 2
        runs or no spread.
    """
    a = np.asarray(a, float)
    if b is None:
        n, df = len(a), len(a) - 1
        sd = np.std(a, ddof=1) if n > 1 else np.nan
        difference, scale = np.mean(a) - value, math.sqrt(1 / n) if n else np.nan
    else:
        b = np.asarray(b, float)
        n_a, n_b = len(a), len(b)
        df = n_a + n_b - 2
        if n_a < 2 or n_b < 2:
            return np.nan, np.nan, np.nan
        sd = math.sqrt(((n_a - 1) * np.var(a, ddof=1) + (n_b - 1) * np.var(b, ddof=1)) / df)
        difference, scale = np.mean(a) - np.mean(b), math.sqrt(1 / n_a + 1 / n_b)
    if df < 1 or not np.isfinite(sd) or sd <= 0:
        return np.nan, np.nan, np.nan
    d = difference / sd
    t = d / scale
    # the noncentrality at which t is the upper (lower) alpha quantile: the one-sided bounds
    low, high = _noncentrality(t, df, 1 - alpha), _noncentrality(t, df, alpha)
    correction = math.exp(math.lgamma(df / 2) - math.lgamma((df - 1) / 2)) / math.sqrt(df / 2) if df > 1 else 1.0
    return float(d * correction), float(low * scale), float(high * scale)


def _noncentrality(t: float, df: int, quantile: float) -> float:
    """The noncentrality delta with P(T_df,delta <= t) = quantile (decreasing in delta)."""
    f = lambda delta: stats.nct.cdf(t, df, delta) - quantile
    # widen a bracket around t step by step: scipy's nct is NaN far out in its tails
    step = 1.0
    while not (f(t - step) > 0 > f(t + step)) and step < 64:
        step *= 2
    return float(optimize.brentq(f, t - step, t + step, xtol=1e-6))


def our_effect(claim: Claim, a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """One cell's standardised effect in the claimed direction and its ``1 - 2 alpha`` interval
    (:data:`UNIT`; positive: the claimed direction)."""
    sign = 1.0 if claim.direction == "greater" else -1.0
    if claim.compare == "spread":
        ratio, low, high = exact.spread_interval(a, b, claim.alpha)  # a's spread over b's
        # claimed direction: log of the spread of the group claimed more spread over the other's
        with np.errstate(divide="ignore"):  # a ratio bound of 0: an unbounded log
            ours, ends = sign * math.log(ratio) if ratio > 0 else np.nan, sorted(sign * np.log([low, high]))
        return (float(ours), np.nan, np.nan) if np.isnan(low) else (float(ours), float(ends[0]), float(ends[1]))
    g, low, high = standardised_difference(a, b, claim.alpha)
    return (g, low, high) if sign > 0 else (-g, -high, -low)


# ---------------------------------------------------------------------------------------------
# the reference effect


@lru_cache(maxsize=None)
def d33(kind: str, paper_n: int, power: float = TELESCOPE_POWER, alpha: float = TELESCOPE_ALPHA) -> float:
    """Simonsohn's (2015) d33: the effect the paper's study of ``paper_n`` runs per group had
    ``power`` to detect with a two-sided test at ``alpha``; in :data:`UNIT` (NaN: under 2 runs).

    Two groups: the two-sample t test (the noncentral t with ``2 n - 2`` degrees of freedom,
    noncentrality d sqrt(n / 2)); threshold: the one-sample t test; spread: the F test of two
    variances, the log SD ratio r with P(F > F_crit / e^(2r)) + P(F < F_low / e^(2r)) = power.
    """
    n = int(paper_n)
    if n < 2:
        return np.nan
    if kind == "spread":
        df = n - 1
        top, bottom = stats.f.ppf(1 - alpha / 2, df, df), stats.f.ppf(alpha / 2, df, df)

        def reach(r: float) -> float:
            ratio = math.exp(2 * r)  # a variance ratio
            return stats.f.sf(top / ratio, df, df) + stats.f.cdf(bottom / ratio, df, df) - power

    else:
        one = kind == "threshold"
        df = n - 1 if one else 2 * n - 2
        scale = math.sqrt(n) if one else math.sqrt(n / 2)
        critical = stats.t.ppf(1 - alpha / 2, df)

        def reach(d: float) -> float:
            return stats.nct.sf(critical, df, d * scale) + stats.nct.cdf(-critical, df, d * scale) - power

    high = 1.0
    while reach(high) < 0:  # the power rises with the effect: bracket it before the root
        high *= 2
    return float(optimize.brentq(reach, 0.0, high, xtol=1e-6))


def reference(claim: Claim, cell: str) -> tuple[float, str, str]:
    """The effect a cell's reading compares ours with: (value in :data:`UNIT`, kind, why none).

    The paper's effect in the cell (:data:`PAPER`; a spread ratio r as -log r), else d33 of its
    ``paper_n`` (:data:`D33`), else NaN, :data:`NONE` and the reason."""
    effect = claim.paper_effect_in(cell)
    if effect is not None:
        value = -math.log(effect) if claim.compare == "spread" else float(effect)
        if value <= 0:
            return np.nan, NONE, "the paper's effect is not in the claimed direction"
        return value, PAPER, ""
    if claim.paper_n is not None:
        value = d33(claim.compare, claim.paper_n)
        if np.isfinite(value):
            return value, D33, ""
        return np.nan, NONE, f"the paper's study had {claim.paper_n} run per group, too few for a d33"
    return np.nan, NONE, "the paper states neither its effect nor its n"


def reading(low: float, high: float, reference_value: float, reference_kind: str = PAPER) -> str:
    """The reading of an effect's interval (low, high) in the claimed direction against 0 and
    ``reference_value`` (module docstring); NaN ends are unbounded sides."""
    low = -math.inf if not np.isfinite(low) else low
    high = math.inf if not np.isfinite(high) else high
    if high < 0:
        return OPPOSITE
    if high < reference_value:
        return SMALLER_D33 if reference_kind == D33 else SMALLER
    if low > 0:
        return CONSISTENT
    return IMPRECISE


def runs_to_say(kind: str, reference_value: float, alpha: float) -> int:
    """Runs per group at which the ``1 - 2 alpha`` interval is about as narrow as the reference:
    its width 2 z_(1 - alpha) sqrt(v / n) (normal theory, v :data:`PER_RUN_VARIANCE`) equals the
    reference at n = v (2 z / reference)^2. A narrower interval cannot hold both 0 and the
    reference, so it reads one of opposite / smaller / consistent whatever the effect."""
    z = stats.norm.ppf(1 - alpha)
    return int(math.ceil(PER_RUN_VARIANCE[kind] * (2 * z / reference_value) ** 2))


# ---------------------------------------------------------------------------------------------
# the reading of a claim's verdict rows


def replicate(
    claim: Claim,
    verdicts: pd.DataFrame,
    groups: list | None,
    hours: Callable[[], tuple[float | None, float | None]] | None = None,
) -> pd.DataFrame:
    """The :data:`REPLICATION_COLUMNS` of a claim's verdict rows (same index).

    Parameters
    ----------
    verdicts : DataFrame
        :func:`robustkit.verdicts.rules.judge` rows of the claim (cells, then ``all``).
    groups : list of :class:`robustkit.verdicts.cells.Cell` or None
        The cells the rows test (:func:`cells_of`); None where no run was read.
    hours : callable, optional
        () -> (CPU-hours, GPU-hours) of the runs behind the rows' n (None where unmeasured), for
        what the runs that would say cost; called only when a row is too imprecise.
    """
    from robustkit.verdicts.decidability import agreeing_level, power

    by_name = {g.name: g for g in groups or []}
    cell_rows = verdicts if len(verdicts) == 1 else verdicts.iloc[:-1]
    level = agreeing_level(claim.quantifier, list(cell_rows["smallest_p"].fillna(1.0)), claim.alpha)
    priced: list = []

    def price() -> tuple[float | None, float | None]:
        if not priced:
            try:
                priced.append(hours() if hours else (None, None))
            except Exception:  # noqa: BLE001 - a reading stands without its price
                priced.append((None, None))
        return priced[0]

    out = []
    for _, row in cell_rows.iterrows():
        out.append(_cell_reading(claim, row, by_name.get(row["cell"]), level, power, price))
    if len(verdicts) > 1:
        out.append(_overall(out))
    return pd.DataFrame(out, columns=REPLICATION_COLUMNS, index=verdicts.index)


def _cell_reading(claim: Claim, row: pd.Series, group, level: float, power, price) -> dict:
    found = dict.fromkeys(REPLICATION_COLUMNS, np.nan)
    found.update(replication_unit=UNIT.get(claim.compare, ""), reference_kind=NONE, replication_settles="")
    effect = claim.paper_effect_in(row["cell"])
    n_a, n_b = int(row["n_a"]), int(row["n_b"])
    if effect is not None and n_a and (n_b or claim.compare == "threshold"):
        margin, difference = effect if isinstance(effect, tuple) else (effect, 0.0)
        configs = (len(group.configs_a), len(group.configs_b)) if group is not None and claim.tuned else (1, 1)
        found["paper_power"] = _power(
            power, claim.compare, n_a, n_b, float(margin), level / claim.configuration_factor(*configs), difference
        )
    if claim.compare not in STANDARDISED:
        return {**found, "replication": f"{NO_READING}: {WHY_NOT[claim.compare]}"}
    if claim.tuned:
        return {
            **found,
            "replication": f"{NO_READING}: each group at its best {claim.tuned} has no single standardised "
            "difference without selecting on the runs tested",
        }
    value, kind, why = reference(claim, row["cell"])
    found.update(paper_reference=value, reference_kind=kind)
    if group is None:
        return {**found, "replication": f"{NO_READING}: no runs read in this cell"}
    ours, low, high = our_effect(claim, group.a, group.b)
    found.update(our_effect_sd=ours, our_low_sd=low, our_high_sd=high)
    if kind == NONE:
        return {**found, "replication": f"{NO_READING}: {why}"}
    if not np.isfinite(ours):
        return {**found, "replication": f"{NO_READING}: no spread over seeds to standardise by at this n"}
    said = reading(low, high, value, kind)
    found["replication"] = said
    if said == IMPRECISE:
        found["replication_settles"] = settles_text(claim.compare, value, claim.alpha, min(n_a, n_b or n_a), price())
    return found


def settles_text(kind: str, reference_value: float, alpha: float, n_now: int, hours: tuple) -> str:
    """``"about 37 runs per group (32 more each: 4.1 CPU-hours, 0.3 GPU-hours)"``: the runs of
    :func:`runs_to_say` and their cost, the runs behind ``n_now`` (``hours``) scaled up."""
    n = runs_to_say(kind, reference_value, alpha)
    more = max(n - n_now, 0)
    costs = [
        f"{h * more / n_now:.3g} {name}-hours" if h is not None and n_now else f"{name}-hours not measured"
        for h, name in zip(hours, ("CPU", "GPU"))
    ]
    return f"about {n} runs per group ({more} more each: {', '.join(costs)})"


def _power(power, kind: str, n_a: int, n_b: int, effect: float, level: float, difference: float) -> float:
    return _cached_power(power, kind, n_a, n_b, effect, level, difference)


@lru_cache(maxsize=None)
def _cached_power(power, kind: str, n_a: int, n_b: int, effect: float, level: float, difference: float) -> float:
    if exact.smallest_p(kind if kind != "trend" else "location", n_a, n_b) >= level:
        return 0.0
    return round(float(power(kind, n_a, n_b, effect, level, difference=difference)), 3)


def _overall(cells: list[dict]) -> dict:
    """A claim's overall row over several cells: its readings counted, the weakest cell's power,
    and the most runs a cell too imprecise to say needs."""
    counts = pd.Series([c["replication"].split(":")[0] for c in cells]).value_counts()
    said = ", ".join(f"{n} {text}" for text, n in counts.items())
    settles = [c["replication_settles"] for c in cells if c["replication_settles"]]
    most = max(settles, key=lambda t: int(t.split()[1])) if settles else ""
    powers = [c["paper_power"] for c in cells if np.isfinite(c["paper_power"])]
    references = {c["reference_kind"] for c in cells}
    return {
        **dict.fromkeys(REPLICATION_COLUMNS, np.nan),
        "replication_unit": cells[0]["replication_unit"],
        "reference_kind": references.pop() if len(references) == 1 else "mixed",
        "replication": counts.index[0]
        if len(counts) == 1 and cells[0]["replication"] in _READINGS
        else f"cells: {said}",
        "paper_power": min(powers) if powers else np.nan,
        "replication_settles": most,
    }


_READINGS = (CONSISTENT, SMALLER, SMALLER_D33, OPPOSITE, IMPRECISE)


def blank(verdicts: pd.DataFrame, why: str) -> pd.DataFrame:
    """:data:`REPLICATION_COLUMNS` of rows no run was read for: ``no reading: <why>``."""
    frame = pd.DataFrame(index=verdicts.index, columns=REPLICATION_COLUMNS, dtype=object)
    for column in ("our_effect_sd", "our_low_sd", "our_high_sd", "paper_reference", "paper_power"):
        frame[column] = np.nan
    return frame.assign(
        replication_unit="", reference_kind=NONE, replication=f"{NO_READING}: {why}", replication_settles=""
    )


def cells_of(claim: Claim, observations: pd.DataFrame, include_failed: bool = False) -> list:
    """The cells a claim's verdict tests, as :func:`robustkit.verdicts.rules.judge` builds them
    (its selection, failed runs left out unless the claim keeps them as data)."""
    from robustkit.store import collapse
    from robustkit.verdicts.cells import cells
    from robustkit.verdicts.rules import tested_rows

    frame = tested_rows(claim, observations)
    failed = frame["outcome"] != collapse.OK if "outcome" in frame else pd.Series(False, index=frame.index)
    if not (include_failed or claim.failures == "data"):
        frame, failed = frame[~failed], failed[~failed]
    return cells(claim, frame, failed)


def claim_hours(recipe, claim: Claim, scale: str, defaults: dict | None = None) -> tuple[float | None, float | None]:
    """(CPU-hours, GPU-hours) of the runs a claim compares at ``scale``, each to its budget:
    :func:`robustkit.sweeps.plan.run_hours` over the recipe's run specs in the claim's groups
    (its ``where`` on run settings), by the measured throughput tables (None: not measured)."""
    from robustkit.sweeps.plan import CPU_THROUGHPUT_TABLE, examples, read_throughput, run_hours
    from robustkit.verdicts.decidability import spec_frame
    from robustkit.verdicts.rules import tested_rows

    specs = tested_rows(claim, spec_frame(recipe, scale, defaults), missing_where="ignore")
    wanted = set(specs["run_id"]) if "run_id" in specs else set()
    rows = []
    for spec in recipe.specs(scale, defaults):
        if spec.run_id in wanted:
            resolved = spec.resolved()
            trained, evaluated = examples(resolved)
            rows.append(
                {
                    "model": resolved.model,
                    "max_length": resolved.max_length,
                    "train_examples": trained,
                    "eval_examples": evaluated,
                }
            )
    frame = pd.DataFrame(rows)
    if frame.empty:
        return None, None
    return run_hours(frame, read_throughput(CPU_THROUGHPUT_TABLE)), run_hours(frame, read_throughput())


def short(row: pd.Series | dict) -> str:
    """The reading in one phrase for the index and ``robustkit claims``: ``"too imprecise to say
    (ours 0.4 [-0.6, 1.4] SD vs paper effect 1.2; power 0.31; about 37 runs per group ...)"``."""
    said = row.get("replication")
    if not isinstance(said, str) or not said:
        return ""
    parts = []
    ours = row.get("our_effect_sd")
    if _finite(ours):
        low, high = row.get("our_low_sd"), row.get("our_high_sd")
        bounds = f" [{_g(low)}, {_g(high)}]" if _finite(low) or _finite(high) else ""
        parts.append(f"ours {ours:.2g}{bounds} {row.get('replication_unit', '')}".rstrip())
    if _finite(row.get("paper_reference")):
        parts[-1:] = [" vs ".join(parts[-1:] + [f"{row.get('reference_kind')} {row['paper_reference']:.2g}"])]
    if _finite(row.get("paper_power")):
        parts.append(f"power at the paper's effect {row['paper_power']:.2f}")
    if isinstance(row.get("replication_settles"), str) and row["replication_settles"]:
        parts.append(row["replication_settles"])
    return said + (f" ({'; '.join(parts)})" if parts else "")


def _finite(value) -> bool:
    return isinstance(value, (int, float, np.floating)) and bool(np.isfinite(value))


def _g(value) -> str:
    return f"{value:.2g}" if _finite(value) else "unbounded"
