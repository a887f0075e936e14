"""Which rows of a per-layer frame are the top or bottom third of the encoder: the layer
convention of every per-layer statistic, stated once.

The frames number their layers as their source does, and the frames' columns stay as they are
(figures and caches read them):

- the representation frames (``rsa``, ``similarity-ci``): ``layer`` 0 is the embeddings, encoder
  layers are 1..L (:data:`REPRESENTATIONS`);
- the gradient-norm frame (``gradnorm``): ``layer_index`` is the ``i`` of the model's
  ``layer.<i>``, encoder layers 0..L-1, NaN for the pooler, classifier and embeddings
  (:data:`GRADIENT_NORMS`).

A statistic names its frame's :class:`Numbering`; :func:`encoder_third` then keeps the same
encoder layers of either frame (the top third of a 6-layer encoder is its layers 5 and 6 counted
from 1, whichever frame they come from).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from robustkit.errors import RobustkitError


@dataclass(frozen=True)
class Numbering:
    """How a frame numbers its encoder layers: the column, and the number of the first encoder
    layer in it (the highest number in each run is its last encoder layer)."""

    column: str
    first: int


REPRESENTATIONS = Numbering("layer", 1)  # 0 = the embeddings
GRADIENT_NORMS = Numbering("layer_index", 0)  # layer.<i>; NaN outside the encoder


def encoder_third(frame: pd.DataFrame, numbering: Numbering, which: str) -> pd.DataFrame:
    """Rows of the top or bottom third (rounded up) of each run's encoder layers.

    Parameters
    ----------
    frame : DataFrame
        Rows with ``run_id`` and the numbering's column (rows outside the encoder, NaN there, are
        dropped).
    numbering : Numbering
        :data:`REPRESENTATIONS` or :data:`GRADIENT_NORMS`.
    which : {"top", "bottom"}

    Raises
    ------
    RobustkitError
        ``which`` is neither.
    """
    if which not in ("top", "bottom"):
        raise RobustkitError(f"layer must be each, top or bottom, got {which!r}")
    frame = frame.dropna(subset=[numbering.column])
    index = pd.to_numeric(frame[numbering.column])
    last = index.groupby(frame["run_id"]).transform("max")
    k = np.ceil((last - numbering.first + 1) / 3)
    keep = index > last - k if which == "top" else (index >= numbering.first) & (index < numbering.first + k)
    return frame[keep]
