"""Checks made before a run trains: what would make it fail once started (a model folder that is
not a model, an unknown hub name, a device that does not exist, data that is missing, malformed
or smaller than ``train_size``), found before any run folder exists.

:func:`robustkit.sweeps.grid.run_sweep` checks every run it is about to train, so that a bad input
stops the sweep (the CLI: exit status 2 and one line naming the value) instead of failing each
run; :func:`robustkit.train.train` and :func:`robustkit.train.pretrain` check their own run, so
notebooks get the same errors. The values themselves (types, ranges) are checked earlier, by
:class:`robustkit.specs.spec.RunSpec`.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Iterable

from robustkit.data import tasks
from robustkit.errors import RobustkitError, TaskError
from robustkit.methods.registry import options_of
from robustkit.specs.spec import RunSpec, TspSpec

# Rows of the train split of each GLUE task on the hub (nyu-mll/glue): train_size is checked
# against them without downloading the data. Local TSV files are read instead.
GLUE_TRAIN_ROWS = {
    "cola": 8551,
    "sst2": 67349,
    "mrpc": 3668,
    "qqp": 363846,
    "stsb": 5749,
    "mnli": 392702,
    "qnli": 104743,
    "rte": 2490,
    "wnli": 635,
}
VAL_SIZE = 1000  # the low-resource validation split drawn from train (tasks.load_splits' val_size)


class DeviceError(RobustkitError):
    """A device that torch does not know, or that this machine does not have."""


def check_device(device: str | None, here: bool = True) -> None:
    """Raise :class:`DeviceError` naming ``device`` unless runs can train on it.

    ``None`` and ``auto`` (the GPU if there is one) always can. ``here`` False checks the name
    only: runs that train on another machine (Slurm jobs) may ask for a GPU this one lacks.
    """
    if device is None or device in ("auto", "cpu"):  # always there: a read-only verb's --device cpu needs no torch
        return
    import torch  # seconds to import: only where a device must be looked up

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise DeviceError(f"unknown device {device!r}: expected cpu, cuda, cuda:N or mps") from None
    if parsed.type not in ("cpu", "cuda", "mps", "xpu"):
        raise DeviceError(f"device {device!r}: runs train on cpu, cuda, cuda:N, mps or xpu, not {parsed.type}")
    if not here or parsed.type == "cpu":
        return
    backend = getattr(torch, parsed.type)  # torch.cuda, torch.mps, torch.xpu
    if not backend.is_available():
        raise DeviceError(f"device {device!r}: this machine has no {parsed.type} device")
    count = backend.device_count()
    if parsed.index is not None and parsed.index >= count:
        raise DeviceError(f"device {device!r}: this machine has {count} {parsed.type} device(s), numbered from 0")


def check_run(
    spec: RunSpec | TspSpec, device: str | None = None, data_dir: str | None = None, device_here: bool = True
) -> dict | None:
    """Everything a run needs besides its values: device, model, method settings that depend on
    the model (:meth:`robustkit.methods.base.Method.check_model`, e.g. ``top_k``), and its data (``data_dir`` is a
    TSP run's; a RunSpec has its own).

    Returns
    -------
    dict or None
        The run's splits (:func:`robustkit.data.tasks.load_splits`) where its data was loaded to
        check it (:func:`check_data`), so that training need not load it again; else None.

    Raises
    ------
    RobustkitError
        :class:`DeviceError`, :class:`robustkit.models.pretrained.ModelError`,
        :class:`robustkit.errors.MethodError` or :class:`robustkit.errors.TaskError`, naming
        the bad value.
    """
    if isinstance(spec, RunSpec):
        spec, data_dir = spec.resolved(), spec.data_dir
    check_device(device, here=device_here)
    from robustkit.models import pretrained as models  # transformers: only where a run is checked

    config = models.check_model(spec.model)
    method, options = options_of(spec)
    method.check_model(config, options)  # e.g. a top_k beyond the model's layers
    return check_data(spec.task, data_dir, spec.train_size, spec.split_seed)


def check_runs(specs: Iterable[RunSpec], device: str | None = None, device_here: bool = True) -> None:
    """:func:`check_run` of each distinct model, task and data setting among ``specs``."""
    check_device(device, here=device_here)
    seen = set()
    for spec in specs:
        key = (
            spec.model,
            spec.method,
            spec.top_k,
            spec.method_options,
            spec.task,
            spec.data_dir,
            spec.train_size,
            spec.split_seed,
        )
        if key not in seen:
            seen.add(key)
            check_run(spec, device, device_here=device_here)


def check_data(task: str, data_dir: str | None, train_size: int | None, split_seed: int) -> dict | None:
    """Raise :class:`robustkit.errors.TaskError` unless the task's data loads and holds
    ``train_size`` training examples besides the validation split drawn from them.

    Embedded tasks take no ``data_dir``. Local GLUE files are read (and checked as
    :func:`robustkit.data.tasks.load_splits` checks them), once per process and setting; hub GLUE
    data is not downloaded here: ``train_size`` is checked against :data:`GLUE_TRAIN_ROWS`.

    Returns
    -------
    dict or None
        The splits :func:`robustkit.data.tasks.load_splits` gave where they were loaded now; None
        where nothing was loaded (hub data, or a setting checked before in this process).
    """
    source = tasks.get_task(task)
    if source.source == "embedded" and data_dir is not None:
        raise TaskError(
            f"data_dir {str(data_dir)!r} is for GLUE tasks; task {source.name!r} is embedded "
            "(its data ships with robustkit): leave data_dir out"
        )
    if source.source == "glue" and data_dir is None:
        rows = GLUE_TRAIN_ROWS.get(source.glue_config)
        if train_size is not None and rows is not None and train_size > rows - VAL_SIZE:
            raise TaskError(
                f"train_size={train_size} is more than the {rows - VAL_SIZE} training examples available for "
                f"task {source.name!r} ({rows} in its train split minus val_size={VAL_SIZE})"
            )
        return None
    key = (source.name, None if data_dir is None else str(data_dir), train_size, split_seed)
    if key in _CHECKED:
        _CHECKED.move_to_end(key)
        return None
    # an error is not remembered: it is raised every time
    splits = tasks.load_splits(source.name, data_dir=key[1], train_size=train_size, split_seed=split_seed)
    _CHECKED[key] = None
    while len(_CHECKED) > _CHECKED_MAX:
        _CHECKED.popitem(last=False)
    return splits


# The data settings (task, data_dir, train_size, split_seed) whose data loaded in this process,
# the most recently checked last: at most _CHECKED_MAX are remembered (as functools.lru_cache did).
_CHECKED: OrderedDict[tuple, None] = OrderedDict()
_CHECKED_MAX = 16
