"""Kept importable only: every analysis declares its statistics in its own module, next to its
computation (``DECLARED = Analysis(..., statistics=(Statistic("name", ":function", ...),))``:
:mod:`robustkit.analysis.declare`); the attack's ``success`` is
:func:`robustkit.analysis.attack.attack_success`. ``with_outcome`` and ``OUTCOME_ON`` are
:mod:`robustkit.analysis.scores`'s, importable from here as before; nothing of robustkit imports
this module.
"""

from __future__ import annotations

from robustkit.analysis.scores import OUTCOME_ON, with_outcome  # noqa: F401  (kept importable from here)
