"""Recipes: every shipped recipe parses and expands at both scales; errors name the problem."""

from __future__ import annotations

import pytest

from robustkit.verdicts.demo import demo_specs
from robustkit.verdicts.recipes import RECIPE_DIR, RecipeError, list_recipes, load_defaults, load_recipe

# The figures and tables issues #6 and #11 ask for, by recipe name.
REQUIRED = {
    "han2021/fig1",
    "han2021/fig2",
    "han2021/fig3",
    "han2021/fig4",
    "han2021/fig5",
    "han2021/fig9-10",
    "han2021/table1",
    "he2021/fig2",
    "he2021/fig3",
    "he2021/fig4",
    "he2021/fig5-9",
    "he2021/fig6",
    "he2021/fig7",
    "he2021/table2",
    "he2021/table5",
    "he2021/table6",
    "he2021/table7",
    "houlsby2019/fig3",
    "houlsby2019/fig3-4",
    "houlsby2019/fig6-ablation",
    "houlsby2019/fig6-init-std",
    "mohebbi/fig8",
}
# Demo scale: every paper recipe's runs together (each ~4 CPU-minutes), so that reproducing the
# papers' figures at demo scale fits its time budget on 2 CPU cores.
# 43, then +6 so that every demo claim can decide (he fig 3 at 300 examples, LayerNorm-only), then
# +2 (a third mixout seed per method: he table 7's equivalence claim, Holm over its two methods),
# then +2 (a fifth seed per method at 300 examples: the Brunner-Munzel test, valid when spreads
# differ, decides from 5 vs 5, issue #45)
DEMO_RUN_BUDGET = 53
# The PEFT zoo (issue #14): five recipes on the same runs, 5 seeds of 4 added methods beyond the
# papers' runs (its full and houlsby runs are Han et al. figure 2's; the fifth seed because the
# RSA claims are tested at 7 layer outputs with Holm's correction, which 4 vs 4 cannot pass).
ZOO = ["peft/zoo", "peft/zoo-rsa", "peft/zoo-landscape", "peft/zoo-attack", "peft/zoo-tradeoff"]
ZOO_EXTRA_RUNS = 20
# The findings that followed the papers (issue #30): five recipes on the papers' and the zoo's runs,
# plus 5 seeds of LoRA at r = 64 (rsLoRA scaling) for beyond/intruders' higher-rank claim (their
# rank-8 LoRA seed 4, once an extra run of theirs, is now the zoo's).
BEYOND_LORA = [
    "beyond/intruders",
    "beyond/forgetting",
    "beyond/flat-lora",
    "beyond/curve-connectivity",
    "beyond/stability-length",
]
BEYOND_EXTRA_RUNS = 5
# every shipped recipe, as the registry finds them: a new recipe is checked with no list to edit
RECIPES = sorted(list_recipes())
# He et al. 2021 figure 4's demo grid: one learning-rate grid for both methods.
DEMO_LR_GRID = [2e-5, 1e-4, 5e-4, 2.5e-3]


def test_every_required_figure_has_a_recipe():
    assert REQUIRED <= set(list_recipes())


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_expands_at_both_scales(name):
    from robustkit import figures

    recipe = load_recipe(name)
    demo, paper = recipe.specs("demo"), recipe.specs("paper")
    assert demo and paper  # each scale's model and task: the rule "scales" of robustkit.check (tests/test_check.py)
    assert len({s.run_id for s in demo}) == len(demo)  # distinct
    for scale in recipe.scales:  # the registered figure and its parameters are valid
        figures.get(recipe.figure).resolve(**recipe.figure_params(scale))


# What each recipe must say (its scales' models and tasks, the comment citing the paper above
# [paper], its claims in the paper's words, groups its runs have, the paper's effect and n, a
# location claim's runs per group, its demo runs' budget) is robustkit.check's, rule by rule
# (robustkit/checks/recipe.py); tests/test_check.py runs it on every recipe.


def test_demo_runs_fit_the_budget():
    """Recipes that need the same run share it; the papers' recipes stay within the budget, the
    PEFT zoo adds only its added methods' runs, and beyond/ adds one LoRA seed and the r = 64 LoRA
    runs (issue #30)."""

    def runs(names):
        return {s.run_id for name in names for s in load_recipe(name).specs("demo")}

    names = list_recipes()
    papers = runs(n for n in names if not n.startswith(("peft/", "beyond/")))
    zoo = runs(n for n in names if n.startswith("peft/"))
    assert len(papers) <= DEMO_RUN_BUDGET, f"{len(papers)} distinct demo runs > {DEMO_RUN_BUDGET}"
    assert len(zoo - papers) <= ZOO_EXTRA_RUNS, len(zoo - papers)
    extra = runs(n for n in names if n.startswith("beyond/")) - papers - zoo
    assert len(extra) <= BEYOND_EXTRA_RUNS, sorted(extra)
    added = {
        (s.method, s.seed, dict(s.method_options).get("r"))
        for n in BEYOND_LORA
        for s in load_recipe(n).specs("demo")
        if s.run_id in extra
    }
    assert added <= {("lora", seed, 64) for seed in range(5)}, added


@pytest.mark.parametrize("scale", ["demo", "paper"])
def test_the_zoo_recipes_draw_the_same_runs(scale):
    """One grid of runs: all five draw the same runs, at demo scale 5 seeds (the Brunner-Munzel
    test decides from 5 vs 5, issue #45), at paper scale 8 (the spread test's 4 seed pairs)."""
    runs = {name: {s.run_id for s in load_recipe(name).specs(scale)} for name in ZOO}
    assert all(r == runs[ZOO[0]] for r in runs.values())
    seeds = {s.seed for s in load_recipe(ZOO[0]).specs(scale)}
    assert seeds == set(range(8 if scale == "paper" else 5))
    methods = {s.method for s in load_recipe(ZOO[0]).specs(scale)}
    assert methods == {"full", "houlsby", "pfeiffer", "lora", "prefix", "ia3"}


def test_zoo_methods_take_their_calibrated_rate():
    """Each added method's demo rate is a point of the calibration grid or its one extension
    (recipes/README.md, "PEFT zoo"), and the zoo's full and houlsby runs are figure 2's."""
    lr = load_defaults()["demo"]["lr"]
    for method in ("pfeiffer", "lora", "prefix", "ia3"):
        assert lr[method] in [*DEMO_LR_GRID, 1.25e-2], (method, lr.get(method))
    zoo = {s.run_id for s in load_recipe("peft/zoo").specs("demo") if s.method in ("full", "houlsby")}
    assert zoo <= {s.run_id for s in load_recipe("han2021/fig2").specs("demo")}


def test_demo_learning_rates_are_on_the_shared_grid():
    """Each method's demo rate is one of the grid both methods are compared on (He fig 4), so the
    figures that compare methods at their own rates reuse He fig 4's runs."""
    lr = load_defaults()["demo"]["lr"]
    assert {lr["houlsby"], lr["full"]} <= set(DEMO_LR_GRID), lr
    grid = load_recipe("he2021/fig4").specs("demo")
    assert {(s.method, s.lr) for s in grid} == {(m, r) for m in ("houlsby", "full") for r in DEMO_LR_GRID}


def test_demo_recipes_share_the_demo_commands_runs():
    """`robustkit demo` and the recipes name the same runs, so neither trains them twice."""
    union = {s.run_id for name in REQUIRED for s in load_recipe(name).specs("demo")}
    assert {s.run_id for s in demo_specs()} <= union


def test_method_learning_rates_come_from_the_scale_defaults():
    lr = load_defaults()["demo"]["lr"]
    specs = load_recipe("houlsby2019/fig3-4").specs("demo")
    assert {(s.method, s.lr) for s in specs} == {(m, lr[m]) for m in ("houlsby", "full", "topk", "layernorm")}
    explicit = load_recipe("he2021/fig4").specs("demo")  # a grid that sets lr keeps it
    assert {s.lr for s in explicit if s.method == "full"} == set(DEMO_LR_GRID)


def test_paper_scale_scores_han_after_the_fixed_budget_and_he_on_a_held_out_split():
    """Han et al. report the dev score after training (never a selection on that split); He et
    al. select on validation and report on test (appendix A.2)."""
    for name in ("han2021/fig2", "han2021/fig4", "han2021/table1"):
        values = _figure_values(name, "paper")
        assert values["checkpoint"] == "last" and values["split"] == "validation", name
    for name in ("he2021/fig3", "he2021/fig4", "he2021/table2", "he2021/table5", "he2021/table7"):
        values = _figure_values(name, "paper")
        assert values["checkpoint"] == "best" and values["split"] == "test", name


def _figure_values(name: str, scale: str) -> dict:
    """Every parameter of the recipe's figure at ``scale`` (the recipe's over the defaults)."""
    from robustkit import figures

    recipe = load_recipe(name)
    return figures.get(recipe.figure).resolve(**recipe.figure_params(scale))


def test_he_fig4_keeps_the_training_sizes_apart():
    recipe = load_recipe("he2021/fig4")
    assert {s.train_size for s in recipe.specs("paper")} == {1000, 5000}
    assert all("train_size" in c.within and "train_size" not in c.pooled for c in recipe.claims)


def test_he_table2_builds_only_cells_with_1k_validation_examples_left():
    """STS-B has 5,749 training examples: 5k + 1k validation cannot be drawn (dropped)."""
    cells = {(s.task, s.train_size) for s in load_recipe("he2021/table2").specs("paper")}
    assert ("stsb", 1000) in cells and ("stsb", 5000) not in cells
    assert not {("mrpc", 5000), ("rte", 5000)} & cells


def test_houlsby_accuracy_on_cola_and_the_lr_sweep():
    for name in (
        "houlsby2019/fig3",
        "houlsby2019/fig3-4",
        "houlsby2019/fig6-ablation",
        "houlsby2019/fig6-init-std",
        "mohebbi/fig8",
    ):
        assert _figure_values(name, "paper")["metric"] == "accuracy", name
    specs = load_recipe("houlsby2019/fig3-4").specs("paper")
    assert {s.lr for s in specs} == {3e-5, 3e-4, 3e-3}
    assert {s.adapter_size for s in specs if s.method == "houlsby"} == {2**n for n in range(10)}


def test_unknown_recipe_lists_the_known_ones():
    with pytest.raises(RecipeError, match=r"unknown recipe 'han2021/fig99'.*han2021/fig2"):
        load_recipe("han2021/fig99")


def test_bad_recipe_names_the_file_and_key(tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "f.toml").write_text(
        'title = "t"\nfigure = "rsa"\noutput = "o.pdf"\ncolour = 1\n[demo.grid]\nseed = [0]\n'
    )
    with pytest.raises(RecipeError, match=r"f.toml: unknown key\(s\) \['colour'\]"):
        load_recipe("p/f", tmp_path)
    (tmp_path / "p" / "g.toml").write_text('title = "t"\nfigure = "rsa"\noutput = "o.pdf"\n[demo]\ngrids = []\n')
    with pytest.raises(RecipeError, match=r"unknown key\(s\) \['grids'\] in \[demo\]"):
        load_recipe("p/g", tmp_path)
    (tmp_path / "p" / "h.toml").write_text('title = "t"\nfigure = "rsa"\noutput = "o.pdf"\n[demo.grid]\nseed = [0]\n')
    with pytest.raises(RecipeError, match=r"no 'paper' scale"):
        load_recipe("p/h", tmp_path).specs("paper")
    (tmp_path / "p" / "i.toml").write_text(
        'title = "t"\nfigure = "rsa"\nparams = { tokenz = 5 }\noutput = "o.pdf"\n[demo.grid]\nseed = [0]\n'
    )
    with pytest.raises(RecipeError, match=r"i.toml: figure 'rsa' has no parameter\(s\) \['tokenz'\]"):
        load_recipe("p/i", tmp_path)
    (tmp_path / "p" / "j.toml").write_text(
        'title = "t"\nfigure = "rsa"\noutput = "o.pdf"\n[demo]\nparams = { tokens = "many" }\n[demo.grid]\nseed = [0]\n'
    )
    with pytest.raises(RecipeError, match=r"j.toml: figure 'rsa': parameter 'tokens'"):
        load_recipe("p/j", tmp_path)


@pytest.fixture(scope="module")
def recipes_and_plan():
    """Every shipped recipe and its decidability plan at both scales (~20 CPU-seconds: the exact
    null distributions of the largest pooled cells and the spread test's power)."""
    from robustkit.verdicts.decidability import plan

    recipes = [load_recipe(name) for name in list_recipes()]
    return recipes, plan(recipes)


def test_every_claim_can_be_decided_at_its_runs(recipes_and_plan):
    """A claim whose exact test cannot reach alpha with the runs its recipe trains is an error of
    the recipe (issue #26), at every scale it is judged at (``scales``); those left out say why."""
    recipes, table = recipes_and_plan
    judged = table[table["judged"]]
    assert len(judged) > 100 and judged["decidable"].all(), judged[~judged["decidable"]][
        ["recipe", "scale", "claim", "cell", "n_a", "n_b"]
    ]
    # a claim left out at a scale its recipe trains says why: the rule "judged scales" of robustkit.check


def test_every_claim_says_the_papers_effect_or_why_there_is_none():
    """Issue #26: the power at the effect the paper reports needs that effect; every shipped claim
    quotes the numbers it comes from, or says "not reported" and why, and an effect given per
    cell names cells its recipe has."""
    from robustkit.verdicts.decidability import claim_sizes
    from robustkit.verdicts.spec import NOT_REPORTED

    reported = 0
    for recipe in (load_recipe(name) for name in list_recipes()):
        for claim in recipe.claims:
            where = (recipe.name, claim.id)
            assert claim.paper_effect_source, where
            if claim.paper_effect is None:
                assert claim.paper_effect_source.startswith(NOT_REPORTED), where
                continue
            reported += 1
            assert any(ch.isdigit() for ch in claim.paper_effect_source), where
            if isinstance(claim.paper_effect, dict):
                cells = {cell for scale in recipe.scales for cell, _, _ in claim_sizes(recipe, claim, scale)}
                assert set(claim.paper_effect) <= cells, (where, set(claim.paper_effect) - cells)
    assert reported >= 10


README_BEGIN = "<!-- generated: robustkit claims --plan --markdown (edit the recipes, not this table) -->\n"
README_END = "<!-- end of generated table -->"


@pytest.mark.slow  # the plan of every recipe: ~20 CPU-seconds, shared with the decidability check
def test_the_readme_table_is_the_plan(recipes_and_plan):
    """recipes/README.md's table of detectable effects and power at the paper's effect is
    ``robustkit claims --plan --markdown``: a recipe, test or paper effect that changes it makes
    the doc stale, and this fails until it is regenerated (``python tools/plan_table.py``, which
    writes it: no one edits it by hand)."""
    from robustkit.verdicts.decidability import markdown

    recipes, table = recipes_and_plan
    text = (RECIPE_DIR / "README.md").read_text()
    shown = text[text.index(README_BEGIN) + len(README_BEGIN) : text.index(README_END)]
    assert shown == markdown(table, recipes), "regenerate it: python tools/plan_table.py"


def test_the_pooled_corpus_is_said():
    """Issue #26: rt and polarity are one corpus; a figure that pools them says so (the tally of
    runs shared between claims is robustkit.verdicts.evidence's, tests/test_evidence.py)."""
    from robustkit.verdicts.reproduce import one_corpus

    assert one_corpus(["polarity", "rt"]).startswith("; polarity and rt are one corpus")
    assert one_corpus(["rt", "rte"]) == ""


def test_a_plan_counts_disjoint_seed_pairs_and_method_options(tmp_path):
    """A statistic of disjoint seed pairs has half as many observations as runs (per
    configuration, rounded down); a claim may group on a method option's column (``lora.r``)."""
    from robustkit.verdicts.decidability import claim_sizes

    recipe = load_recipe("beyond/curve-connectivity")
    assert claim_sizes(recipe, recipe.claims[0], "demo") == [("all", 6, 0)]  # 3 methods x 4 seeds: 2 pairs each
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "r.toml").write_text(
        'title = "t"\nfigure = "curve-connectivity"\noutput = "o.pdf"\n'
        '[[claim]]\nid = "c"\nsays = "s"\nstatistic = "curve-connectivity.barrier-drop"\ncompare = "threshold"\n'
        'a = "lora"\nvalue = 0\ndirection = "greater"\n'
        '[[claim]]\nid = "d"\nsays = "s"\nstatistic = "scores.score"\ncompare = "location"\nby = "lora.r"\n'
        'a = 4\nb = 8\ndirection = "less"\n'
        '[[demo.grid]]\nmethod = ["lora"]\nseed = [0, 1, 2, 3, 4]\nmethod_options = [{r = 4}, {r = 8}]\n'
    )
    odd = load_recipe("p/r", tmp_path)
    assert claim_sizes(odd, odd.claims[0], "demo", {}) == [("all", 4, 0)]  # 5 seeds of each rank: 2 pairs each
    assert claim_sizes(odd, odd.claims[1], "demo", {}) == [("all", 5, 5)]


def test_the_plan_table_tool_writes_between_the_markers():
    """tools/plan_table.py replaces exactly the generated table, the rest of the README as it was."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("plan_table", RECIPE_DIR.parent / "tools" / "plan_table.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert (tool.BEGIN, tool.END) == (README_BEGIN, README_END)
    readme = f"intro\n{README_BEGIN}old rows\n{README_END}\noutro\n"
    assert tool.with_table(readme, "new rows\n") == f"intro\n{README_BEGIN}new rows\n{README_END}\noutro\n"
