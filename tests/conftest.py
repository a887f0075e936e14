"""Shared fixtures: the embedded tiny model, and small run specs that train in seconds."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

# One BLAS thread per test process, set before numpy loads its BLAS: with two test processes on
# two cores, BLAS's own threads wait on each other (a 12,870 x 16 product of the Brunner-Munzel
# test took 12 ms with them, 0.6 ms without), as torch's do (_one_torch_thread).
for _variable in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import pytest  # noqa: E402

import robustkit.attacks  # noqa: E402, F401  (before any test module imports OpenAttack: its 3.12+ shim)
from robustkit.specs.spec import RunSpec  # noqa: E402


def pytest_collection_modifyitems(config, items):
    """Skip the tests marked ``gpu`` where torch sees no CUDA device, saying why (a skip is never a
    pass: `pytest -m gpu` on a machine without one reports them all skipped)."""
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu:
        return
    import torch

    if torch.cuda.is_available():
        return
    built = f"built for CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
    skip = pytest.mark.skip(reason=f"needs a CUDA GPU: torch {torch.__version__} ({built}) sees none")
    for item in gpu:
        item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    """Tiny test models gain nothing from a second thread, and two threads per process thrash
    when test processes overlap (the kill/resume subprocess, Slurm jobs) on 2 cores."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session", autouse=True)
def _ctrl_c_reaches_child_processes():
    """The Ctrl-C tests signal `python -m robustkit` children. A suite started in the background
    (`make test &`, nohup) inherits SIGINT ignored, the children with it, and Python installs no
    KeyboardInterrupt handler where SIGINT is ignored at start: they would never see the Ctrl-C.
    Handling it here resets it to the default in every child at exec."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield


@pytest.fixture(scope="session")
def shared_nltk_data() -> str:
    """The NLTK data the attack tests share, as a ``$NLTK_DATA`` value (``os.pathsep``-joined).

    Resolved once, as the attacks resolve it (:func:`robustkit.attacks.nltk_data.default_roots`):
    ``$NLTK_DATA`` where it is set, then the embedded WordNet, Punkt, stopwords and POS tagger
    (pinned registry packages, ``robustkit assets fetch``), so a fresh clone needs nothing else.
    """
    from robustkit.attacks.nltk_data import default_roots

    return os.pathsep.join(default_roots())


@pytest.fixture(scope="session")
def tiny_model() -> str:
    """Folder of the embedded 2-layer BERT (hidden 128) with a masked-LM head."""
    from robustkit.assets import asset_path

    return str(asset_path("bert-tiny"))


@pytest.fixture
def tiny_spec() -> RunSpec:
    """A run of a few steps on bert-tiny / rt: 64 training and 1k validation examples."""
    return RunSpec(
        model="bert-tiny",
        task="rt",
        method="houlsby",
        seed=1,
        train_size=64,
        epochs=2,
        batch_size=16,
        max_length=32,
        adapter_size=16,
        eval_every=2,
    )


# A local GLUE-format RTE of 24 training / 12 dev pairs: evaluations take milliseconds, where the
# embedded rt task's 1k dev examples take seconds each; it also exercises the local-TSV path.
_RTE_PAIRS = [
    ("A man plays a guitar.", "A person makes music.", "entailment"),
    ("The sky is green.", "Grass is blue.", "not_entailment"),
    ("A dog runs in the park.", "An animal is outside.", "entailment"),
    ("She sold her old car.", "She bought a car.", "not_entailment"),
]
TINY_RTE = RunSpec(model="bert-tiny", task="rte", epochs=2, batch_size=8, max_length=32, adapter_size=16, eval_every=2)


def write_rte(folder: Path, train: int = 24, dev: int = 12) -> Path:
    """A GLUE data folder with RTE/train.tsv and RTE/dev.tsv in the GLUE distribution's format."""
    rte = folder / "RTE"
    rte.mkdir(parents=True, exist_ok=True)
    for name, n in (("train.tsv", train), ("dev.tsv", dev)):
        rows = [f"{i}\t{a}\t{b}\t{label}" for i, (a, b, label) in enumerate((_RTE_PAIRS * n)[:n])]
        (rte / name).write_text("\n".join(["index\tsentence1\tsentence2\tlabel", *rows]) + "\n")
    return folder


@pytest.fixture(scope="session")
def rte_folder():
    """:func:`write_rte`, for tests that need their own local GLUE folder."""
    return write_rte


@pytest.fixture(scope="session")
def tiny_store(tmp_path_factory) -> Path:
    """houlsby and full bert-tiny runs (seed 0) on the tiny local RTE, shared by the analysis
    tests; a test that changes a run works on a copy."""
    from robustkit.train import train

    root = tmp_path_factory.mktemp("analysis-tiny-store")
    glue = write_rte(root / "glue")
    for method in ("houlsby", "full"):
        train(dataclasses.replace(TINY_RTE, method=method, data_dir=str(glue)), root / "runs", progress=False)
    return root / "runs"


def new_run(root: Path, name: str = "run-a", **manifest) -> Path:
    """A run folder under ``root`` holding only a minimal fine-tuning manifest (``manifest``
    adds or replaces its keys): the store tests' starting point."""
    from robustkit.store.manifest import write_manifest

    run_dir = root / name
    run_dir.mkdir()
    write_manifest(run_dir, {"run_id": name, "kind": "finetune", "spec": {"task": "rt"}, "checkpoints": {}, **manifest})
    return run_dir


@pytest.fixture(scope="session")
def lora_store(tiny_store, tmp_path_factory) -> Path:
    """tiny_store + full fine-tuning seed 1 and LoRA seeds 0 and 1 (r = 8 on query and value), for
    the analyses of weight updates and of seed pairs (issue #30); a test that changes a run works on
    a copy."""
    import shutil

    from robustkit.store.folders import run_dirs
    from robustkit.store.manifest import read_spec
    from robustkit.train import train

    runs = tmp_path_factory.mktemp("lora-store") / "runs"
    shutil.copytree(tiny_store, runs, ignore=shutil.ignore_patterns(".cache"))
    data_dir = next(read_spec(p).data_dir for p in run_dirs(runs))
    for method, seed in (("full", 1), ("lora", 0), ("lora", 1)):
        train(dataclasses.replace(TINY_RTE, method=method, seed=seed, data_dir=data_dir), runs, progress=False)
    return runs


@pytest.fixture(scope="session")
def sentence_runs(tmp_path_factory) -> Path:
    """Two seeds each of full, Houlsby and LoRA bert-tiny runs on a generated single-sentence CSV
    (:mod:`sentence_store`): what every figure needs, for the common figure contract."""
    from sentence_store import reviews, train_runs

    root = tmp_path_factory.mktemp("sentence-runs")
    reviews().to_csv(root / "reviews.csv", index=False)
    return train_runs(root / "runs", task="reviews", data_dir=str(root / "reviews.csv"))
