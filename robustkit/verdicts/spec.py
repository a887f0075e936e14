"""What a paper's claim says: a recipe's ``[[claim]]`` table, parsed and checked into a :class:`Claim`.

Each recipe (``recipes/<paper>/<figure>.toml``) states its paper's claim before any run exists::

    [[claim]]
    id = "spread"
    says = "full FT 'leads to a large standard deviation'; adapters 'a much smaller variance' (§2)"
    statistic = "scores.score"       # <analysis>.<statistic> (robustkit.analysis.registry)
    compare = "spread"               # spread | location | rate | equivalence | threshold
    a = "houlsby"
    b = "full"
    direction = "less"               # the claim: a less than b
    paper_effect_source = "not reported: figure 2 shows the scores as box plots, no numbers"

:class:`Claim` documents every key. How a claim is decided from its observations is
:mod:`robustkit.verdicts.rules` (the decision framework); its observations computed from a store,
every claim of the recipes judged and the verdict table, :mod:`robustkit.verdicts.tally`.

The paper's effect (``paper_effect``, with ``paper_effect_source`` quoting the numbers and how
they were standardised) is the effect the paper reports, in the kind's unit of
:data:`robustkit.verdicts.decidability.UNITS` and in the claimed direction. ``robustkit claims --plan``
prints the test's power at it beside the smallest effect it detects. Only from numbers the paper
prints, never read off a plot; otherwise ``paper_effect_source`` says ``"not reported: ..."`` and
why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from robustkit.analysis import registry
from robustkit.errors import RobustkitError
from robustkit.measures import exact
from robustkit.verdicts.scales import SCALES
from robustkit.verdicts.selection import text as _text

AGREES, CONTRADICTS, INCONCLUSIVE = "agrees", "contradicts", "inconclusive"
VERDICTS = (AGREES, CONTRADICTS, INCONCLUSIVE)
COMPARES = {
    "spread": "seed-pair-rank-sum",
    "location": "brunner-munzel",
    "mean": "welch-bootstrap-t",
    "rate": "fisher",
    "equivalence": "tost-brunner-munzel",
    "threshold": "sign",
    "trend": "brunner-munzel-intervals",
}
FAILURE_POLICIES = ("exclude", "data")
QUANTIFIERS = ("each", "any", "overall")
_KEYS = {
    "id",
    "says",
    "statistic",
    "params",
    "compare",
    "by",
    "a",
    "b",
    "direction",
    "test",
    "within",
    "pooled",
    "value",
    "alpha",
    "where",
    "sign",
    "floor",
    "paired",
    "failures",
    "final",
    "scales",
    "paper_effect",
    "paper_effect_source",
    "quantifier",
    "exclude",
    "exclude_why",
    "along",
    "tuned",
    "artefact",
    "artefact_scales",
    "paper_n",
    "paper_n_source",
}
NOT_REPORTED = "not reported"  # how a paper_effect_source without a paper_effect begins
NOT_STATED = "not stated"  # how a paper_n_source without a paper_n begins
SMALL_MODEL_SCALES = tuple(s for s in SCALES if s != "paper")  # where a small model stands in


class ClaimError(RobustkitError):
    """A claim table that does not parse (the message names the recipe and the key)."""


@dataclass(frozen=True)
class Claim:
    """One paper claim as a directional hypothesis about a per-run statistic.

    Attributes
    ----------
    id, says : str
        Short name; the paper's words with the section.
    statistic : str
        ``<analysis>.<statistic>`` of :mod:`robustkit.analysis.registry`.
    params : dict
        The statistic's parameters (and, for an analysis other than the figure's, the analysis's).
    compare : str
        ``spread``, ``location``, ``mean``, ``rate``, ``equivalence``, ``threshold`` or ``trend``
        (:mod:`robustkit.verdicts.rules`). ``location`` is about where a run of one group tends
        to fall against one of the other (P(a > b), medians); ``mean`` about the groups' means,
        for a claim whose paper states it of means (a table's mean over seeds).
    by : str
        Column whose groups ``a`` and ``b`` are compared.
    a, b : tuple
        The values of ``by`` that make group a and group b (several values: one group, e.g.
        ``("houlsby", "adapterhub-houlsby")`` so that one claim serves both scales; numbers
        compare as numbers). ``b`` is empty for ``threshold``.
    direction : {"less", "greater"} or None
        The claim: a less / greater than b (threshold: than ``value``); None for equivalence.
    test : str
        The kind's test (:data:`COMPARES`; one per kind).
    within, pooled : tuple of str
        Cells judged separately; run settings pooled on purpose inside a group.
    quantifier : {"each", "any", "overall"} or None
        How the claim's words aggregate its cells (required with ``within``): ``each`` (the
        claim holds in every cell: an intersection-union test, every cell at alpha), ``any``
        (in some cell: Holm over the cells) or ``overall`` (one test of each run's mean over
        the cells).
    exclude, exclude_why : dict, str
        Column -> values whose observations are left out, and the stated rule why (cells a
        method cannot change, e.g. ``{layer = [0]}``: the embedding output of methods that
        freeze the embeddings).
    along : str or None
        ``trend`` only: the numeric ``within`` column the trend runs along (``train_size``); the
        claim compares the shift a - b at its largest value with that at its smallest.
    where : dict
        Column -> accepted values: only these observations are judged (e.g. the late TSP stage).
        ``"unset"`` accepts the runs that have no value there: ``{"lora.r": [8, "unset"]}`` keeps
        rank-8 LoRA runs and the runs of methods without a rank (full fine-tuning).
    value : float or None
        Equivalence margin or threshold (statistic units, e.g. 0.02 = 2 accuracy points).
    alpha : float
        One-sided level of the tests; intervals are 1 - 2 alpha.
    sign : {"less", "greater"} or None
        The direction of change the claim names for group a's own values (against 0).
    floor : float
        Smallest effect that counts for a cell (statistic units).
    paired : bool
        ``location`` only (without ``tuned`` or ``sign``): the groups' runs are paired by seed (and by the
        ``pooled`` settings), and the claim is decided by the exact sign test of the within-seed
        differences a - b (:mod:`robustkit.measures.paired`) instead of Brunner-Munzel: the null
        is "a's run is above its seed's run of b at most half the time". For methods whose runs
        of one seed start from the same head and see the same batches (robustkit's training:
        :mod:`robustkit.measures.paired`), where the paper compares them on the same seeds. A
        seed with a run in one group only is no pair and is left out; failed runs are placed at
        either extreme as for any claim (``failures``). It decides from 5 pairs (p >= 1/32).
    tuned : str or None
        ``location`` and ``equivalence`` only: a run setting each compared group is tuned over
        (``lr``), as a paper that "selects the best learning rate" for every method: the claim
        compares each group at its best value of it. Decided without selecting on the tested
        runs (:func:`robustkit.verdicts.rules.judge`): every configuration of one group against
        some configuration of the other, so the winner's curse of picking the best on the same
        runs cannot make a verdict.
    failures : {"exclude", "data"}
        ``exclude``: failed runs left out, and the verdict must hold with them too (ranked
        worst where the statistic has a better side, else as data) or it is *inconclusive:
        depends on failed runs*; ``data``: claims about failing, failed runs kept as data
        (always for ``rate``).
    final : bool
        The statistic depends on how training ended (default: the statistic's declaration,
        :attr:`robustkit.analysis.registry.Statistic.ends`): a cell whose runs are still
        improving is *inconclusive: not converged*.
    scales : tuple of str
        The scales whose runs can decide the claim (the recipe says why where one is left out);
        at the others it is *inconclusive: not sized for this scale* where its runs are stored
        (with the observed effect), else *untestable at this scale*.
    paper_effect : float, tuple or dict, optional
        The effect the paper reports, in the kind's unit (:data:`robustkit.verdicts.decidability.UNITS`)
        and in the claimed direction: location and threshold a standardised difference (SD),
        spread the SD ratio of the group claimed less spread to the other, rate the failure rate
        of the group claimed to fail more (the other's taken as 0), equivalence the pair
        ``(margin, difference)`` in SD. One value for every cell, or a dict cell -> value (cells
        named as :func:`robustkit.verdicts.decidability.claim_sizes` names them); None: not reported.
    paper_effect_source : str or None
        Where ``paper_effect`` comes from (table, the numbers, how they were standardised), or
        ``"not reported: ..."`` and why.
    paper_n : int or None
        Runs per group behind the claim in the paper's own study (seeds per method; a threshold
        claim: its runs), as the paper describes them: what its study could see (a replication
        reading compares our effect with the effect that n could detect). None: not stated.
    paper_n_source : str or None
        Where ``paper_n`` comes from (the section or table, and the design and test the paper
        used where it says), or ``"not stated: ..."`` and why.
    artefact : str or None
        Why the claim's statistic is fixed by the setting, not the method, at
        ``artefact_scales`` (e.g. a ratio bounded by the small model's width): stated before the
        claim is judged; there it is *inconclusive: untestable on this model*, with this reason.
    artefact_scales : tuple of str
        The scales ``artefact`` holds at (default: every scale but ``paper``, the scales that
        stand a small model in for the paper's).
    """

    id: str
    says: str
    statistic: str
    compare: str
    a: tuple
    direction: str | None = None
    b: tuple = ()
    by: str = "method"
    test: str | None = None
    params: dict = field(default_factory=dict)
    within: tuple[str, ...] = ()
    pooled: tuple[str, ...] = ()
    quantifier: str | None = None
    exclude: dict = field(default_factory=dict)
    exclude_why: str = ""
    along: str | None = None
    value: float | None = None
    alpha: float = 0.05
    where: dict = field(default_factory=dict)
    sign: str | None = None
    floor: float = 0.0
    paired: bool = False
    tuned: str | None = None
    failures: str = "exclude"
    final: bool = False
    scales: tuple[str, ...] = SCALES
    paper_effect: float | tuple | dict | None = None
    paper_effect_source: str | None = None
    artefact: str | None = None
    artefact_scales: tuple[str, ...] = ()
    paper_n: int | None = None
    paper_n_source: str | None = None

    @classmethod
    def from_table(cls, raw: dict, where: str) -> "Claim":
        """Parse and check one ``[[claim]]`` table of a recipe (``where`` names it in errors)."""
        name = raw.get("id", "?")
        unknown = sorted(set(raw) - _KEYS)
        missing = sorted({"id", "says", "statistic", "compare"} - set(raw))
        if unknown or missing:
            raise ClaimError(f"{where}: claim {name!r} has unknown key(s) {unknown}, missing key(s) {missing}")
        compare = raw["compare"]
        if compare not in COMPARES:
            raise ClaimError(f"{where}: claim {name!r}: compare must be one of {', '.join(COMPARES)}, got {compare!r}")
        test = raw.get("test", COMPARES[compare])
        if test != COMPARES[compare]:
            raise ClaimError(
                f"{where}: claim {name!r}: {compare} is tested by {COMPARES[compare]} (one rule per kind), got {test!r}"
            )
        direction = raw.get("direction")
        if compare == "equivalence":
            if direction is not None:
                raise ClaimError(f"{where}: claim {name!r}: equivalence has no direction (both sides of the margin)")
        elif direction not in ("less", "greater"):
            raise ClaimError(f"{where}: claim {name!r}: direction must be less or greater, got {direction!r}")
        for key, allowed in (("sign", (None, "less", "greater")), ("failures", FAILURE_POLICIES)):
            if raw.get(key, allowed[0]) not in allowed:
                raise ClaimError(
                    f"{where}: claim {name!r}: {key} must be one of {[a for a in allowed if a]}, got {raw[key]!r}"
                )
        try:
            statistic = registry.statistic_of(raw["statistic"])[1]
        except RobustkitError as error:
            raise ClaimError(f"{where}: claim {name!r}: {error}") from None
        quantifier = raw.get("quantifier")
        if raw.get("within") and quantifier not in QUANTIFIERS:
            raise ClaimError(
                f"{where}: claim {name!r} has cells (within): its quantifier must say how its words aggregate "
                f"them, one of {', '.join(QUANTIFIERS)}; got {quantifier!r}"
            )
        if not raw.get("within") and quantifier is not None:
            raise ClaimError(f"{where}: claim {name!r}: a quantifier needs cells (within)")
        along = raw.get("along")
        if (compare == "trend") != (along is not None) or (along is not None and along not in raw.get("within", ())):
            raise ClaimError(
                f"{where}: claim {name!r}: a trend names the within column it runs along (along), and only a trend does"
            )
        if bool(raw.get("exclude")) != bool(raw.get("exclude_why")):
            raise ClaimError(
                f"{where}: claim {name!r}: exclude needs exclude_why, the stated rule (and the other way round)"
            )
        if compare in ("equivalence", "threshold") and not isinstance(raw.get("value"), (int, float)):
            raise ClaimError(f"{where}: claim {name!r}: {compare} needs a numeric value")
        if compare != "threshold" and (raw.get("a") is None or raw.get("b") is None):
            raise ClaimError(f"{where}: claim {name!r}: {compare} compares two groups: give a and b")
        tuned = raw.get("tuned")
        if tuned is not None and (
            compare not in ("location", "equivalence")
            or raw.get("sign")
            or not statistic.better
            or tuned in (raw.get("by", "method"), *raw.get("within", ()), *raw.get("pooled", ()))
        ):
            raise ClaimError(
                f"{where}: claim {name!r}: tuned (each group at its best {tuned}) needs a location or equivalence "
                "claim without sign, on a statistic with a better side, and a column that is not by, within or pooled"
            )
        paired = raw.get("paired", False)
        if not isinstance(paired, bool) or (paired and (compare != "location" or tuned is not None or raw.get("sign"))):
            raise ClaimError(
                f"{where}: claim {name!r}: paired must be true or false, and true only for a location claim without "
                "tuned or sign (a sign test of within-seed differences)"
            )
        final = raw.get("final", statistic.ends_with_training(raw.get("params", {})))
        paper_effect = _paper_effect(raw, compare, f"{where}: claim {name!r}")
        paper_n = raw.get("paper_n")
        n_source = raw.get("paper_n_source")
        if paper_n is not None and (isinstance(paper_n, bool) or not isinstance(paper_n, int) or paper_n < 1):
            raise ClaimError(f"{where}: claim {name!r}: paper_n is the paper's runs per group, a whole number >= 1")
        if n_source is not None and (not isinstance(n_source, str) or not n_source.strip()):
            raise ClaimError(f"{where}: claim {name!r}: paper_n_source must be a non-empty text")
        if (paper_n is None) != (n_source is None or n_source.startswith(NOT_STATED)) and n_source is not None:
            raise ClaimError(
                f"{where}: claim {name!r}: paper_n_source begins {NOT_STATED!r} exactly when there is no paper_n"
            )
        if paper_n is not None and n_source is None:
            raise ClaimError(f"{where}: claim {name!r}: paper_n needs a paper_n_source (section or table)")
        artefact = raw.get("artefact")
        if artefact is not None and (not isinstance(artefact, str) or not artefact.strip()):
            raise ClaimError(f"{where}: claim {name!r}: artefact must say why the setting fixes the statistic")
        if "artefact_scales" in raw and (artefact is None or not set(raw["artefact_scales"]) <= set(SCALES)):
            raise ClaimError(
                f"{where}: claim {name!r}: artefact_scales needs an artefact and names scales of {', '.join(SCALES)}"
            )
        return cls(
            id=raw["id"],
            says=raw["says"],
            statistic=raw["statistic"],
            compare=compare,
            a=_values(raw.get("a")),
            b=_values(raw.get("b")),
            by=raw.get("by", "method"),
            direction=direction,
            test=test,
            where={k: _values(v) for k, v in raw.get("where", {}).items()},
            params=dict(raw.get("params", {})),
            within=tuple(raw.get("within", ())),
            pooled=tuple(raw.get("pooled", ())),
            quantifier=quantifier,
            exclude={k: _values(v) for k, v in raw.get("exclude", {}).items()},
            exclude_why=raw.get("exclude_why", ""),
            along=along,
            value=None if raw.get("value") is None else float(raw["value"]),
            alpha=float(raw.get("alpha", 0.05)),
            sign=raw.get("sign"),
            floor=float(raw.get("floor", 0.0)),
            paired=paired,
            tuned=tuned,
            failures="data" if compare == "rate" else raw.get("failures", "exclude"),
            final=bool(final),
            scales=tuple(raw.get("scales", SCALES)),
            paper_effect=paper_effect,
            paper_effect_source=raw.get("paper_effect_source"),
            artefact=artefact,
            paper_n=paper_n,
            paper_n_source=raw.get("paper_n_source"),
            artefact_scales=tuple(raw.get("artefact_scales", SMALL_MODEL_SCALES)) if artefact else (),
        )

    def judged_at(self, scale: str) -> bool:
        """Whether runs at ``scale`` can decide the claim: a scale of its ``scales`` where no
        ``artefact`` fixes its statistic."""
        return scale in self.scales and scale not in self.artefact_scales

    def paper_effect_in(self, cell: str) -> float | tuple | None:
        """The paper's effect in the cell named ``cell`` (None: the paper reports none there)."""
        if isinstance(self.paper_effect, dict):
            return self.paper_effect.get(cell)
        return self.paper_effect

    @property
    def hypothesis(self) -> str:
        """The claim in one line, e.g. ``"spread of scores.score: houlsby < full (brown-forsythe, one-sided)"``."""
        left = label(self.a) or "all runs"
        if self.compare == "equivalence":
            return f"{self.statistic}: {left} within {self.value:g} of {label(self.b)} ({self.test}, both sides)"
        sign = "<" if self.direction == "less" else ">"
        other = label(self.b) if self.compare != "threshold" else f"{self.value:g}"
        text = f"{self.compare} of {self.statistic}: {left} {sign} {other} ({self.test}, one-sided)"
        return text + (f"; {left} itself {sign} 0" if self.sign else "")

    @property
    def lower_is_better(self) -> bool:
        """The statistic's lower values are the better outcome (its declared ``better``)."""
        return registry.statistic_of(self.statistic)[1].better == "lower"

    @property
    def best_direction(self) -> str | None:
        """The claimed direction on the scale where higher is better: what a ``tuned`` claim
        compares the groups' best configurations in (its values negated where lower is better)."""
        return opposite(self.direction) if self.direction and self.lower_is_better else self.direction

    def configuration_factor(self, configs_a: int, configs_b: int) -> int:
        """What a ``tuned`` claim's claimed side multiplies a configuration pair's p by: the
        number of configurations of the group its test takes a union over (:func:`judge`'s rule;
        equivalence: the larger, one of its two parts each); 1 for a claim not tuned."""
        if not self.tuned:
            return 1
        if self.compare == "equivalence":
            return max(configs_a, configs_b)
        return configs_b if self.best_direction == "less" else configs_a

    def smallest_p(self, n_a: int, n_b: int, configs: tuple[int, int] = (1, 1)) -> float:
        """The smallest p the claim's test can give a cell of ``n_a`` vs ``n_b`` runs (a
        ``tuned`` claim: per configuration, ``configs`` configurations of group a and b; a trend:
        the runs at each end, two intervals at alpha / 2)."""
        if self.compare == "trend":
            return min(1.0, 2 * exact.smallest_p("location", n_a, n_b))
        if self.tuned:
            return min(1.0, self.configuration_factor(*configs) * exact.smallest_p("location", n_a, n_b))
        if self.paired:  # the sign test of at most min(n_a, n_b) seed pairs
            return 1.0 if min(n_a, n_b) < 1 else 2.0 ** -min(n_a, n_b)
        return exact.smallest_p(self.compare, n_a, n_b)

    @property
    def groups(self) -> int:
        """Groups compared: 1 for a threshold, else 2."""
        return 1 if self.compare == "threshold" else 2


def _paper_effect(raw: dict, compare: str, where: str) -> float | tuple | dict | None:
    """A claim's ``paper_effect`` checked against its kind and cells, and its source required."""
    value, source = raw.get("paper_effect"), raw.get("paper_effect_source")
    if source is not None and (not isinstance(source, str) or not source.strip()):
        raise ClaimError(f"{where}: paper_effect_source must be a non-empty text, got {source!r}")
    if value is None:
        if source is not None and not source.startswith(NOT_REPORTED):
            raise ClaimError(f"{where}: paper_effect_source without a paper_effect must begin {NOT_REPORTED!r}")
        return None
    if source is None or source.startswith(NOT_REPORTED):
        raise ClaimError(f"{where}: paper_effect needs a paper_effect_source that quotes the paper's numbers")

    def one(effect, label: str):
        if compare == "equivalence":
            ok = isinstance(effect, list) and len(effect) == 2 and all(_number(e) for e in effect) and effect[0] > 0
            if not ok:
                raise ClaimError(
                    f"{where}: {label} of an equivalence is [margin, difference] in SD, margin > 0; got {effect!r}"
                )
            return float(effect[0]), float(effect[1])
        limits = {"spread": (0.0, math.inf), "rate": (0.0, 1.0)}.get(compare, (-math.inf, math.inf))
        if not _number(effect) or not limits[0] <= effect <= limits[1] or (compare == "spread" and effect == 0):
            raise ClaimError(
                f"{where}: {label} of a {compare} claim must be a number in its unit "
                f"({_UNITS.get(compare, 'SD')}), got {effect!r}"
            )
        return float(effect)

    if not isinstance(value, dict):
        return one(value, "paper_effect")
    within = list(raw.get("within", ()))
    for cell in value:
        columns = [part.split("=", 1)[0] for part in cell.split(", ")]
        if not within or columns != within:
            raise ClaimError(
                f"{where}: paper_effect cell {cell!r} must name the claim's cells "
                f"({', '.join(f'{c}=...' for c in within) or 'the claim has none: give one value'})"
            )
    return {cell: one(effect, f"paper_effect[{cell!r}]") for cell, effect in value.items()}


# the unit of an effect size, by the kind of comparison (a difference of means is in SDs)
_UNITS = {"spread": "a positive SD ratio", "rate": "a rate in [0, 1]"}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _values(value) -> tuple:
    """A claim's group or filter value(s) as a tuple (``None``: empty)."""
    if value is None:
        return ()
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)


def opposite(direction: str) -> str:
    """The other one-sided direction: ``less`` <-> ``greater``."""
    return "greater" if direction == "less" else "less"


def label(values: tuple) -> str:
    return "/".join(_text(v) for v in values)
