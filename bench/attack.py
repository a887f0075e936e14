"""PWWS speed: the batched engine vs OpenAttack's PWWSAttacker, same victim, same inputs, one run.

Attacks the first ``--n`` rt test sentences (target: the victim's prediction) with both engines,
interleaved example by example (so load changes on a shared machine hit both alike), each
starting from an empty memo. Prints seconds per example, the speed ratio (target: >= 5x),
sentences run / forward passes per example, and asserts that the adversarial texts, success
decisions and query counts are identical.

    .venv/bin/python bench/attack.py [--model minilm-l6] [--method houlsby] [--n 50] [--threads 1]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field

import torch

from robustkit.attack import (
    AttackResult,
    Victim,
    attack_fast,
    attack_openattack,
    configure_openattack,
    pwws_attacker,
)
from robustkit.checkpoints import build_classifier
from robustkit.models import load_tokenizer
from robustkit.spec import RunSpec
from robustkit.tasks import load_splits


@dataclass
class Tally:
    """What one engine cost over all examples."""

    seconds: float = 0.0
    forwards: int = 0
    batches: int = 0
    results: list[AttackResult] = field(default_factory=list)


def run_engine(engine, victim: Victim, sentence: str, target: int, tally: Tally) -> None:
    victim.clear_cache()
    victim.reset_counters()
    started = time.perf_counter()
    tally.results.append(engine(victim, sentence, target))
    tally.seconds += time.perf_counter() - started
    tally.forwards += victim.forwards
    tally.batches += victim.batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="minilm-l6", help="embedded model (default: minilm-l6)")
    parser.add_argument("--method", default="houlsby", help="tuning method of the victim (default: houlsby)")
    parser.add_argument("--n", type=int, default=50, help="rt test sentences attacked (default: 50)")
    parser.add_argument("--dtype", default="float64", choices=["float32", "float64"], help="victim precision")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1)")
    parser.add_argument("--nltk-data", help="NLTK data tree for OpenAttack (default: $NLTK_DATA, else NLTK's folders)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    configure_openattack(args.nltk_data)
    pwws_attacker()  # load WordNet and the tagger before timing
    model, _, _ = build_classifier(RunSpec(model=args.model, task="rt", method=args.method), num_labels=2)
    victim = Victim(model, load_tokenizer(args.model), dtype=getattr(torch, args.dtype))
    sentences = load_splits("rt")["test"]["sentence"][: args.n]
    targets = [int(t) for t in victim.get_pred(sentences)]

    reference, fast = Tally(), Tally()
    for sentence, target in zip(sentences, targets):
        run_engine(attack_openattack, victim, sentence, target, reference)
        run_engine(attack_fast, victim, sentence, target, fast)

    fields = ("adversarial", "success", "queries", "modified_words")
    same = sum(
        all(getattr(r, f) == getattr(q, f) for f in fields) for r, q in zip(reference.results, fast.results)
    )
    n = len(sentences)
    print(f"victim: {args.model} / {args.method} (random head), {args.dtype}, {torch.get_num_threads()} thread(s); "
          f"{n} rt test sentences, {sum(r.words for r in fast.results) / n:.1f} words on average")
    print(f"success rate {sum(r.success for r in fast.results) / n:.2f}, "
          f"OpenAttack-equivalent queries per example {sum(r.queries for r in fast.results) / n:.1f}")
    for name, tally in (("openattack", reference), ("fast", fast)):
        print(f"{name:>10}: {tally.seconds / n:.3f} s/example   sentences run {tally.forwards / n:.1f}/example   "
              f"forward passes {tally.batches / n:.1f}/example")
    print(f"speed ratio openattack/fast: {reference.seconds / fast.seconds:.2f}x (target >= 5x)")
    print(f"identical results: {same}/{n}")
    assert same == n, "the fast engine's results differ from OpenAttack's"


if __name__ == "__main__":
    main()
