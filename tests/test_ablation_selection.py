"""No selection inside the single-layer ablation statistic (issue #55, item 3).

Houlsby et al. 2019 §3.6: "removing any single layer's adapters has only a small impact on
performance ... largest performance drop is 2%". The claim is about every layer, so
``ablation.single-drop`` gives one observation per run and layer and the recipes take the layers
as cells (``within = ["task", "layer"]``, quantifier ``each``): it agrees only when every layer's
drop is below the threshold (each cell at alpha, an intersection-union test) and contradicts when
some layer's is above (Holm over the cells). The statistic it replaced, each run's largest of its
L noisy drops, lies above the largest true drop, and contradicted a true claim.

Synthetic runs that look like the demo's, judged through :func:`robustkit.verdicts.rules.judge`:
each run's drop at layer l is its true drop plus the noise of a difference of two accuracies on
1,066 examples (rt's dev set) of a model at 80% accuracy when ablating a layer flips a fraction
``flips`` of its predictions (SD sqrt(flips / 1066) / 0.8, relative), correlated across the layers
of a run (``rho``: the full model's accuracy is shared by every layer's difference), plus a
spread of the true drop over runs (``tau``), rounded onto the examples' grid. The nuisances:
``flips`` in {0.02, 0.05, 0.10} (SD 0.5 to 1.2 points), ``rho`` in {0, 0.5, 0.9}, ``tau`` in {0,
0.005}; the shapes 1 task x 6 layers (minilm-l6 at demo and cpu, 5 runs; 7 the first n at which
its Holm side can be reached) and 2 tasks x 12 layers (BERT-base on MNLI and CoLA, the paper's
6 runs and the recipe's 9). Rates are the worst over the nuisances, each within alpha plus two
Monte-Carlo standard errors at its draws (:func:`robustkit.verdicts.simulation.bound`).
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from robustkit.verdicts.rules import judge
from robustkit.verdicts.simulation import bound
from robustkit.verdicts.spec import AGREES, CONTRADICTS, Claim

ALPHA, THRESHOLD, EXAMPLES, ACCURACY = 0.05, 0.02, 1066, 0.8
FLIPS, RHOS, TAUS = (0.02, 0.05, 0.10), (0.0, 0.5, 0.9), (0.0, 0.005)


def _claim(within: list[str]) -> Claim:
    return Claim.from_table(
        {
            "id": "single-layer-small",
            "says": "removing any single layer's adapters has only a small impact (largest drop 2%)",
            "statistic": "ablation.single-drop",
            "compare": "threshold",
            "by": "method",
            "a": "houlsby",
            "direction": "less",
            "value": THRESHOLD,
            "within": within,
            "quantifier": "each",
        },
        "test",
    )


PER_LAYER = _claim(["task", "layer"])  # the recipes' claim
LARGEST = _claim(["task"])  # the statistic it replaced: each run's largest single-layer drop


def drops(
    rng: np.random.Generator,
    true: np.ndarray,
    runs: int,
    tasks: int,
    flips: float,
    rho: float,
    tau: float,
) -> np.ndarray:
    """Measured relative drops, shape (tasks, runs, layers), of true drops ``true`` (layers,)."""
    layers = len(true)
    sd = np.sqrt(flips / EXAMPLES) / ACCURACY
    shared = rng.standard_normal((tasks, runs, 1))
    own = rng.standard_normal((tasks, runs, layers))
    noise = sd * (np.sqrt(rho) * shared + np.sqrt(1 - rho) * own)
    value = true + tau * rng.standard_normal((tasks, runs, layers)) + noise
    grid = ACCURACY * EXAMPLES  # a drop is a whole number of examples
    return np.round(value * grid) / grid


def observations(values: np.ndarray) -> pd.DataFrame:
    """One row per task, run and layer, as ``ablation.single-drop`` gives them."""
    tasks, runs, layers = values.shape
    t, r, layer = np.meshgrid(np.arange(tasks), np.arange(runs), np.arange(layers), indexing="ij")
    return pd.DataFrame(
        {
            "run_id": [f"t{a}-s{b}" for a, b in zip(t.ravel(), r.ravel())],
            "method": "houlsby",
            "task": [f"t{a}" for a in t.ravel()],
            "seed": r.ravel(),
            "layer": layer.ravel() + 1,  # the encoder layers, 1..L
            "value": values.ravel(),
            "outcome": "ok",
        }
    )


def largest(frame: pd.DataFrame) -> pd.DataFrame:
    """Each run's largest single-layer drop (the old ``ablation.max-single-drop``)."""
    return frame.sort_values("value").groupby("run_id", as_index=False).last().drop(columns="layer")


NOISY, QUIET = (0.10, 0.0, 0.005), (0.02, 0.9, 0.0)  # the nuisance corners: flips, rho, tau


def rate(
    true: np.ndarray, shape: tuple[int, int, int], nuisance: tuple, draws: int, seed: int, old: bool = False
) -> tuple[dict[str, float], dict[str, float]]:
    """The verdict rates over ``draws`` of the per-layer claim and (``old``), on the same draws,
    of the claim on each run's largest drop: ({verdict: rate} new, {verdict: rate} old; empty
    without ``old``)."""
    tasks, layers, runs = shape
    assert len(true) == layers
    rng = np.random.default_rng(seed)
    counts = ({AGREES: 0, CONTRADICTS: 0}, {AGREES: 0, CONTRADICTS: 0} if old else {})
    for _ in range(draws):
        frame = observations(drops(rng, true, runs, tasks, *nuisance))
        for side, claim, rows in ((0, PER_LAYER, frame), (1, LARGEST, largest(frame)))[: 2 if old else 1]:
            verdict = judge(claim, rows, describe=False).iloc[-1]["verdict"]
            counts[side][verdict] = counts[side].get(verdict, 0) + 1
    return tuple({v: c / draws for v, c in part.items()} for part in counts)


def single(layers: int, largest_drop: float, others: float = 0.015) -> np.ndarray:
    """True drops: the last layer's ``largest_drop``, every other layer's ``others``."""
    true = np.full(layers, others)
    true[-1] = largest_drop
    return true


DEMO, PAPER, RECIPE_PAPER = (1, 6, 5), (2, 12, 6), (2, 12, 9)  # tasks, layers, runs


@pytest.mark.parametrize("shape", [DEMO, RECIPE_PAPER])
@pytest.mark.parametrize("level", [0.015, THRESHOLD])
def test_a_true_claim_is_not_contradicted(shape, level):
    """(a) Every layer's true drop 1.5%, and every one at the threshold itself (the union over
    the most cells at its largest: Holm's worst case), under the noisiest nuisance; the claim on
    each run's largest drop contradicted 1.5% most of the time on the same draws."""
    draws = 100
    before = shape == DEMO and level == 0.015
    new, old = rate(np.full(shape[1], level), shape, NOISY, draws, seed=1, old=before)
    assert new[CONTRADICTS] <= bound(ALPHA, draws), new
    if before:  # the before number: selection inside the statistic
        assert old[CONTRADICTS] > bound(ALPHA, draws), old


@pytest.mark.parametrize("shape, nuisance", [(DEMO, QUIET), (DEMO, NOISY), (RECIPE_PAPER, QUIET)])
def test_a_largest_drop_at_the_threshold_does_not_agree(shape, nuisance):
    """(b) One layer's true drop exactly at the threshold, the others at 1.5% (the quiet
    nuisance: the other cells agree, so the claim rests on the one at the threshold)."""
    draws = 120
    new, _ = rate(single(shape[1], THRESHOLD), shape, nuisance, draws, seed=2)
    assert new[AGREES] <= bound(ALPHA, draws), new


@pytest.mark.parametrize("shape", [(1, 6, 7), RECIPE_PAPER])
def test_a_false_claim_can_be_contradicted(shape):
    """(c) One layer's true drop 4%, twice the threshold: contradicted at the n where Holm over
    the layers can reach alpha (7 runs for 6 layers, 9 for 2 x 12: the paper recipe's); at the
    demo's 5 runs it cannot be (2^-5 > 0.05 / 2, Tarone's family of 6 cells), which is why the
    recipe does not judge it there."""
    draws = 40
    new, _ = rate(single(shape[1], 0.04), shape, NOISY, draws, seed=3)
    assert new[CONTRADICTS] >= 0.5, new
    assert new[AGREES] == 0.0, new
    demo, _ = rate(single(DEMO[1], 0.04), DEMO, NOISY, 10, seed=3)
    assert demo[CONTRADICTS] == 0.0


@pytest.mark.slow
def test_worst_case_over_the_nuisances(capsys):
    """(a), (b) and the claim on each run's largest drop, every nuisance screened (30 draws) and
    the worst redrawn (600 draws, another seed), at each shape: the per-layer claim within alpha
    + 2 MC SE, the old statistic's rates printed (the before numbers). About 4 CPU-minutes (the
    screen only picks which nuisance to redraw: at 60 draws it took 7 and held the suite past 15
    minutes; the numbers of docs/verdicts.md came from the 60-draw screen)."""
    screen, again = 30, 600
    nuisances = list(itertools.product(FLIPS, RHOS, TAUS))
    cases = [  # name, true drops, the side that is false, whether to measure the old claim too
        ("every layer 1.5%", lambda layers: np.full(layers, 0.015), CONTRADICTS, True),
        ("every layer 2%", lambda layers: np.full(layers, THRESHOLD), CONTRADICTS, True),
        ("one layer 2%, others 1.5%", lambda layers: single(layers, THRESHOLD), AGREES, False),
    ]
    for shape in (DEMO, PAPER, RECIPE_PAPER):
        for name, truth, side, old in cases:
            true = truth(shape[1])
            found = [rate(true, shape, n, screen, seed=10 + k, old=old) for k, n in enumerate(nuisances)]
            worst = int(np.argmax([new[side] for new, _ in found]))
            new, _ = rate(true, shape, nuisances[worst], again, seed=99)
            line = f"{shape} {name}: new {side} {new[side]:.3f} at {nuisances[worst]} ({again} draws)"
            if old:
                k = int(np.argmax([before[side] for _, before in found]))
                line += f"; old {side} {min(b[side] for _, b in found):.2f}-{found[k][1][side]:.2f} over nuisances"
                line += f" (worst {nuisances[k]}, {screen} draws each)"
            with capsys.disabled():
                print(line)
            assert new[side] <= bound(ALPHA, again), line
