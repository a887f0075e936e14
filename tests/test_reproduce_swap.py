"""A paper's claim on the user's setting (issue #47 item 4): ``reproduce RECIPE --model M --data
FILE`` re-judges a recipe's claims on runs that take that model and data in place of the recipe's,
with the figure and verdicts beside the user's store and the index saying what was swapped."""

from __future__ import annotations

from sentence_store import reviews

from robustkit.cli import main
from robustkit.data import user_data
from robustkit.verdicts.recipes import load_recipe

TOY = """
title = "Seeds"
figure = "box-seeds"
params = { split = "test" }
output = "toy.pdf"

[[claim]]
id = "spread"
says = "adapters vary less than full fine-tuning over seeds"
statistic = "scores.score"
compare = "spread"
by = "method"
a = "houlsby"
b = "full"
direction = "less"

[demo.base]
model = "minilm-l6"
task = "rt"
train_size = 1000
epochs = 2
batch_size = 16
max_length = 32
adapter_size = 16
lr = 1e-3
[demo.grid]
method = ["houlsby", "full"]
seed = [0, 1]
"""


def test_every_run_of_a_swapped_recipe_takes_the_users_model_and_data(tmp_path):
    path = tmp_path / "reviews.csv"
    reviews(300).to_csv(path, index=False)
    fields = user_data.run_fields(str(path))
    recipe = load_recipe("han2021/fig2")
    swapped = recipe.swapped(model="bert-tiny", **fields)
    specs = swapped.specs("demo")
    assert len(specs) == len(recipe.specs("demo"))  # the same grid: seeds x methods
    assert {(s.model, s.task, s.train_size) for s in specs} == {("bert-tiny", "reviews", None)}  # 1,000 > the data
    assert {s.method for s in specs} == {s.method for s in recipe.specs("demo")}
    assert not {s.run_id for s in specs} & {s.run_id for s in recipe.specs("demo")}


def test_reproduce_a_recipe_on_bert_tiny_and_a_csv_end_to_end(tmp_path, capsys):
    (tmp_path / "recipes" / "toy").mkdir(parents=True)
    (tmp_path / "recipes" / "toy" / "seeds.toml").write_text(TOY)
    reviews(300).to_csv(tmp_path / "reviews.csv", index=False)
    store, figures = tmp_path / "mine", tmp_path / "mine-figures"
    argv = ["reproduce", "toy/seeds", "--recipe-dir", str(tmp_path / "recipes"), "--model", "bert-tiny"]
    assert main([*argv, "--data", str(tmp_path / "reviews.csv")]) == 2  # no store of its own: refused
    assert "their own --store" in capsys.readouterr().err
    data = ["--data", str(tmp_path / "reviews.csv")]
    assert main([*argv, *data, "--store", str(store), "--figures", str(figures), "--jobs", "1"]) == 0
    runs = sorted(p.name for p in store.iterdir() if p.is_dir() and not p.name.startswith("."))  # not swaps.json
    assert len(runs) == 4 and all(r.startswith("reviews-") and "-bert-tiny-" in r for r in runs)
    assert (figures / "toy.pdf").is_file()
    index = (figures / "README.md").read_text()
    assert "**Swapped:**" in index and "model = bert-tiny" in index and "task = reviews" in index
    assert "bert-tiny on reviews (in place of minilm-l6 on rt)" in index
    verdicts = (figures / "claims.csv").read_text()
    assert "toy/seeds" in verdicts and "spread" in verdicts
