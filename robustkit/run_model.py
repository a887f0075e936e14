"""A run's model from its checkpoints: build it (base + method), take the tensors it saves, load them back.

A run is always rebuilt as: pretrained base model + the method's adapters + the saved tensors.
Every checkpoint carries the fingerprint of its base model, so tensors are never loaded onto a
different base.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from robustkit import models
from robustkit.errors import StoreError
from robustkit.methods.registry import options_of
from robustkit.spec import RunSpec, TspSpec
from robustkit.store.checkpoints import load_checkpoint
from robustkit.store.manifest import read_spec


def build_classifier(spec: RunSpec, num_labels: int) -> tuple[nn.Module, list[str], str]:
    """The run's classification model as it starts (before any checkpoint is loaded).

    Returns
    -------
    model : nn.Module
    trainable : list of str
        Names of the parameters the method trains.
    fingerprint : str
        sha256 of the pretrained base (see :func:`robustkit.models.fingerprint`).
    """
    spec = spec.resolved()
    model = models.load_classifier(spec.model, num_labels, seed=spec.seed)
    fingerprint = models.fingerprint(model)
    torch.manual_seed(spec.seed)  # adapter init (and its re-init with adapter_init_std)
    method, options = options_of(spec)
    return model, method.adapt(model, options), fingerprint


def build_masked_lm(spec: TspSpec) -> tuple[nn.Module, list[str], str, list[str]]:
    """The TSP run's masked-LM model; also returns the head parameters initialised here."""
    model, initialised = models.load_masked_lm(spec.model, seed=spec.seed)
    fingerprint = models.fingerprint(model)
    torch.manual_seed(spec.seed)
    method, options = options_of(spec)
    return model, method.adapt(model, options), fingerprint, initialised


def trainable_state(model: nn.Module, names: list[str]) -> dict[str, torch.Tensor]:
    """The named parameters' tensors (detached, on CPU): what a checkpoint stores."""
    wanted = set(names)
    return {n: p.detach().cpu().clone() for n, p in model.named_parameters() if n in wanted}


def checkpoint_metadata(fingerprint: str, run_id: str, model: str, method: str) -> dict[str, str]:
    return {"base_fingerprint": fingerprint, "run_id": run_id, "model": model, "method": method}


def load_tensors(
    model: nn.Module,
    tensors: dict[str, torch.Tensor],
    metadata: dict[str, str],
    fingerprint: str,
    source: str,
    ignore_prefixes: tuple[str, ...] = (),
) -> list[str]:
    """Copy checkpoint tensors into ``model`` after checking they belong to its base.

    Parameters
    ----------
    ignore_prefixes : tuple of str
        Checkpoint tensors to skip (a masked-LM head when a TSP checkpoint starts a classifier).

    Returns
    -------
    list of str
        Names of the tensors loaded.

    Raises
    ------
    StoreError
        The checkpoint comes from another base model, or holds tensors the model lacks or with
        other shapes.
    """
    if metadata.get("base_fingerprint") != fingerprint:
        raise StoreError(
            f"checkpoint {source} was trained on base model {metadata.get('model')!r} "
            f"(fingerprint {str(metadata.get('base_fingerprint'))[:12]}), which is not the model it is "
            f"being loaded onto (fingerprint {fingerprint[:12]})"
        )
    parameters = dict(model.named_parameters())
    wanted = {k: v for k, v in tensors.items() if not k.startswith(ignore_prefixes)}
    unknown = sorted(set(wanted) - set(parameters))
    if unknown:
        raise StoreError(f"checkpoint {source} has tensors the model lacks: {unknown[:5]}")
    with torch.no_grad():
        for name, tensor in wanted.items():
            if parameters[name].shape != tensor.shape:
                raise StoreError(
                    f"checkpoint {source}: {name} has shape {tuple(tensor.shape)}, "
                    f"the model expects {tuple(parameters[name].shape)}"
                )
            parameters[name].copy_(tensor)
    return sorted(wanted)


def load_run_model(run_dir: str | Path, checkpoint: str = "best") -> nn.Module:
    """Rebuild a fine-tuning run's model at one of its checkpoints, in eval mode.

    Parameters
    ----------
    run_dir : path
        The run's folder in the store.
    checkpoint : str
        ``step-0`` (theta_0), ``best`` or ``last``.
    """
    from robustkit.tasks import get_task

    run_dir = Path(run_dir)
    spec = read_spec(run_dir)
    model, _, fingerprint = build_classifier(spec, get_task(spec.task).num_labels)
    tensors, metadata = load_checkpoint(run_dir, checkpoint)
    load_tensors(model, tensors, metadata, fingerprint, f"{run_dir.name}/{checkpoint}")
    return model.eval()
