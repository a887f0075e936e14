"""Train until converged (issue #47 item 1): one rule stops a run and is what the convergence guard
checks, so a run it stops passes the guard by construction; a run that hits its budget says
whether it was still improving."""

from __future__ import annotations

import dataclasses

from conftest import TINY_RTE, write_rte

from robustkit.analysis import convergence
from robustkit.specs.spec import RunSpec
from robustkit.store.manifest import read_manifest
from robustkit.train import convergence_rule, train


def test_the_guard_and_the_stopping_rule_are_one_definition():
    assert convergence.improving is convergence_rule.improving
    falling = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5]
    flat = [1.0, 0.8, 0.7, 0.7, 0.7, 0.7]
    assert convergence_rule.improving(falling) and not convergence_rule.converged(falling)
    assert not convergence_rule.improving(flat) and convergence_rule.converged(flat)
    assert not convergence_rule.converged(flat[:3])  # fewer than 4 evaluations: not judged, never stops


def test_a_run_until_converged_stops_where_the_guard_passes(tmp_path):
    glue = write_rte(tmp_path / "glue")
    # dev labels flipped against train's: the more the run learns, the higher its dev loss, so
    # its dev loss stops improving early (the 4 evaluations the rule needs at the least)
    dev = glue / "RTE" / "dev.tsv"
    flip = {"entailment": "not_entailment", "not_entailment": "entailment"}
    head, *rows = dev.read_text().splitlines()
    dev.write_text("\n".join([head, *(r.rsplit("\t", 1)[0] + "\t" + flip[r.rsplit("\t", 1)[1]] for r in rows)]) + "\n")
    budget = dataclasses.replace(
        TINY_RTE, method="full", lr=1e-3, epochs=40, eval_every=1, data_dir=str(glue), until_converged=True
    )
    run_dir = train(budget, tmp_path / "runs", progress=False)
    manifest = read_manifest(run_dir)
    steps_per_epoch = 3  # 24 examples, batch 8
    assert manifest["stopped"]["reason"] == "converged"
    assert manifest["stopped"]["step"] < 40 * steps_per_epoch
    assert manifest["stopped"]["still_improving"] is False
    assert not convergence.still_improving(tmp_path / "runs", [run_dir.name]).iloc[0]  # the guard agrees
    # the same settings without the rule are another run, trained to their budget
    plain = dataclasses.replace(budget, until_converged=False, epochs=2)
    other = train(plain, tmp_path / "runs", progress=False)
    assert other.name != run_dir.name and read_manifest(other)["stopped"]["reason"] == "budget"


def test_the_rule_is_part_of_the_id_only_when_on():
    assert RunSpec().run_id == "rt-houlsby-minilm-l6-s0-tsp0-605128a5"  # as before the field existed
    on = RunSpec(until_converged=True)
    assert on.run_id != RunSpec().run_id and on.resolved().until_converged is True
