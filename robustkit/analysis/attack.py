"""Adversarial attacks on saved runs (Han et al. 2021, section 4 and figure 5).

For each selected run, a reproducible sample of ``n`` test examples is attacked by one attacker
of the attack registry (:data:`robustkit.attacks.ATTACKS`: every ``@register_attack`` module of
:mod:`robustkit.attacks`, and those a researcher loads, see :mod:`robustkit.attacks.registry`), a
parameter of the analysis, e.g.:

- ``pwws``: PWWS (Ren et al. 2019) as OpenAttack 2.1.1 implements it, the paper's attack,
  through robustkit's fast engine (``engine="fast"``: certified float32 decisions, identical
  outputs) or OpenAttack's own (``engine="openattack"``);
- ``deepwordbug``: DeepWordBug (Gao et al. 2018), character-level, by OpenAttack, its random
  choices seeded by (``seed``, example) (:mod:`robustkit.attacks.deepwordbug`).

Before attacking, the data an attacker declares is made available (:func:`robustkit.attacks.prepare`):
OpenAttack is configured offline only for attackers that run it, NLTK data is looked up only for
attackers that read some, and a missing resource's error names the attacker.

Its parts: the per-example cache (:mod:`robustkit.analysis.attack_cache`, resumable, each line
bound to its file by its sha256), the summaries per success convention
(:mod:`robustkit.analysis.attack_summary`: ``openattack`` counts every changed prediction,
``gold`` only correctly classified examples that become misclassified) and the figures' data
(:mod:`robustkit.analysis.attack_views`). Every output has an ``attacker`` column.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: importing this module stays light (registration, --help)
    import pandas as pd

from robustkit import attacks
from robustkit.analysis.declare import (
    ATTACKERS,
    DEVICE,
    Analysis,
    Param,
    Statistic,
    checkpoint_param,
    registered_attackers,
)
from robustkit.analysis.registry import register_analysis
from robustkit.errors import RobustkitError
from robustkit.progress import bar as progress_bar
from robustkit.train.provenance import computed_on

# Everything robustkit reads about this analysis (robustkit.analysis.declare); its attackers are
# the attack registry's (robustkit.attacks.registry), read when they are chosen.
DECLARED = register_analysis(
    Analysis(
        "attack",
        "adversarial attacks (PWWS, DeepWordBug) on each selected run (Han et al. 2021, section 4)",
        "Attack each selected run's checkpoint with each chosen attacker (PWWS and DeepWordBug as OpenAttack 2.1.1 "
        "defines them) on a reproducible sample of its test split; results are saved per example and an interrupted "
        "attack resumes. Its summary has two rows per run and attacker, one per success convention (column "
        "convention): openattack attacks every sampled example and counts a success when the prediction changes, "
        "misclassified examples included (OpenAttack's AttackEval); gold counts only the examples the run classified "
        "correctly (attacked: their number) and a success when one becomes misclassified, so its success_rate = 1 - "
        "accuracy_under_attack / accuracy_before (both over all n examples, in either row). The attackers that declare "
        f"NLTK data ({registered_attackers(labels=False, nltk_data=True)}) need what each declares (of WordNet, Punkt "
        "and an averaged-perceptron POS tagger), from robustkit's embedded assets (fetched from pinned registry "
        "packages) or the folders of $NLTK_DATA first; the others need none.",
        ":run",
        (
            Param(
                "attackers",
                ["pwws"],
                f"comma-separated attackers, of those registered: {registered_attackers()}",
                kind=list,
                choices=ATTACKERS,
            ),
            Param("n", 200, "test examples attacked per run (the same sample for every run)"),
            Param("seed", 0, "seed of the example sample and of randomized attacks (per example)"),
            Param(
                "query_budget",
                None,
                "victim queries allowed per example (the attack fails past it)",
                default_note="no limit",
                kind=int,
            ),
            checkpoint_param("checkpoint attacked", ("best", "last", "step-0")),
            Param(
                "attack_options",
                [],
                "an attacker's own options as NAME=VALUE, comma-separated (e.g. PWWS's engine=openattack: "
                "OpenAttack's own PWWSAttacker instead of robustkit's batched one with certified float32 screening, "
                "identical outputs); an option no chosen attacker takes is an error",
                kind=list,
            ),
        ),
        (
            DEVICE,
            Param(
                "threads",
                None,
                "torch CPU threads",
                default_note="torch's (OMP_NUM_THREADS, else all cores)",
                kind=int,
                minimum=1,
            ),
        ),
        summary="robustkit.analysis.attack_summary:summarize",
        statistics=(
            Statistic(
                "success",
                "robustkit.analysis.attack_summary:attack_success",
                "attack success rate of each run (fraction)",
                (
                    Param(
                        "convention",
                        "openattack",
                        "openattack: prediction flips, misclassified inputs included; gold: only correctly classified "
                        "inputs",
                        choices=("openattack", "gold"),
                    ),
                    Param("attacker", "pwws", "the attacker whose success is tested", choices=ATTACKERS),
                ),
                undefined_on_failed="a run stuck at the majority class cannot be attacked: it misclassifies the "
                "minority class already and no word swap flips a constant prediction, so its success rate says nothing "
                "of its robustness",
            ),
        ),
        output="the per-example results (original and adversarial text)",
        views=("robustkit.analysis.attack_views:success_by_tsp", "robustkit.analysis.attack_views:attack_boxes"),
        order=140,
        module=__name__,
    )
)

ANALYSIS = "attack"  # the cache folder


def sample_examples(run_dir: Path, n: int, seed: int, split: str = "test") -> pd.DataFrame:
    """The ``n`` examples of the run's ``split`` an attack uses, drawn with ``seed``.

    Returns
    -------
    DataFrame
        ``example`` (position in the split), ``idx``, ``sentence``, ``label``; sorted by
        ``example``. Every run of one task and split seed gets the same examples.
    """
    import numpy as np
    import pandas as pd

    from robustkit.store.manifest import read_spec
    from robustkit.store.run_data import run_splits, run_task

    spec = read_spec(run_dir)
    task = run_task(spec, run_dir)
    if len(task.text_fields) != 1:
        raise RobustkitError(f"the attacks take single-sentence tasks; {spec.task!r} has sentence pairs")
    data = run_splits(spec, run_dir)[split]  # checked against the run's recorded data
    if n > len(data):
        raise RobustkitError(f"--n {n} is more than the {len(data)} examples of {spec.task!r}/{split}")
    chosen = np.sort(np.random.default_rng(seed).choice(len(data), size=n, replace=False))
    subset = data.select(chosen.tolist())
    return pd.DataFrame(
        {"example": chosen, "idx": subset["idx"], "sentence": subset[task.text_fields[0]], "label": subset["label"]}
    )


def attack_run(
    run_dir: str | Path,
    n: int = DECLARED.default("n"),
    seed: int = DECLARED.default("seed"),
    attacker: str = DECLARED.default("attackers")[0],
    query_budget: int | None = None,
    checkpoint: str = DECLARED.default("checkpoint"),
    progress: bool = True,
    path: str | Path | None = None,
    device: str | None = None,
    **options: Any,
) -> pd.DataFrame:
    """Attack one run's checkpoint on a sample of its test split; resumable.

    Parameters
    ----------
    run_dir : path
        The run's folder.
    n, seed, attacker, query_budget, checkpoint, options
        As in :func:`run_attacker`.
    progress : bool
        Show a progress bar.
    path : path, optional
        The per-example results file (JSON lines, appended as examples finish); default: the
        run's cache file for these parameters (:func:`robustkit.analysis.each_run.cache_path`).
    device : str, optional
        Where the victim runs (default: the GPU if there is one). Not part of the cache key:
        the engines' decisions are certified on any device's float32 kernels (see
        :mod:`robustkit.attacks.pwws`); each example's record keeps the device it ran on.

    Returns
    -------
    DataFrame
        One row per example: :data:`~robustkit.analysis.attack_cache.EXAMPLE_COLUMNS`
        (``prediction`` on the original text; ``adversarial`` is None where the attack failed or
        was not needed; ``queries`` as the attack defines them, e.g. PWWS's as OpenAttack counts
        them; ``forward_passes`` the sentences the attack really ran through the model, float32
        and float64, memo hits not counted, NaN in rows cached before the column existed).
    """
    import pandas as pd

    from robustkit.analysis import attack_cache
    from robustkit.analysis.each_run import cache_path, record_provenance

    # The attack seed is the sample's: a seed names one reproducible experiment.
    attack = attacks.create(attacker, seed=seed, **options)
    attacks.prepare(attacker)  # before its params: they may digest the NLTK data it reads
    run_dir = Path(run_dir)
    params = _cache_params(attack, attacker, n, seed, query_budget, checkpoint)
    if path is None:
        path = cache_path(run_dir, ANALYSIS, params, [checkpoint], ".jsonl", label=attacker)
    path = Path(path)
    legacy = cache_path(run_dir, ANALYSIS, params, [checkpoint], ".jsonl")
    if legacy.exists() and not path.exists():
        # Files named before the attacker was (PWWS only): the key hashes the attacker, so a file
        # with this key holds this attacker's results.
        with contextlib.suppress(OSError):  # read-only: read below from a copy
            legacy.rename(path)
    path = attack_cache.writable(path, legacy)
    done = attack_cache.done_examples(path)
    examples = sample_examples(run_dir, n, seed)
    todo = examples[~examples["example"].isin(done)]
    if len(todo):
        _attack_examples(run_dir, todo, path, attack, query_budget, checkpoint, progress, device)
    records = attack_cache.records(path)
    # where the examples ran (more than one device where an attack resumed elsewhere); none
    # recorded in lines from before the device was
    devices = sorted({r["device"] for r in records if r.get("device")})
    record_provenance(f"{run_dir.name}/{attacker}", {"device": ",".join(devices)} if devices else {})
    rows = pd.DataFrame(records, columns=attack_cache.EXAMPLE_COLUMNS)
    rows["attacker"] = attacker  # rows written before the column existed have none
    return rows.sort_values("example").reset_index(drop=True)


def _attack_examples(
    run_dir: Path,
    todo: pd.DataFrame,
    path: Path,
    attack: attacks.Attack,
    query_budget: int | None,
    checkpoint: str,
    progress: bool,
    device: str | None = None,
) -> None:
    from robustkit.analysis import attack_cache
    from robustkit.attacks.victim import Victim
    from robustkit.models.pretrained import load_tokenizer
    from robustkit.train.run_model import load_run

    run = load_run(run_dir, checkpoint, device)
    where = computed_on(device)["device"]
    victim = Victim(run.model, load_tokenizer(run.spec.model), max_length=run.spec.max_length)
    attack_cache.keep_intact_lines(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as out:
        rows = progress_bar(
            todo.itertuples(), total=len(todo), desc=f"{attack.name} {run_dir.name}", show=progress, unit="ex"
        )
        for row in rows:
            started = time.perf_counter()
            prediction = attack.predict(victim, row.sentence)
            example = attacks.Example(row.sentence, target=prediction, index=int(row.example))
            result = attack.attack(victim, example, query_budget)
            record = {
                "attacker": attack.name,
                "example": int(row.example),
                "idx": int(row.idx),
                "label": int(row.label),
                "prediction": prediction,
                "original": row.sentence,
                "adversarial": result.adversarial,
                "success": bool(result.success),
                "queries": int(result.queries),
                "forward_passes": None if result.forward_passes is None else int(result.forward_passes),
                "modified_words": int(result.modified_words),
                "words": int(result.words),
                "seconds": time.perf_counter() - started,
                "device": where,
            }
            out.write(json.dumps({**record, attack_cache.LINE_SHA256: attack_cache.line_sha256(record, path)}) + "\n")
            out.flush()


def run_attacker(
    store: str | Path,
    select: dict | list[str] | None = None,
    n: int = DECLARED.default("n"),
    seed: int = DECLARED.default("seed"),
    attacker: str = DECLARED.default("attackers")[0],
    query_budget: int | None = None,
    checkpoint: str = DECLARED.default("checkpoint"),
    progress: bool = True,
    device: str | None = None,
    **options: Any,
) -> pd.DataFrame:
    """Attack every selected run with one attacker; per-example results with the runs' identity columns.

    Parameters
    ----------
    store : path
        Run store.
    select : dict or list of str, optional
        Run filters, e.g. ``["task=rt", "method=houlsby"]``.
    n, seed : int
        Sample size and seed of the test examples attacked (the same examples for every run);
        ``seed`` also seeds randomized attackers (per example, see :mod:`robustkit.attacks.base`).
    attacker : str
        A name in :data:`robustkit.attacks.ATTACKS`, e.g. ``pwws`` (Han et al. 2021's) or ``deepwordbug``.
    **options
        The attacker's own options (:func:`robustkit.attacks.options_of`), e.g. PWWS's
        ``engine``: ``fast`` (certified float32 decisions, identical outputs) or ``openattack``;
        one it does not take is an error.
    query_budget : int, optional
        Victim queries allowed per example; past it the attack counts as failed.
    checkpoint : str
        Which checkpoint of each run is attacked (default ``best``).
    device : str, optional
        Where the victims run (default: the GPU if there is one); not part of the cache key.

    Returns
    -------
    DataFrame
        Identity columns + :data:`~robustkit.analysis.attack_cache.EXAMPLE_COLUMNS` + ``label_name,
        prediction_name`` (:func:`with_label_names`); summarise with
        :func:`robustkit.analysis.attack_summary.summarize`.
    """
    import pandas as pd

    from robustkit.analysis.each_run import each_run
    from robustkit.analysis.select import select_runs

    attack = attacks.create(attacker, seed=seed, **options)  # an unknown attacker or option fails before any run
    attacks.prepare(attacker)  # missing data fails before any run too, naming the attacker
    params = _cache_params(attack, attacker, n, seed, query_budget, checkpoint)

    def compute(row: pd.Series, path: Path) -> pd.DataFrame:
        return attack_run(
            row["path"],
            n=n,
            seed=seed,
            attacker=attacker,
            query_budget=query_budget,
            checkpoint=checkpoint,
            progress=progress,
            path=path,
            device=device,
            **options,
        )

    runs = select_runs(store, select)
    frame = each_run(runs, ANALYSIS, params, [checkpoint], compute, resumable=True, label=attacker)
    return with_label_names(frame, runs)


def with_label_names(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (per-example rows with ``run_id, label, prediction``) + ``label_name`` and
    ``prediction_name``: the class names of each run's data (a user's word labels, GLUE's
    names), so that a three-class frame reads ``neg``/``neutral``/``pos``, not 0/1/2; None
    where the task has no names (regression). The integer ids stay: the cache and the
    summaries read them."""
    import pandas as pd

    from robustkit.store.manifest import read_spec
    from robustkit.store.run_data import run_task

    if frame.empty or "run_id" not in frame:
        return frame.assign(label_name=None, prediction_name=None)
    attacked = set(frame["run_id"])
    names = {
        run_id: tuple(run_task(read_spec(path), path).label_names)
        for run_id, path in zip(runs["run_id"], runs["path"])
        if run_id in attacked
    }

    def named(column: str) -> list:
        return [
            names[r][int(v)] if pd.notna(v) and 0 <= int(v) < len(names.get(r, ())) else None
            for r, v in zip(frame["run_id"], frame[column])
        ]

    return frame.assign(label_name=named("label"), prediction_name=named("prediction"))


def _cache_params(
    attack: attacks.Attack, attacker: str, n: int, seed: int, query_budget: int | None, checkpoint: str
) -> dict:
    """Everything besides the checkpoint that changes an attack's per-example results."""
    return {
        **attack.params,
        "attacker": attacker,
        "n": n,
        "seed": seed,
        "query_budget": query_budget,
        "checkpoint": checkpoint,
    }


def run(
    store: str | Path,
    select: dict | list[str] | None,
    *,
    attackers: Sequence[str],
    n: int,
    seed: int,
    query_budget: int | None,
    checkpoint: str,
    attack_options: Sequence[str],
    threads: int | None = None,
    device: str | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """:func:`run_attacker` of each attacker on the same runs and examples, as one frame (its
    ``attacker`` column in the order of ``attackers``): the registered ``attack`` analysis.

    Parameters
    ----------
    attack_options : sequence of str
        ``NAME=VALUE`` options of the attackers (e.g. PWWS's ``engine=openattack``), each passed
        to the attackers that take it; one that no chosen attacker takes is an error.
    threads : int, optional
        torch CPU threads (changes the speed, never the results).
    device : str, optional
        Where the victims run (default: the GPU if there is one; changes the speed, never the
        results).
    """
    import pandas as pd

    if not attackers:
        raise RobustkitError("no attackers given")
    options = attacks.parse_options(attack_options)
    taken = {
        name: attacks.accepted_options(name, options) for name in attackers
    }  # fails on a typo before hours of attacks
    unused = sorted(set(options) - {key for chosen in taken.values() for key in chosen})
    if unused:
        raise RobustkitError(
            f"attack option(s) {unused} are taken by none of {list(attackers)}; "
            f"they take: {', '.join(f'{a}: {sorted(attacks.options_of(a)) or None}' for a in attackers)}"
        )
    if threads is not None:
        if threads < 1:
            raise RobustkitError(f"threads must be at least 1, got {threads}")
        import torch

        torch.set_num_threads(threads)
    frames = [
        run_attacker(
            store,
            select,
            n=n,
            seed=seed,
            attacker=a,
            query_budget=query_budget,
            checkpoint=checkpoint,
            progress=progress,
            device=device,
            **taken[a],
        )
        for a in attackers
    ]
    return pd.concat(frames, ignore_index=True)
