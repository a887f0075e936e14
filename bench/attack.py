"""PWWS speed: the fast engine vs OpenAttack's PWWSAttacker, same victim, same inputs, one run.

Attacks the first ``--n`` rt test sentences (target: the victim's prediction) with four set-ups,
interleaved example by example (so load changes on a shared machine hit all alike), each
starting from an empty memo:

- ``openattack``: OpenAttack's PWWSAttacker on the victim as the issue asks it to be wrapped
  (no gradients, float64, dynamic padding) without a memo: the baseline;
- ``openattack+memo``: the same with robustkit's memo, which spares it the repeated sentences;
- ``fast-float64``: robustkit's batched, deduplicated engine on the float64 victim;
- ``fast``: the same with certified float32 screening (the default of ``analyze attack``).

Prints seconds per example and the ratios against the baseline (target: >= 5x), sentences run
and forward passes per example, the float32 / float64 split of the fast engine, and the largest
float32-vs-float64 logit difference seen (screening assumes <= robustkit's LOGIT_ERROR); asserts
that the adversarial texts, success decisions and query counts of all four are identical.

    .venv/bin/python bench/attack.py [--run runs/demo/<run>] [--model minilm-l6] [--method houlsby] [--n 50] [--threads 1]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from dataclasses import dataclass, field

import torch

from robustkit.attacks.base import AttackResult
from robustkit.attacks.offline import configure_openattack
from robustkit.attacks.pwws import LOGIT_ERROR, attack_fast, attack_openattack, pwws_attacker
from robustkit.attacks.victim import Victim
from robustkit.run_model import build_classifier, load_run_model
from robustkit.models import load_tokenizer
from robustkit.spec import RunSpec
from robustkit.store import read_manifest
from robustkit.tasks import load_splits


@dataclass
class Tally:
    """What one engine cost over all examples."""

    seconds: float = 0.0
    forwards: int = 0
    batches: int = 0
    screened: int = 0
    results: list[AttackResult] = field(default_factory=list)


def run_engine(engine, victims: list[Victim], sentence: str, target: int, tally: Tally) -> None:
    for victim in victims:
        victim.clear_cache()
        victim.reset_counters()
    started = time.perf_counter()
    tally.results.append(engine(sentence, target))
    tally.seconds += time.perf_counter() - started
    tally.forwards += sum(v.forwards for v in victims)
    tally.batches += sum(v.batches for v in victims)
    tally.screened += sum(v.forwards for v in victims[1:])


def load_victim(args) -> tuple[Victim, str]:
    """The victim model: a stored run's best checkpoint, or a fresh model with a random head."""
    if args.run:
        spec = read_manifest(Path(args.run))["spec"]
        model, name = load_run_model(Path(args.run), "best"), f"{Path(args.run).name} (best checkpoint)"
        return Victim(model, load_tokenizer(spec["model"]), max_length=spec["max_length"] or 128), name
    model, _, _ = build_classifier(RunSpec(model=args.model, task="rt", method=args.method), num_labels=2)
    return Victim(model, load_tokenizer(args.model)), f"{args.model} / {args.method} (random head)"


def largest_logit_error(victim: Victim, screen: Victim, sentences: list[str]) -> float:
    """max |float32 logit - float64 logit| over ``sentences``, each run in its own batch of the lot."""
    encoded = victim.tokenizer(sentences, padding=True, truncation=True, max_length=victim.max_length, return_tensors="pt")
    with torch.inference_mode():
        exact = victim.model(**encoded).logits
        screened = screen.model(**encoded).logits.to(torch.float64)
    return float((exact - screened).abs().max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", help="a stored run folder whose best checkpoint is the victim (default: a random-head model)")
    parser.add_argument("--model", default="minilm-l6", help="embedded model without --run (default: minilm-l6)")
    parser.add_argument("--method", default="houlsby", help="tuning method of the victim without --run (default: houlsby)")
    parser.add_argument("--n", type=int, default=50, help="rt test sentences attacked (default: 50)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1)")
    parser.add_argument("--nltk-data", help="NLTK data tree for OpenAttack (default: $NLTK_DATA, else NLTK's folders)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    configure_openattack(args.nltk_data)
    pwws_attacker()  # load WordNet and the tagger before timing
    victim, name = load_victim(args)
    plain = Victim(victim.model, victim.tokenizer, victim.max_length, cache_size=0)
    screen = victim.screening()
    sentences = load_splits("rt")["test"]["sentence"][: args.n]
    targets = [int(t) for t in victim.get_pred(sentences)]

    setups = {
        "openattack": (lambda s, t: attack_openattack(plain, s, t), [plain]),
        "openattack+memo": (lambda s, t: attack_openattack(victim, s, t), [victim]),
        "fast-float64": (lambda s, t: attack_fast(victim, s, t), [victim]),
        "fast": (lambda s, t: attack_fast(victim, s, t, screen=screen), [victim, screen]),
    }
    tallies = {key: Tally() for key in setups}
    for sentence, target in zip(sentences, targets):
        for key, (engine, victims) in setups.items():
            run_engine(engine, victims, sentence, target, tallies[key])

    n = len(sentences)
    fast = tallies["fast"].results
    print(f"victim: {name}, float64, {torch.get_num_threads()} thread(s); "
          f"{n} rt test sentences, {sum(r.words for r in fast) / n:.1f} words on average")
    print(f"success rate {sum(r.success for r in fast) / n:.2f}, "
          f"OpenAttack-equivalent queries per example {sum(r.queries for r in fast) / n:.1f}")
    baseline = tallies["openattack"].seconds
    for key, tally in tallies.items():
        print(f"{key:>16}: {tally.seconds / n:.3f} s/example  {baseline / tally.seconds:5.2f}x   "
              f"sentences run {tally.forwards / n:.1f}/example   forward passes {tally.batches / n:.1f}/example")
    print(f"speed ratio openattack/fast: {baseline / tallies['fast'].seconds:.2f}x (target >= 5x); "
          f"openattack+memo/fast: {tallies['openattack+memo'].seconds / tallies['fast'].seconds:.2f}x")
    texts = [r.adversarial or r.original for r in fast]
    screened = tallies["fast"].screened
    print(f"fast: {screened / n:.1f} float32 + {(tallies['fast'].forwards - screened) / n:.1f} float64 sentences/example; "
          f"largest float32 logit error on the {n} final texts: {largest_logit_error(victim, screen, texts):.2e} "
          f"(screening assumes <= {LOGIT_ERROR:.0e})")
    fields = ("adversarial", "success", "queries", "modified_words")
    reference = tallies["openattack"].results
    for key, tally in tallies.items():
        same = sum(all(getattr(r, f) == getattr(q, f) for f in fields) for r, q in zip(reference, tally.results))
        print(f"identical to openattack: {key} {same}/{n}")
        assert same == n, f"{key}'s results differ from OpenAttack's"


if __name__ == "__main__":
    main()
