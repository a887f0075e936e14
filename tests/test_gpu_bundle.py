"""tools/gpu_bundle.py carries every dependency the GPU image lacks, for the image's Python."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def _bundle():
    spec = importlib.util.spec_from_file_location("gpu_bundle", ROOT / "tools" / "gpu_bundle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_dependency_is_on_the_image_or_carried():
    bundle = _bundle()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    needed = {canonicalize_name(Requirement(d).name) for d in project["dependencies"]}
    needed.add("pytest")  # the checks themselves
    have = {canonicalize_name(n) for n in (*bundle.IMAGE, *bundle.PACKAGES)}
    assert needed <= have, needed - have
    # adapters' pinned stack shadows the image's transformers 5.x (README): all three carried
    assert {"transformers", "tokenizers", "huggingface-hub"} <= {canonicalize_name(n) for n in bundle.PACKAGES}


def test_wheels_are_chosen_for_the_machines_python():
    options = _bundle().target_options("3.12")
    assert options[options.index("--python-version") + 1] == "3.12" and "--only-binary=:all:" in options
    assert "--no-deps" in options and options.count("--platform") == 3


def test_the_pins_are_the_installed_versions():
    from importlib import metadata

    pins = _bundle().pinned(("transformers", "adapters"))
    assert pins == [f"transformers=={metadata.version('transformers')}", f"adapters=={metadata.version('adapters')}"]
