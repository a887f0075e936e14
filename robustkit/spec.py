"""What defines a run: :class:`RunSpec` (supervised tuning) and :class:`TspSpec` (task-specific
pretraining), with their defaults from the papers and their stable run ids.

Defaults follow Han et al. 2021, appendix A, tables 2-3: batch size 32; adapter runs lr 1e-4,
20 epochs, max length 256; full fine-tuning lr 2e-5, 10 epochs, max length 128. Linear warmup
over 10% of the steps, then linear decay to zero (Houlsby et al. 2019, section 3.1).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field

from robustkit.errors import RobustkitError

# The tuning methods' names, in robustkit.methods.METHODS order. Kept here as plain data so that
# what only needs the names (the CLI's --method choices) does not import robustkit.methods, which
# imports torch and AdapterHub (seconds); tests/test_spec.py checks it equals the registry's keys.
METHOD_NAMES = ("full", "houlsby", "adapterhub-houlsby", "topk", "layernorm")

# Methods without adapters: top-k fine-tunes part of the network, so it takes full fine-tuning's
# settings; LayerNorm-only freezes the base like adapters do, so it takes the adapter settings.
DEFAULT_EPOCHS = {"full": 10, "topk": 10, "layernorm": 20}
ADAPTER_EPOCHS = 20
DEFAULT_MAX_LENGTH = {"full": 128, "topk": 128, "layernorm": 256}
ADAPTER_MAX_LENGTH = 256
TSP_WARMUP_STEPS = 100


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
        Low-resource setting of He et al. 2021 section 3.2 (N training examples); None = all.
    eval_every : int or None
        Evaluate every this many steps, besides every epoch end.
    data_dir : str or None
        Local folder of GLUE-format TSV files; not part of the run id.
    top_k : int or None
        ``topk`` only: how many top encoder layers train (Houlsby et al. 2019 section 3.4).
    adapter_init_std : float or None
        ``houlsby`` only: std of the adapters' truncated-normal init (Houlsby et al. 2019
        section 3.6); None = AdapterHub's ``houlsby`` init (std 1e-2).
    adapter_sharing : str
        ``houlsby`` only: ``none``, ``layer`` or ``3-layer`` (Mohebbi's report, section 6).
    mixout : float
        Mixout probability p, 0 <= p < 1 (Lee et al. 2020; He et al. 2021 table 7 use 0.9): with
        p > 0 dropout is off and the trained linear layers mix toward their weights at step 0 of
        tuning (see :mod:`robustkit.mixout`); 0 = plain dropout. The TSP run does not use it.
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

    def resolved(self) -> "RunSpec":
        """A copy with every paper default filled in (what the run id and manifest record).

        Raises
        ------
        RobustkitError
            Unknown task or method, or a value of the wrong type or range (named).
        """
        # methods imports adapters and transformers (seconds): only when a spec is resolved, so
        # that reading a store (robustkit.store uses the spec's fields) stays light
        from robustkit.methods import ADAPTER_SIZE, DEFAULT_LR, get_method

        self._validate()
        method = get_method(self.method)
        adapters = method.uses_adapters
        # Without TSP the TSP settings change nothing: normalise them so such runs share an id.
        tsp = {} if self.tsp_step else {"tsp_seed": 0, "tsp_batch_size": 32}
        houlsby = method.name == "houlsby"
        if method.train_top_layers and self.top_k is None:
            raise SpecError("method 'topk' needs top_k (--top-k): how many top encoder layers train")
        return dataclasses.replace(
            self,
            **tsp,
            # Settings of other methods change nothing: normalise them so such runs share an id.
            top_k=self.top_k if method.train_top_layers else None,
            adapter_init_std=float(self.adapter_init_std) if houlsby and self.adapter_init_std is not None else None,
            adapter_sharing=self.adapter_sharing if houlsby else "none",
            mixout=float(self.mixout),  # TOML 0 vs 0.0: one id
            lr=self.lr if self.lr is not None else DEFAULT_LR[method.name],
            adapter_size=(self.adapter_size or ADAPTER_SIZE) if method.name == "houlsby" else None,
            epochs=self.epochs or (ADAPTER_EPOCHS if adapters else DEFAULT_EPOCHS[method.name]),
            max_length=self.max_length or (ADAPTER_MAX_LENGTH if adapters else DEFAULT_MAX_LENGTH[method.name]),
            tsp_lr=None if not self.tsp_step else (self.tsp_lr or self.lr or DEFAULT_LR[method.name]),
        )

    def _validate(self) -> None:
        from robustkit.tasks import get_task

        get_task(self.task)
        for name in ("seed", "tsp_step", "batch_size", "split_seed", "tsp_seed", "tsp_batch_size"):
            _check(name, getattr(self, name), int, minimum=0)
        for name in ("train_size", "adapter_size", "epochs", "max_length", "eval_every", "top_k"):
            if getattr(self, name) is not None:
                _check(name, getattr(self, name), int, minimum=1)
        for name in ("lr", "tsp_lr", "warmup_ratio", "weight_decay", "max_grad_norm", "adapter_init_std"):
            if getattr(self, name) is not None:
                _check(name, getattr(self, name), (int, float), minimum=0)
        if self.adapter_init_std is not None and not self.adapter_init_std > 0:
            raise SpecError(f"adapter_init_std must be > 0, got {self.adapter_init_std!r}")
        _check("mixout", self.mixout, (int, float), minimum=0)
        if not self.mixout < 1:
            raise SpecError(f"mixout must be < 1 (a probability), got {self.mixout!r}")
        from robustkit.methods import SHARING

        if self.adapter_sharing not in SHARING:
            raise SpecError(f"adapter_sharing must be one of {', '.join(SHARING)}, got {self.adapter_sharing!r}")
        if self.batch_size < 1:
            raise SpecError(f"batch_size must be at least 1, got {self.batch_size}")

    @property
    def run_id(self) -> str:
        spec = self.resolved()
        return f"{spec.task}-{spec.method}-{_safe(spec.model)}-s{spec.seed}-tsp{spec.tsp_step}-{_digest(spec)}"

    def tsp_spec(self) -> TspSpec:
        """The TSP run this run starts from (meaningful when ``tsp_step > 0``)."""
        spec = self.resolved()
        return TspSpec(
            model=spec.model,
            task=spec.task,
            method=spec.method,
            adapter_size=spec.adapter_size,
            train_size=spec.train_size,
            split_seed=spec.split_seed,
            seed=spec.tsp_seed,
            lr=spec.tsp_lr,
            batch_size=spec.tsp_batch_size,
            max_length=spec.max_length,
            top_k=spec.top_k,
            adapter_init_std=spec.adapter_init_std,
            adapter_sharing=spec.adapter_sharing,
        )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


SPEC_FIELDS = tuple(f.name for f in dataclasses.fields(RunSpec))
SPEC_DEFAULTS = {f.name: f.default for f in dataclasses.fields(RunSpec)}


class SpecError(RobustkitError):
    """A run setting of the wrong type or out of range."""


def _check(name: str, value, types, minimum) -> None:
    if isinstance(value, bool) or not isinstance(value, types):
        kind = "an integer" if types is int else "a number"
        raise SpecError(f"{name} must be {kind}, got {value!r}")
    if value < minimum:
        raise SpecError(f"{name} must be >= {minimum}, got {value!r}")


def _safe(model: str) -> str:
    return model.strip("/").replace("/", "_")


# Fields added after runs were stored, with the default that reproduces those runs. At that
# default a field is left out of the hash, so the ids of the runs made before it stay the same.
_ADDED_FIELDS = {"top_k": None, "adapter_init_std": None, "adapter_sharing": "none", "mixout": 0.0}


def _digest(spec) -> str:
    """Short hash of every field that changes the result (``compare=True`` fields), except
    :data:`_ADDED_FIELDS` at their defaults."""
    values = {
        f.name: getattr(spec, f.name)
        for f in dataclasses.fields(spec)
        if f.compare and not (f.name in _ADDED_FIELDS and getattr(spec, f.name) == _ADDED_FIELDS[f.name])
    }
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:8]
