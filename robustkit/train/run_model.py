"""A run's model from its checkpoints: build it (base + method), take the tensors it saves, load them back.

A run is always rebuilt as: pretrained base model + the method's adapters + the saved tensors.
Every checkpoint carries the fingerprint of its base model, so tensors are never loaded onto a
different base. :func:`load_run` is the one way an analysis loads a run: its resolved spec, task
and model at a checkpoint, on a device (:class:`LoadedRun`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from robustkit.errors import StoreError
from robustkit.methods.registry import options_of
from robustkit.models import pretrained as models
from robustkit.models.precision import autocast_forward
from robustkit.specs.spec import ResolvedRunSpec, RunSpec, TspSpec
from robustkit.store.checkpoints import load_checkpoint

if TYPE_CHECKING:
    from robustkit.data.tasks import Task


def build_classifier(spec: RunSpec, num_labels: int) -> tuple[nn.Module, list[str], str]:
    """The run's classification model as it starts (before any checkpoint is loaded).

    Returns
    -------
    model : nn.Module
        Its forward passes under bfloat16 autocast for a ``bf16`` run (:mod:`robustkit.models.precision`).
    trainable : list of str
        Names of the parameters the method trains.
    fingerprint : str
        sha256 of the pretrained base (see :func:`robustkit.models.pretrained.fingerprint`).
    """
    spec = spec.resolved()
    model = models.load_classifier(spec.model, num_labels, seed=spec.seed)
    fingerprint = models.fingerprint(model)
    torch.manual_seed(spec.seed)  # adapter init (and its re-init with adapter_init_std)
    method, options = options_of(spec)
    trainable = method.adapt(model, options)
    return autocast_forward(model, spec.precision), trainable, fingerprint


def build_masked_lm(spec: TspSpec) -> tuple[nn.Module, list[str], str, list[str]]:
    """The TSP run's masked-LM model; also returns the head parameters initialised here."""
    model, initialised = models.load_masked_lm(spec.model, seed=spec.seed)
    fingerprint = models.fingerprint(model)
    torch.manual_seed(spec.seed)
    method, options = options_of(spec)
    trainable = method.adapt(model, options)
    return autocast_forward(model, spec.precision), trainable, fingerprint, initialised


def trainable_state(model: nn.Module, names: list[str]) -> dict[str, torch.Tensor]:
    """The named parameters' tensors (detached, on CPU): what a checkpoint stores."""
    wanted = set(names)
    return {n: p.detach().cpu().clone() for n, p in model.named_parameters() if n in wanted}


def checkpoint_metadata(fingerprint: str, run_id: str, model: str, method: str) -> dict[str, str]:
    return {"base_fingerprint": fingerprint, "run_id": run_id, "model": model, "method": method}


def check_tensors(
    model: nn.Module,
    tensors: dict[str, torch.Tensor],
    metadata: dict[str, str],
    fingerprint: str,
    source: str,
    ignore_prefixes: tuple[str, ...] = (),
) -> dict[str, torch.Tensor]:
    """Check that checkpoint tensors belong to ``model``'s base and fit its parameters, without
    copying them in.

    Parameters
    ----------
    model : nn.Module
        The model they are for.
    tensors : dict of str to Tensor
        A checkpoint's tensors by parameter name.
    metadata : dict of str to str
        The checkpoint's safetensors metadata (its ``base_fingerprint`` and ``model``).
    fingerprint : str
        sha256 of ``model``'s pretrained base (:func:`robustkit.models.pretrained.fingerprint`).
    source : str
        ``<run>/<checkpoint>``, for the messages.
    ignore_prefixes : tuple of str
        Checkpoint tensors to skip (a masked-LM head when a TSP checkpoint starts a classifier).

    Returns
    -------
    dict of str to Tensor
        The tensors to load (those not skipped), by parameter name.

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
    for name, tensor in wanted.items():
        if parameters[name].shape != tensor.shape:
            raise StoreError(
                f"checkpoint {source}: {name} has shape {tuple(tensor.shape)}, "
                f"the model expects {tuple(parameters[name].shape)}"
            )
    return wanted


def load_tensors(
    model: nn.Module,
    tensors: dict[str, torch.Tensor],
    metadata: dict[str, str],
    fingerprint: str,
    source: str,
    ignore_prefixes: tuple[str, ...] = (),
) -> list[str]:
    """Copy checkpoint tensors into ``model`` after checking they belong to its base
    (:func:`check_tensors`, whose parameters these are).

    Returns
    -------
    list of str
        Names of the tensors loaded.

    Raises
    ------
    StoreError
        The checkpoint comes from another base model, or holds tensors the model lacks or with
        other shapes (nothing is copied then).
    """
    wanted = check_tensors(model, tensors, metadata, fingerprint, source, ignore_prefixes)
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name, tensor in wanted.items():
            parameters[name].copy_(tensor)
    return sorted(wanted)


@dataclass(frozen=True)
class LoadedRun:
    """A fine-tuning run loaded at one checkpoint (:func:`load_run`): what an analysis of it needs.

    Attributes
    ----------
    run_dir : Path
        The run's folder in the store.
    checkpoint : str
        The checkpoint loaded (``step-0``, ``best``, ``last``).
    spec : ResolvedRunSpec
        The run's spec, resolved once (:meth:`robustkit.specs.spec.RunSpec.resolved`): pass it on,
        resolving it again is free.
    task : Task
        The run's task (:func:`robustkit.data.tasks.get_task`).
    model : nn.Module
        Base model + the method's adapters + the checkpoint's tensors, on ``device``, in eval mode.
    trainable : list of str
        Names of the parameters the run's method trains.
    fingerprint : str
        sha256 of the pretrained base (:func:`robustkit.models.pretrained.fingerprint`).
    tensors : dict of str to Tensor
        The checkpoint's tensors as stored (sha256-checked, on the CPU), by parameter name.
    device : torch.device
        Where the model is.
    """

    run_dir: Path
    checkpoint: str
    spec: ResolvedRunSpec
    task: Task
    model: nn.Module
    trainable: list[str]
    fingerprint: str
    tensors: dict[str, torch.Tensor]
    device: torch.device

    def checkpoint_tensors(self, name: str) -> dict[str, torch.Tensor]:
        """Another checkpoint's tensors of the same run (sha256-checked, on the CPU), after
        checking they fit the model (:func:`check_tensors`); the model keeps its weights.

        Raises
        ------
        StoreError
            A missing or corrupt checkpoint, or tensors that do not fit the model.
        """
        tensors, metadata = load_checkpoint(self.run_dir, name)
        check_tensors(self.model, tensors, metadata, self.fingerprint, f"{self.run_dir.name}/{name}")
        return tensors


def load_run(
    run_dir: str | Path, checkpoint: str = "best", device: str | torch.device | None = None, spec: RunSpec | None = None
) -> LoadedRun:
    """Load a fine-tuning run at one of its checkpoints: the one way analyses load a run.

    Parameters
    ----------
    run_dir : path
        The run's folder in the store.
    checkpoint : str
        ``step-0`` (theta_0), ``best`` or ``last``.
    device : str or torch.device, optional
        Where the model goes (``cpu``, ``cuda``, ``cuda:1``; default: the GPU if there is one,
        :func:`robustkit.train.evaluate.resolve_device`).
    spec : RunSpec, optional
        The run's spec where the caller has already read it (:func:`robustkit.store.manifest.read_spec`);
        default: read from the run's manifest. It is resolved here, once.

    Returns
    -------
    LoadedRun
        The resolved spec, the task, and the model holding the checkpoint's tensors, on
        ``device``, in eval mode.

    Raises
    ------
    StoreError
        No fine-tuning run there, a missing or corrupt checkpoint, or tensors that do not fit
        the model (another base model, other names or shapes).
    """
    from robustkit.store.run_data import run_spec, run_task
    from robustkit.train.evaluate import resolve_device

    run_dir = Path(run_dir)
    spec = run_spec(run_dir, spec)  # its data as the run recorded it, wherever this process runs
    task = run_task(spec, run_dir)
    model, trainable, fingerprint = build_classifier(spec, task.num_labels)
    tensors, metadata = load_checkpoint(run_dir, checkpoint)
    load_tensors(model, tensors, metadata, fingerprint, f"{run_dir.name}/{checkpoint}")
    where = resolve_device(device) if not isinstance(device, torch.device) else device
    return LoadedRun(run_dir, checkpoint, spec, task, model.to(where).eval(), trainable, fingerprint, tensors, where)


def load_run_model(run_dir: str | Path, checkpoint: str = "best") -> nn.Module:
    """Rebuild a fine-tuning run's model at one of its checkpoints, on the CPU, in eval mode
    (:func:`load_run`'s model).

    Parameters
    ----------
    run_dir : path
        The run's folder in the store.
    checkpoint : str
        ``step-0`` (theta_0), ``best`` or ``last``.
    """
    return load_run(run_dir, checkpoint, device="cpu").model
