"""A store of single-sentence runs that every analysis and figure can read: two seeds each of full
fine-tuning, Houlsby adapters and LoRA (pairs of seeds, LoRA's factors, adapters to ablate) on
distinct generated reviews, bert-tiny at a rate where the runs learn (finite scores to compare),
trained in about 10 s. The own-data matrix trains it from a CSV, a JSONL file and a DataFrame;
the figure contract (``tests/test_figures_axes.py``) draws every figure from it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from robustkit.specs.spec import RunSpec

FAST = dict(model="bert-tiny", lr=1e-3, epochs=2, batch_size=16, max_length=32, adapter_size=16, eval_every=4)
RUNS = (("full", 0), ("full", 1), ("houlsby", 0), ("houlsby", 1), ("lora", 0), ("lora", 1))
WORDS = ("great", "awful", "fine", "bad", "lovely", "poor")


def reviews(n: int = 240) -> pd.DataFrame:
    """n distinct single-sentence reviews, string labels (an attack's kind of task)."""
    return pd.DataFrame(
        {
            "text": [
                f"a {WORDS[i % 6]} movie about {('cats', 'dogs', 'ships', 'trains')[i % 4]} number {i}"
                for i in range(n)
            ],
            "label": ["pos" if i % 2 == 0 else "neg" for i in range(n)],
        }
    )


def train_runs(store: Path, **fields) -> Path:
    """Train :data:`RUNS` on the data ``fields`` name (``task``, ``data_dir``) into ``store``."""
    from robustkit.train import train

    for method, seed in RUNS:
        train(RunSpec(method=method, seed=seed, **fields, **FAST), store, progress=False)
    return store
