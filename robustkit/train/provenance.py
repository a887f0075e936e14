"""Provenance recorded in every run's manifest: the package versions and the sha256 of the
embedded assets (model weights, data files) the run used, so a result can be traced to exactly
what produced it; and the kernels its bytes depend on (:func:`kernel_identity`).

The same run (same id) trained under another set of CPU kernels (``ATEN_CPU_CAPABILITY``:
``default``, ``avx2``, ``avx512``; another node type after a Slurm requeue) or another torch
version has other checkpoint bytes, ``step-0`` included. These are recorded in the manifest when
a run starts (``cpu_capability``, ``versions.torch``) and **not** put in the run id: that would
orphan every existing store and make one experiment's runs, trained on mixed nodes, look like
different experiments. A run finished under one set stays valid; what is refused is a *hybrid*,
an interrupted run resumed under another set (:func:`refuse_other_kernels`). A run started
before these were recorded resumes and has them recorded then (said once).
"""

from __future__ import annotations

import platform
import time
from importlib import metadata as importlib_metadata

PACKAGES = ("torch", "transformers", "adapters", "datasets", "numpy", "pandas", "safetensors", "robustkit")


def package_versions() -> dict[str, str]:
    """``{package: version}`` of Python and of :data:`PACKAGES` (``not installed`` if absent).

    torch's is ``torch.__version__``, build tag included: PyPI's CUDA wheel says ``2.13.0`` in
    its metadata but ``2.13.0+cu130`` at run time, and :func:`kernel_identity` compares the
    recorded value with the run-time one when a run resumes."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        versions[name] = _installed_version(name) or "not installed"
    versions["torch"] = kernel_identity()["torch"]
    return versions


def _installed_version(name: str) -> str | None:
    try:
        return importlib_metadata.version(name)
    except importlib_metadata.PackageNotFoundError:
        return None


def asset_hashes(*names: str) -> dict[str, dict[str, str]]:
    """sha256 of the files of the embedded assets a run uses (models and data), by asset name;
    names that are not embedded assets (a hub model, a local folder) are left out."""
    from robustkit.assets import ASSETS

    return {name: dict(ASSETS[name].files) for name in names if name in ASSETS}


def computed_on(device: str | None = None) -> dict[str, str]:
    """Where an analysis computes a result (recorded with the cached frame, never in its key).

    Parameters
    ----------
    device : str, optional
        As the analyses take it (``cpu``, ``cuda``, ``cuda:1``; None: the GPU if there is one).

    Returns
    -------
    dict
        ``device`` (resolved, with its index: ``cuda:0``, ``cpu``), ``device_name`` (the GPU's
        name; the CPU's architecture), ``torch`` (version) and ``computed`` (local time, ISO 8601).
    """
    import torch

    from robustkit.train.evaluate import resolve_device

    resolved = resolve_device(device)
    if resolved.type == "cuda" and resolved.index is None:
        resolved = torch.device("cuda", torch.cuda.current_device())
    name = torch.cuda.get_device_name(resolved) if resolved.type == "cuda" else platform.machine()
    return {
        "device": str(resolved),
        "device_name": name,
        "torch": torch.__version__,
        "computed": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def cpu_capability() -> str:
    """The CPU kernel set torch runs (``torch.backends.cpu.get_cpu_capability()``: ``DEFAULT``,
    ``AVX2``, ``AVX512``; ``ATEN_CPU_CAPABILITY`` lowers it)."""
    import torch

    return torch.backends.cpu.get_cpu_capability()


def kernel_identity() -> dict[str, str]:
    """What a run's bytes depend on beyond its spec: ``{"cpu_capability": ..., "torch": version}``."""
    import torch

    return {"cpu_capability": cpu_capability(), "torch": torch.__version__}


def refuse_other_kernels(run: str, recorded: dict, device_type: str, error: type[Exception]) -> list[str]:
    """Raise ``error`` (one line, naming both values) if an interrupted run (manifest
    ``recorded``) would resume under other kernels than it started with: a CPU run under
    another CPU capability, any run under another torch version.

    Returns
    -------
    list of str
        The names of the fields the manifest lacks (a run from before they were recorded): the
        caller records them and says so.
    """
    now = kernel_identity()
    started = {"cpu_capability": recorded.get("cpu_capability"), "torch": recorded.get("versions", {}).get("torch")}
    if device_type == "cpu" and started["cpu_capability"] not in (None, now["cpu_capability"]):
        raise error(
            f"run {run} was started under CPU capability {started['cpu_capability']}; resuming it under "
            f"{now['cpu_capability']} would finish it as a hybrid of two kernel sets: resume it on a node "
            f"with {started['cpu_capability']} (or with ATEN_CPU_CAPABILITY={started['cpu_capability'].lower()} "
            "where this CPU supports it), or move its folder aside to train it from the start"
        )
    # Manifests written before package_versions took torch.__version__ hold the metadata
    # version, which PyPI's CUDA wheel gives without its build tag: the same install, not another.
    if started["torch"] not in (None, now["torch"], _installed_version("torch")):
        raise error(
            f"run {run} was started under torch {started['torch']}; resuming it under torch {now['torch']} "
            f"would finish it as a hybrid: resume it where torch {started['torch']} is installed, or move "
            "its folder aside to train it from the start"
        )
    return [name for name, value in started.items() if value is None]
