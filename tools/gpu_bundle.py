"""Pack what an offline GPU machine needs to run robustkit's GPU checks into one archive.

The machine this was made for (an H100 image: Python 3.12, CUDA torch, transformers 5.x,
numpy, pandas, scipy, matplotlib, safetensors, pyarrow, accelerate preinstalled; no network)
lacks the rest of robustkit's stack and its embedded assets. This builds, here,
``<out>/gpu-bundle.tar.xz`` holding:

- ``site/``: :data:`PACKAGES` installed for that Python (``pip install --target --no-deps
  --only-binary=:all: --python-version``, from wheels ``pip download``-ed for CPython on
  manylinux x86_64), at the versions installed in the environment running this script (the
  stack the test suite passes on). transformers, tokenizers and huggingface_hub shadow the image's
  newer ones when ``site/`` comes first on ``PYTHONPATH``: adapters 1.3.0 pins transformers
  ~=4.57.6. Installed rather than as wheels: 2.5x smaller once compressed, and nothing to run
  pip for on the machine.
- ``cache/``: a ``$ROBUSTKIT_CACHE`` holding the embedded assets of :data:`ASSETS` (polarity: the
  attack identity tests), laid out as
  ``robustkit assets fetch`` leaves its cache (sha256-verified here; checked again on use).
  minilm-l6 (88 MB) is left out: it would not fit one 64 MiB transfer.
- ``nltk_data/``: NLTK's POS tagger (in no registry package robustkit pins), for ``$NLTK_DATA``.
- ``BUNDLE.txt``: what is inside and how it was made.

``bench/gpu_check.sh`` unpacks it on the machine and runs the checks. Run from the repository root:

    .venv/bin/python tools/gpu_bundle.py [--out .gpu-bundle] [--python-version 3.12]

``.gpu-bundle/`` is git-ignored; it travels to the machine as a carried path. The downloaded
wheels stay in ``.cache/gpu-wheels/`` (ignored too), outside what travels.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib import metadata
from pathlib import Path

# What the image lacks (robustkit's dependencies and theirs, beyond the image's own packages).
# What the GPU image has (Python 3.12.3, torch 2.11.0+cu130): robustkit's other dependencies are carried.
IMAGE = ("torch", "numpy", "pandas", "scipy", "matplotlib", "seaborn", "tqdm", "safetensors", "pyarrow", "accelerate")
# xxhash (datasets') is there already as far as we know; carried in case (200 kB). pytest and its
# own dependencies run the checks.
PACKAGES = (
    "transformers",
    "tokenizers",
    "huggingface_hub",
    "adapters",
    "datasets",
    "dill",
    "multiprocess",
    "submitit",
    "deepsig",
    "opda",
    "OpenAttack",
    "nltk",
    "defusedxml",
    "xxhash",
    "scikit-learn",
    "joblib",
    "threadpoolctl",
    "narwhals",
    "pytest",
    "pluggy",
    "iniconfig",
    "pygments",
)
ASSETS = ("bert-tiny", "rt", "polarity", "nltk-wordnet", "nltk-punkt-tab", "nltk-stopwords")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
MiB = 2**20


def target_options(python_version: str) -> list[str]:
    """pip's options selecting binary wheels for CPython ``python_version`` on manylinux x86_64."""
    options = ["--no-deps", "--only-binary=:all:", "--python-version", python_version, "--implementation", "cp"]
    for platform in PLATFORMS:
        options += ["--platform", platform]
    return options


def pinned(names: tuple[str, ...] = PACKAGES) -> list[str]:
    """``name==version`` of each package as installed here (the tested stack)."""
    return [f"{name}=={metadata.version(name)}" for name in names]


def download(requirements: list[str], wheels: Path, python_version: str) -> None:
    wheels.mkdir(parents=True, exist_ok=True)
    for requirement in requirements:  # one at a time: a missing wheel is named
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                *target_options(python_version),
                "-d",
                str(wheels),
                requirement,
            ],
            check=True,
        )


def install(wheels: Path, site: Path, python_version: str) -> None:
    files = sorted(str(w) for w in wheels.glob("*.whl"))
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-index",
            "--no-compile",
            *target_options(python_version),
            "--target",
            str(site),
            *files,
        ],
        check=True,
    )
    for cache in site.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)


def copy_assets(cache: Path) -> list[str]:
    """Each asset's verified folder into ``cache/assets/<name>`` (with its ``.verified`` stamp)."""
    from robustkit.assets import asset_dir, fetch

    lines = []
    for name in ASSETS:
        fetch(name)  # downloads and verifies it where it is not cached yet
        source = asset_dir(name)
        shutil.copytree(source, cache / "assets" / name, copy_function=shutil.copy2)
        size = sum(f.stat().st_size for f in source.rglob("*") if f.is_file())
        lines.append(f"asset {name}: {size / MiB:.1f} MiB")
    return lines


def copy_tagger(nltk_data: Path) -> str:
    from robustkit.attacks.nltk_data import TAGGER_PATH, default_roots, has_resource

    for root in default_roots():
        if has_resource(root, TAGGER_PATH):
            shutil.copytree(Path(root) / TAGGER_PATH, nltk_data / TAGGER_PATH, copy_function=shutil.copy2)
            return f"NLTK tagger from {root}"
    raise SystemExit(
        f"no NLTK data folder holds {TAGGER_PATH}: python -m nltk.downloader averaged_perceptron_tagger_eng"
    )


def folder_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / MiB


def working_tree_mib(root: Path) -> float:
    """What a transfer of the repository's working tree carries: tracked and untracked, not ignored."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.split(b"\0")
    return sum((root / os.fsdecode(p)).stat().st_size for p in listed if p and (root / os.fsdecode(p)).is_file()) / MiB


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--out",
        default=".gpu-bundle",
        help="folder of the archive, nothing else: it is what travels (default: .gpu-bundle)",
    )
    parser.add_argument(
        "--wheels",
        default=".cache/gpu-wheels",
        help="where the downloaded wheels are kept between builds (default: .cache/gpu-wheels)",
    )
    parser.add_argument("--python-version", default="3.12", help="the GPU machine's Python (default: 3.12)")
    parser.add_argument("--xz-preset", type=int, default=9, help="xz compression level, 0-9 (default: 9, the smallest)")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    wheels = Path(args.wheels).resolve() / f"py{args.python_version}"
    requirements = pinned()
    download(requirements, wheels, args.python_version)  # kept: a second build downloads nothing
    with tempfile.TemporaryDirectory() as tmp:
        stage = Path(tmp)
        install(wheels, stage / "site", args.python_version)
        lines = [
            f"robustkit GPU bundle for CPython {args.python_version} on manylinux x86_64",
            "packages (site/):",
            *(f"  {r}" for r in requirements),
            f"site/: {folder_mib(stage / 'site'):.1f} MiB installed",
        ]
        lines += copy_assets(stage / "cache")
        lines.append(copy_tagger(stage / "nltk_data"))
        (stage / "BUNDLE.txt").write_text("\n".join(lines) + "\n")
        archive = out / "gpu-bundle.tar.xz"
        with tarfile.open(archive, "w:xz", preset=args.xz_preset) as tar:
            for entry in sorted(stage.iterdir()):
                tar.add(entry, arcname=entry.name)
    tree = working_tree_mib(Path.cwd())
    size = archive.stat().st_size / MiB
    print("\n".join(lines))
    print(f"archive {archive}: {size:.1f} MiB; wheels (not sent): {folder_mib(wheels):.1f} MiB")
    print(
        f"transfer: working tree {tree:.1f} MiB + archive {size:.1f} MiB = {tree + size:.1f} MiB (limit 64 MiB); "
        f"carry {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}"
    )


if __name__ == "__main__":
    main()
