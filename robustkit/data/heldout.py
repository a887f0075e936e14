"""Held-out English text that is no task's: the glosses of WordNet 3.0.

Forgetting (Biderman et al. 2024) is measured on text from outside the tuning task. The embedded
tasks cannot give it: ``rt`` and ``polarity`` are one corpus, Pang & Lee's movie reviews
(:data:`robustkit.data.tasks.MOVIE_REVIEWS`), and GLUE comes from the hub. WordNet 3.0 is embedded
already (the ``nltk-wordnet`` asset, pinned and sha256-checked, :mod:`robustkit.assets`), and
its 117,659 synsets have 117,033 distinct glosses: short definitions of general English words,
some with usage examples, about ten words each; text of the pre-training kind (encyclopaedic,
not reviews) that no task here holds.

The gloss is the part of each line of ``data.noun``, ``data.verb``, ``data.adj`` and
``data.adv`` after ``" | "`` (the database format of WordNet's wndb(5) manual page), read here
directly: NLTK's ``WordNetCorpusReader`` builds every synset to return it (about 30 s), and reads
nothing but the embedded asset anyway. A test checks the glosses against NLTK's reader on a
sample. Distinct glosses only, in file order (nouns, verbs, adjectives, adverbs).
"""

from __future__ import annotations

import functools

import numpy as np

from robustkit.errors import RobustkitError

ASSET = "nltk-wordnet"
FILES = ("data.noun", "data.verb", "data.adj", "data.adv")


@functools.lru_cache(maxsize=1)
def glosses() -> tuple[str, ...]:
    """Every distinct WordNet 3.0 gloss (definition and examples as written), in file order."""
    from robustkit.assets import asset_path

    folder = asset_path(ASSET) / "corpora" / "wordnet"
    seen: dict[str, None] = {}
    for name in FILES:
        with open(folder / name, encoding="utf-8") as lines:
            for line in lines:
                if line.startswith("  "):  # the license header
                    continue
                _, bar, gloss = line.partition(" | ")
                if bar and gloss.strip():
                    seen.setdefault(gloss.strip(), None)
    return tuple(seen)


def sample(count: int, seed: int, skip: int = 0) -> list[str]:
    """``count`` glosses of one seeded permutation, after its first ``skip``.

    Two calls with the same seed and disjoint ranges (``skip=0, count=n`` and ``skip=n``) give
    disjoint texts: the evaluation texts and the texts a head is fitted on.

    Raises
    ------
    RobustkitError
        More texts asked for than WordNet has.
    """
    texts = glosses()
    if count < 1 or skip < 0 or skip + count > len(texts):
        raise RobustkitError(f"cannot draw glosses {skip}..{skip + count}: WordNet has {len(texts)}")
    order = np.random.default_rng(seed).permutation(len(texts))[skip : skip + count]
    return [texts[i] for i in order]
