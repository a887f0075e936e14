"""Provenance recorded in every run's manifest: the package versions and the sha256 of the
embedded assets (model weights, data files) the run used, so a result can be traced to exactly
what produced it."""

from __future__ import annotations

import platform
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
