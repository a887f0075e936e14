"""PWWS speed: robustkit's fast engine vs OpenAttack as its users run it, same victims, same inputs, one run.

For each victim (default: the demo store's polarity minilm-l6 runs, one full fine-tuning and one
houlsby adapter run; ``--run`` picks others, no run gives random-head models), the first ``--n``
test sentences of the victim's task are attacked by every set-up below, interleaved example by
example (load changes on a shared machine hit all alike), each example starting from empty memos,
after one untimed attack of another sentence (OpenAttack's tagger and WordNet load on first use):

- ``readme``: OpenAttack as its README runs it: ``TransformersClassifier`` on the run's float32
  model (its own batches of 8, a backward pass per batch for the gradients PWWS never uses),
  ``AttackEval(PWWSAttacker(), victim).ieval`` (which adds the target prediction and a re-check
  of the adversarial text; ``ieval`` leaves out ``eval(visualize=True)``'s extra display query).
  Its ``max_length`` is the run's, as in training. On an adapter run the word embeddings are
  frozen and its gradient hook fails on every sentence; ``AttackEval`` logs that and reports an
  attack success rate of 0.0. The bench shows this on one sentence, then makes the embeddings
  grad-capable (``requires_grad_(True)``: outputs unchanged) to time it;
- ``openattack``: ``--engine openattack``: OpenAttack's ``PWWSAttacker`` on robustkit's victim
  (float64, no gradients, memoized, length-sorted batches);
- ``fast``: ``--engine fast`` (the default of ``analyze attack``): certified float32 decisions
  with lazy evaluation of positions (see ``robustkit/attacks/pwws.py``);
- ``fast-blas``: the fast engine with its float32 twin's linear layers on PyTorch's BLAS (MKL)
  instead of oneDNN (``robustkit/attacks/onednn.py``): how much of the speed-up comes from the
  kernel, which depends on the CPU (on this project's AMD processor oneDNN runs AVX-512 code and
  MKL's sgemm half its rate);
- ``fast-eager`` and ``fast-float64`` (unless ``--quick``): the fast engine without lazy
  evaluation, and without the float32 twin (every number float64).

The robustkit set-ups' time includes the prediction that picks the target, as the analysis makes
it (``PWWS.predict``: float64, which the fast engine certifies from its float32 twin where it
can). Printed per victim: seconds per example and the fast engine's speed-up over each set-up
(target: >= 5x the README route), PWWS queries per example (as PWWSAttacker counts them; the
README route's count less AttackEval's target prediction and re-check), sentences really run
through a model and forward batches per example, the float32 bound (``D``, the largest error
audited), and the identity checks: each set-up's adversarial text, success, PWWS queries and
modified words against the fast engine's (and the README route's target, from float32).

On a GPU (``--device cuda``) every model runs there: the README route's ``TransformersClassifier``
(its own default on a GPU machine), robustkit's float64 victim and its float32 twin (whose
certification audits CUDA's float32 kernels as it does the CPU's); ``fast-blas`` is left out
(oneDNN is a CPU kernel). Without stored runs on that machine the victims are random-head models
of ``--model`` (bert-tiny where minilm-l6 is not there).

    .venv/bin/python bench/attack.py [--run RUN ...] [--n 20] [--threads 2] [--quick] [--device cuda]
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from robustkit.attacks.base import AttackResult, Example
from robustkit.attacks.offline import configure_openattack
from robustkit.attacks.pwws import PWWS, pwws_attacker
from robustkit.attacks.victim import Victim
from robustkit.data.tasks import load_splits
from robustkit.models.pretrained import load_tokenizer
from robustkit.specs.spec import RunSpec
from robustkit.store.manifest import read_manifest
from robustkit.train.run_model import build_classifier, load_run_model

DEMO_RUNS = (
    "runs/demo/polarity-full-minilm-l6-s0-tsp0-09731d8b",
    "runs/demo/polarity-houlsby-minilm-l6-s0-tsp0-fbb08406",
)
FIELDS = ("adversarial", "success", "queries", "modified_words")


@dataclass
class Tally:
    """What one set-up cost over all examples."""

    seconds: float = 0.0
    sentences: int = 0
    batches: int = 0
    results: list[AttackResult] = field(default_factory=list)


class ReadmeRoute:
    """OpenAttack's README set-up on a float32 model, attacked one example at a time through AttackEval."""

    def __init__(self, model, tokenizer, max_length: int, device: str = "cpu") -> None:
        import OpenAttack

        self.model = model.eval()
        self.classifier = OpenAttack.classifiers.TransformersClassifier(
            model, tokenizer, model.get_input_embeddings(), max_length=max_length, device=torch.device(device)
        )
        self.eval = OpenAttack.AttackEval(pwws_attacker(), self.classifier)
        self.sentences = self.batches = 0
        predict = self.classifier.predict

        def counted(sen_list, labels=None):  # every sentence it is asked for runs: it has no memo
            self.sentences += len(sen_list)
            self.batches += math.ceil(len(sen_list) / self.classifier.batch_size)
            return predict(sen_list, labels)

        self.classifier.predict = counted

    def attack(self, sentence: str, label: int) -> AttackResult:
        started = time.perf_counter()
        (record,) = list(self.eval.ieval([{"x": sentence, "y": label}]))
        seconds = time.perf_counter() - started
        adversarial = record["result"]
        # AttackEval counts the target prediction, and the re-check of a success.
        queries = int(record["metrics"]["Victim Model Queries"]) - 1 - (adversarial is not None)
        words = pwws_attacker().tokenizer.tokenize(sentence.lower(), pos_tagging=False)
        modified = 0 if adversarial is None else sum(a != b for a, b in zip(words, adversarial.split(" ")))
        target = int(self.classifier.get_pred([sentence])[0])
        return AttackResult(
            sentence, adversarial, adversarial is not None, target, queries, modified, len(words), seconds
        )


def readme_on_frozen_embeddings(
    model, tokenizer, max_length: int, sentence: str, label: int, device: str = "cpu"
) -> str:
    """What the README route does on an adapter run as it is: the error AttackEval swallows, and its summary."""
    import OpenAttack

    messages = []

    class Catch(logging.Handler):
        def emit(self, record):
            messages.append(str(record.exc_info[1]) if record.exc_info else record.getMessage())

    logger = logging.getLogger("OpenAttack.AttackEval")
    handler, propagate = Catch(), logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        classifier = OpenAttack.classifiers.TransformersClassifier(
            model.eval(), tokenizer, model.get_input_embeddings(), max_length=max_length, device=torch.device(device)
        )
        summary = OpenAttack.AttackEval(pwws_attacker(), classifier).eval([{"x": sentence, "y": label}])
        classifier.hook.remove()
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
    return (
        f"attack success rate {summary['Attack Success Rate']}, error swallowed: {messages[0] if messages else 'none'}"
    )


def load_victim(run: str | None, model_name: str, method: str):
    """(float32 model, tokenizer, max_length, task, name): a stored run's best checkpoint, or a random head."""
    if run:
        spec = read_manifest(Path(run))["spec"]
        return (
            load_run_model(Path(run), "best"),
            load_tokenizer(spec["model"]),
            spec["max_length"] or 128,
            spec["task"],
            f"{Path(run).name} (best checkpoint)",
        )
    model, _, _ = build_classifier(RunSpec(model=model_name, task="rt", method=method), num_labels=2)
    return model, load_tokenizer(model_name), 128, "rt", f"{model_name} / {method} (random head)"


def bench_victim(model, tokenizer, max_length: int, task: str, name: str, args) -> tuple[bool, dict]:
    model = model.to(args.device)
    data = load_splits(task)["test"]
    sentences, labels = data["sentence"][: args.n], [int(y) for y in data["label"][: args.n]]
    victim = Victim(model, tokenizer, max_length=max_length)  # float64 copy; `model` stays float32
    # untimed: OpenAttack's tokenizer, POS tagger and WordNet load on first use (seconds), which
    # would otherwise be charged to whichever set-up attacks the first sentence
    warm = data["sentence"][args.n] if len(data["sentence"]) > args.n else "a fine film ."
    PWWS("openattack").attack(victim, Example(warm, int(victim.get_pred([warm])[0])))
    victim.clear_cache()
    frozen = not model.get_input_embeddings().weight.requires_grad
    where = (
        torch.cuda.get_device_name(args.device)
        if args.device.startswith("cuda")
        else f"{torch.get_num_threads()} CPU thread(s)"
    )
    print(f"\n== {name}: {len(sentences)} {task} test sentences, on {args.device} ({where})")
    if frozen:
        print(
            "readme route as is (frozen word embeddings), first sentence: "
            + readme_on_frozen_embeddings(model, tokenizer, max_length, sentences[0], labels[0], args.device)
        )
        model.get_input_embeddings().weight.requires_grad_(True)
        print(
            "readme route below: word embeddings made grad-capable (requires_grad_(True); the forward pass is "
            "unchanged)"
        )
    readme = ReadmeRoute(model, tokenizer, max_length, args.device)
    engines = {"fast": PWWS("fast")}
    if args.device == "cpu":  # oneDNN against BLAS: a CPU question
        engines["fast-blas"] = PWWS("fast", onednn=False)
    if not args.quick:
        engines |= {"fast-eager": PWWS("fast", lazy=False), "fast-float64": PWWS("fast", certify=False)}
    engines["openattack"] = PWWS("openattack")
    tallies = {key: Tally() for key in ["readme", *engines]}

    for index, (sentence, label) in enumerate(zip(sentences, labels)):
        for key, tally in tallies.items():
            if key == "readme":
                before = readme.sentences, readme.batches
                result = readme.attack(sentence, label)
                tally.sentences += readme.sentences - before[0]
                tally.batches += readme.batches - before[1]
            else:
                pwws = engines[key]
                models = [victim] + [s.victim for s in pwws._screens.values()]
                for m in models:
                    m.clear_cache()
                before = sum(m.forwards for m in models), sum(m.batches for m in models)
                started = time.perf_counter()
                target = pwws.predict(victim, sentence)  # as the analysis picks the target
                result = pwws.attack(victim, Example(sentence, target, index))
                result.seconds = time.perf_counter() - started
                models = [victim] + [s.victim for s in pwws._screens.values()]  # the twin is made on the first example
                tally.sentences += sum(m.forwards for m in models) - before[0]
                tally.batches += sum(m.batches for m in models) - before[1]
            tally.seconds += result.seconds
            tally.results.append(result)

    n = len(sentences)
    fast = tallies["fast"]
    print(
        f"success rate {sum(r.success for r in fast.results) / n:.2f}, "
        f"{sum(r.words for r in fast.results) / n:.1f} words per sentence"
    )
    print(
        f"{'set-up':>13}  {'s/example':>9}  {'fast is':>8}  {'PWWS queries':>12}  {'sentences run':>13}  "
        f"{'forward batches':>15}"
    )
    for key, tally in tallies.items():
        print(
            f"{key:>13}  {tally.seconds / n:9.3f}  {tally.seconds / fast.seconds:7.2f}x  "
            f"{sum(r.queries for r in tally.results) / n:12.1f}  {tally.sentences / n:13.1f}  {tally.batches / n:15.1f}"
        )
    screen = next(iter(engines["fast"]._screens.values()))
    print(
        f"fast engine's float32 bound: D = {screen.margin_error:.1e} on log-odds; largest error measured or audited "
        f"{screen.largest_error:.1e} over {screen.audited} sentences run in both precisions"
    )
    print(
        f"fast engine's float32 twin: last layer on the first token only: {screen.victim.first_token_only}; "
        f"linear layers on oneDNN: {screen.victim.onednn}"
    )
    print(
        f"fast engine {tallies['readme'].seconds / fast.seconds:.2f}x the README route (target >= 5x), "
        f"{tallies['openattack'].seconds / fast.seconds:.2f}x --engine openattack"
    )
    identical = True
    for key, tally in tallies.items():
        if key == "fast":
            continue
        same = [all(getattr(r, f) == getattr(q, f) for f in FIELDS) for r, q in zip(fast.results, tally.results)]
        extra = ""
        if key == "readme":
            targets = sum(r.target == q.target for r, q in zip(fast.results, tally.results))
            extra = f" (targets: float32 prediction = float64 prediction on {targets}/{n})"
        print(f"identical to fast ({', '.join(FIELDS)}): {key} {sum(same)}/{n}{extra}")
        for result, ok in zip(tally.results, same):
            if not ok:
                print(f"   differs: {result.original!r}")
        identical &= all(same) or key == "readme"  # the README route decides in float32: reported, not required
    ratios = {f"{key}/fast": round(tally.seconds / fast.seconds, 2) for key, tally in tallies.items() if key != "fast"}
    return identical, {
        **ratios,
        "readme identical": sum(
            all(getattr(r, f) == getattr(q, f) for f in FIELDS) for r, q in zip(fast.results, tallies["readme"].results)
        ),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--run",
        action="append",
        help="a stored run folder whose best checkpoint is a victim (repeatable; "
        "default: the demo store's polarity minilm-l6 full and houlsby runs where present)",
    )
    parser.add_argument("--model", default="minilm-l6", help="embedded model of random-head victims (no run found)")
    parser.add_argument("--n", type=int, default=20, help="test sentences attacked per victim (default: 20)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: 2)")
    parser.add_argument("--quick", action="store_true", help="leave out the fast-eager and fast-float64 variants")
    parser.add_argument(
        "--nltk-data", help="NLTK data tree for OpenAttack (default: $NLTK_DATA, then robustkit's embedded assets)"
    )
    parser.add_argument(
        "--device", default="cpu", help="where every set-up's model runs: cpu, cuda, cuda:N (default: cpu)"
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    configure_openattack(args.nltk_data)
    pwws_attacker()  # load WordNet and the tagger before timing
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    runs = args.run or [run for run in DEMO_RUNS if Path(run).exists()]
    victims = (
        [load_victim(run, args.model, None) for run in runs]
        if runs
        else [load_victim(None, args.model, method) for method in ("full", "houlsby")]
    )
    results = {victim[4]: bench_victim(*victim, args) for victim in victims}
    print(f"\nload average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    assert all(ok for ok, _ in results.values()), "an engine's results differ from the fast engine's"
    return {name: ratios for name, (_, ratios) in results.items()}


if __name__ == "__main__":
    main()
