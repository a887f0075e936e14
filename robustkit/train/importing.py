"""Bring your own checkpoints: put models trained elsewhere into a run store, as runs that every
analysis accepts.

A source folder is a fine-tuned transformers model (``save_pretrained``: a run of method
``full``), an AdapterHub adapter folder (``save_adapter``: robustkit's own method where one makes
exactly its config, :func:`robustkit.methods.registry.method_of_config`, else method
``adapterhub``), or a checkpoint series of ``checkpoint-<N>/`` subfolders of either. The run is
rebuilt, as every run is, as the base (``base``) + the method + the saved tensors
(:mod:`robustkit.train.run_model`); a source of another architecture is refused.

Checkpoints written: ``step-0`` (the base with the method at its init, the head robustkit's with
seed 0), ``step-<N>`` per checkpoint of a series, ``last`` and ``best`` (the series' checkpoint
with the best validation score, as training chooses it); ``last`` and ``best`` are scored and
get an outcome (:mod:`robustkit.store.collapse`). An import is all or nothing, and pickled
weights are read with ``torch.load(weights_only=True)``. What nobody told robustkit (the seed,
the learning rate, ...) is recorded as unknown (the manifest's ``unknown``), never guessed; the
manifest's ``import`` records the source folder and the sha256 of each of its files.

``train_size`` decides the split convention the import is scored under; without it the store's
own runs of the task decide (:func:`store_convention`).

The details (adapter configs, a base's missing weights and ``seed``, the split convention):
``docs/reference.md``, "robustkit/train/importing.py".
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from robustkit.data import batches as data
from robustkit.data import tasks
from robustkit.errors import RobustkitError, StoreError
from robustkit.methods.adapterhub import config_json
from robustkit.methods.base import ADAPTER_NAME
from robustkit.methods.registry import method_of_config
from robustkit.models import pretrained as models
from robustkit.specs.spec import SPEC_DEFAULTS, RunSpec, _safe
from robustkit.store.atomic import atomic_write_parquet, sha256_file
from robustkit.store.checkpoints import finished_state, save_checkpoint
from robustkit.store.folders import HISTORY, new_store, run_dirs
from robustkit.store.locks import run_lock
from robustkit.store.logs import record_logs
from robustkit.store.manifest import read_manifest, refuse_damaged, update_manifest, write_manifest
from robustkit.store.schema import COMPLETE
from robustkit.train.evaluate import (
    EVAL_BATCH_SIZE,
    encode_split,
    eval_batches,
    evaluate,
    final_outcomes,
    split_baselines,
)
from robustkit.train.provenance import asset_hashes, package_versions
from robustkit.train.run_model import build_classifier, checkpoint_metadata, trainable_state

# Spec fields an import can be told (``known``); the training settings besides these are unknown.
KNOWN_FIELDS = ("seed", "lr", "epochs", "batch_size", "train_size", "split_seed")
# Training settings of an import that are unknown unless given (the rest of the spec describes
# how robustkit reads and scores the data, which it does itself).
UNKNOWN_UNLESS_GIVEN = (
    "seed",
    "lr",
    "epochs",
    "batch_size",
    "train_size",
    "warmup_ratio",
    "weight_decay",
    "max_grad_norm",
)
_CHECKPOINT = re.compile(r"checkpoint-(\d+)")
ADAPTER_CONFIG = "adapter_config.json"
_HEAD_FILES = ("pytorch_model_head.bin", "model_head.safetensors")


class ImportError_(RobustkitError):
    """A folder that cannot be imported as a run (what is wrong named)."""


@dataclass(frozen=True)
class Source:
    """One saved model to import: ``kind`` ``model`` (transformers folder) or ``adapter``
    (AdapterHub folder), and ``step``, its optimisation step in a series (None alone)."""

    kind: str
    folder: Path
    step: int | None = None


def find_sources(folder: str | Path) -> list[Source]:
    """The saved models in ``folder``: itself, or each ``checkpoint-<N>/`` in step order.

    Raises
    ------
    ImportError_
        No model, adapter or checkpoint series there, or a series mixing kinds.
    """
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise ImportError_(f"{str(folder)!r} is not a folder")
    alone = _source(folder)
    if alone is not None:
        return [alone]
    series = sorted(
        (int(m.group(1)), p) for p in folder.iterdir() if p.is_dir() and (m := _CHECKPOINT.fullmatch(p.name))
    )
    sources = []
    for step, path in series:
        source = _source(path, step)
        if source is None:
            raise ImportError_(
                f"{path} holds neither a transformers model (config.json + weights) nor an AdapterHub adapter "
                f"({ADAPTER_CONFIG})"
            )
        sources.append(source)
    if not sources:
        raise ImportError_(
            f"{str(folder)!r} holds no model to import: expected a transformers model folder (config.json + "
            f"weights), an AdapterHub adapter folder ({ADAPTER_CONFIG}, from save_adapter) or checkpoint-<N>/ folders"
        )
    if len({s.kind for s in sources}) > 1:
        raise ImportError_(f"the checkpoint series in {folder} mixes full models and adapters")
    return sources


def _source(folder: Path, step: int | None = None) -> Source | None:
    if (folder / ADAPTER_CONFIG).is_file():
        return Source("adapter", folder, step)
    if (folder / "config.json").is_file() and any((folder / name).is_file() for name in models.WEIGHT_FILES):
        return Source("model", folder, step)
    adapters = (
        [p for p in folder.iterdir() if p.is_dir() and (p / ADAPTER_CONFIG).is_file()] if step is not None else []
    )
    if len(adapters) == 1:  # AdapterTrainer: checkpoint-N/<adapter name>/
        return Source("adapter", adapters[0], step)
    return None


def import_run(
    folder: str | Path,
    base: str,
    task: str,
    store_path: str | Path,
    *,
    known: dict | None = None,
    data_dir: str | None = None,
    max_length: int | None = None,
    device: str | None = None,
) -> Path:
    """Put a model, an adapter or a checkpoint series into a store as one fine-tuning run.

    Parameters
    ----------
    folder : path
        The source (see the module docstring).
    base : str
        The model it was tuned from (embedded name, folder or hub name).
    task : str
        The task it was tuned on; its validation and test splits score the import.
    known : dict, optional
        Settings of the source's training that are known (:data:`KNOWN_FIELDS`: ``seed``,
        ``lr``, ...); every other training setting is recorded as unknown. Without
        ``train_size``, the split convention of the store's runs of ``task`` is used
        (:func:`store_convention`); ``train_size`` 0 says the full-data splits.
    data_dir : str, optional
        Local GLUE TSV folder for a GLUE task.
    max_length : int, optional
        Tokens per example when scoring (default: the method's).

    Returns
    -------
    Path
        The run's folder; importing the same files again returns it as it is.
    """
    from robustkit.specs.preflight import check_device

    check_device(device)  # before any file is hashed or scored, as train does
    sources = find_sources(folder)
    known = dict(known or {})
    full_data = known.get("train_size") == 0  # said outright: the full-data splits
    if full_data:
        known["train_size"] = None
    bad = sorted(set(known) - set(KNOWN_FIELDS))
    if bad:
        raise ImportError_(f"cannot record {', '.join(bad)} for an import (known settings: {', '.join(KNOWN_FIELDS)})")
    task_object = tasks.get_task(task)
    method, options = _method_of(sources)
    given = {k: v for k, v in known.items() if v is not None}
    convention = None
    if "train_size" not in given and not full_data:
        convention = store_convention(store_path, task)
        if convention is not None:
            given.update(train_size=convention.train_size, split_seed=convention.split_seed)
    unknown = [name for name in UNKNOWN_UNLESS_GIVEN if name not in given]
    spec = RunSpec(
        model=base,
        task=task,
        method=method,
        method_options=options,
        data_dir=data_dir,
        max_length=max_length,
        **{**{name: SPEC_DEFAULTS[name] for name in unknown}, **given},
    ).resolved()
    files = {
        str(s.folder.relative_to(Path(folder).expanduser())) if s.step is not None else ".": _hashes(s.folder)
        for s in sources
    }
    if convention is not None:
        note = convention.describe(task)
    else:
        note = _convention_name(spec.train_size, spec.split_seed) + (
            " (given)"
            if "train_size" in given or full_data
            else " (not given; no run of the task in the store says otherwise)"
        )
    run_id = _run_id(spec, unknown, files)
    # all or nothing: a refused, failed or interrupted import leaves no folder behind, neither
    # its run's nor a store it created (an import is not resumable; importing again starts over)
    with new_store(store_path) as root:
        run_dir = root / run_id
        existed = run_dir.exists()
        try:
            with run_lock(run_dir):
                if finished_state(run_dir)[0]:
                    return run_dir
                refuse_damaged(run_dir)
                _Import(spec, task_object, run_dir, sources, unknown, files, Path(folder), device, note).run()
        except BaseException:
            if not existed:
                shutil.rmtree(run_dir, ignore_errors=True)
            raise
    return run_dir


@dataclass(frozen=True)
class Convention:
    """The low-resource split convention (``train_size``, ``split_seed``) shared by ``runs``
    runs of a task in a store."""

    train_size: int
    split_seed: int
    runs: int

    def describe(self, task: str) -> str:
        return (
            f"train_size={self.train_size}, split_seed={self.split_seed}, as the store's {self.runs} "
            f"{task} run{'s' if self.runs != 1 else ''} (not given)"
        )


def _convention_name(train_size: int | None, split_seed: int | None) -> str:
    return "full data (no train_size)" if train_size is None else f"train_size={train_size}, split_seed={split_seed}"


def store_convention(store_path: str | Path, task: str) -> Convention | None:
    """The split convention an import of ``task`` into the store gets when none is given.

    Returns
    -------
    Convention or None
        The low-resource convention that every fine-tuning run of ``task`` in the store uses;
        None when the store has no such run or they all use the full-data splits.

    Raises
    ------
    ImportError_
        The store's runs of ``task`` use several conventions (each is named, with its count).
    """
    root = Path(store_path).expanduser()
    counts: dict[tuple[int | None, int | None], int] = {}
    for run_dir in run_dirs(root) if root.is_dir() else []:
        try:
            manifest = read_manifest(run_dir)
        except StoreError:
            continue  # `robustkit verify` reports damaged runs; a neighbour only advises here
        spec = manifest.get("spec")
        if manifest.get("kind") != "finetune" or not isinstance(spec, dict) or spec.get("task") != task:
            continue
        key = (spec.get("train_size"), spec.get("split_seed") if spec.get("train_size") is not None else None)
        counts[key] = counts.get(key, 0) + 1
    if len(counts) > 1:
        named = "; ".join(
            f"{_convention_name(*key)}: {n} run{'s' if n != 1 else ''}"
            for key, n in sorted(
                counts.items(), key=lambda item: (item[0][0] is not None, item[0][0] or 0, item[0][1] or 0)
            )
        )
        raise ImportError_(
            f"the store's {task} runs use different split conventions ({named}); say which one scores "
            f"the import with --train-size N (and --split-seed), or --train-size 0 for full data"
        )
    if not counts:
        return None
    (train_size, split_seed), runs = counts.popitem()
    return None if train_size is None else Convention(int(train_size), int(split_seed or 0), runs)


def summary(run_dir: str | Path) -> list[str]:
    """What ``robustkit import`` prints under the run's folder: the scores of ``best`` (and of
    ``last`` where it differs) on validation and test with the number of examples each split
    has, their outcome, and the split convention that scored them.

    Parameters
    ----------
    run_dir : path
        A finished import's folder.

    Returns
    -------
    list of str
        One line per checkpoint scored, then the convention line.
    """
    manifest = read_manifest(Path(run_dir))
    metric, sizes, final = manifest["main_metric"], manifest.get("splits", {}), manifest.get("final", {})
    outcome = manifest.get("outcome") or {}
    lines = []
    for name in ("best", "last"):
        if name not in final or (name == "last" and final["last"] == final.get("best")):
            continue
        scores = ", ".join(
            f"{split} {metric} {final[name][split][metric]:.4f} ({sizes.get(split, '?')} examples)"
            for split in ("validation", "test")
        )
        outcomes = outcome.get(name) or {}
        verdict = ", ".join(f"{split} {outcomes[split]}" for split in ("validation", "test") if split in outcomes)
        step = f" (step {manifest['best_step']})" if name == "best" and manifest.get("best_step") is not None else ""
        lines.append(f"{name}{step}: {scores}; outcome: {verdict or 'unknown'}")
    lines.append(f"split convention: {manifest.get('import', {}).get('split_convention') or 'unrecorded'}")
    return lines


def _method_of(sources: list[Source]) -> tuple[str, dict]:
    """``full`` for transformers models; for adapters, robustkit's method that makes exactly
    their one config, with its options, else ``adapterhub`` with the config."""
    if sources[0].kind == "model":
        return "full", {}
    configs = {config_json(_read_json(s.folder / ADAPTER_CONFIG).get("config") or {}) for s in sources}
    if len(configs) > 1:
        raise ImportError_("the adapters of the checkpoint series have different configs")
    config = configs.pop()
    if config == "{}":
        raise ImportError_(f"{sources[0].folder / ADAPTER_CONFIG} has no config")
    own = method_of_config(json.loads(config))
    return own if own is not None else ("adapterhub", {"config": config})


def _read_json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise ImportError_(f"cannot read {path}: {error}") from None
    if not isinstance(value, dict):
        raise ImportError_(f"{path} is not a JSON object")
    return value


def _hashes(folder: Path) -> dict[str, str]:
    """sha256 of each file of the folder (not of its subfolders: a Trainer's other checkpoints)."""
    return {p.name: sha256_file(p) for p in sorted(folder.iterdir()) if p.is_file()}


def _run_id(spec: RunSpec, unknown: list[str], files: dict) -> str:
    """``<task>-<method>-<base>-import-<hash>``: the hash of the source files and the settings."""
    identity = {
        "spec": {k: v for k, v in spec.to_dict().items() if k not in unknown and k != "data_dir"},
        "files": files,
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:8]
    return f"{spec.task}-{spec.method}-{_safe(spec.model)}-import-{digest}"


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class _Import:
    """One import: build the run's model, copy each source's tensors in, save, score."""

    def __init__(
        self,
        spec: RunSpec,
        task,
        run_dir: Path,
        sources: list[Source],
        unknown: list[str],
        files: dict,
        folder: Path,
        device: str | None,
        convention: str = "",
    ):
        self.spec, self.task, self.run_dir, self.sources = spec, task, run_dir, sources
        self.unknown, self.files, self.folder = unknown, files, folder
        self.device = device
        self.convention = convention

    def run(self) -> None:
        from robustkit.train.evaluate import resolve_device
        from robustkit.train.records import check_data, trainable_summary

        spec, task = self.spec, self.task
        splits = tasks.load_splits(
            spec.task, data_dir=spec.data_dir, train_size=spec.train_size, split_seed=spec.split_seed
        )
        data_record = check_data(self.run_dir, spec, spec.data_dir, splits)
        model, names, fingerprint = build_classifier(spec, task.num_labels)
        device = resolve_device(self.device)
        manifest_spec = {**spec.to_dict(), **dict.fromkeys(self.unknown)}
        write_manifest(
            self.run_dir,
            {
                "run_id": self.run_dir.name,
                "kind": "finetune",
                "spec": manifest_spec,
                "unknown": self.unknown,
                "base_fingerprint": fingerprint,
                "trainable": trainable_summary(model, names),
                "assets": asset_hashes(spec.model, spec.task),
                "data": data_record,
                "tsp_run": None,
                "splits": {name: len(split) for name, split in splits.items()},
                "main_metric": task.main_metric,
                "status": "running",
                "created": _now(),
                "updated": _now(),
                "versions": package_versions(),
                "checkpoints": {},
                "device": str(device),
                "import": {
                    "source": str(self.folder.expanduser().resolve()),
                    "kind": self.sources[0].kind,
                    "files": self.files,
                    "step-0": "the base model with the method at its init; the source's own initial head is "
                    "unknown, so step-0's head is initialised by robustkit (seed 0)",
                    "split_convention": self.convention,
                },
            },
        )
        meta = checkpoint_metadata(fingerprint, self.run_dir.name, spec.model, spec.method)
        save_checkpoint(self.run_dir, "step-0", trainable_state(model, names), meta, 0)
        tokenizer = models.load_tokenizer(spec.model)
        collator = data.classification_collator(tokenizer)
        batches = {
            s: eval_batches(encode_split(splits[s], task, tokenizer, spec.max_length, s), EVAL_BATCH_SIZE, collator)
            for s in ("validation", "test")
        }
        model.to(device)
        history, scored = [], []
        for index, source in enumerate(self.sources):
            tensors = self._tensors(source, names)
            _copy(model, tensors)
            step = source.step if source.step is not None else index + 1
            if len(self.sources) > 1:
                save_checkpoint(self.run_dir, f"step-{step}", tensors, meta, step)
            validation = evaluate(model, batches["validation"], task, shares=True)
            history += [
                {"step": step, "epoch": float("nan"), "split": "validation", "metric": m, "value": v}
                for m, v in validation.items()
                if m != "top_class_share"
            ]
            scored.append((validation[task.main_metric], step, tensors, validation))
        last = scored[-1]
        best = max(scored, key=lambda item: item[0])  # the first of equals, as training keeps it
        final = {}
        for name, (_, step, tensors, validation) in (("last", last), ("best", best)):
            save_checkpoint(self.run_dir, name, tensors, meta, step)
            if name == "best" and step == last[1]:
                final["best"] = final["last"]
                continue
            _copy(model, tensors)
            final[name] = {"validation": validation, "test": evaluate(model, batches["test"], task, shares=True)}
        if len(self.sources) > 1:
            atomic_write_parquet(self.run_dir / HISTORY, pd.DataFrame(history))
            record_logs(self.run_dir)
        update_manifest(
            self.run_dir,
            status=COMPLETE,
            updated=_now(),
            final=final,
            best_step=best[1],
            outcome=final_outcomes(task, splits, final),
            baselines=split_baselines(task, splits),
        )

    def _tensors(self, source: Source, names: list[str]) -> dict[str, torch.Tensor]:
        """The values of the run's trained parameters (``names``) in ``source``.

        Raises
        ------
        ImportError_
            The source lacks some of them or holds other shapes (another architecture or
            adapter config than the base's), or an adapter folder without its head.
        """
        loaded = self._load(source)
        state = {name: tensor.detach().cpu() for name, tensor in loaded.state_dict().items()}
        missing = [n for n in names if n not in state]
        if missing:
            raise ImportError_(
                f"{source.folder}: the model built from base {self.spec.model!r} has parameters the source "
                f"lacks ({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}): not a model tuned from that "
                "base"
            )
        return {n: state[n].clone() for n in names}

    def _load(self, source: Source) -> torch.nn.Module:
        num_labels = self.task.num_labels
        if source.kind == "model":
            config = _read_json(source.folder / "config.json")
            base_type = models.load_config(self.spec.model).model_type
            if config.get("model_type") != base_type:
                raise ImportError_(
                    f"{source.folder} is a {config.get('model_type')!r} model; base {self.spec.model!r} is "
                    f"{base_type!r}"
                )
            labels = len(config.get("id2label") or {}) or config.get("num_labels")
            if labels not in (None, num_labels):
                raise ImportError_(f"{source.folder} has {labels} labels; task {self.spec.task!r} has {num_labels}")
            with models.quiet_loading():
                from transformers import AutoModelForSequenceClassification

                try:
                    return AutoModelForSequenceClassification.from_pretrained(str(source.folder))
                except (OSError, ValueError, RuntimeError, ImportError, pickle_errors()) as error:
                    raise ImportError_(
                        f"transformers cannot load the model in {source.folder}: {_first_line(error)}"
                    ) from None
        if not any((source.folder / name).is_file() for name in _HEAD_FILES):
            raise ImportError_(
                f"{source.folder} holds the adapter but not its classification head: save it with "
                "model.save_adapter(folder, name) from the sequence-classification model (with_head=True, the default)"
            )
        import adapters

        model = models.load_classifier(self.spec.model, num_labels, seed=self.spec.seed)
        with models.quiet_loading():
            adapters.init(model)
            try:
                model.load_adapter(str(source.folder), load_as=ADAPTER_NAME, with_head=True, set_active=True)
            except (ValueError, KeyError, RuntimeError, OSError, ImportError, pickle_errors()) as error:
                raise ImportError_(
                    f"AdapterHub cannot load {source.folder} onto base {self.spec.model!r}: {_first_line(error)}"
                ) from None
        return model


def pickle_errors() -> type[BaseException]:
    """What loading damaged weights raises besides OSError and ValueError: safetensors' header
    errors, and what ``torch.load(weights_only=True)`` raises for a pickle holding anything but
    tensors."""
    from safetensors import SafetensorError

    return SafetensorError


def _first_line(error: BaseException) -> str:
    """The first line of an error's message (transformers' run to many lines of advice)."""
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"


def _copy(model: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """Copy tensors into the model's parameters of the same names, checking shapes."""
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name, tensor in tensors.items():
            if parameters[name].shape != tensor.shape:
                raise ImportError_(
                    f"{name} has shape {tuple(tensor.shape)} in the source; the model built from the base "
                    f"expects {tuple(parameters[name].shape)}"
                )
            parameters[name].copy_(tensor.to(parameters[name].device))
