"""PWWS adversarial attack on saved runs (Han et al. 2021, section 4 and figure 5).

For each selected run, a reproducible sample of ``n`` test examples is attacked with PWWS
(Ren et al. 2019) as OpenAttack 2.1.1 implements it, through robustkit's batched engine
(``engine="fast"``, identical outputs) or OpenAttack's own (``engine="openattack"``).

One attack per example serves both success conventions, because PWWS is untargeted and moves
away from the model's own prediction:

- ``openattack``: every example is attacked; success = the prediction changes (misclassified
  inputs included), as OpenAttack's ``AttackEval`` counts it.
- ``gold``: only correctly classified examples count; success = they become misclassified.

Results are appended per example to ``<store>/.cache/attack/<run_id>-<key>.jsonl`` as they
finish, so an interrupted attack resumes where it stopped; the key hashes the parameters and
the checkpoint's sha256.
"""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from robustkit.analysis.cache import CACHE_DIR, cache_key
from robustkit.analysis.select import select_runs, with_identity
from robustkit.errors import RobustkitError
from robustkit.store import IDENTITY

ENGINES = ("fast", "openattack")
ATTACKERS = ("pwws",)
CONVENTIONS = ("openattack", "gold")
EXAMPLE_COLUMNS = [
    "example", "idx", "label", "prediction", "original", "adversarial", "success",
    "queries", "modified_words", "words", "seconds",
]


def sample_examples(run_dir: Path, n: int, seed: int, split: str = "test") -> pd.DataFrame:
    """The ``n`` examples of the run's ``split`` an attack uses, drawn with ``seed``.

    Returns
    -------
    DataFrame
        ``example`` (position in the split), ``idx``, ``sentence``, ``label``; sorted by
        ``example``. Every run of one task and split seed gets the same examples.
    """
    from robustkit import tasks
    from robustkit.spec import RunSpec
    from robustkit.store import read_manifest

    spec = RunSpec(**read_manifest(run_dir)["spec"])
    task = tasks.get_task(spec.task)
    if len(task.text_fields) != 1:
        raise RobustkitError(f"PWWS attacks single-sentence tasks; {spec.task!r} has sentence pairs")
    data = tasks.load_splits(spec.task, data_dir=spec.data_dir, train_size=spec.train_size, split_seed=spec.split_seed)[split]
    if n > len(data):
        raise RobustkitError(f"--n {n} is more than the {len(data)} examples of {spec.task!r}/{split}")
    chosen = np.sort(np.random.default_rng(seed).choice(len(data), size=n, replace=False))
    subset = data.select(chosen.tolist())
    return pd.DataFrame(
        {"example": chosen, "idx": subset["idx"], "sentence": subset[task.text_fields[0]], "label": subset["label"]}
    )


def attack_run(
    run_dir: str | Path,
    n: int = 200,
    seed: int = 0,
    engine: str = "fast",
    query_budget: int | None = None,
    checkpoint: str = "best",
    progress: bool = True,
) -> pd.DataFrame:
    """Attack one run's checkpoint on a sample of its test split; resumable.

    Returns
    -------
    DataFrame
        One row per example: :data:`EXAMPLE_COLUMNS` (``prediction`` on the original text;
        ``adversarial`` is None where the attack failed or was not needed).
    """
    if engine not in ENGINES:
        raise RobustkitError(f"unknown attack engine {engine!r}; known: {', '.join(ENGINES)}")
    run_dir = Path(run_dir)
    params = {"attacker": "pwws", "n": n, "seed": seed, "engine": engine, "query_budget": query_budget, "checkpoint": checkpoint}
    key = cache_key(run_dir, "attack", params, [checkpoint])
    path = run_dir.parent / CACHE_DIR / "attack" / f"{run_dir.name}-{key}.jsonl"
    done = _read_done(path)
    examples = sample_examples(run_dir, n, seed)
    todo = examples[~examples["example"].isin(done)]
    if len(todo):
        _attack_examples(run_dir, todo, path, engine, query_budget, checkpoint, progress)
    rows = pd.DataFrame([json.loads(line) for line in path.read_text().splitlines()], columns=EXAMPLE_COLUMNS)
    return rows.sort_values("example").reset_index(drop=True)


def _read_done(path: Path) -> set[int]:
    if not path.exists():
        return set()
    done = set()
    for line in path.read_text().splitlines():
        try:
            done.add(json.loads(line)["example"])
        except (json.JSONDecodeError, KeyError):
            continue  # a line cut short by a kill: that example is attacked again
    return done


def _attack_examples(run_dir, todo: pd.DataFrame, path: Path, engine, query_budget, checkpoint, progress) -> None:
    from robustkit.attack import Victim, attack_fast, attack_openattack, configure_openattack
    from robustkit.checkpoints import load_run_model
    from robustkit.models import load_tokenizer
    from robustkit.spec import RunSpec
    from robustkit.store import read_manifest

    configure_openattack()
    spec = RunSpec(**read_manifest(run_dir)["spec"]).resolved()
    victim = Victim(load_run_model(run_dir, checkpoint), load_tokenizer(spec.model), max_length=spec.max_length)
    if engine == "fast":
        screen = victim.screening()  # float32 rules out substitutes; results stay float64's
        attack = partial(attack_fast, screen=screen)
    else:
        attack = attack_openattack
    _drop_partial_line(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as out:
        for row in tqdm(todo.itertuples(), total=len(todo), desc=f"PWWS {run_dir.name}", disable=not progress, unit="ex"):
            started = time.perf_counter()
            prediction = int(victim.get_pred([row.sentence])[0])
            result = attack(victim, row.sentence, target=prediction, query_budget=query_budget)
            record = {
                "example": int(row.example), "idx": int(row.idx), "label": int(row.label), "prediction": prediction,
                "original": row.sentence, "adversarial": result.adversarial, "success": bool(result.success),
                "queries": int(result.queries), "modified_words": int(result.modified_words), "words": int(result.words),
                "seconds": time.perf_counter() - started,
            }
            out.write(json.dumps(record) + "\n")
            out.flush()


def _drop_partial_line(path: Path) -> None:
    """Cut a last line that a kill left without its newline, so appends stay one JSON per line."""
    if path.exists():
        text = path.read_text()
        if text and not text.endswith("\n"):
            path.write_text(text[: text.rfind("\n") + 1])


def run(
    store: str | Path,
    select: dict | list[str] | None = None,
    n: int = 200,
    seed: int = 0,
    attacker: str = "pwws",
    engine: str = "fast",
    query_budget: int | None = None,
    checkpoint: str = "best",
    progress: bool = True,
) -> pd.DataFrame:
    """Attack every selected run; per-example results with the runs' identity columns.

    Parameters
    ----------
    store : path
        Run store.
    select : dict or list of str, optional
        Run filters, e.g. ``["task=rt", "method=houlsby"]``.
    n, seed : int
        Sample size and seed of the test examples attacked (the same examples for every run).
    attacker : str
        ``pwws`` (the only one so far).
    engine : str
        ``fast`` (batched, identical outputs) or ``openattack``.
    query_budget : int, optional
        Victim queries allowed per example; past it the attack counts as failed.
    checkpoint : str
        Which checkpoint of each run is attacked (default ``best``).

    Returns
    -------
    DataFrame
        Identity columns + :data:`EXAMPLE_COLUMNS`; summarise with :func:`summarize`.
    """
    if attacker not in ATTACKERS:
        raise RobustkitError(f"unknown attacker {attacker!r}; known: {', '.join(ATTACKERS)}")
    runs = select_runs(store, select)
    frames = []
    for _, run_row in runs.iterrows():
        frames.append(with_identity(attack_run(run_row["path"], n, seed, engine, query_budget, checkpoint, progress), run_row))
    return pd.concat(frames, ignore_index=True)


def summarize(examples: pd.DataFrame) -> pd.DataFrame:
    """Per run and success convention: success rate, accuracy before and under attack, costs.

    Parameters
    ----------
    examples : DataFrame
        Output of :func:`run`.

    Returns
    -------
    DataFrame
        Identity columns + ``convention`` (``openattack`` or ``gold``), ``attacked`` (examples
        the convention attacks), ``success_rate``, ``accuracy_before``,
        ``accuracy_under_attack``, ``mean_queries``, ``mean_modification_rate`` (modified /
        total words, over successful attacks), ``mean_seconds`` (per attacked example).
    """
    rows = []
    for run_id, group in examples.groupby("run_id", sort=True):
        identity = group.iloc[0][[c for c in IDENTITY if c in group]].to_dict()
        correct = group["prediction"] == group["label"]
        fooled = correct & group["success"]
        for convention in CONVENTIONS:
            attacked = group if convention == "openattack" else group[correct]
            successful = attacked[attacked["success"]]
            rows.append({
                **identity,
                "convention": convention,
                "attacked": len(attacked),
                "success_rate": attacked["success"].mean() if len(attacked) else np.nan,
                "accuracy_before": correct.mean(),
                "accuracy_under_attack": (correct & ~fooled).mean(),
                "mean_queries": attacked["queries"].mean(),
                "mean_modification_rate": (successful["modified_words"] / successful["words"].clip(lower=1)).mean(),
                "mean_seconds": attacked["seconds"].mean(),
            })
    return pd.DataFrame(rows)


def success(
    store: str | Path,
    select: dict | list[str] | None = None,
    n: int = 200,
    seed: int = 0,
    engine: str = "fast",
    checkpoint: str = "best",
) -> pd.DataFrame:
    """Han et al. 2021 figure 5's data: :func:`summarize` of :func:`run` per victim, with each
    victim's outcome (:func:`with_outcomes`)."""
    examples = run(store, select, n=n, seed=seed, engine=engine, checkpoint=checkpoint)
    return with_outcomes(summarize(examples), store, checkpoint=checkpoint)


def with_outcomes(summary: pd.DataFrame, store: str | Path, checkpoint: str = "best") -> pd.DataFrame:
    """``summary`` + each victim's ``outcome`` on its test split (:mod:`robustkit.collapse`).

    A victim stuck at the majority class predicts one label whatever the input, so no word
    substitution flips it: its low success rate is no robustness, and figures and claims leave
    it out (Han et al. 2021 figure 5 at demo scale once showed exactly that).
    """
    from robustkit.analysis import stability

    scores = stability.outcomes(store, {"run_id": list(summary["run_id"].unique())}, checkpoint=checkpoint, split="test")
    return summary.merge(scores[["run_id", "outcome"]], on="run_id", how="left").fillna({"outcome": "ok"})
