"""`claims` on any store a swapped `reproduce` wrote (issue #57 items 1 and 6).

``reproduce RECIPE --model M --data FILE --store S`` records the swap in ``S/swaps.json``
(:mod:`robustkit.store.swaps`); ``claims RECIPE --store S`` applies it by itself and says so in one
line, so it judges the runs reproduce trained (not "no complete run matches" the recipe's own), and
the index's commands remake the figures as they were made. ``reproduce`` announces each stage
(no silence between them)."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest
from sentence_store import reviews
from test_reproduce_swap import TOY

from robustkit.data import user_data
from robustkit.errors import RobustkitError, StoreError
from robustkit.store import swaps
from robustkit.store.folders import MANIFEST
from robustkit.verdicts import reproduce as reproduce_module
from robustkit.verdicts.recipes import load_defaults, load_recipe


@pytest.fixture
def setting(tmp_path) -> dict:
    """A recipe folder with the toy recipe, two data files and an empty store."""
    (tmp_path / "recipes" / "toy").mkdir(parents=True)
    (tmp_path / "recipes" / "toy" / "seeds.toml").write_text(TOY)  # 2 seeds x 2 methods, bert-tiny learns it
    reviews(300).to_csv(tmp_path / "reviews.csv", index=False)
    reviews(320).to_csv(tmp_path / "other.csv", index=False)
    (tmp_path / "store").mkdir()
    return {"recipes": tmp_path / "recipes", "store": tmp_path / "store", "root": tmp_path}


def _record(setting: dict, data: str, model: str = "bert-tiny") -> list[str]:
    """Record the swap reproduce records (without training), returning its run ids."""
    swap = {"model": model, **user_data.run_fields(str(setting["root"] / data))}
    recipe = load_recipe("toy/seeds", setting["recipes"]).swapped(**swap)
    specs = recipe.specs("demo", load_defaults(setting["recipes"]))
    if not (setting["store"] / specs[0].run_id).exists():
        before = swaps.read_swaps(setting["store"])
        reproduce_module._record_swaps(setting["store"], [recipe], "demo", {recipe.name: specs})
        assert swaps.read_swaps(setting["store"]) == before  # no run of it there (a model refused): no record
        (setting["store"] / specs[0].run_id).mkdir()
        (setting["store"] / specs[0].run_id / MANIFEST).write_text("{}")  # a run started (a sweep cut short)
    reproduce_module._record_swaps(setting["store"], [recipe], "demo", {recipe.name: specs})
    return [spec.run_id for spec in specs]


def test_the_record_keeps_one_entry_per_swap(setting):
    store = setting["store"]
    assert swaps.read_swaps(store) == []
    first = _record(setting, "reviews.csv")
    _record(setting, "reviews.csv")  # the same swap again: replaced, not added
    (entry,) = swaps.read_swaps(store)
    assert entry["swap"]["model"] == "bert-tiny" and entry["swap"]["task"] == "reviews"
    assert Path(entry["swap"]["data_dir"]).is_absolute() and entry["run_ids"] == first
    assert entry["data_fingerprint"].startswith("user:sha256:") and len(entry["data_sha256"]) == 64
    assert "--model bert-tiny --data " in entry["command"] and "--store" in entry["command"]
    _record(setting, "other.csv")
    assert len(swaps.swaps_of(store, "toy/seeds", "demo")) == 2 and swaps.swaps_of(store, "toy/seeds", "cpu") == []
    swaps.swap_file(store).write_text("{not json")
    with pytest.raises(StoreError, match="is no swap record"):
        swaps.read_swaps(store)


def test_claims_applies_the_recorded_swap_and_says_so(setting, caplog):
    recorded = _record(setting, "reviews.csv")
    with caplog.at_level(logging.INFO, logger="robustkit"):
        (recipe,) = reproduce_module.claim_recipes(setting["store"], ["toy/seeds"], "demo", setting["recipes"])
    assert [s.run_id for s in recipe.specs("demo", load_defaults(setting["recipes"]))] == recorded
    (line,) = [r.getMessage() for r in caplog.records if "swap" in r.getMessage()]
    assert line.startswith("toy/seeds: applied the swap `reproduce` recorded in ") and "model bert-tiny" in line
    plain = reproduce_module.claim_recipes(setting["root"] / "recipes", ["toy/seeds"], "demo", setting["recipes"])
    assert plain[0].swap == ()  # a store without a record: the recipe as written


def test_two_swaps_of_one_recipe_are_never_picked_silently(setting, caplog):
    _record(setting, "reviews.csv")
    other = _record(setting, "other.csv")
    with pytest.raises(RobustkitError, match=r"from 2 swaps: \(1\) model bert-tiny, data .*reviews.csv.*say which"):
        reproduce_module.claim_recipes(setting["store"], ["toy/seeds"], "demo", setting["recipes"])
    chosen = {"model": "bert-tiny", **user_data.run_fields(str(setting["root"] / "other.csv"))}
    (recipe,) = reproduce_module.claim_recipes(setting["store"], ["toy/seeds"], "demo", setting["recipes"], chosen)
    assert [s.run_id for s in recipe.specs("demo", load_defaults(setting["recipes"]))] == other
    with pytest.raises(RobustkitError, match="from 2 swaps"):  # --model alone does not tell them apart
        reproduce_module.claim_recipes(
            setting["store"], ["toy/seeds"], "demo", setting["recipes"], {"model": "bert-tiny"}
        )


def test_a_given_swap_that_differs_overrides_the_record_with_a_note(setting, caplog):
    _record(setting, "reviews.csv")
    other = load_recipe("toy/seeds", setting["recipes"]).swapped(
        **{**swaps.read_swaps(setting["store"])[0]["swap"], "model": "minilm-l6"}
    )
    stored = setting["store"] / other.specs("demo", load_defaults(setting["recipes"]))[0].run_id
    stored.mkdir()
    (stored / MANIFEST).write_text("{}")  # one of its runs is there (claims then judges what is)
    with caplog.at_level(logging.INFO, logger="robustkit"):
        (recipe,) = reproduce_module.claim_recipes(
            setting["store"], ["toy/seeds"], "demo", setting["recipes"], {"model": "minilm-l6"}
        )
    assert dict(recipe.swap)["model"] == "minilm-l6" and dict(recipe.swap)["task"] == "reviews"
    assert any("over the swap `reproduce` recorded (model bert-tiny" in r.getMessage() for r in caplog.records)


def test_a_given_swap_of_no_stored_run_is_refused(setting):
    _record(setting, "reviews.csv")
    with pytest.raises(
        RobustkitError,
        match=r"holds no run of toy/seeds with model nosuch-model, data .*reviews.csv .*\(its runs of it have",
    ):
        reproduce_module.claim_recipes(
            setting["store"], ["toy/seeds"], "demo", setting["recipes"], {"model": "nosuch-model"}
        )


def test_a_moved_data_file_is_named_and_found_by_its_content(setting):
    recorded = _record(setting, "reviews.csv")
    moved = setting["root"] / "moved.csv"
    (setting["root"] / "reviews.csv").rename(moved)
    with pytest.raises(RobustkitError, match=r"reviews.csv, the data toy/seeds's runs in .* is not there any more"):
        reproduce_module.claim_recipes(setting["store"], ["toy/seeds"], "demo", setting["recipes"])
    given = {"model": "bert-tiny", "data_dir": str(moved), "task": "reviews"}  # same content: the same record
    (recipe,) = reproduce_module.claim_recipes(setting["store"], ["toy/seeds"], "demo", setting["recipes"], given)
    assert [s.run_id for s in recipe.specs("demo", load_defaults(setting["recipes"]))] == recorded


def test_the_index_of_a_swap_remakes_its_figures(setting):
    figures = setting["root"] / "figures"
    figures.mkdir()
    (figures / "toy.pdf").write_bytes(b"%PDF-1.4\n")
    data = str(setting["root"] / "reviews.csv")
    swap = {"model": "bert-tiny", **user_data.run_fields(data)}
    index = reproduce_module.write_index(
        figures, "demo", setting["recipes"], store=setting["store"], swap=swap
    ).read_text()
    made = f"robustkit reproduce toy/seeds --scale demo --model bert-tiny --data {data} --store {setting['store']}"
    assert f"Made by `{made} --figures {figures}`" in index and "--all" not in index
    row = next(line for line in index.splitlines() if line.startswith("| [toy.pdf]"))
    assert row.endswith(f"| `{made}` |")


def test_each_stage_of_reproduce_announces_itself(setting, monkeypatch, capsys):
    """No stage between the lines is silent for long: planning, the store check, each recipe's
    claims, its drawing and the index each say so before they start (the gaps measured by hand:
    the report of issue #57)."""
    import pandas as pd

    monkeypatch.setattr(
        reproduce_module,
        "run_sweep",
        lambda specs, *a, **k: pd.DataFrame({"run_id": [s.run_id for s in specs], "status": "complete"}),
    )
    monkeypatch.setattr(reproduce_module.tally, "verdicts", lambda *a, **k: pd.DataFrame())
    monkeypatch.setattr(reproduce_module.tally, "summary_line", lambda verdicts: "")
    monkeypatch.setattr(reproduce_module, "_draw", lambda *a, **k: {"pdf": None})
    monkeypatch.setattr(reproduce_module, "write_index", lambda *a, **k: None)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)  # a redirected log (captured stderr): timestamped lines
    reproduce_module.reproduce(
        ["toy/seeds"], store=setting["store"], figures=setting["root"] / "f", recipe_dir=setting["recipes"]
    )
    said = [line[20:] for line in capsys.readouterr().err.splitlines() if re.match(r"\d{4}-\d\d-\d\d \d\d:", line)]
    stages = ["planning the runs of 1 recipe(s)", "loading torch", "checking which of the 4 distinct run(s)"]
    stages += ["toy/seeds: judging its 1"]
    stages += ["toy/seeds: drawing box-seeds (toy.pdf)", "writing "]
    where = [next((i for i, line in enumerate(said) if line.startswith(stage)), None) for stage in stages]
    assert None not in where and where == sorted(where), said


def _robustkit(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "robustkit", *argv], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_reproduce_with_a_swap_then_claims_then_reproduce_again(setting):
    """The README's flow on the user's model and data, each command a fresh process."""
    root, recipes = setting["root"], str(setting["recipes"])
    swap = ["--model", "bert-tiny", "--data", "reviews.csv", "--store", "mine", "--jobs", "1"]
    first = _robustkit("reproduce", "toy/seeds", "--recipe-dir", recipes, *swap, cwd=root)
    assert "4 run(s) to train, 0 complete already" in first.stderr
    entry = json.loads((root / "mine" / "swaps.json").read_text())["swaps"][0]
    index = (root / "mine-figures" / "README.md").read_text()
    assert entry["command"] in index and "reproduce --all" not in index

    claims = ["claims", "toy/seeds", "--recipe-dir", recipes, "--store", "mine", "--format", "csv"]
    judged = _robustkit(*claims, cwd=root)
    assert "toy/seeds: applied the swap `reproduce` recorded in mine/swaps.json: model bert-tiny" in judged.stderr
    import io

    import pandas as pd

    table = pd.read_csv(io.StringIO(judged.stdout.split("\n\n")[0]))
    (row,) = table.to_dict("records")
    assert "not computable" not in row["reason"] and row["n"] == "2 vs 2", row  # every run reproduce trained
    assert isinstance(row["would_settle"], str) and "not estimated" not in row["would_settle"]
    # the verdict reproduce wrote is the one claims gives
    written = pd.read_csv(root / "mine-figures" / "claims.csv")
    assert written.iloc[-1]["verdict"] == row["verdict"] and written.iloc[-1]["reason"] == row["reason"]

    again = _robustkit("reproduce", "toy/seeds", "--recipe-dir", recipes, *swap, cwd=root)
    assert "0 run(s) to train, 4 complete already" in again.stderr
    assert _robustkit(*claims, cwd=root).stdout == judged.stdout


def test_a_data_file_edited_since_is_said_and_its_runs_still_judged(setting, caplog):
    recorded = _record(setting, "reviews.csv")
    reviews(310).to_csv(setting["root"] / "reviews.csv", index=False)  # ten rows more
    with caplog.at_level(logging.INFO, logger="robustkit"):
        (recipe,) = reproduce_module.claim_recipes(setting["store"], ["toy/seeds"], "demo", setting["recipes"])
    assert [s.run_id for s in recipe.specs("demo", load_defaults(setting["recipes"]))] == recorded
    assert any("reviews.csv changed since these runs trained on it" in r.getMessage() for r in caplog.records)
