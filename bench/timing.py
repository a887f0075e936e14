"""What the training benches share: rt batches and the fastest block of timed training steps.

``bench/train.py`` (every method against full fine-tuning) and ``bench/cpu_throughput.py`` (the
examples per second the CPU plan divides by) time the same training step
(:meth:`robustkit.train.loop._Loop.step`: forward, backward, clipping, AdamW) the same way.
"""

from __future__ import annotations

import time

import torch

from robustkit.data import batches as data
from robustkit.data import tasks
from robustkit.models.pretrained import load_tokenizer
from robustkit.specs.spec import RunSpec
from robustkit.train.loop import _Loop
from robustkit.train.optimiser import _Optimiser
from robustkit.train.run_model import build_classifier


def rt_features(model_name: str, examples: int, length: int, split: str = "train") -> tuple[list, object]:
    """The first ``examples`` of rt's ``split`` tokenised for ``model_name`` at ``length`` tokens,
    and the collator that pads them into a batch."""
    splits = tasks.load_splits("rt")
    tokenizer = load_tokenizer(model_name)
    texts = data.split_texts(splits[split], tasks.get_task("rt").text_fields)[:examples]
    features = data.encode_labelled(texts, splits[split]["label"][:examples], tokenizer, length)
    return features, data.classification_collator(tokenizer)


def rt_batches(model_name: str, examples: int, batch: int, length: int) -> list[dict]:
    """:func:`rt_features` of the train split collated into batches of ``batch``, in order."""
    features, collator = rt_features(model_name, examples, length)
    return [collator(features[i : i + batch]) for i in range(0, len(features), batch)]


def fastest_steps(spec: RunSpec, batches: list[dict], steps: int, repeats: int) -> tuple[torch.nn.Module, list, float]:
    """Train ``spec``'s model on ``batches`` (cycled): one warm-up step, then ``repeats`` blocks of
    ``steps`` steps; (the model, its trained parameter names, seconds of the fastest block), so
    that a busy machine's pauses do not count."""
    model, names, _ = build_classifier(spec, num_labels=2)
    optimiser = _Optimiser(model, spec.lr, 0.0)
    loop = _Loop(run_dir=None, seed=0, progress=False)
    loop.step(model, batches[0], optimiser, 1.0, 0, 1.0)  # warm-up, not timed
    fastest = float("inf")
    for block in range(repeats):
        started = time.perf_counter()
        for step in range(block * steps, (block + 1) * steps):
            loop.step(model, batches[step % len(batches)], optimiser, 1.0, step + 1, 1.0)
        fastest = min(fastest, time.perf_counter() - started)
    return model, names, fastest
