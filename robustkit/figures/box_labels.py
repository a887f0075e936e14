"""How a box figure names what it shows: panel titles, x values, hue levels and the score axis.

:mod:`robustkit.figures.score_boxes` draws with these words; the results table
(:mod:`robustkit.figures.tables`) heads its values with :func:`value_label` too.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from robustkit.figures.labels import setting_label
from robustkit.figures.method_style import method_label
from robustkit.figures.setting_groups import is_missing
from robustkit.figures.units import score_label


def panel_title(task: str, keys: list[str], combo: tuple, most: int = 3) -> str:
    """``task: method, setting value, ...``: an import by its import_id alone (its other settings
    are unknown), unknown settings left out (a missing train_size is the whole set: "all"), at
    most ``most`` settings."""
    settings = dict(zip(keys, combo))
    parts = [task, *([method_label(settings.pop("method"))] if "method" in settings else [])]
    imported = settings.get("import_id")
    if not is_missing(imported):
        settings = {"import_id": imported}
    shown = [
        f"import {v}"
        if k == "import_id"
        else data_label(v)
        if k == "data_fingerprint"
        else f"{setting_label(k)} {x_label(v)}"
        for k, v in settings.items()
        if not is_missing(v) or k == "train_size"
    ]
    parts += shown[:most] + (["..."] if len(shown) > most else [])
    return ": ".join(parts[:2]) + "".join(f", {p}" for p in parts[2:])


def data_label(fingerprint: str | None) -> str:
    """A data fingerprint as a panel title says it: its kind and 8 hex digits (``data
    user:673d5df8``), not 64 (``user:sha256:673d...``); the legacy default (None) is the task's
    own data."""
    if is_missing(fingerprint):
        return "data: the task's own"
    kind, _, digest = str(fingerprint).rpartition("sha256:")
    return f"data {kind}{digest[:8]}" if kind else f"data {fingerprint}"


def hue_label(hue: str, level: object) -> str:
    """A hue level as the legend names it: a method's label, ``TSP 1000 steps``, else ``<column> <level>``."""
    if hue == "method":
        return method_label(level)
    return f"TSP {level} steps" if hue == "tsp_step" else f"{hue} {level}"


def _numeric(value: object) -> bool:
    """A number, not a bool."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)


def x_label(value: object) -> str:
    """An x value as its tick says it: ``all`` for a missing value (train_size: the whole
    training set), whole numbers without ``.0``, other numbers by ``:g``."""
    if is_missing(value):
        return "all"  # train_size missing: the whole training set
    if _numeric(value):
        return f"{int(value)}" if float(value).is_integer() else f"{value:g}"
    return str(value)


def value_label(panel: pd.DataFrame) -> str:
    """Axis label of the scores: split, metric and unit (e.g. \"test accuracy (%)\")."""
    return score_label(panel["metric"], panel["split"] if "split" in panel else ())
