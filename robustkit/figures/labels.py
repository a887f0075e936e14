"""How a figure words what it shows: run settings and their values, and its title.

A setting's name as a title, axis or table header says it (:func:`setting_label`), its value
(:func:`setting_text`, :func:`cell_text`), a group's settings (:func:`settings_text`), and the
title naming the paper's figure and what was run (:func:`paper_title`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from robustkit.figures.setting_groups import is_missing
from robustkit.methods.adapterhub import short_config

# Setting columns as figures and tables name them; any other column with its underscores spaced.
SETTING_LABELS = {
    "tsp_step": "TSP steps",
    "train_size": "training examples",
    "adapter_size": "adapter size m",
    "lr": "learning rate",
}


def setting_label(column: str) -> str:
    """A run setting's name as a panel title, axis or table header says it (``lr`` ->
    ``learning rate``)."""
    return SETTING_LABELS.get(column, column.replace("_", " "))


def setting_text(column: str, value: object) -> str:
    """One run setting as a figure shows it: an AdapterHub config (an import's JSON) as its short
    readable label (:func:`robustkit.methods.adapterhub.short_config`), whole numbers without
    their ``.0``, anything else as it is."""
    if isinstance(value, str) and (column.endswith(".config") or len(value) > 32):
        return short_config(value)
    if isinstance(value, (float, np.floating)) and float(value).is_integer() and column != "lr":
        return str(int(value))
    return f"{value:g}" if isinstance(value, (float, np.floating)) else str(value)


def cell_text(value: object, column: str) -> str:
    """A setting's value in a title or table cell: :func:`setting_text`, a missing training size
    as ``all`` (the whole set) and any other missing value as ``-``."""
    if is_missing(value):
        return "all" if column == "train_size" else "-"
    return setting_text(column, value)


def settings_text(settings: dict, most: int = 3) -> str:
    """``{column: value}`` of a line or group as ``k=v, ...``: missing values left out (an
    import's unknown settings), at most ``most`` settings (an import shows its ``import_id``
    first, which alone tells it apart)."""
    shown = sorted(((k, v) for k, v in settings.items() if not is_missing(v)), key=lambda kv: kv[0] != "import_id")
    text = ", ".join(f"{k}={setting_text(k, v)}" for k, v in shown[:most])
    return text + (", ..." if len(shown) > most else "")


def paper_title(figure: str, frame: pd.DataFrame | None = None, extra: str = "") -> str:
    """``"He et al. 2021, figure 2 — minilm-l6 on rt"``: the paper's figure and what was run.

    Parameters
    ----------
    figure : str
        The paper and figure, e.g. ``"He et al. 2021, figure 2"``.
    frame : DataFrame, optional
        Rows drawn; their ``model`` and ``task`` columns name what was actually used.
    extra : str
        Appended after a comma (e.g. ``"layer-shared adapters"``).
    """
    used = ""
    if frame is not None and not frame.empty:
        models = _values(frame, "model")
        task_names = _values(frame, "task")
        used = " on ".join(p for p in (", ".join(models), ", ".join(task_names)) if p)
    title = f"{figure} — {used}" if used else figure
    return f"{title}, {extra}" if extra else title


def _values(frame: pd.DataFrame, column: str) -> list[str]:
    """The distinct values of ``column`` as sorted text; none where ``frame`` lacks it."""
    return sorted(map(str, frame[column].dropna().unique())) if column in frame else []
