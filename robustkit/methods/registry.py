"""Every tuning method by name, and what the rest of robustkit reads from them: the run spec's
options, the CLI's flags, the store's identity columns.

A method family is one module of this package with a ``METHODS`` tuple; the families are listed
in :data:`FAMILIES`. Importing this module imports neither torch nor AdapterHub.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from robustkit.errors import MethodError, did_you_mean
from robustkit.methods import adapterhub, bottleneck, combined, finetune, houlsby, lora, prefix, reft
from robustkit.methods.base import Method, Option

# Families in the order their methods are listed (the methods that existed first, first).
FAMILIES = (finetune, houlsby, bottleneck, lora, prefix, reft, combined, adapterhub)
_ORDER = ("full", "houlsby", "adapterhub-houlsby", "topk", "layernorm")


def _collect() -> dict[str, Method]:
    found: dict[str, Method] = {}
    for family in FAMILIES:
        for method in family.METHODS:
            if method.name in found:
                raise MethodError(f"two methods are named {method.name!r} ({family.__name__})")
            found[method.name] = method
    first = {name: found[name] for name in _ORDER}
    return {**first, **{n: m for n, m in found.items() if n not in first}}


METHODS: dict[str, Method] = _collect()
METHOD_NAMES = tuple(METHODS)


# AdapterHub's config names (``adapters.ADAPTER_CONFIG_MAP``) for a robustkit method of another
# name: the same config at the defaults (tests/test_method_names.py checks each), so the name is
# accepted and the run is that method's. AdapterHub's ``houlsby``, ``pfeiffer`` and ``parallel``
# presets are robustkit's ``adapterhub-houlsby``, ``pfeiffer`` and ``parallel``; robustkit's own
# ``houlsby`` is Houlsby et al. 2019 as published. (AdapterHub 1.3's ``noreft`` is the very
# config of its ``direft``.)
ADAPTERHUB_ALIASES = {
    "seq_bn": "pfeiffer",
    "double_seq_bn": "adapterhub-houlsby",
    "par_bn": "parallel",
    "prefix_tuning": "prefix",
    "prompt_tuning": "prompt",
    "noreft": "direft",
}
# AdapterHub's config names that are a robustkit method with options: the answer to use instead.
ADAPTERHUB_WITH_OPTIONS = {"prefix_tuning_flat": ("prefix", {"reparametrise": False})}
# AdapterHub's config names with no robustkit method: ``adapterhub:<name>`` trains them.
ADAPTERHUB_ONLY = (
    "scaled_par_bn",
    "scaled_parallel",
    "seq_bn_inv",
    "double_seq_bn_inv",
    "pfeiffer+inv",
    "houlsby+inv",
    "compacter++",
    "dvora",
    "mtl_lora",
)


def get_method(name: str) -> Method:
    """Look a method up by name (``adapterhub:<config>`` is the ``adapterhub`` method; an
    AdapterHub name of a robustkit method, :data:`ADAPTERHUB_ALIASES`, is that method); the
    error names the bad value, the method to use where AdapterHub has one, and the known ones."""
    base = name.partition(":")[0] if isinstance(name, str) else name
    try:
        return METHODS[ADAPTERHUB_ALIASES.get(base, base)]
    except (KeyError, TypeError):
        hint = ""
        if base in ADAPTERHUB_ONLY:
            hint = f"AdapterHub's {base!r} has no robustkit method of its own: use adapterhub:{base}; "
        elif base in ADAPTERHUB_WITH_OPTIONS:
            method, options = ADAPTERHUB_WITH_OPTIONS[base]
            flags = " ".join(f"--method-option {k}={str(v).lower()}" for k, v in options.items())
            hint = f"AdapterHub's {base!r} is robustkit's --method {method} {flags}; "
        raise MethodError(
            f"unknown method {name!r}{did_you_mean(base, METHODS)}; {hint}known methods: {', '.join(METHODS)} "
            f"(AdapterHub's names {', '.join(ADAPTERHUB_ALIASES)} are accepted for "
            f"{', '.join(ADAPTERHUB_ALIASES.values())})"
        ) from None


def method_of_config(config: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """robustkit's own method and options whose AdapterHub config is exactly ``config`` (an
    AdapterHub config as a dict, e.g. an adapter folder's ``adapter_config.json`` ``config``):
    ``("lora", {"r": 8, "alpha": 16, ...})``; None where no method makes that config (it stays
    ``adapterhub:<config>``). Exact: the method's config for those options is built and
    compared field by field, so a config that differs in anything robustkit does not set
    (another non-linearity, a bias) is never given a robustkit name.
    """
    import json

    from robustkit.methods.adapterhub import AdapterHubMethod

    wanted = json.loads(json.dumps(dict(config)))
    for method in METHODS.values():
        if not isinstance(method, AdapterHubMethod) or method.argument is not None or not method.config_class:
            continue
        try:
            options = method.resolve({k: v for k, v in method.config_options(wanted).items() if v is not None})
            made = json.loads(json.dumps(method.adapter_config(options, None).to_dict()))
        except (MethodError, KeyError, TypeError, ValueError, AttributeError):
            continue
        if made == wanted:
            return method.name, options
    return None


def split_method(name: str) -> tuple[Method, dict[str, Any]]:
    """The method of ``name`` and the option its ``:<value>`` part sets (``adapterhub:lora`` ->
    ``adapterhub``, ``{"config": "lora"}``).

    Raises
    ------
    MethodError
        Unknown method, or a ``:`` part for a method that takes none.
    """
    method = get_method(name)
    _, colon, argument = name.partition(":")
    if not colon:
        return method, {}
    if method.argument is None:
        raise MethodError(f"method {method.name!r} takes no ':' argument, got {name!r}")
    return method, {method.argument: argument}


def given_options(method: Method, pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """The options of ``method`` among ``pairs``: ``name`` or ``<method>.name`` keys; keys
    qualified by another method's name are dropped (a grid over several methods).

    Raises
    ------
    MethodError
        A key of no known method, or one given twice with two values.
    """
    given: dict[str, Any] = {}
    for key, value in pairs:
        owner, dot, option = key.rpartition(".")
        if dot and owner != method.name:
            if owner not in METHODS:  # a typo in the method name is an error, another method's option is not
                raise MethodError(f"option {key!r}: no method is named {owner!r}; known methods: {', '.join(METHODS)}")
            continue
        name = option if dot else key
        if name in given and given[name] != value:
            raise MethodError(f"method {method.name!r}: option {name!r} given twice ({given[name]!r}, {value!r})")
        given[name] = value
    return given


def spec_fields() -> dict[str, tuple[Option, list[str]]]:
    """Run-spec fields that hold an option (``adapter_size``, ``top_k``, ...): field -> (option,
    methods having it)."""
    fields: dict[str, tuple[Option, list[str]]] = {}
    for method in METHODS.values():
        for option in method.options:
            if option.spec_field:
                fields.setdefault(option.spec_field, (option, []))[1].append(method.name)
    return fields


def options_of(spec) -> tuple[Method, dict[str, Any]]:
    """The method of a resolved run spec (:class:`robustkit.specs.spec.RunSpec` or ``TspSpec``) and every
    option's value."""
    method = get_method(spec.method)
    given = dict(spec.method_options)
    given.update({o.name: getattr(spec, o.spec_field) for o in method.options if o.spec_field})
    return method, method.resolve(given)


def option_columns() -> list[str]:
    """The store's identity columns of the methods' options that are not run-spec fields
    (``lora.r``, ...), in method order."""
    return [m.column(o.name) for m in METHODS.values() for o in m.options if not o.spec_field]


def identity_columns(method: str, method_options: Iterable | Mapping | None) -> dict[str, Any]:
    """A run's option columns (``{"lora.r": 8, ...}``, as :meth:`Method.column` names them) from
    its manifest's ``method`` and ``method_options`` (pairs); readable without the method object
    (a store written by a later version)."""
    pairs = method_options.items() if isinstance(method_options, Mapping) else (method_options or ())
    return {f"{method}.{name}": value for name, value in pairs}


def method_labels() -> dict[str, str]:
    return {name: m.label for name, m in METHODS.items()}


def method_colours() -> dict[str, str]:
    return {name: m.colour for name, m in METHODS.items()}


def defaults_help(attribute: str) -> str:
    """Each method's default of a run setting, grouped by value: ``"2e-05 (full, topk), 1e-04
    (houlsby, ...)"`` (``attribute``: ``default_lr``, ``default_epochs``, ``default_max_length``)."""
    groups: dict[Any, list[str]] = {}
    for name, method in METHODS.items():
        groups.setdefault(getattr(method, attribute), []).append(name)
    return ", ".join(f"{value:g} ({', '.join(names)})" for value, names in groups.items())


def options_help() -> str:
    """Every method's options (those that are not run-spec fields) with their defaults, for ``--help``."""
    lines = []
    for method in METHODS.values():
        options = [
            f"{o.name}={'none' if o.default is None else o.default} ({o.help})"
            for o in method.options
            if not o.spec_field
        ]
        if options:
            lines.append(f"{method.name}: " + "; ".join(options))
    return ". ".join(lines)
