"""Provenance recorded in every run's manifest: the package versions and the sha256 of the
embedded assets (model weights, data files) the run used, so a result can be traced to exactly
what produced it."""

from __future__ import annotations

import platform
import time
from importlib import metadata as importlib_metadata

PACKAGES = ("torch", "transformers", "adapters", "datasets", "numpy", "pandas", "safetensors", "robustkit")


def package_versions() -> dict[str, str]:
    """``{package: version}`` of Python and of :data:`PACKAGES` (``not installed`` if absent)."""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


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

    from robustkit.evaluate import resolve_device

    resolved = resolve_device(device)
    if resolved.type == "cuda" and resolved.index is None:
        resolved = torch.device("cuda", torch.cuda.current_device())
    name = torch.cuda.get_device_name(resolved) if resolved.type == "cuda" else platform.machine()
    return {"device": str(resolved), "device_name": name, "torch": torch.__version__,
            "computed": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
