"""The pinned stack (adapters 1.3.0 -> transformers ~=4.57.6 -> tokenizers, huggingface_hub) is
the one installed, and pyproject.toml pins no torch build (a GPU image's CUDA torch fits)."""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _requirements(package: str) -> dict[str, Requirement]:
    found = {}
    for line in metadata.requires(package) or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            found[requirement.name.lower().replace("_", "-")] = requirement
    return found


def test_the_installed_stack_is_the_pinned_one():
    """Each link of the chain the README names holds for what is installed."""
    chain = {"adapters": ["transformers"], "transformers": ["tokenizers", "huggingface-hub"]}
    for package, pinned in chain.items():
        requirements = _requirements(package)
        for name in pinned:
            installed = metadata.version(name)
            assert requirements[name].specifier.contains(installed, prereleases=True), (package, name, installed)
    assert _requirements("adapters")["transformers"].specifier.contains("4.57.6")
    assert not _requirements("adapters")["transformers"].specifier.contains("5.0.0")  # why the README says so


def test_pyproject_takes_a_torch_range_and_python_311_to_313():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    torch = next(Requirement(d) for d in project["dependencies"] if Requirement(d).name == "torch")
    assert not any(s.operator == "==" for s in torch.specifier)
    assert torch.specifier.contains("2.11.0+cu130") and torch.specifier.contains("2.13.0")
    python = Requirement(f"python{project['requires-python']}").specifier
    assert [python.contains(v) for v in ("3.10", "3.11.7", "3.12.3", "3.13.0", "3.14.0")] == [
        False,
        True,
        True,
        True,
        False,
    ]
    pin = (ROOT / "constraints-cpu.txt").read_text().split("\n")
    assert [line for line in pin if line and not line.startswith("#")] == ["torch==2.13.0"]
