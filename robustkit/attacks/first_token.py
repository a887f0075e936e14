"""A classifier whose last encoder layer computes the first token only: the same logits for
about 14% less compute (six-layer encoders), for the attacks' float32 screening twin.

Every sequence classifier robustkit builds (BERT, RoBERTa, XLM-R, ELECTRA, DeBERTa, DistilBERT,
ALBERT heads) reads the last layer's output at the first token alone (``[CLS]`` / ``<s>``).
That layer's other rows are computed and thrown away: their queries, attention, output
projection, adapters and feed-forward block, everything but the keys and values, which the
first token attends to. :func:`first_token_only` replaces the last layer's forward by one that
runs its attention with the first token as the only query and every token as keys and values
(the cross-attention path of the layer's own attention module, with the layer's own weights and
adapters), then its feed-forward block on that one row. The logits are the same up to float
rounding (the matrix products see other shapes, so their last bits may differ).

Written by hand: transformers has no such option. It applies to layers built like BERT's
(an ``attention`` module that takes ``encoder_hidden_states`` and a ``feed_forward_chunk``:
BERT, RoBERTa, XLM-R, ELECTRA, with or without AdapterHub's modules); other layers are left as
they are. Either way the result is *checked*: the changed model must give the original's logits
on a probe batch (two rows, one padded), else the change is undone. A method that acts on other
positions of the last layer (ReFT on the last token, say) fails that check and keeps the full
layer. The float32 twin is only ever used through certified intervals
(:mod:`robustkit.attacks.pwws`), so its rounding is covered by the measured bound ``D`` and its
audits in any case.
"""

from __future__ import annotations

import inspect
import types

import torch
from torch import nn
from transformers.pytorch_utils import apply_chunking_to_forward

from robustkit.attacks.probe import probe_batch, same_logits
from robustkit.errors import MethodError
from robustkit.methods.model_parts import encoder_layers


def first_token_only(model: nn.Module) -> bool:
    """Make ``model``'s last encoder layer compute its first token only, if that keeps its logits.

    Parameters
    ----------
    model : nn.Module
        A sequence-classification model in eval mode (changed in place: give it a copy).

    Returns
    -------
    bool
        Whether the change was made (the layer is BERT-like and the probe's logits agree);
        False leaves the model as it was.
    """
    try:
        layer = model.get_submodule(encoder_layers(model)[-1].rstrip("."))
    except (MethodError, AttributeError):
        return False
    attention = getattr(layer, "attention", None)
    if attention is None or not hasattr(layer, "feed_forward_chunk") or not _takes(attention, "encoder_hidden_states"):
        return False
    probe = probe_batch(model)
    with torch.inference_mode():
        expected = model(**probe).logits
        layer.forward = types.MethodType(_first_token_forward, layer)
        try:
            agrees = same_logits(model(**probe).logits, expected)
        except Exception:  # noqa: BLE001 - any failure of the shortcut keeps the full layer
            agrees = False
    if not agrees:
        del layer.forward  # the class's forward again
    return agrees


def _first_token_forward(self, hidden_states, attention_mask=None, *args, **kwargs):
    """The layer's output at the first token, shape (batch, 1, hidden)."""
    mask = attention_mask
    if mask is not None and mask.dim() == 4 and mask.shape[-2] > 1:
        mask = mask[:, :, :1, :]  # the first query's row of a (batch, 1, query, key) mask
    attended = self.attention(hidden_states[:, :1], attention_mask=mask, encoder_hidden_states=hidden_states)
    output = apply_chunking_to_forward(
        self.feed_forward_chunk, self.chunk_size_feed_forward, self.seq_len_dim, attended[0]
    )
    return (output,) + tuple(attended[1:])


def _takes(module: nn.Module, argument: str) -> bool:
    try:
        return argument in inspect.signature(module.forward).parameters
    except (TypeError, ValueError):
        return False
