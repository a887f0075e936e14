"""What defines a run: :class:`RunSpec` (supervised tuning) and :class:`TspSpec` (task-specific
pretraining), with their defaults from the papers and their stable run ids.

Defaults follow Han et al. 2021, appendix A, tables 2-3: batch size 32; adapter runs lr 1e-4,
20 epochs, max length 256; full fine-tuning lr 2e-5, 10 epochs, max length 128. Linear warmup
over 10% of the steps, then linear decay to zero (Houlsby et al. 2019, section 3.1). Each
method's defaults and options are its own (:mod:`robustkit.methods`): a resolved spec holds
every option's value, in ``method_options`` or, for the options that existed before method
options did (``adapter_size``, ``top_k``, ``adapter_init_std``, ``adapter_sharing``), in their
own fields.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from robustkit.errors import RobustkitError
from robustkit.methods.registry import METHOD_NAMES, given_options, spec_fields, split_method
from robustkit.models.precision import DEFAULT_PRECISION, PRECISIONS

__all__ = ["METHOD_NAMES", "RunSpec", "ResolvedRunSpec", "TspSpec", "SpecError", "SPEC_FIELDS", "SPEC_DEFAULTS"]

TSP_WARMUP_STEPS = 100
# More intra-op threads than any machine has is a typo, not a setting.
MAX_THREADS = 1024
# The range of every integer setting (inclusive). The upper bounds lie far beyond any real run;
# they are there so that a typo (epochs = 9223372036854775807) is refused, naming its bounds,
# instead of training for ever or overflowing deep inside torch or numpy. Seeds: numpy's
# generators take seeds below 2**32.
SEED_MAX = 2**32 - 1
INT_BOUNDS = {
    "seed": (0, SEED_MAX),
    "split_seed": (0, SEED_MAX),
    "tsp_seed": (0, SEED_MAX),
    "tsp_step": (0, 10**7),
    "epochs": (1, 10**4),
    "eval_every": (1, 10**9),
    "train_size": (1, 10**9),
    "batch_size": (1, 2**16),
    "tsp_batch_size": (1, 2**16),
    "max_length": (1, 2**16),
    "adapter_size": (1, 2**16),
    "top_k": (1, 1024),
    "threads": (1, MAX_THREADS),
}


@dataclass(frozen=True)
class TspSpec:
    """One masked-LM run on a task's training text; its checkpoints seed supervised runs.

    The learning rate warms up linearly over ``warmup_steps`` and then stays constant, so the
    trajectory does not depend on how far the run goes: asking for a later TSP step extends the
    same run instead of starting a new one, and ``tsp-2000`` is the same tensor whether the run
    stopped at 2000 or 20000.
    """

    model: str
    task: str
    method: str
    adapter_size: int | None
    train_size: int | None
    split_seed: int
    seed: int
    lr: float
    batch_size: int
    max_length: int
    mlm_probability: float = 0.15
    warmup_steps: int = TSP_WARMUP_STEPS
    top_k: int | None = None
    adapter_init_std: float | None = None
    adapter_sharing: str = "none"
    data_fingerprint: str | None = None
    method_options: tuple = ()
    threads: int = 1
    precision: str = "fp32"

    def __post_init__(self):
        object.__setattr__(self, "method_options", option_pairs(self.method_options))

    @property
    def run_id(self) -> str:
        return f"tsp-{self.task}-{self.method}-{_safe(self.model)}-{_digest(self)}"


@dataclass(frozen=True)
class RunSpec:
    """One supervised tuning run. ``None`` fields take the method's paper default.

    Attributes
    ----------
    tsp_step : int
        Start from the checkpoint after this many TSP steps (0 = the pretrained model).
    train_size : int or None
        Low-resource setting of He et al. 2021 section 3.2 (N training examples); None (or
        ``"all"``, stored as None) = all.
    eval_every : int or None
        Evaluate every this many steps, besides every epoch end.
    data_dir : str or None
        Local folder of GLUE-format TSV files, or the data of a user task
        (:mod:`robustkit.data.user_data`: a file, a folder, ``hub:NAME[:CONFIG]``). Where the data
        lives is not part of the run id; what it holds is (``data_fingerprint``).
    top_k : int or None
        ``topk`` only: how many top encoder layers train (Houlsby et al. 2019 section 3.4).
    adapter_init_std : float or None
        ``houlsby`` only: std of the adapters' truncated-normal init (Houlsby et al. 2019
        section 3.6); None = AdapterHub's ``houlsby`` init (std 1e-2).
    adapter_sharing : str
        ``houlsby`` only: ``none``, ``layer`` or ``3-layer`` (Mohebbi's report, section 6).
    method_options : tuple of (str, object)
        The method's other options (``(("alpha", 8), ("r", 4), ...)``; a dict is accepted and
        sorted). Keys are option names or ``<method>.<name>``; the latter are dropped for runs
        of other methods (a grid over several methods). Resolved, it holds every option of the
        method (defaults filled in), so two spellings of one setting share a run id.
    mixout : float
        Mixout probability p, 0 <= p < 1 (Lee et al. 2020; He et al. 2021 table 7 use 0.9): with
        p > 0 dropout is off and the trained linear layers mix toward their weights at step 0 of
        tuning (see :mod:`robustkit.models.mixout`); 0 = plain dropout. The TSP run does not use it.
    threads : int
        torch's CPU (intra-op) threads while the run trains. A CPU run's bytes depend on it
        (reductions split differently: test loss 0.69096619975 with 1 thread, ...082 with 2),
        so it is part of the run's identity and fixed per run, whatever ``--jobs`` is: a sweep
        with ``--jobs 1`` and one with ``--jobs 2`` train the same bytes. Its TSP run trains
        with the same count.
    precision : str
        ``fp32`` or ``bf16``: every forward pass of the run (training, its evaluations, the
        analyses that load it) under bfloat16 autocast, weights and checkpoints float32
        (:mod:`robustkit.models.precision`). Part of the run's identity; its TSP run uses it too.
    until_converged : bool
        Stop at the first evaluation where the dev loss is no longer improving
        (:func:`robustkit.train.convergence_rule.converged`, the convergence guard's own rule);
        ``epochs`` is then the budget, and the learning-rate schedule runs over it. Part of the
        run's identity (left out of it when False, as before the field existed).
    data_fingerprint : str or None
        What data the run trains on (:func:`robustkit.data.tasks.data_fingerprint`), filled in by
        :meth:`resolved`: None for the data every run had before ids included it (an embedded
        task's data file at the sha256 pinned then, a hub task at no pinned revision), so those
        runs keep their ids; else e.g. ``tsv:sha256:...`` for a local TSV folder, so changed
        data is a new run. Training refuses data with another fingerprint.
    """

    model: str = "minilm-l6"
    task: str = "rt"
    method: str = "houlsby"
    seed: int = 0
    tsp_step: int = 0
    lr: float | None = None
    train_size: int | None = None
    adapter_size: int | None = None
    epochs: int | None = None
    batch_size: int = 32
    max_length: int | None = None
    eval_every: int | None = None
    warmup_ratio: float = 0.1
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    split_seed: int = 0
    tsp_seed: int = 0
    tsp_lr: float | None = None
    tsp_batch_size: int = 32
    data_dir: str | None = field(default=None, compare=False)
    # Fields added after runs existed: left out of the run id at their defaults (see _digest).
    top_k: int | None = None
    adapter_init_std: float | None = None
    adapter_sharing: str = "none"
    mixout: float = 0.0
    data_fingerprint: str | None = None
    method_options: tuple = ()
    threads: int = 1
    precision: str = "fp32"
    until_converged: bool = False

    def __post_init__(self):
        object.__setattr__(self, "method_options", option_pairs(self.method_options))
        if self.train_size == "all":  # what --help and recipes call the full-data setting
            object.__setattr__(self, "train_size", None)

    def __eq__(self, other: object) -> bool:
        """The same settings (``compare`` fields), whether either spec is resolved or not: a
        :class:`ResolvedRunSpec` equals the :class:`RunSpec` of the same values."""
        if not isinstance(other, RunSpec):
            return NotImplemented
        return _compared(self) == _compared(other)

    def resolved(self) -> ResolvedRunSpec:
        """A copy with every paper default filled in (what the run id and manifest record), of
        the type that says so: resolving a :class:`ResolvedRunSpec` again returns it as it is.

        Raises
        ------
        RobustkitError
            Unknown task or method, or a value of the wrong type or range (named).
        """
        self._validate()
        method, options = resolve_method(self)
        data_dir = located(self.data_dir)
        # Without TSP the TSP settings change nothing: normalise them so such runs share an id.
        tsp = {} if self.tsp_step else {"tsp_seed": 0, "tsp_batch_size": 32}
        return _resolved(
            dataclasses.replace(
                self,
                **tsp,
                **options,
                mixout=float(self.mixout),  # TOML 0 vs 0.0: one id
                # what the data holds (hashing a TSV folder's files once per process), not where it is
                data_dir=data_dir,  # resolved: the same analysis from another folder reads the same data
                data_fingerprint=data_identity(self.task, data_dir, self.data_fingerprint),
                lr=self.lr if self.lr is not None else method.default_lr,
                epochs=self.epochs or method.default_epochs,
                max_length=self.max_length or method.default_max_length,
                tsp_lr=None if not self.tsp_step else (self.tsp_lr or self.lr or method.default_lr),
            )
        )

    def _validate(self) -> None:
        """Types and ranges of every field, each error naming the field and the value. What
        needs the model or the data (a model folder, a device, train_size against the data)
        is checked before training by :mod:`robustkit.specs.preflight`."""
        from robustkit.data.tasks import get_task

        for name in ("model", "task", "method", "adapter_sharing"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise SpecError(f"{name} must be a non-empty string, got {getattr(self, name)!r}")
        if self.data_dir is not None and (not isinstance(self.data_dir, (str, os.PathLike)) or not str(self.data_dir)):
            raise SpecError(f"data_dir must be a folder or file path, got {self.data_dir!r}")
        get_task(self.task, self.data_dir)  # a user data task is read (and known) from here on
        for name, (low, high) in INT_BOUNDS.items():  # None: the method's default (optional fields)
            if getattr(self, name) is not None or name not in _OPTIONAL_INTS:
                _check(name, getattr(self, name), int, minimum=low, maximum=high)
        if not isinstance(self.until_converged, bool):
            raise SpecError(f"until_converged must be true or false, got {self.until_converged!r}")
        if self.precision not in PRECISIONS:
            raise SpecError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        # learning rates and init std: finite and > 0 (0 trains nothing, inf trains NaN from step 2)
        for name in ("lr", "tsp_lr", "adapter_init_std"):
            if getattr(self, name) is not None:
                _check(name, getattr(self, name), (int, float), minimum=0, positive=True)
        for name in ("weight_decay", "max_grad_norm"):
            _check(name, getattr(self, name), (int, float), minimum=0)
        _check("warmup_ratio", self.warmup_ratio, (int, float), minimum=0, maximum=1)
        _check("mixout", self.mixout, (int, float), minimum=0)
        if not self.mixout < 1:
            raise SpecError(f"mixout must be < 1 (a probability), got {self.mixout!r}")

    @property
    def run_id(self) -> str:
        """The run's folder name in the store: task, method, model, seed, TSP step and a digest of
        every setting of the resolved spec."""
        return self.resolved().run_id

    def tsp_spec(self) -> TspSpec:
        """The TSP run this run starts from (meaningful when ``tsp_step > 0``)."""
        return self.resolved().tsp_spec()

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass(frozen=True, eq=False)
class ResolvedRunSpec(RunSpec):
    """A :class:`RunSpec` with every default filled in: what :meth:`RunSpec.resolved` returns,
    and the only way one is made.

    A spec is resolved once, where it enters (``train``, a sweep, ``load_run``), and passed on:
    resolving it again returns it as it is, and its :attr:`run_id` and :meth:`tsp_spec` read its
    fields. Any other construction of one, ``dataclasses.replace`` included (the changed fields
    may need resolving again), gives a plain :class:`RunSpec`; a pickled one unpickles resolved.
    It equals and hashes as the :class:`RunSpec` of the same values.
    """

    def __new__(cls, *args, **kwargs):
        return RunSpec(*args, **kwargs)

    def __reduce__(self):
        return _unpickled, (tuple(getattr(self, f.name) for f in dataclasses.fields(self)),)

    def resolved(self) -> ResolvedRunSpec:
        """This spec: it is resolved already."""
        return self

    @property
    def run_id(self) -> str:
        return f"{self.task}-{self.method}-{_safe(self.model)}-s{self.seed}-tsp{self.tsp_step}-{_digest(self)}"

    def tsp_spec(self) -> TspSpec:
        """The TSP run this run starts from (meaningful when ``tsp_step > 0``)."""
        return TspSpec(
            model=self.model,
            task=self.task,
            method=self.method,
            adapter_size=self.adapter_size,
            train_size=self.train_size,
            split_seed=self.split_seed,
            seed=self.tsp_seed,
            lr=self.tsp_lr,
            batch_size=self.tsp_batch_size,
            max_length=self.max_length,
            top_k=self.top_k,
            adapter_init_std=self.adapter_init_std,
            adapter_sharing=self.adapter_sharing,
            data_fingerprint=self.data_fingerprint,
            method_options=self.method_options,
            threads=self.threads,
            precision=self.precision,
        )


def _resolved(spec: RunSpec) -> ResolvedRunSpec:
    """``spec``'s values (already resolved by :meth:`RunSpec.resolved`) as a :class:`ResolvedRunSpec`."""
    return _resolved_from(tuple(getattr(spec, f.name) for f in dataclasses.fields(RunSpec)))


def _resolved_from(values: tuple) -> ResolvedRunSpec:
    """A :class:`ResolvedRunSpec` of the field values ``values`` (in field order), bypassing its
    ``__new__``, which makes plain specs."""
    spec = object.__new__(ResolvedRunSpec)
    RunSpec.__init__(spec, *values)
    return spec


def _unpickled(values: tuple) -> ResolvedRunSpec:
    """A pickled resolved spec, in (say) a spawned sweep worker. Resolving it read a task of the
    user's own data in the process that resolved it; this process reads it too (from the spec's
    ``data_dir``), so that ``get_task(spec.task)`` knows it here as well. Unreadable data is left
    for the run to report (the one-line error of :func:`robustkit.data.tasks.get_task`)."""
    spec = _resolved_from(values)
    from robustkit.data.tasks import TASKS
    from robustkit.errors import TaskError

    if spec.task not in TASKS and spec.data_dir is not None:
        from robustkit.data.user_data import ensure

        try:
            ensure(spec.task, spec.data_dir)
        except TaskError:
            pass
    return spec


def _compared(spec: RunSpec) -> tuple:
    """The values of ``spec``'s ``compare`` fields (those that make a run what it is)."""
    return tuple(getattr(spec, f.name) for f in dataclasses.fields(spec) if f.compare)


SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(RunSpec))
# The integer fields that may be None (the method's default, or none).
_OPTIONAL_INTS = ("train_size", "adapter_size", "epochs", "max_length", "eval_every", "top_k")
SPEC_DEFAULTS = {f.name: f.default for f in dataclasses.fields(RunSpec)}


class SpecError(RobustkitError):
    """A run setting of the wrong type or out of range."""


def _check(name: str, value, types, minimum, maximum=None, positive: bool = False) -> None:
    """Raise :class:`SpecError` naming ``name`` and ``value`` unless ``value`` is of ``types``,
    finite, >= ``minimum`` (> 0 with ``positive``) and <= ``maximum``."""
    if isinstance(value, bool) or not isinstance(value, types):
        kind = "an integer" if types is int else "a number"
        raise SpecError(f"{name} must be {kind}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise SpecError(f"{name} must be a finite number, got {value!r}")
    if positive and not value > 0:
        raise SpecError(f"{name} must be > 0, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise SpecError(f"{name} must be {bounds}, got {value!r}")


def _safe(model: str) -> str:
    return model.strip("/").replace("/", "_")


# Fields added after runs were stored, with the default that reproduces those runs. At that
# default a field is left out of the hash, so the ids of the runs made before it stay the same
# (the methods that existed before method options have none: their method_options stay empty).
# ``threads`` 1 is what every run trained in a sweep with as many jobs as cores had (the default
# of ``make demo`` on 2 cores); a run trained before the field existed with more threads cannot be
# told apart by its id, and its manifest has no ``threads``: resuming one is refused (see
# robustkit.train.loop).
# ``precision`` fp32 is what every run trained before bf16 autocast existed.
_ADDED_FIELDS = {
    "top_k": None,
    "adapter_init_std": None,
    "adapter_sharing": "none",
    "mixout": 0.0,
    "data_fingerprint": None,
    "method_options": (),
    "threads": 1,
    "precision": DEFAULT_PRECISION,
    "until_converged": False,
}


def _digest(spec) -> str:
    """Short hash of every field that changes the result (``compare=True`` fields), except
    :data:`_ADDED_FIELDS` at their defaults."""
    values = {
        f.name: getattr(spec, f.name)
        for f in dataclasses.fields(spec)
        if f.compare and not (f.name in _ADDED_FIELDS and getattr(spec, f.name) == _ADDED_FIELDS[f.name])
    }
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:8]


# The data fingerprint (robustkit.data.tasks.data_fingerprint) of each task's data as every run had it
# before run ids included the data: the embedded tasks' files at the sha256 pinned in assets.toml
# then, the GLUE tasks from the hub at no pinned revision. At this value the fingerprint is left
# out of the id (data_fingerprint None), so the runs of existing stores keep their ids; a new pin
# of an embedded file, a hub revision or a local TSV folder gives runs of their own.
_LEGACY_DATA = {
    "rt": "asset:rt:sha256:26b56d24d5a04cbed72d2a8c9a3fa47ebf62229f8c1cd8c9c3544c4ef12dd3f5",
    "polarity": "asset:polarity:sha256:1b9975e7c33f487bc2187fffdc55213fdbb84bac4f6c1852b5dd40912411f53f",
    **{
        task: f"hub:nyu-mll/glue/{config}"
        for task, config in (
            ("cola", "cola"),
            ("sst2", "sst2"),
            ("mrpc", "mrpc"),
            ("qqp", "qqp"),
            ("stsb", "stsb"),
            ("mnli", "mnli"),
            ("mnli-mm", "mnli"),
            ("qnli", "qnli"),
            ("rte", "rte"),
            ("wnli", "wnli"),
        )
    },
}


def located(data_dir: str | os.PathLike | None) -> str | None:
    """``data_dir`` with a relative local path made absolute (``~`` expanded), so a run records
    where its data is, not where it was seen from; ``hub:`` names and a user source's
    ``#column`` choices are kept as they are."""
    if data_dir is None:
        return None
    text = str(data_dir)
    if text.startswith("hub:"):
        return text
    path, mark, choices = text.partition("#")
    return str(Path(path).expanduser().resolve()) + mark + choices


def data_identity(task: str, data_dir: str | None, given: str | None = None) -> str | None:
    """The ``data_fingerprint`` a run's id holds: ``given`` if set (a spec read back from a
    manifest keeps the data it was trained on), else the fingerprint of the data ``task`` and
    ``data_dir`` give now; None where that is the legacy default (:data:`_LEGACY_DATA`).

    Raises
    ------
    SpecError
        ``given`` is not a string.
    TaskError
        The data cannot be fingerprinted (a missing TSV folder or file).
    """
    if given is not None and (not isinstance(given, str) or not given):
        raise SpecError(f"data_fingerprint must be a non-empty string, got {given!r}")
    if given is None:
        from robustkit.data.tasks import data_fingerprint

        given = data_fingerprint(task, data_dir)
    return None if given == _LEGACY_DATA.get(task) else given


def full_data_fingerprint(spec: RunSpec | TspSpec) -> str:
    """The fingerprint of the data a (resolved) spec's run is for, the legacy default spelt out."""
    return spec.data_fingerprint or _LEGACY_DATA[spec.task]


def option_pairs(options) -> tuple:
    """``method_options`` in one form: sorted (name, value) pairs (from a dict, or pairs read
    back from a manifest as lists). Anything else is kept for :func:`resolve_method` to refuse."""
    if options is None:
        return ()
    if isinstance(options, dict):
        options = options.items()
    try:
        pairs = [tuple(pair) for pair in options]
    except TypeError:
        return options
    if not all(len(pair) == 2 and isinstance(pair[0], str) for pair in pairs):
        return options
    return tuple(sorted(pairs, key=lambda pair: pair[0]))


def resolve_method(spec: RunSpec | TspSpec):
    """The spec's method and its resolved option fields: ``method`` (its plain name),
    ``method_options`` and the option fields of :func:`robustkit.methods.registry.spec_fields`
    (those of other methods at their defaults: they change nothing, so such runs share an id).
    Raises
    ------
    SpecError
        Unknown method, an option it does not have, a bad value (the method, the option and
        the value named).
    """
    from robustkit.errors import MethodError

    try:
        method, argument = split_method(spec.method)
        pairs = spec.method_options
        if not isinstance(pairs, tuple) or not all(isinstance(p, tuple) and len(p) == 2 for p in pairs):
            raise SpecError(f"method_options must map option names to values, got {pairs!r}")
        given = {**argument, **given_options(method, pairs)}
        for field_name, (option, owners) in spec_fields().items():
            value = getattr(spec, field_name)
            if value is None or value == SPEC_DEFAULTS[field_name]:
                continue
            if method.name not in owners:  # another method's setting: checked, then dropped
                option.coerce(owners[0], value)
                continue
            if option.name in given and given[option.name] != value:
                raise SpecError(
                    f"method {method.name!r}: option {option.name!r} given twice ({given[option.name]!r}, {value!r})"
                )
            given[option.name] = value
        options = method.resolve(given)
    except MethodError as error:
        raise SpecError(str(error)) from None
    resolved = {name: SPEC_DEFAULTS[name] for name in spec_fields()}
    resolved.update({o.spec_field: options[o.name] for o in method.options if o.spec_field})
    return method, {"method": method.name, "method_options": method.stored_options(options), **resolved}
