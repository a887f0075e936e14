"""Train until converged (issue #47 item 1): one rule stops a run and is what the convergence guard
checks, so a run it stops passes the guard by construction; a run that hits its budget says
whether it was still improving."""

from __future__ import annotations

import dataclasses

from conftest import TINY_RTE, write_rte

from robustkit.analysis import convergence
from robustkit.specs.spec import RunSpec
from robustkit.store import collapse
from robustkit.store.manifest import read_manifest
from robustkit.train import convergence_rule, train


def test_the_guard_and_the_stopping_rule_are_one_definition():
    assert convergence.improving is convergence_rule.improving
    falling = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5]
    flat = [1.0, 0.8, 0.7, 0.7, 0.7, 0.7]
    assert convergence_rule.improving(falling) and not convergence_rule.converged(falling)
    assert not convergence_rule.improving(flat) and convergence_rule.converged(flat)
    assert not convergence_rule.converged(flat[:3])  # fewer than 4 evaluations: not judged, never stops
    # a flat dev loss before the run has left the majority class is a slow start, not convergence
    assert not convergence_rule.converged(flat, learned=False)
    assert convergence_rule.converged(flat, learned=None)  # no baseline to judge against: the loss rule alone


def test_a_slow_starter_trains_on_until_it_learns():
    # the demo's adapters: dev loss flat at the majority class, then learning (0.574 majority, 1,000 rows)
    losses = [0.69, 0.684, 0.683, 0.683, 0.683, 0.60, 0.55, 0.54]
    scores = [0.574, 0.574, 0.574, 0.574, 0.574, 0.68, 0.71, 0.72]
    stops = [
        k
        for k in range(1, len(losses) + 1)
        if convergence_rule.converged(losses[:k], learned=collapse.ever_learned(scores[:k], 0.574, "accuracy", 1000))
    ]
    assert convergence_rule.converged(losses[:4])  # the loss rule alone would stop it at the majority class
    assert 4 not in stops and 5 not in stops  # it trains on, and learns


def test_a_run_until_converged_stops_where_the_guard_passes(tmp_path):
    glue = write_rte(tmp_path / "glue")
    # the dev rows once more with the labels of two of them flipped against train's (labels stay
    # balanced): the run learns the rest (dev accuracy above the majority class), and the more
    # confident it grows the higher the flipped rows' loss, so its dev loss stops improving early
    dev = glue / "RTE" / "dev.tsv"
    flip = {"entailment": "not_entailment", "not_entailment": "entailment"}
    head, *rows = dev.read_text().splitlines()
    flipped = [r.rsplit("\t", 1)[0] + "\t" + flip[r.rsplit("\t", 1)[1]] for r in rows[:2]]
    dev.write_text("\n".join([head, *rows, *flipped]) + "\n")
    budget = dataclasses.replace(
        TINY_RTE, method="full", lr=1e-3, epochs=40, eval_every=1, data_dir=str(glue), until_converged=True
    )
    run_dir = train(budget, tmp_path / "runs", progress=False)
    manifest = read_manifest(run_dir)
    steps_per_epoch = 3  # 24 examples, batch 8
    assert manifest["stopped"]["reason"] == "converged"
    assert manifest["stopped"]["step"] < 40 * steps_per_epoch
    assert manifest["stopped"]["still_improving"] is False
    assert manifest["ever_learned"] is True  # it stopped after it had learned
    assert not convergence.still_improving(tmp_path / "runs", [run_dir.name]).iloc[0]  # the guard agrees
    # the same settings without the rule are another run, trained to their budget
    plain = dataclasses.replace(budget, until_converged=False, epochs=2)
    other = train(plain, tmp_path / "runs", progress=False)
    assert other.name != run_dir.name and read_manifest(other)["stopped"]["reason"] == "budget"


def test_the_rule_is_part_of_the_id_only_when_on():
    assert RunSpec().run_id == "rt-houlsby-minilm-l6-s0-tsp0-605128a5"  # as before the field existed
    on = RunSpec(until_converged=True)
    assert on.run_id != RunSpec().run_id and on.resolved().until_converged is True
