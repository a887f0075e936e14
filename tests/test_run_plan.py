"""`robustkit reproduce --plan`: the runs, what the store holds, what to fetch, GPU-hours (estimate)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from robustkit.cli import main
from robustkit.specs.spec import RunSpec
from robustkit.sweeps import plan as run_plan
from robustkit.sweeps.plan import NOT_MEASURED, Throughput
from robustkit.verdicts.recipes import load_defaults, load_recipe

TOY = """title = "{title}"
figure = "box-seeds"
params = {{ split = "validation", checkpoint = "last" }}
output = "{name}.pdf"

[demo.grid]
method = ["houlsby", "full"]
seed = {seeds}
"""


@pytest.fixture
def recipe_dir(tmp_path, rte_folder):
    """Two toy recipes on bert-tiny / a local RTE (24 train, 12 dev): seeds 0-1 and 1-2, seed 1 shared."""
    glue = rte_folder(tmp_path / "glue")
    folder = tmp_path / "recipes"
    (folder / "toy").mkdir(parents=True)
    (folder / "defaults.toml").write_text(
        '[demo.base]\nmodel = "bert-tiny"\ntask = "rte"\nepochs = 2\nbatch_size = 8\nmax_length = 32\n'
        f'adapter_size = 16\ndata_dir = "{glue}"\n[demo.lr]\nhoulsby = 1e-3\nfull = 1e-4\n'
    )
    for name, seeds in (("a", "[0, 1]"), ("b", "[1, 2]")):
        (folder / "toy" / f"{name}.toml").write_text(TOY.format(title=name, name=name, seeds=seeds))
    return folder


def test_examples_by_hand():
    # rt low-resource: 64 train, 1000 validation drawn from train, rt's validation (1281) as test
    spec = RunSpec(model="bert-tiny", task="rt", train_size=64, epochs=2, batch_size=16, eval_every=2).resolved()
    # 4 steps per epoch, 8 in all; evaluations at steps 2, 4, 6, 8; then best and last on validation and test
    assert run_plan.examples(spec) == (8 * 16, 4 * 1000 + 2 * (1000 + 1281))


def test_embedded_sizes_are_the_tasks_own():
    from robustkit.data.tasks import TASKS, load_splits

    assert set(run_plan.SPLIT_SIZES) == set(TASKS)
    for name in ("rt", "polarity"):
        splits = load_splits(name)
        assert run_plan.SPLIT_SIZES[name] == tuple(len(splits[s]) for s in ("train", "validation", "test"))


def test_shared_runs_count_once_and_held_runs_are_found(recipe_dir, tmp_path):
    from robustkit.store.manifest import write_manifest

    recipes = [load_recipe(name, recipe_dir) for name in ("toy/a", "toy/b")]
    defaults = load_defaults(recipe_dir)
    store = tmp_path / "runs"
    held = recipes[0].specs("demo", defaults)[0].resolved()
    (store / held.run_id).mkdir(parents=True)
    write_manifest(
        store / held.run_id,
        {"run_id": held.run_id, "kind": "finetune", "spec": {}, "checkpoints": {}, "status": "complete"},
    )
    rate = {"bert-tiny": Throughput("bert-tiny", "Test GPU", 100.0, 1000.0, 64, "test")}
    per_recipe, runs = run_plan.plan(recipes, "demo", store, defaults, throughput=rate)
    assert list(per_recipe["runs"]) == [4, 4, 6] and list(per_recipe["shared"][:2]) == [2, 2]  # seed 1 of each method
    assert list(per_recipe["held"]) == [1, 0, 1] and per_recipe["to_train"].iloc[-1] == 5
    assert runs["run_id"].is_unique and len(runs) == 6
    # 24 train examples, batch 8: 3 steps per epoch, 6 in all; evaluated at steps 3 and 6 on the 12 dev rows
    todo = runs[~runs["held"]]
    assert (todo["train_examples"] == 48).all() and (todo["eval_examples"] == 2 * 12 + 2 * (12 + 12)).all()
    expected = 5 * (48 / 100 + 72 / 1000) * (32 / 64) / 3600
    assert per_recipe["gpu_hours"].iloc[-1] == pytest.approx(expected)
    unmeasured, _ = run_plan.plan(
        recipes,
        "demo",
        store,
        defaults,
        throughput={"bert-tiny": Throughput("bert-tiny", NOT_MEASURED, None, None, 64, "")},
    )
    assert unmeasured["gpu_hours"].isna().all()
    text = run_plan.describe(unmeasured, runs, "demo", {})
    assert NOT_MEASURED in text and "bert-tiny: embedded" in text and "task rte: local, GLUE TSV folder" in text


def test_tsp_runs_are_counted_once_to_their_largest_step(tmp_path):
    class Recipe:
        name = "toy/tsp"

        def specs(self, scale, defaults):
            base = RunSpec(model="bert-tiny", task="rt", train_size=64, epochs=1, batch_size=16)
            return [
                RunSpec(**{**base.to_dict(), "tsp_step": step, "method": method})
                for step in (100, 300)
                for method in ("full",)
            ]

    _, runs = run_plan.plan([Recipe()], "demo", tmp_path, None, throughput={})
    tsp = runs[runs["method"] == "tsp/full"]
    assert len(tsp) == 1 and tsp["train_examples"].iloc[0] == 300 * 32  # tsp_batch_size 32


def test_the_cli_plans_and_trains_nothing(recipe_dir, tmp_path, capsys):
    store = tmp_path / "store"
    assert main(["reproduce", "--plan", "--all", "--recipe-dir", str(recipe_dir), "--store", str(store)]) == 0
    out = capsys.readouterr().out
    # the toy recipes train bert-tiny, whose throughput bench/gpu_throughput.toml holds: the
    # estimate names the GPU it was measured on
    assert "total (distinct runs)" in out and "estimate" in out and "NVIDIA H100" in out and NOT_MEASURED not in out
    assert not store.exists()


def test_the_paper_plan_of_every_recipe():
    """Every recipe plans at paper scale without a model or data (the hub tasks' sizes are known)."""
    from robustkit.verdicts.recipes import RECIPE_DIR, list_recipes

    recipes = [load_recipe(name, RECIPE_DIR) for name in list_recipes(RECIPE_DIR)]
    per_recipe, runs = run_plan.plan(recipes, "paper", RECIPE_DIR.parent / "no-store", load_defaults(RECIPE_DIR))
    assert per_recipe["runs"].iloc[-1] == len(runs) < per_recipe["runs"].iloc[:-1].sum()
    assert (runs["train_examples"] > 0).all() and not math.isnan(float(runs["eval_examples"].sum()))
    assert isinstance(per_recipe, pd.DataFrame) and "bert-base-uncased" in set(runs["model"])


def test_the_plan_says_cpu_hours_from_the_measured_cpu_rates(tmp_path):
    """Issue #47 item 5: CPU-hours beside GPU-hours, from bench/cpu_throughput.toml; a model
    without a measured rate says so."""
    from robustkit.sweeps import plan as planning
    from robustkit.verdicts.recipes import load_recipe

    recipe = load_recipe("han2021/fig2")
    rates = {"minilm-l6": planning.Throughput("minilm-l6", "cpu", 30.0, 150.0, 64, "test")}
    per_recipe, runs = planning.plan([recipe], "demo", tmp_path, cpu_throughput=rates)
    expected = sum(r.train_examples / 30.0 + r.eval_examples / 150.0 for r in runs.itertuples()) / 3600
    assert per_recipe["cpu_hours"].iloc[-1] == pytest.approx(expected)
    none = planning.plan([recipe], "demo", tmp_path, cpu_throughput={})[0]
    assert none["cpu_hours"].isna().all()
    text = planning.describe(per_recipe, runs, "demo")
    assert "CPU-hours (estimate)" in text and "CPU-hours / --jobs" in text
    assert "until converged" not in text  # the demo's runs train to their budget


def test_the_plan_says_its_hours_bound_runs_trained_until_converged(tmp_path):
    """Runs trained until converged (here the cpu scale with until_converged set; its shipped runs
    train a fixed budget, issue #55 item 5) stop once converged, so hours priced at their budget
    are an upper bound, and the plan says so with how many runs it concerns."""
    import copy

    from robustkit.sweeps import plan as planning
    from robustkit.verdicts.recipes import load_defaults, load_recipe

    defaults = copy.deepcopy(load_defaults())
    defaults["cpu"]["base"]["until_converged"] = True
    per_recipe, runs = planning.plan([load_recipe("houlsby2019/fig6-ablation")], "cpu", tmp_path, defaults)
    assert runs["until_converged"].all()
    text = planning.describe(per_recipe, runs, "cpu")
    assert f"{len(runs)} of the {len(runs)} runs train until converged" in text and "upper bound" in text
