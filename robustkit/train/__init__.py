"""Training: task-specific pretraining (masked LM) and supervised tuning, into the run store.

- :func:`pretrain` runs ONE masked-LM run per :class:`TspSpec` and keeps ``tsp-<N>`` at every
  requested step N; the method decides what trains (adapter runs: adapters, LayerNorms, head).
- :func:`train` runs one supervised :class:`RunSpec` from the pretrained model (``tsp_step`` 0)
  or from ``tsp-<N>``: AdamW, linear warmup (10%) and decay, gradient clipping, evaluation every
  ``eval_every`` steps and at each epoch end, ``step-0`` / ``best`` / ``last`` checkpoints,
  per-layer gradient norms (before clipping) at every step.

Both resume from ``last`` after a crash exactly as the uninterrupted run (step ``s``'s
randomness depends only on (seed, s)), and both stop a run that diverges (:class:`Diverged`),
which keeps its last finite state and is marked ``diverged``.

One concern per module:

- :mod:`robustkit.train.runs`: the entry points :func:`train` and :func:`pretrain` (locks,
  finished runs, preflight);
- :mod:`robustkit.train.loop`: what both loops share: one optimisation step, logs, resume,
  the manifest of a new run; :mod:`robustkit.train.pretraining` and
  :mod:`robustkit.train.finetuning`: the two loops;
- :mod:`robustkit.train.optimiser`: AdamW and the learning-rate schedules;
- :mod:`robustkit.train.gradnorms`: per-layer gradient norms;
- :mod:`robustkit.train.divergence`: the divergence guard;
- :mod:`robustkit.train.records`: what the manifest records of a run's data and trainable
  parameters.

The divergence guard in full, and why layer naming and the masked-LM loss live outside this
package: ``docs/reference.md``, "robustkit/train/__init__.py".
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from robustkit import lazy

if TYPE_CHECKING:  # for type checkers and IDEs only; at run time __getattr__ imports them
    from robustkit.train.divergence import Diverged
    from robustkit.train.runs import pretrain, train, train_counted

# Name -> module that defines it, imported on first access (PEP 562 module __getattr__): the
# entry points import torch and transformers, and the light modules of this package that
# read-only commands use (``collapse``, ``data_notes``, ...) must not pay for them (issue #57).
_LAZY = {
    "Diverged": "robustkit.train.divergence",
    "pretrain": "robustkit.train.runs",
    "train": "robustkit.train.runs",
    "train_counted": "robustkit.train.runs",
}


__getattr__, __dir__ = lazy.exports(__name__, _LAZY, globals())


__all__ = ["Diverged", "pretrain", "train", "train_counted"]
