"""What ``robustkit reproduce`` would train, and what it would cost, before anything is trained.

:func:`plan` counts, for the named recipes at a scale, the distinct runs each needs (a run two
recipes share is trained once, so it is counted once in the total), the runs the store already
holds (finished: complete or diverged), the models and tasks to fetch, and the examples each run
processes: training examples (steps x batch, TSP steps included) and evaluation examples (the
validation split at every evaluation point, then validation and test once per kept checkpoint).

GPU-hours and CPU-hours are **estimates**: those examples divided by a model's measured
examples/s on one GPU, from the throughput table ``bench/gpu_throughput.toml``
(``bench/trainers.py`` and ``bench/precision.py`` on that GPU), or on one CPU core from
``bench/cpu_throughput.toml`` (``bench/cpu_throughput.py``; runs train one thread each, so CPU-hours
over ``--jobs`` is the wall time on an idle machine), scaled by the run's ``max_length`` over the measured one
(cost per example taken as linear in its length: at BERT's short sequences the feed-forward
products dominate attention). A model the table has not measured gets no estimate, and the plan
says "not measured yet". Nothing here loads a model or a hub dataset: the full-data tasks' sizes
are the hub splits' (:data:`SPLIT_SIZES`); a local TSV folder's are counted.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from robustkit.specs.spec import RunSpec

# Throughput table, beside the benchmarks that fill it.
THROUGHPUT_TABLE = Path(__file__).resolve().parents[2] / "bench" / "gpu_throughput.toml"
CPU_THROUGHPUT_TABLE = THROUGHPUT_TABLE.with_name("cpu_throughput.toml")
NOT_MEASURED = "not measured yet"
# (train, validation, test) examples of the full-data splits: the GLUE hub configs nyu-mll/glue
# (train; validation = the test split robustkit scores, as the GLUE test labels are hidden) and
# the embedded tasks' fixed splits (robustkit.data.tasks).
SPLIT_SIZES = {
    "cola": (8551, 1043, 1043),
    "sst2": (67349, 872, 872),
    "mrpc": (3668, 408, 408),
    "qqp": (363846, 40430, 40430),
    "stsb": (5749, 1500, 1500),
    "mnli": (392702, 9815, 9815),
    "mnli-mm": (392702, 9832, 9832),
    "qnli": (104743, 5463, 5463),
    "rte": (2490, 277, 277),
    "wnli": (635, 71, 71),
    "rt": (10248, 1281, 1279),
    "polarity": (3200, 400, 400),
}
LOW_RESOURCE_VALIDATION = 1000  # robustkit.data.tasks.load_splits's val_size (He et al. 2021 §3.2)
KEPT_CHECKPOINTS = 2  # best and last, each scored on validation and test at the end


@dataclass(frozen=True)
class Throughput:
    """One model's measured examples/s on one GPU or CPU core (a row of a throughput table; ``gpu``
    names the device either way)."""

    model: str
    gpu: str
    train_per_s: float | None
    eval_per_s: float | None
    max_length: int
    source: str

    @property
    def measured(self) -> bool:
        return self.train_per_s is not None and self.eval_per_s is not None


def read_throughput(path: str | Path = THROUGHPUT_TABLE) -> dict[str, Throughput]:
    """The throughput table: ``[<model>]`` tables with ``gpu``, ``train_examples_per_s``,
    ``eval_examples_per_s``, ``max_length`` and ``source``; a model without the two rates is
    not measured yet."""
    with open(path, "rb") as handle:
        table = tomllib.load(handle)
    return {
        model: Throughput(
            model,
            row.get("gpu", row.get("device", NOT_MEASURED)),
            row.get("train_examples_per_s"),
            row.get("eval_examples_per_s"),
            int(row.get("max_length", 64)),
            row.get("source", ""),
        )
        for model, row in table.items()
        if isinstance(row, dict)
    }


def split_sizes(spec: RunSpec) -> tuple[int, int, int]:
    """(train, validation, test) examples of a resolved spec's splits, as robustkit.data.tasks makes them
    (a local TSV folder's are counted: it is on disk)."""
    if spec.data_dir is not None:
        from robustkit.data.tasks import load_splits

        splits = load_splits(spec.task, data_dir=spec.data_dir, train_size=spec.train_size, split_seed=spec.split_seed)
        return len(splits["train"]), len(splits["validation"]), len(splits["test"])
    train, validation, test = SPLIT_SIZES[spec.task]
    if spec.train_size is None:
        return train, validation, test
    return spec.train_size, LOW_RESOURCE_VALIDATION, validation  # the task's validation split is the test


def examples(spec: RunSpec) -> tuple[int, int]:
    """(training examples, evaluation examples) a resolved run processes (its TSP run apart)."""
    train, validation, test = split_sizes(spec)
    per_epoch = math.ceil(train / spec.batch_size)
    total = spec.epochs * per_epoch
    points = set(range(per_epoch, total + 1, per_epoch)) | {total}  # as robustkit.train.finetuning evaluates
    if spec.eval_every:
        points |= set(range(spec.eval_every, total + 1, spec.eval_every))
    return total * spec.batch_size, len(points) * validation + KEPT_CHECKPOINTS * (validation + test)


def _held(store: Path, run_id: str, tsp_step: int | None = None) -> bool:
    """Whether ``store`` holds the run finished (a TSP run: with its ``tsp-<tsp_step>`` checkpoint)."""
    from robustkit.store.folders import MANIFEST
    from robustkit.store.manifest import read_manifest
    from robustkit.store.schema import FINISHED

    if not (store / run_id / MANIFEST).exists():
        return False
    manifest = read_manifest(store / run_id)
    if tsp_step is not None:
        return f"tsp-{tsp_step}" in manifest.get("checkpoints", {})
    return manifest.get("status") in FINISHED


def run_hours(rows: pd.DataFrame, rates: dict[str, Throughput]) -> float | None:
    """Hours of ``rows`` (runs) at ``rates`` (GPU or CPU), None if a model among them has no measured throughput."""
    seconds = 0.0
    for row in rows.itertuples():
        rate = rates.get(row.model)
        if rate is None or not rate.measured:
            return None
        scale = row.max_length / rate.max_length
        seconds += scale * (row.train_examples / rate.train_per_s + row.eval_examples / rate.eval_per_s)
    return seconds / 3600


def plan(
    recipes: Sequence,
    scale: str,
    store: str | Path,
    defaults: dict | None = None,
    throughput: dict[str, Throughput] | None = None,
    cpu_throughput: dict[str, Throughput] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The runs of ``recipes`` at ``scale``, per recipe and distinct, against ``store``.

    Returns
    -------
    per_recipe : DataFrame
        One row per recipe: ``recipe, runs, shared`` (runs another chosen recipe needs too),
        ``held`` (already finished in ``store``), ``to_train``, ``train_examples``,
        ``eval_examples``, ``gpu_hours`` and ``cpu_hours`` (estimates, one GPU / one CPU core per
        run; NaN where not measured); then a ``total``
        row over the distinct runs (each counted once).
    runs : DataFrame
        One row per distinct run, TSP runs included (method ``tsp/<method>``, trained to the
        largest step any run starts from): ``run_id, model, task, method, data_dir`` (None: the
        task's own data), ``max_length, held,
        train_examples, eval_examples, recipes`` (how many chosen recipes need it).
    """
    store = Path(store)
    rates = read_throughput() if throughput is None else throughput
    cpu_rates = read_throughput(CPU_THROUGHPUT_TABLE) if cpu_throughput is None else cpu_throughput
    needed = {recipe.name: [spec.resolved() for spec in recipe.specs(scale, defaults)] for recipe in recipes}
    distinct: dict[str, dict] = {}
    members: dict[str, set[str]] = {}  # recipe -> its runs' ids, TSP runs included
    for name, specs in needed.items():
        members[name] = set()
        for spec in specs:
            if spec.run_id not in distinct:
                trained, evaluated = examples(spec)
                distinct[spec.run_id] = {
                    "run_id": spec.run_id,
                    "model": spec.model,
                    "task": spec.task,
                    "method": spec.method,
                    "data_dir": spec.data_dir,
                    "max_length": spec.max_length,
                    "held": _held(store, spec.run_id),
                    "train_examples": trained,
                    "eval_examples": evaluated,
                    "until_converged": spec.until_converged,
                    "recipes": set(),
                }
            distinct[spec.run_id]["recipes"].add(name)
            members[name].add(spec.run_id)
    # a TSP run is trained once for every run that starts from it, up to its largest step
    for name, specs in needed.items():
        for spec in (s for s in specs if s.tsp_step):
            tsp = spec.tsp_spec()
            row = distinct.setdefault(
                tsp.run_id,
                {
                    "run_id": tsp.run_id,
                    "model": tsp.model,
                    "task": tsp.task,
                    "method": f"tsp/{tsp.method}",
                    "data_dir": spec.data_dir,  # the TSP run reads the training text of its supervised runs
                    "max_length": tsp.max_length,
                    "step": 0,
                    "eval_examples": 0,
                    "until_converged": False,
                    "recipes": set(),
                },
            )
            row["step"] = max(row["step"], spec.tsp_step)
            row["train_examples"] = row["step"] * tsp.batch_size
            row["held"] = _held(store, tsp.run_id, row["step"])
            row["recipes"].add(name)
            members[name].add(tsp.run_id)
    for row in distinct.values():
        row["recipes"] = len(row["recipes"])
        row.pop("step", None)
    runs = pd.DataFrame(
        list(distinct.values()),
        columns=[
            "run_id",
            "model",
            "task",
            "method",
            "data_dir",
            "max_length",
            "held",
            "train_examples",
            "eval_examples",
            "until_converged",
            "recipes",
        ],
    )

    def row(label: str, chosen: pd.DataFrame, shared: int | None) -> dict:
        todo = chosen[~chosen["held"]]
        hours, cpu = run_hours(todo, rates), run_hours(todo, cpu_rates)
        return {
            "recipe": label,
            "runs": len(chosen),
            "shared": shared,
            "held": int(chosen["held"].sum()),
            "to_train": len(todo),
            "train_examples": int(todo["train_examples"].sum()),
            "eval_examples": int(todo["eval_examples"].sum()),
            "gpu_hours": math.nan if hours is None else hours,
            "cpu_hours": math.nan if cpu is None else cpu,
        }

    rows = []
    for name in needed:
        chosen = runs[runs["run_id"].isin(members[name])]
        rows.append(row(name, chosen, int((chosen["recipes"] > 1).sum())))
    rows.append(row("total (distinct runs)", runs, None))
    return pd.DataFrame(rows), runs


def fetch_list(runs: pd.DataFrame) -> list[str]:
    """What the runs need on disk before an offline cluster run: each model and task, embedded
    (``robustkit assets fetch``), from the Hugging Face hub, or local (the user's own data file or
    folder, a GLUE TSV folder: named by its path, nothing to fetch)."""
    from robustkit.assets import ASSETS

    lines = []
    for model in sorted(runs["model"].unique()):
        lines.append(
            f"model {model}: "
            + (
                "embedded (robustkit assets fetch)"
                if model in ASSETS
                else "Hugging Face hub (download it into the HF cache first)"
            )
        )
    data_dirs = runs["data_dir"] if "data_dir" in runs else pd.Series([None] * len(runs), index=runs.index)
    pairs = {(task, None if pd.isna(where) else str(where)) for task, where in zip(runs["task"], data_dirs)}
    for name, data_dir in sorted(pairs, key=lambda pair: (pair[0], pair[1] or "")):
        lines.append(f"task {name}: {task_source(name, data_dir)}")
    return lines


def task_source(name: str, data_dir: str | None) -> str:
    """Where task ``name`` read from ``data_dir`` comes from, in the plan's words: local data is
    named local with its path, hub data with its hub name."""
    from robustkit.data.tasks import get_task
    from robustkit.data.user_sources import HUB_PREFIX, parse_source

    task = get_task(name, data_dir)
    if task.source == "embedded":
        return f"embedded (robustkit assets fetch {task.asset})"
    if task.source == "user":
        location, _ = parse_source(str(data_dir)) if data_dir is not None else ("", {})
        if location.startswith(HUB_PREFIX):
            return f"Hugging Face hub, {location[len(HUB_PREFIX) :]} (your data; download it into the HF cache first)"
        return f"local, your data at {location or 'a registered data set'} (nothing to fetch; copy it along)"
    if data_dir is not None:
        return f"local, GLUE TSV folder {data_dir} (nothing to fetch; copy it along)"
    return f"Hugging Face hub, nyu-mll/glue config {task.glue_config}"


def describe(
    per_recipe: pd.DataFrame, runs: pd.DataFrame, scale: str, throughput: dict[str, Throughput] | None = None
) -> str:
    """The plan as ``robustkit reproduce --plan`` prints it."""
    rates = read_throughput() if throughput is None else throughput
    shown = per_recipe.assign(
        shared=per_recipe["shared"].map(lambda v: "" if pd.isna(v) else int(v)),
        gpu_hours=per_recipe["gpu_hours"].map(lambda v: NOT_MEASURED if pd.isna(v) else f"{v:.2f}"),
        cpu_hours=per_recipe["cpu_hours"].map(lambda v: NOT_MEASURED if pd.isna(v) else f"{v:.2f}"),
    )
    lines = [
        f"Plan for --scale {scale}: nothing is trained. A run two recipes need is trained once "
        "(counted once in the total); 'held': finished in the store already.",
        shown.rename(columns={"gpu_hours": "GPU-hours (estimate)", "cpu_hours": "CPU-hours (estimate)"}).to_string(
            index=False
        ),
        "",
    ]
    lines += ["To fetch before going offline:", *(f"  {line}" for line in fetch_list(runs)), ""]
    lines.append(
        "GPU-hours are an estimate: examples (train steps x batch, TSP included; every evaluation) / "
        f"examples per second measured on one GPU ({THROUGHPUT_TABLE.parent.name}/{THROUGHPUT_TABLE.name}), "
        "scaled by max_length; no data loading, checkpointing or queueing counted."
    )
    lines += _rate_lines(runs, rates, "bench/trainers.py --model {model} --device cuda on the GPU")
    lines.append(
        "CPU-hours are an estimate the same way, from examples per second on one CPU core "
        f"({CPU_THROUGHPUT_TABLE.parent.name}/{CPU_THROUGHPUT_TABLE.name}; runs train one thread each): "
        "wall hours on an idle machine are CPU-hours / --jobs."
    )
    lines += _rate_lines(runs, read_throughput(CPU_THROUGHPUT_TABLE), "bench/cpu_throughput.py --models {model}")
    converging = int(runs["until_converged"].sum())
    if converging:
        # the hours count every step of the budget: a run that converges stops before it
        lines.append(
            f"{converging} of the {len(runs)} runs train until converged: both estimates price them at their "
            "whole budget, an upper bound, since each stops once it has learned and converged "
            '(recipes/README.md, "CPU scale", gives what the cpu scale\'s runs took).'
        )
    return "\n".join(lines)


def _rate_lines(runs: pd.DataFrame, rates: dict[str, Throughput], how: str) -> list[str]:
    """One line per model of ``runs``: its measured rates and where, or ``how`` to measure them."""
    lines = []
    for model in sorted(runs["model"].unique()):
        rate = rates.get(model)
        lines.append(
            f"  {model}: {rate.train_per_s:,.0f} train / {rate.eval_per_s:,.0f} eval examples/s at max length "
            f"{rate.max_length} on {rate.gpu} ({rate.source})"
            if rate is not None and rate.measured
            else f"  {model}: {NOT_MEASURED} ({how.format(model=model)}, then add it to the table)"
        )
    return lines


__all__ = ["Throughput", "describe", "examples", "fetch_list", "plan", "read_throughput", "task_source"]
