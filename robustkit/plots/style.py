"""What every figure shares: method names and colours, PDF output."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # figures are files; no display is needed or assumed
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

METHOD_LABELS = {
    "houlsby": "with adapters (Houlsby)",
    "adapterhub-houlsby": "with adapters (AdapterHub preset)",
    "full": "without adapters (full fine-tuning)",
    "topk": "fine-tuning the top k layers",
    "layernorm": "LayerNorm parameters only",
}
METHOD_COLORS = {
    "houlsby": "#1b9e77", "adapterhub-houlsby": "#7570b3", "full": "#d95f02", "topk": "#1f78b4", "layernorm": "#e7298a",
}


def method_label(method: str) -> str:
    return METHOD_LABELS.get(method, method)


def method_color(method: str) -> str:
    return METHOD_COLORS.get(method, "#666666")


def new_figure(width: float = 5.0, height: float = 3.6) -> tuple[Figure, plt.Axes]:
    fig, ax = plt.subplots(figsize=(width, height), constrained_layout=True)
    return fig, ax


def save_pdf(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as a PDF (folders created) and close it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="pdf")
    plt.close(fig)
    return path
