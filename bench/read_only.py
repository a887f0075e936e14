"""Read-only commands: how long ``runs``, ``stats`` and ``claims`` take on stores of finished runs.

Issue #57 item 4: ``robustkit runs`` took 5.7 s of CPU on a 4-run store because reading a table
imported torch and transformers; the target is ``runs`` on a 100-run store under 1.5 s on an
idle core. This builds a synthetic store of ``--runs`` finished fine-tuning runs without
training anything (each a manifest as training writes it, with final metrics, the majority-class
baseline and outcomes, and no checkpoint files: the store code reads nothing else for these two
commands), then times, each the median wall seconds of ``--repeat`` fresh processes:

- ``python -c pass`` (the interpreter alone) and ``robustkit --help`` (the CLI's own imports):
  the baselines;
- ``robustkit runs STORE``;
- ``robustkit stats STORE --no-aso`` (ASO, deepsig's bootstrap, is work that grows with the
  runs, not imports: left out so that the number is comparable across stores);
- ``robustkit claims he2021/fig4 --store S --no-settle`` on the recipe's 16 demo runs (a claim on
  ``scores.score``; settling is simulation, work not imports): on a plain store (minilm-l6 on the
  embedded ``rt``), and on the store a swapped ``reproduce he2021/fig4 --model bert-tiny --data
  mine.csv`` leaves (a three-class CSV of 240 rows, the swap recorded in ``swaps.json`` as
  reproduce records it, which ``claims`` applies by itself);

and prints each with its CPU seconds (user + system, which a busy machine inflates less than
wall time), its wall time's ratio to ``robustkit --help`` and whether torch, transformers or
datasets was imported (``-X importtime`` of the same command). Every number comes from the same run on the
same machine and load; only the ratios compare across runs.

    .venv/bin/python bench/read_only.py [--runs 100] [--repeat 3]

A baseline is the same script run from a clone of an earlier commit (``python -m robustkit`` runs
the code of the folder the script lies in).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
METHODS = ("full", "houlsby", "lora", "prefix")
HEAVY = ("torch", "transformers", "datasets")
RECIPE = "he2021/fig4"


def write_store(store: Path, n_runs: int) -> Path:
    """``n_runs`` finished fine-tuning runs of minilm-l6 on rt, the methods in turn and seeds
    0, 1, ...: manifests only, their accuracies spread over 0.70-0.90 (test split of 1066)."""
    from robustkit.store.manifest import write_manifest

    store.mkdir(parents=True, exist_ok=True)
    for i in range(n_runs):
        method, seed = METHODS[i % len(METHODS)], i // len(METHODS)
        run_id = f"rt-{method}-s{seed}"
        accuracy = 0.70 + 0.20 * ((i * 37) % 100) / 100
        final = {
            split: {"accuracy": accuracy - (0.01 if split == "test" else 0.0), "top_class_share": 0.52}
            for split in ("validation", "test")
        }
        (store / run_id).mkdir()
        write_manifest(
            store / run_id,
            {
                "run_id": run_id,
                "kind": "finetune",
                "spec": {"model": "minilm-l6", "task": "rt", "method": method, "seed": seed, "lr": 1e-4},
                "status": "complete",
                "main_metric": "accuracy",
                "checkpoints": {},
                "splits": {"validation": 1066, "test": 1066},
                "final": {"best": final, "last": final},
                "outcome": {c: {"validation": "ok", "test": "ok"} for c in ("best", "last")},
                "baselines": {s: {"n": 1066, "accuracy": 0.5} for s in ("validation", "test")},
            },
        )
    return store


def write_run(run_dir: Path, spec: dict, accuracy: float) -> None:
    """A finished fine-tuning run of ``spec`` (a resolved RunSpec as a dict): its manifest (final
    ``accuracy`` on 1000 validation and test examples, the majority class at 0.5) and the dev
    history of a run whose loss has stopped falling; no checkpoint files."""
    import pandas as pd

    from robustkit.store.manifest import write_manifest

    run_dir.mkdir(parents=True)
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
            "run_id": run_dir.name,
            "kind": "finetune",
            "spec": spec,
            "status": "complete",
            "main_metric": "accuracy",
            "checkpoints": {},
            "splits": {"validation": 1000, "test": 1000},
            "final": {"best": final, "last": final},
            "outcome": {c: {"validation": "ok", "test": "ok"} for c in ("best", "last")},
            "baselines": {split: {"n": 1000, "accuracy": 0.5} for split in ("validation", "test")},
        },
    )


def write_recipe_store(store: Path, recipe: str, data: Path | None = None) -> Path:
    """``recipe``'s demo runs, finished (:func:`write_run`, accuracies 0.70-0.90), in ``store``;
    with ``data`` (a CSV), as ``reproduce RECIPE --model bert-tiny --data DATA`` leaves them, the
    swap recorded in ``swaps.json``."""
    from robustkit.verdicts import reproduce
    from robustkit.verdicts.recipes import load_recipe

    chosen = load_recipe(recipe)
    if data is not None:
        from robustkit.data import user_data

        chosen = chosen.swapped(model="bert-tiny", **user_data.run_fields(str(data)))
    specs = chosen.specs("demo")
    for i, spec in enumerate(specs):
        write_run(store / spec.run_id, spec.to_dict(), 0.70 + 0.20 * ((i * 7) % 16) / 16)
    if data is not None:
        reproduce._record_swaps(store, [chosen], "demo", {chosen.name: specs})
    return store


def write_user_data(path: Path, rows: int = 240) -> Path:
    """A CSV of ``rows`` short texts in three classes with word labels (the user's own data)."""
    import pandas as pd

    words, topics = ("good", "dull", "odd"), ("cats", "dogs", "ships", "trains")
    pd.DataFrame(
        {
            "text": [f"a {words[i % 3]} film about {topics[i % 4]} number {i}" for i in range(rows)],
            "label": [("pos", "neg", "mixed")[i % 3] for i in range(rows)],
        }
    ).to_csv(path, index=False)
    return path


def seconds(code: list[str], repeat: int) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (user + system, which a busy machine inflates
    less) of ``python code...`` in a fresh process, ``repeat`` times."""
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run([sys.executable, *code], cwd=ROOT, capture_output=True, text=True)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(code)} failed:\n{done.stderr[-2000:]}")
    return statistics.median(walls), statistics.median(cpus)


def heavy_imports(code: list[str]) -> list[str]:
    """Which of :data:`HEAVY` ``python -X importtime code...`` imports."""
    done = subprocess.run([sys.executable, "-X", "importtime", *code], cwd=ROOT, capture_output=True, text=True)
    names = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    return [name for name in HEAVY if name in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100, help="runs in the synthetic store")
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per command (the median is shown)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = str(write_store(Path(folder) / "runs", args.runs))
        plain = str(write_recipe_store(Path(folder) / "plain", RECIPE))
        swapped = str(write_recipe_store(Path(folder) / "swapped", RECIPE, write_user_data(Path(folder) / "mine.csv")))
        claims = ["-m", "robustkit", "claims", RECIPE, "--no-settle", "--store"]
        commands = {
            "python -c pass": ["-c", "pass"],
            "robustkit --help": ["-m", "robustkit", "--help"],
            f"robustkit runs ({args.runs} runs)": ["-m", "robustkit", "runs", store],
            f"robustkit stats --no-aso ({args.runs} runs)": ["-m", "robustkit", "stats", store, "--no-aso"],
            f"robustkit claims {RECIPE} (plain, 16 runs)": [*claims, plain],
            f"robustkit claims {RECIPE} (swapped, user data)": [*claims, swapped],
        }
        # one untimed run first: the store's hash cache and Python's bytecode are then written,
        # as they are for any command after the first
        for code in commands.values():
            seconds(code, 1)
        times = {name: seconds(code, args.repeat) for name, code in commands.items()}
        heavy = {name: heavy_imports(code) for name, code in commands.items()}
    base = times["robustkit --help"][0]
    print(f"median of {args.repeat} fresh processes each; {args.runs}-run synthetic store")
    print(f"{'command':<50} {'wall s':>7} {'x --help':>9} {'CPU s':>6}  imports")
    for name, (wall, cpu) in times.items():
        print(f"{name:<50} {wall:7.2f} {wall / base:9.1f} {cpu:6.2f}  {', '.join(heavy[name]) or '-'}")


if __name__ == "__main__":
    main()
