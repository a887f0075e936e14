"""Read-only commands answer in about a second (issue #57 item 4): ``runs``, ``stats``, ``claims``
on a store whose statistics need no model, ``verify`` and ``plot`` of a figure whose frames are
in the store, each in a fresh interpreter, import neither torch nor transformers (seconds each to
import on 2 cores: ``runs`` on a 4-run store took 5.7 s of CPU when it did).

The store is written by hand, as training writes it, without training: he2021/fig4's demo runs
(a claim judged on ``scores.score``), each a manifest with final metrics, baselines and outcomes,
its dev history and two checkpoints of a few bytes listed with their sha256 (``verify`` hashes them, nothing
loads them). A claim on a statistic that runs a model (similarity, landscape) imports torch to
compute it: that path is not this test's.

A store of built-in-task runs is read without ``datasets`` either (a second to import). A store
a swapped ``reproduce --model bert-tiny --data mine.csv`` wrote (its swap in ``swaps.json``,
applied by ``claims`` itself) is read the same way without torch or transformers; its user data
is read to check that it is still what the runs trained on, which builds ``datasets`` splits.

The wall-clock target (``runs`` on 100 runs under 1.5 s on an idle core) is measured by
``bench/read_only.py``, not asserted here: a shared machine's load would make it flaky.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers")
DATA = "datasets"  # not imported where no user data is read
RECIPE = "he2021/fig4"

# robustkit.cli.main(ARGS...) as `robustkit ARGS...` runs it, then its exit code and the heavy
# modules and `datasets` it imported, as the last line of stderr.
_PROBE = f"""
import json, sys
from robustkit.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print(json.dumps({{"code": code, "heavy": [m for m in {(*HEAVY, DATA)!r} if m in sys.modules]}}), file=sys.stderr)
"""


def write_finished_run(store: Path, spec: dict, accuracy: float) -> Path:
    """A complete fine-tuning run of ``spec`` (a RunSpec as a dict) as training leaves it, without
    its weights: the manifest with ``accuracy`` on validation and test (1000 examples each, the
    majority class at 0.5), checkpoints ``best`` and ``last`` of a few bytes each and the history
    of a run whose dev loss has stopped falling."""
    import pandas as pd

    from robustkit.specs.spec import RunSpec
    from robustkit.store.atomic import sha256_file
    from robustkit.store.manifest import write_manifest

    run_id = RunSpec(**spec).run_id
    run_dir = store / run_id
    checkpoints = {}
    for step, name in ((10, "best"), (20, "last")):
        folder = run_dir / "checkpoints" / name
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(f"{run_id} {name}".encode())
        checkpoints[name] = {"step": step, "files": {"model.safetensors": sha256_file(folder / "model.safetensors")}}
    # the dev curve: loss falls, then stays (a converged run), accuracy rises to its final value
    pd.DataFrame(
        [
            {"step": step, "epoch": step / 20, "split": "validation", "metric": metric, "value": value}
            for step, loss in ((5, 0.69), (10, 0.50), (15, 0.45), (20, 0.45))
            for metric, value in (("loss", loss), ("accuracy", accuracy * (1.45 - loss)))
        ]
    ).to_parquet(run_dir / "history.parquet")
    final = {split: {"accuracy": accuracy, "top_class_share": 0.55} for split in ("validation", "test")}
    write_manifest(
        run_dir,
        {
            "run_id": run_id,
            "kind": "finetune",
            "spec": spec,
            "status": "complete",
            "main_metric": "accuracy",
            "checkpoints": checkpoints,
            "splits": {"validation": 1000, "test": 1000},
            "final": {"best": final, "last": final},
            "outcome": {c: {"validation": "ok", "test": "ok"} for c in ("best", "last")},
            "baselines": {split: {"n": 1000, "accuracy": 0.5} for split in ("validation", "test")},
        },
    )
    return run_dir


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """he2021/fig4's demo runs, each finished with an accuracy of its own (0.70-0.90)."""
    from robustkit.verdicts.recipes import load_recipe

    store = tmp_path_factory.mktemp("read-only") / "runs"
    store.mkdir()
    for i, spec in enumerate(load_recipe(RECIPE).specs("demo")):
        write_finished_run(store, spec.to_dict(), 0.70 + 0.20 * ((i * 7) % 16) / 16)
    return store


def _run(args: list[str], prelude: str = "") -> tuple[dict, subprocess.CompletedProcess]:
    done = subprocess.run(
        [sys.executable, "-c", prelude + _PROBE, *args], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    lines = done.stderr.strip().splitlines()
    return (json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}), done


def _commands(store: Path, pdf: Path) -> dict[str, tuple[list[str], int]]:
    """Each read-only verb's arguments and the exit code it must give on ``store``."""
    return {
        "runs": (["runs", str(store)], 0),
        "stats": (["stats", str(store), "--select", "lr=1e-4"], 0),
        "claims": (["claims", RECIPE, "--store", str(store), "--no-settle", "--format", "csv"], 0),
        # the device is checked before the verb starts: cpu is always there, without torch
        "claims on cpu": (["claims", RECIPE, "--store", str(store), "--no-settle", "--device", "cpu"], 0),
        "verify": (["verify", str(store)], 0),
        # twice: the first computes the figure's frames, the second reads them back
        "plot": (["plot", "box-seeds", str(store), "--select", "lr=1e-4", "-o", str(pdf)], 0),
        "plot again": (["plot", "box-seeds", str(store), "--select", "lr=1e-4", "-o", str(pdf)], 0),
    }


@pytest.mark.parametrize("verb", ["runs", "stats", "claims", "claims on cpu", "verify", "plot", "plot again"])
def test_read_only_verbs_import_no_model_library(store, tmp_path_factory, verb):
    pdf = tmp_path_factory.getbasetemp() / "read-only-box.pdf"
    args, code = _commands(store, pdf)[verb]
    report, done = _run(args)
    assert report.get("code") == code, done.stdout[-1000:] + done.stderr[-3000:]
    assert report["heavy"] == [], f"`robustkit {' '.join(args)}` imports {report['heavy']}"  # datasets neither
    if verb == "claims":  # the claim was judged on the runs' scores, not left without any
        import pandas as pd

        table = pd.read_csv(io.StringIO(done.stdout.split("\n\n")[0])).set_index("claim")
        assert table.loc["stable-across-lrs", "n"] == "8 vs 8", done.stdout
        assert "not computable" not in table.loc["stable-across-lrs", "reason"], done.stdout
    if verb == "runs":  # every run listed
        run_ids = [p.name for p in store.iterdir() if not p.name.startswith(".")]
        assert len(run_ids) == 16 and all(run_id in done.stdout for run_id in run_ids), done.stdout


def test_probe_sees_a_model_library(store):
    # the check above passes on an empty list: make sure the probe does see an imported library
    report, done = _run(["runs", str(store)], prelude="import transformers\n")
    assert report.get("code") == 0 and "transformers" in report["heavy"], done.stderr[-2000:]


@pytest.fixture(scope="module")
def swapped_store(tmp_path_factory) -> Path:
    """he2021/fig4's demo runs as ``reproduce he2021/fig4 --model bert-tiny --data mine.csv`` leaves
    them (written by hand, nothing trained): on a three-class CSV of the user's (word labels),
    their swap recorded in ``swaps.json`` as reproduce records it."""
    import pandas as pd

    from robustkit.data import user_data
    from robustkit.verdicts import reproduce
    from robustkit.verdicts.recipes import load_recipe

    folder = tmp_path_factory.mktemp("read-only-swapped")
    data = folder / "mine.csv"
    words, topics = ("good", "dull", "odd"), ("cats", "dogs", "ships", "trains")
    pd.DataFrame(
        {
            "text": [f"a {words[i % 3]} film about {topics[i % 4]} number {i}" for i in range(240)],
            "label": [("pos", "neg", "mixed")[i % 3] for i in range(240)],
        }
    ).to_csv(data, index=False)
    recipe = load_recipe(RECIPE).swapped(model="bert-tiny", **user_data.run_fields(str(data)))
    specs = recipe.specs("demo")
    store = folder / "runs"
    store.mkdir()
    for i, spec in enumerate(specs):
        write_finished_run(store, spec.to_dict(), 0.70 + 0.20 * ((i * 7) % 16) / 16)
    reproduce._record_swaps(store, [recipe], "demo", {recipe.name: specs})
    return store


@pytest.mark.parametrize("verb", ["claims", "runs", "stats", "verify", "plot", "plot again"])
def test_read_only_verbs_on_a_swapped_user_data_store_import_no_model_library(swapped_store, verb):
    pdf = swapped_store.parent / "read-only-swapped-box.pdf"
    args, code = _commands(swapped_store, pdf)[verb]
    report, done = _run(args)
    assert report.get("code") == code, done.stdout[-1000:] + done.stderr[-3000:]
    heavy = [m for m in report["heavy"] if m in HEAVY]
    assert heavy == [], f"`robustkit {' '.join(args)}` imports {heavy}"
    if verb == "claims":  # judged on the swapped runs, the swap applied from the store's record
        import pandas as pd

        assert "applied the swap `reproduce` recorded in" in done.stderr, done.stderr[-2000:]
        table = pd.read_csv(io.StringIO(done.stdout.split("\n\n")[0])).set_index("claim")
        assert table.loc["stable-across-lrs", "n"] == "8 vs 8", done.stdout
