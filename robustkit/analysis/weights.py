"""A run's weight matrices as they act, with low-rank updates merged: what spectral analyses compare.

The pre-trained encoder layers hold 2-D weight matrices (BERT: the attention's query, key, value
and output projections, the feed-forward block's two). A method changes them in one of three ways:

- full and top-k fine-tuning train them: the checkpoint holds the new matrices;
- the LoRA family (LoRA, DoRA, VeRA, (IA)3 in AdapterHub) adds an update W + (alpha / r) B A (a
  rescaling for (IA)3) computed beside the matrix: AdapterHub's ``merge_adapter`` writes it
  into the matrix (its own merge, the one its inference uses), after which the matrix *is* the
  tuned matrix and the branch is skipped;
- adapters, prefix and prompt tuning add modules and leave every matrix as it was.

:func:`effective_matrices` returns the matrices after merging, so W_tuned - W_0 is the update a
method made to each matrix, whatever its parametrisation, and is exactly zero for the third
kind. W_0 is the run's ``step-0`` checkpoint merged the same way: the pre-trained matrix for a
run with ``tsp_step`` 0 (LoRA's B starts at zero, (IA)3's scaling at one), the TSP checkpoint
the run started from otherwise.

A matrix is one of the layer's own parameters, not a method's: its module path inside the
layer passes through none of AdapterHub's containers (:data:`METHOD_CONTAINERS`). ``kind``
names it as :mod:`robustkit.methods.lora` names the matrices it adapts (``q``, ``k``, ``v``,
``intermediate``, ``output``) plus ``attention-output``; a module path of an architecture not
in :data:`MATRIX_KINDS` is its own kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from robustkit.methods.base import ADAPTER_NAME
from robustkit.methods.model_parts import encoder_layers
from robustkit.train.run_model import LoadedRun, load_run

# Module path inside a layer -> the matrix's kind (BERT and RoBERTa, DistilBERT, DeBERTa).
MATRIX_KINDS = {
    "attention.self.query": "q",
    "attention.self.key": "k",
    "attention.self.value": "v",
    "attention.output.dense": "attention-output",
    "intermediate.dense": "intermediate",
    "output.dense": "output",
    "attention.q_lin": "q",
    "attention.k_lin": "k",
    "attention.v_lin": "v",
    "attention.out_lin": "attention-output",
    "ffn.lin1": "intermediate",
    "ffn.lin2": "output",
    "attention.self.query_proj": "q",
    "attention.self.key_proj": "k",
    "attention.self.value_proj": "v",
}
# Path segments of AdapterHub's method modules: a matrix below one is a method's, not the layer's.
METHOD_CONTAINERS = ("adapters", "loras", "prefix_tuning", "prompt_tuning", "refts", "shared_parameters")


@dataclass(frozen=True)
class Matrix:
    """Where a weight matrix sits: its encoder layer, its module path inside it, its kind."""

    layer: int
    path: str
    kind: str


def layer_matrices(model: nn.Module) -> dict[str, Matrix]:
    """Every 2-D weight of the encoder layers' own linear modules, by parameter name.

    Parameters
    ----------
    model : nn.Module
        A (possibly adapted) model with encoder layers
        (:func:`robustkit.methods.model_parts.encoder_layers`).

    Returns
    -------
    dict of str to Matrix
        ``bert.encoder.layer.0.attention.self.query.weight`` -> ``Matrix(0, "attention.self.query", "q")``,
        in the model's order.
    """
    prefixes = encoder_layers(model)
    found = {}
    for name, module in model.named_modules():
        if not isinstance(module, nn.Linear):
            continue
        layer = next((i for i, p in enumerate(prefixes) if f"{name}.".startswith(p)), None)
        if layer is None:
            continue
        path = name[len(prefixes[layer]) :]
        if any(part in METHOD_CONTAINERS for part in path.split(".")):
            continue
        found[f"{name}.weight"] = Matrix(layer, path, MATRIX_KINDS.get(path, path))
    return found


def merge_low_rank(model: nn.Module) -> bool:
    """Write a LoRA-family update into the matrices it adapts (AdapterHub's ``merge_adapter``), in place.

    Returns
    -------
    bool
        Whether the model had such an update (False: nothing changed).
    """
    from adapters.methods.lora import LoRALayer

    merged = any(isinstance(m, LoRALayer) and ADAPTER_NAME in m.loras for m in model.modules())
    if merged:
        model.merge_adapter(ADAPTER_NAME)
    return merged


def effective_matrices(run: LoadedRun) -> dict[str, torch.Tensor]:
    """The layer matrices of a loaded run with any low-rank update merged (the run's model is changed).

    Returns
    -------
    dict of str to Tensor
        Parameter name -> the matrix (d_out x d_in, detached, float32, on the CPU), for every
        matrix of :func:`layer_matrices`.
    """
    merge_low_rank(run.model)
    parameters = dict(run.model.named_parameters())
    return {name: parameters[name].detach().float().cpu().clone() for name in layer_matrices(run.model)}


def start_and_end(
    run_dir: str | Path, checkpoint: str
) -> tuple[dict[str, Matrix], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """A run's layer matrices at ``step-0`` and at ``checkpoint``, low-rank updates merged, on the CPU.

    Returns
    -------
    matrices : dict of str to Matrix
        Where each matrix sits.
    start, end : dict of str to Tensor
        W_0 and W_tuned by parameter name.
    """
    end_run = load_run(run_dir, checkpoint, "cpu")
    matrices = layer_matrices(end_run.model)
    end = effective_matrices(end_run)
    start = effective_matrices(load_run(run_dir, "step-0", "cpu", spec=end_run.spec))
    return matrices, start, end
