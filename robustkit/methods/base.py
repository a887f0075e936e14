"""What a tuning method is: :class:`Method` (name, options, how it is applied, what trains, the
trainable count it must give, label and colour) and :class:`Option` (a typed setting with its
default).

Everything else reads these objects: the run spec's defaults and validation, the CLI flags, run
ids and the store's identity columns (:mod:`robustkit.methods.registry`), the manifest's
trainable-count check and the figures' labels and colours.

Importing this module imports neither torch nor AdapterHub (``robustkit --help`` builds its
flags from the options); applying a method to a model imports them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from robustkit.errors import MethodError

if TYPE_CHECKING:
    from torch import nn

# The name under which AdapterHub holds a run's adapter (``...adapters.task...``, ``...loras.task...``).
ADAPTER_NAME = "task"
# The attribute of an adapted model that records how it was adapted (see Method.adapt).
ADAPTATION_ATTRIBUTE = "robustkit_adaptation"
_KINDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
# The largest value of an integer option that states no maximum of its own: far beyond any
# rank, size or length a model could use, so that a typo (r = 9223372036854775807) is refused
# with its bounds instead of failing deep inside torch.
INT_OPTION_MAXIMUM = 2**20
_TRUE, _FALSE = {"true", "yes", "1", "on"}, {"false", "no", "0", "off"}


@dataclass(frozen=True)
class Option:
    """One setting of a method: part of the identity of every run of that method.

    Attributes
    ----------
    name : str
        As given on the command line (``--method-option NAME=VALUE``) and in grids
        (``method_options``).
    kind : type
        ``int``, ``float``, ``str`` or ``bool``.
    default : object
        Value when not given (None: no value, e.g. "AdapterHub's own init").
    help : str
        One line for ``--help``.
    choices : tuple
        Allowed values (empty: any value of the kind).
    minimum, maximum : float, optional
        Range of a number (inclusive unless ``open_minimum`` / ``open_maximum``).
    required : bool
        A value must be given (no default makes sense, e.g. top-k's k).
    spec_field : str, optional
        The run-spec field that holds the value, for the options that existed before method
        options did (``adapter_size``, ``top_k``, ...): their runs keep their ids. The option's
        name is then the field's name, and so is its store column.
    symbol : str, optional
        Short name in figures (``m`` for a bottleneck size, ``k``, ``r``).
    normalise : callable, optional
        ``value -> value``: one spelling per setting (e.g. matrix names in a fixed order), so
        that two spellings never make two run ids; raises ``ValueError`` with the reason.
    """

    name: str
    kind: type
    default: Any
    help: str
    choices: tuple = ()
    minimum: float | None = None
    maximum: float | None = None
    open_minimum: bool = False
    open_maximum: bool = False
    required: bool = False
    spec_field: str | None = None
    symbol: str | None = None
    normalise: Callable[[Any], Any] | None = field(default=None, compare=False)

    def __post_init__(self):
        if self.kind is int and self.maximum is None:
            object.__setattr__(self, "maximum", INT_OPTION_MAXIMUM)

    def coerce(self, method: str, value: Any) -> Any:
        """``value`` checked and in its one spelling (text from the command line is parsed).

        Raises
        ------
        MethodError
            Naming the method, the option and the value.
        """
        if value is None:
            if self.default is None and not self.required:
                return None
            raise self._error(method, value)
        if isinstance(value, str) and self.kind is not str:
            value = self._parse(method, value)
        if self.kind is bool:
            if not isinstance(value, bool):
                raise self._error(method, value)
        elif self.kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self._error(method, value)
        elif self.kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self._error(method, value)
            value = float(value)  # TOML 16 vs 16.0: one run id
        elif not isinstance(value, str) or not value.strip():
            raise self._error(method, value)
        else:
            value = value.strip()
        if self.choices and value not in self.choices:
            raise self._error(method, value)
        if self.kind in (int, float) and not self._in_range(value):
            raise self._error(method, value)
        if self.normalise is not None:
            try:
                value = self.normalise(value)
            except ValueError as error:
                raise MethodError(f"method {method!r}: option {self.name!r} = {value!r}: {error}") from None
        return value

    def describe(self) -> str:
        """What a valid value is, e.g. ``an integer >= 1`` or ``one of prefix, prefix_after_bos``."""
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        text = _KINDS[self.kind]
        if self.minimum is not None:
            text += f" {'>' if self.open_minimum else '>='} {_number(self.minimum)}"
        if self.maximum is not None:
            text += (
                f"{' and' if self.minimum is not None else ''} {'<' if self.open_maximum else '<='} "
                f"{_number(self.maximum)}"
            )
        return text

    def _parse(self, method: str, text: str) -> Any:
        text = text.strip()
        if self.kind is bool:
            if text.lower() in _TRUE | _FALSE:
                return text.lower() in _TRUE
            raise self._error(method, text)
        try:
            return self.kind(text)
        except ValueError:
            raise self._error(method, text) from None

    def _in_range(self, value: float) -> bool:
        low = self.minimum is None or (value > self.minimum if self.open_minimum else value >= self.minimum)
        high = self.maximum is None or (value < self.maximum if self.open_maximum else value <= self.maximum)
        return low and high

    def _error(self, method: str, value: Any) -> MethodError:
        if value is None:
            return MethodError(f"method {method!r} needs option {self.name!r} ({self.describe()}): {self.help}")
        return MethodError(f"method {method!r}: option {self.name!r} must be {self.describe()}, got {value!r}")


def _number(value: float) -> str:
    """``1048576`` for an integral bound (``:g`` would write 1.04858e+06), ``0.5`` else."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class ModelShape:
    """The sizes a trainable-count formula needs, from a transformers config.

    Attributes
    ----------
    d : int
        Hidden size.
    layers : int
        Encoder layers L with modules of their own (ALBERT: its distinct shared layers).
    ffn : int or None
        Inner size of the feed-forward block (4d in BERT; None where the config does not say).
    heads : int
        Attention heads.
    embedding : int or None
        Size of the input embeddings where it differs from d (ALBERT, ELECTRA: embedding_size).
    fused_attention : bool
        Query, key and value are one matrix (DeBERTa v1's ``in_proj``): AdapterHub adapts them
        as one merged module.
    """

    d: int
    layers: int
    ffn: int | None
    heads: int
    embedding: int | None = None
    fused_attention: bool = False

    @classmethod
    def of(cls, config) -> ModelShape:
        # transformers maps these names onto each architecture's own (attribute_map); ALBERT's
        # L passes share num_hidden_groups x inner_group_num distinct layers, which are the ones
        # AdapterHub gives modules (its iter_layers)
        layers = config.num_hidden_layers
        if getattr(config, "model_type", None) == "albert":
            layers = config.num_hidden_groups * config.inner_group_num
        ffn = getattr(config, "intermediate_size", None) or getattr(
            config, "hidden_dim", None
        )  # DistilBERT: hidden_dim
        return cls(
            config.hidden_size,
            layers,
            ffn,
            config.num_attention_heads,
            getattr(config, "embedding_size", None),
            getattr(config, "model_type", None) == "deberta",
        )


@dataclass(frozen=True)
class Expected:
    """A method's trainable count from its formula: ``count`` parameters, ``formula`` in words."""

    count: int
    formula: str


@dataclass(frozen=True)
class Adaptation:
    """How a model was adapted (kept on the model, see :meth:`Method.adapt`).

    Attributes
    ----------
    method : str
    options : dict
        Every option's value.
    trainable : tuple of str
        Parameters that train, in ``named_parameters`` order.
    added : tuple of str
        Parameters the method added to the pretrained model (trained or not).
    check : dict
        The trainable-count check, as recorded in the manifest (:meth:`Method.check`).
    """

    method: str
    options: dict
    trainable: tuple[str, ...]
    added: tuple[str, ...]
    check: dict


@dataclass(frozen=True, kw_only=True)
class Method:
    """A tuning method: one object holds everything about it.

    Subclasses say how the method changes a model (:meth:`_apply`) and what it must train
    (:meth:`expected`); :meth:`adapt` does the rest the same way for every method.

    Attributes
    ----------
    name : str
        As in ``--method`` and run ids.
    label : str
        In figures and tables.
    colour : str
        In figures (hex).
    options : tuple of Option
    default_lr : float
        Learning rate when a run sets none.
    default_epochs, default_max_length : int
        Han et al. 2021 table 3: 20 epochs and 256 tokens when the base is frozen (adapter
        runs), 10 and 128 for fine-tuning.
    uses_adapters : bool
        AdapterHub modules are added to the frozen base (they can be switched off:
        :meth:`deactivate`).
    layer_ablation : bool
        AdapterHub's per-layer switch (``skip_layers``) removes the method from chosen encoder
        layers (the layer-span ablation of Houlsby et al. 2019 section 3.6).
    argument : str, optional
        The option that ``<name>:<value>`` sets (``adapterhub:lora[r=4]``).
    curve_option : str, optional
        The option that orders a run along a parameter/performance curve (m, k, r).
    """

    name: str
    label: str
    colour: str
    options: tuple[Option, ...] = ()
    default_lr: float = 1e-4
    default_epochs: int = 20
    default_max_length: int = 256
    uses_adapters: bool = False
    layer_ablation: bool = False
    argument: str | None = None
    curve_option: str | None = None

    # ---- options (light) ------------------------------------------------------------------

    def option(self, name: str) -> Option:
        for option in self.options:
            if option.name == name:
                return option
        known = ", ".join(o.name for o in self.options) or "none"
        raise MethodError(f"method {self.name!r} has no option {name!r} (its options: {known})")

    def resolve(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """Every option's value: the given ones checked, the others at their defaults.

        Raises
        ------
        MethodError
            An option the method does not have, a bad value or a missing required one (the
            message names the method, the option and the value).
        """
        for name, value in given.items():
            with _naming_value(value):
                self.option(name)
        return {o.name: o.coerce(self.name, given.get(o.name, o.default)) for o in self.options}

    def column(self, option: str) -> str:
        """The store column of an option: ``<method>.<option>`` (``lora.r``), or the run-spec
        field of an option that is one (``adapter_size``)."""
        spec_field = self.option(option).spec_field
        return spec_field or f"{self.name}.{option}"

    def stored_options(self, options: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
        """The run spec's ``method_options``: the options that are not run-spec fields, sorted.
        Empty for the methods that existed before method options, so their run ids stay."""
        return tuple(sorted((o.name, options[o.name]) for o in self.options if not o.spec_field))

    @property
    def point_column(self) -> str | None:
        """The store column that orders this method's trade-off curve (None: one point)."""
        return self.column(self.curve_option) if self.curve_option else None

    @property
    def point_symbol(self) -> str | None:
        """The curve option's symbol in figures (``m``, ``k``, ``r``)."""
        return self.option(self.curve_option).symbol or self.curve_option if self.curve_option else None

    # ---- applying it to a model ----------------------------------------------------------

    def adapt(self, model: nn.Module, options: Mapping[str, Any] | None = None) -> list[str]:
        """Apply the method to ``model`` (in place) and set which parameters train.

        Parameters
        ----------
        model : transformers.PreTrainedModel
            A freshly loaded classification or masked-LM model.
        options : mapping, optional
            Option values; the others take their defaults.

        Returns
        -------
        list of str
            The trainable parameters' names in ``named_parameters`` order (a shared parameter
            once). The model keeps an :class:`Adaptation` (see :func:`adaptation_of`).

        Raises
        ------
        MethodError
            A bad option, a model the method does not support, a method that trains none of
            its own parameters (only the head, say), or a trainable count that differs from
            the method's formula: each names the method and the model.
        """
        from robustkit.methods import model_parts

        options = self.resolve(options or {})
        before = set(model_parts.parameter_names(model))
        self._apply(model, options)
        trainable = model_parts.trainable_names(model)
        added = [n for n in model_parts.parameter_names(model) if n not in before]
        own = self.own_trainable(model, trainable, added)
        if not own:
            raise MethodError(
                f"method {self.name!r} trains none of its own parameters on {model_parts.describe(model)}: "
                f"only {', '.join(trainable[:6]) or 'nothing'}{' ...' if len(trainable) > 6 else ''}"
            )
        check = self.check(model, options, added, own)
        setattr(
            model, ADAPTATION_ATTRIBUTE, Adaptation(self.name, dict(options), tuple(trainable), tuple(added), check)
        )
        return trainable

    def own_trainable(self, model: nn.Module, trainable: list[str], added: list[str]) -> list[str]:
        """The trainable parameters that are the method's own: those it added (adapter
        methods), else those of the pretrained model besides the task head."""
        from robustkit.methods import model_parts

        if self.uses_adapters:
            new = set(added)
            return [n for n in trainable if n in new]
        head = set(model_parts.head_names(model))
        return [n for n in trainable if n not in head]

    def check(self, model: nn.Module, options: Mapping[str, Any], added: list[str], own: list[str]) -> dict:
        """The trainable-count check recorded in the manifest (``method_check``).

        Returns
        -------
        dict
            ``method``, ``options``, ``found`` (the method's own trainable parameters, each
            shared one once), ``expected`` and ``formula`` (None where the method has no
            formula), ``added`` (parameters the method added) and ``frozen_added`` (added
            parameters that do not train, e.g. VeRA's shared random matrices).

        Raises
        ------
        MethodError
            ``found`` differs from the formula's count (both named, with the model).
        """
        from robustkit.methods import model_parts

        found = model_parts.count_parameters(model, own)
        expected = self.expected(ModelShape.of(model.config), options)
        trained = set(model_parts.trainable_names(model))
        if expected is not None and expected.count != found:
            raise MethodError(
                f"method {self.name!r} on {model_parts.describe(model)} trains {found} parameters of its own, "
                f"its formula gives {expected.count}: {expected.formula}"
            )
        return {
            "method": self.name,
            "options": dict(options),
            "found": found,
            "expected": None if expected is None else expected.count,
            "formula": None if expected is None else expected.formula,
            "added": model_parts.count_parameters(model, added),
            "frozen_added": [n for n in added if n not in trained],
        }

    def expected(self, shape: ModelShape, options: Mapping[str, Any]) -> Expected | None:
        """The method's own trainable parameters by formula (None: no formula)."""
        return None

    def check_model(self, config, options: Mapping[str, Any]) -> None:
        """Refuse options that do not fit the model (e.g. k above its layers), before any run
        folder is made. Raises :class:`MethodError`."""

    def deactivate(self, model: nn.Module) -> None:
        """Switch the method off (adapter methods): the model then computes what the base with
        its head (and any trained base parameters) computes."""
        raise MethodError(f"method {self.name!r} adds nothing that can be switched off")

    def _apply(self, model: nn.Module, options: Mapping[str, Any]) -> None:
        raise NotImplementedError


def adaptation_of(model: nn.Module) -> Adaptation:
    """The :class:`Adaptation` that :meth:`Method.adapt` left on ``model``."""
    try:
        return getattr(model, ADAPTATION_ATTRIBUTE)
    except AttributeError:
        raise MethodError(f"{type(model).__name__} was not adapted by a robustkit method") from None


def matrix_list(allowed: Iterable[str]) -> Callable[[str], str]:
    """A :attr:`Option.normalise` for a comma-separated set of names: known names only, each
    once, in the order of ``allowed`` (``"v,q"`` and ``"q, v"`` are both ``"q,v"``)."""
    allowed = tuple(allowed)

    def normalise(text: str) -> str:
        names = [part.strip() for part in text.split(",") if part.strip()]
        unknown = sorted(set(names) - set(allowed))
        if unknown or not names:
            raise ValueError(f"expected a comma-separated subset of {', '.join(allowed)}")
        return ",".join(name for name in allowed if name in names)

    return normalise


@contextlib.contextmanager
def _naming_value(value: Any):
    """Add the offending value to an unknown-option error."""
    try:
        yield
    except MethodError as error:
        raise MethodError(f"{error}; given {value!r}") from None
