"""Declared settings: frozen dataclasses whose fields each carry their default, help and check once.

A settings class declares each value with :func:`setting` (default, help, check, and how it reads on a command
line), a nested settings class whose keys read as its own with :func:`group` (a stage's training settings), and
a nested class that is a table of its own with :func:`section` (a pipeline stage's ``[twin]``). Everything else
is derived from the declaration:

* :func:`validate` checks an instance's values (type, then each field's check); call it in ``__post_init__``;
* :func:`keys` / :func:`sections` list what a recipe or a command line may set, flattened over groups;
* :func:`build` makes an instance from layers of plain values (the defaults, a recipe, the options given),
  each mistake one line naming where it came from and the valid keys;
* :func:`replace_keys` changes an instance by key (``train_twin(max_steps=2)``), :func:`to_toml` writes one back.

A class may name, in a ``NOT_KEYS`` class attribute, words a user might take for keys, each with what to do
instead (``{"device": "give --device on the command line"}``).

A check is a function of the value that returns what is wrong with it (``"must be at least 2"``) or ``None``.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from jtcse.errors import JTCSEError, SettingError

Check = Callable[[Any], "str | None"]
_KIND = "jtcse.schema"


# ---------------------------------------------------------------------------------------------------- checks
def at_least(minimum: float) -> Check:
    return lambda value: None if value >= minimum else f"must be at least {minimum:g}"


def positive(value: float) -> str | None:
    return None if math.isfinite(value) and value > 0 else "must be a positive number"


def one_of(*choices: str) -> Check:
    def check(value: str) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}"

    check.choices = choices  # type: ignore[attr-defined]  # shown as the option's metavar
    return check


def every(check: Check, *, non_empty: bool = True) -> Check:
    """``check`` applied to each item of a list (and the list not empty)."""

    def each(values: Sequence[Any]) -> str | None:
        if non_empty and not values:
            return "must not be empty"
        return next((f"has {v!r}, which {problem}" for v in values if (problem := check(v))), None)

    return each


def check_value(value: Any, check: Check | None, name: str) -> Any:
    """``value``, or a ``JTCSEError`` ``"{name} {problem}, not {value!r}."`` when ``check`` finds a problem."""
    problem = None if value is None or check is None else check(value)
    if problem:
        raise JTCSEError(f"{name} {problem}, not {value!r}.")
    return value


# ---------------------------------------------------------------------------------------------------- fields
def setting(
    default: Any,
    help: str,
    *,
    check: Check | None = None,
    unset: str | None = None,
    key: str | None = None,
    flag: str | None = None,
    repeat: bool = False,
    metavar: str | None = None,
    switch: bool = False,
    short: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> Any:
    """A declared value. ``unset``: what ``None`` means (shown as the default); ``key``: its name in recipes and
    on the command line when the attribute cannot have it (``with``); ``flag``: its option's name when that
    differs from the key (``--regularizer`` for ``regularizers``); ``repeat``: a list given by repeating the
    option (else comma-separated); ``switch``: a table's on/off (``[twin] enabled`` is ``--twin/--no-twin``);
    ``short``: a one-letter option name too (``-r``), where the option has no table prefix; ``extra``: what the
    owner of the settings says about the value (``Key.extra``: a training setting's trainer argument ...)."""
    meta = {
        "help": help,
        "check": check,
        "unset": unset,
        "key": key,
        "flag": flag,
        "repeat": repeat,
        "metavar": metavar,
        "switch": switch,
        "short": short,
        "extra": dict(extra or {}),
    }
    return dataclasses.field(default=default, metadata={_KIND: ("setting", meta)})


def group(default: Any) -> Any:
    """A nested settings instance whose keys read as the owner's own (a stage's :class:`TrainingSettings`)."""
    return dataclasses.field(default=default, metadata={_KIND: ("group", {})})


def section(default: Any, help: str, *, exclude: Sequence[str] = (), base: str | None = None) -> Any:
    """A nested settings instance that is a table of its own (``[twin]``) whose ``exclude`` keys are not set
    there (the owner sets them, e.g. a pipeline's seed). With ``base`` (an earlier table of the same class) the
    table holds only what differs from that one: every key it does not set is the base table's
    (``[warmup_b]``: warm-up II's settings, those of ``[warmup]`` but for what it says)."""
    meta = {"help": help, "exclude": tuple(exclude), "base": base}
    return dataclasses.field(default=default, metadata={_KIND: ("section", meta)})


@dataclass(frozen=True)
class Key:
    """One settable value: its ``name`` (recipe key; ``--name`` with dashes), its attribute ``path`` from the
    owner (through groups), and its type: ``kind`` (``int``, ``float``, ``bool``, ``str``), ``optional``
    (``None`` allowed) and ``sequence`` (a list of ``kind``)."""

    name: str
    path: tuple[str, ...]
    kind: type
    optional: bool
    sequence: bool
    default: Any
    meta: Mapping[str, Any]

    @property
    def help(self) -> str:
        """The help text (declared as text, or as a function that builds it on first use)."""
        text = self.meta["help"]
        return text() if callable(text) else text

    @property
    def check(self) -> Check | None:
        return self.meta["check"]

    @property
    def extra(self) -> Mapping[str, Any]:
        """What the settings' owner declared about this value beyond the schema's own (``setting(extra=...)``)."""
        return self.meta["extra"]

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` for this key (type, then its check), or ``None``."""
        if value is None:
            return None if self.optional else "must be set"
        if self.sequence:
            if not isinstance(value, (list, tuple)) or not all(_fits(v, self.kind) for v in value):
                return f"must be an array of {_KINDS[self.kind][1]}"
        elif not _fits(value, self.kind):
            return f"must be {_KINDS[self.kind][0]}"
        return self.check(value) if self.check is not None else None

    def coerce(self, value: Any) -> Any:
        """``value`` as stored: lists as tuples, whole numbers of a float key as floats."""
        convert = float if self.kind is float else (lambda v: v)
        if value is None:
            return None
        return tuple(convert(v) for v in value) if self.sequence else convert(value)


_KINDS = {
    int: ("a whole number", "whole numbers"),
    float: ("a number", "numbers"),
    bool: ("true or false", "booleans"),
    str: ("a string", "strings"),
}


def _fits(value: Any, kind: type) -> bool:
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def _role(field: dataclasses.Field) -> tuple[str, Mapping[str, Any]]:
    return field.metadata.get(_KIND, ("plain", {}))


def _type_of(annotation: Any) -> tuple[type, bool, bool]:
    """``(kind, optional, sequence)`` of ``int``, ``float | None``, ``tuple[str, ...]`` ..."""
    optional = False
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        optional, annotation = True, members[0]
    if typing.get_origin(annotation) is tuple:
        return typing.get_args(annotation)[0], optional, True
    return annotation, optional, False


@functools.cache
def _fields(cls: type) -> list[tuple[dataclasses.Field, Any]]:
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls)]


def keys(cls: type, exclude: Sequence[str] = ()) -> dict[str, Key]:
    """The settable keys of ``cls`` in declaration order, groups flattened, sections left out."""
    return dict(_keys(cls, tuple(exclude)))


@functools.cache
def _keys(cls: type, exclude: tuple[str, ...]) -> dict[str, Key]:
    out: dict[str, Key] = {}
    for field, annotation in _fields(cls):
        role, meta = _role(field)
        if role == "group":
            for name, key in keys(annotation).items():
                out[name] = dataclasses.replace(key, path=(field.name, *key.path))
        elif role == "setting":
            kind, optional, sequence = _type_of(annotation)
            name = meta["key"] or field.name
            out[name] = Key(name, (field.name,), kind, optional, sequence, field.default, meta)
    ordered = sorted(out.items(), key=lambda item: not item[1].meta.get("switch"))  # a table's switch first
    return {name: key for name, key in ordered if name not in exclude}


def sections(cls: type) -> dict[str, tuple[type, Mapping[str, Any]]]:
    """``{name: (settings class, {"help", "exclude"})}`` of the tables of ``cls``."""
    return {f.name: (annotation, _role(f)[1]) for f, annotation in _fields(cls) if _role(f)[0] == "section"}


def get(instance: Any, key: Key) -> Any:
    for attribute in key.path:
        instance = getattr(instance, attribute)
    return instance


def validate(instance: Any) -> None:
    """Check each of ``instance``'s own values (its groups and sections check themselves), and store each as
    :meth:`Key.coerce` says (a whole number given for a float key is a float)."""
    for key in _own_keys(type(instance)):
        value = getattr(instance, key.path[0])
        check_value_of(key, value, key.name)
        object.__setattr__(instance, key.path[0], key.coerce(value))  # frozen: set once, while constructing


@functools.cache
def _own_keys(cls: type) -> tuple[Key, ...]:
    """The keys of ``cls``'s own fields (not of its groups)."""
    return tuple(key for key in _keys(cls, ()).values() if len(key.path) == 1)


def check_value_of(key: Key, value: Any, label: str) -> None:
    """A ``JTCSEError`` ``"{label} {problem}, not {value!r}."`` when ``value`` does not fit ``key`` (a list whose
    items fit names the item that does not instead of the whole list)."""
    problem = key.problem(value)
    if problem:
        item_named = key.sequence and problem.startswith("has ")
        raise JTCSEError(f"{label} {problem}." if item_named else f"{label} {problem}, not {value!r}.")


def replace_keys(
    instance: Any, values: Mapping[str, Any], caller: str | None = None, exclude: Sequence[str] = ()
) -> Any:
    """``instance`` with the keys in ``values`` changed (a flattened key reaches into its group). An unknown key
    is a ``TypeError`` naming ``caller`` (as Python names an unexpected keyword argument), or a ``JTCSEError``
    naming the valid keys when no caller is given."""
    known = keys(type(instance), exclude)
    unknown = sorted(set(values) - set(known))
    if unknown:
        if caller:
            raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}")
        raise JTCSEError(f"unknown setting {unknown[0]!r}{_close(unknown[0], known)}; valid: {', '.join(known)}.")
    return _replace(instance, {known[name].path: known[name].coerce(value) for name, value in values.items()})


def _replace(instance: Any, changes: Mapping[tuple[str, ...], Any]) -> Any:
    own = {path[0]: value for path, value in changes.items() if len(path) == 1}
    nested: dict[str, dict[tuple[str, ...], Any]] = {}
    for path, value in changes.items():
        if len(path) > 1:
            nested.setdefault(path[0], {})[path[1:]] = value
    own.update({name: _replace(getattr(instance, name), inner) for name, inner in nested.items()})
    return dataclasses.replace(instance, **own) if own else instance


def _close(name: str, known: Sequence[str]) -> str:
    match = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {match[0]!r}?)" if match else ""


# ---------------------------------------------------------------------------------------------------- building
@dataclass(frozen=True)
class Layer:
    """Values to put on top of the ones below: ``{key: value, section: {key: value}}``. ``where`` names their
    origin in an error about a key or table (``recipe models/x.toml``); ``label(section, key)`` names one value
    (``--twin-batch-size``), by default ``where [section]: key``."""

    values: Mapping[str, Any]
    where: str = "settings"
    label: Callable[[str, str], str] | None = None

    def name(self, section: str, key: str) -> str:
        if self.label is not None:
            return self.label(section, key)
        return f"{self.where}{f' [{section}]' if section else ''}: {key}"


def build(cls: type, layers: Sequence[Layer], base: Any = None) -> Any:
    """An instance of ``cls``: ``base`` (default ``cls()``) with each layer's values on top, in order. Every
    value is checked where it is given; an unknown key, a key of another table, a table that is not one and a
    value that fails its check are one ``JTCSEError`` line naming the layer, the table and the valid keys."""
    top, tables = keys(cls), sections(cls)
    changes: dict[tuple[str, ...], Any] = {}
    nested: dict[str, list[Layer]] = {name: [] for name in tables}
    for layer in layers:
        inner: dict[str, dict[str, Any]] = {}
        for name, value in layer.values.items():
            if name in tables:
                if not isinstance(value, Mapping):
                    raise JTCSEError(f"{layer.where}: {name} must be a table ([{name}]), not {value!r}.")
                inner[name] = dict(value)
            elif name in top:
                if isinstance(value, Mapping):
                    raise JTCSEError(f"{layer.where}: [{name}] is not a table; {name!r} is a top-level key.")
                check_value_of(top[name], value, layer.name("", name))
                changes[top[name].path] = top[name].coerce(value)
            else:
                raise _unknown(cls, layer, "", name, value)
        for name, values in inner.items():
            section_cls, meta = tables[name]
            allowed = keys(section_cls, meta["exclude"])
            for key in values:
                if key not in allowed:
                    raise _unknown(cls, layer, name, key, values[key])
            nested[name].append(dataclasses.replace(layer, values=values, label=_in_section(layer, name)))
    instance = base if base is not None else cls()
    built: dict[str, Any] = {}
    for name, section_layers in nested.items():  # in declaration order: a table's base is built before it
        meta = tables[name][1]
        start = built[meta["base"]] if meta["base"] else getattr(instance, name)
        built[name] = _build_section(start, section_layers, meta["exclude"], name) if section_layers else start
        if section_layers or meta["base"]:
            changes[(name,)] = built[name]
    try:
        return _replace(instance, changes)
    except SettingError as err:
        raise err.within(None, _origin(layers, "")) from None
    except JTCSEError as err:
        raise JTCSEError(_where(layers, "", err)) from None


def _in_section(layer: Layer, section: str) -> Callable[[str, str], str]:
    return lambda _, key: layer.name(section, key)


def _build_section(instance: Any, layers: Sequence[Layer], exclude: Sequence[str], name: str) -> Any:
    known = keys(type(instance), exclude)
    changes = {}
    for layer in layers:
        for key, value in layer.values.items():
            check_value_of(known[key], value, layer.name(name, key))
            changes[known[key].path] = known[key].coerce(value)
    try:
        return _replace(instance, changes)
    except SettingError as err:  # a check across keys: the keys are this table's
        raise err.within(name, _origin(layers, name)) from None
    except JTCSEError as err:
        raise JTCSEError(_where(layers, name, err)) from None


def _origin(layers: Sequence[Layer], section: str) -> str:
    """The layers that set ``section`` (``""``: the top), as an error names them (a layer without a ``where``, the
    command line's options, is left out: its error names the options itself)."""
    named = [f"{layer.where}{f' [{section}]' if section else ''}" for layer in layers if layer.where]
    return " / ".join(dict.fromkeys(named))


def _where(layers: Sequence[Layer], section: str, err: Exception) -> str:
    """A check across keys failed: the error, after the layers that set that table (:func:`_origin`)."""
    origin = _origin(layers, section)
    return f"{origin}: {err}" if origin else str(err)


def _unknown(cls: type, layer: Layer, section: str, key: str, value: Any) -> JTCSEError:
    """The error for ``key`` where ``cls`` (in table ``section``, ``""``: the top) has no such key."""
    tables = sections(cls)
    top = keys(cls)
    here = keys(tables[section][0], tables[section][1]["exclude"]) if section else top
    others = [s for s, (c, m) in tables.items() if s != section and key in keys(c, m["exclude"])]
    where = f"{layer.where}{f' [{section}]' if section else ''}"
    valid = f"valid {'here' if section else 'top-level keys'}: {', '.join(here)}"
    table_list = ", ".join(f"[{s}]" for s in tables)
    if not section and isinstance(value, Mapping):
        return JTCSEError(f"{where}: [{key}] is not a table; tables: {table_list}.")
    if others:
        return JTCSEError(f"{where}: {key!r} belongs to {' or '.join(f'[{s}]' for s in others)}; {valid}.")
    if section and key in top:
        return JTCSEError(f"{where}: {key!r} is a top-level key (put it before the first table); {valid}.")
    if section and key in keys(tables[section][0]):
        return JTCSEError(f"{where}: {key!r} is set by the pipeline for every stage (a top-level key); {valid}.")
    hint = getattr(tables[section][0] if section else cls, "NOT_KEYS", {}).get(key)
    if hint:
        return JTCSEError(f"{where}: {key!r} is not a setting: {hint}.")
    tail = "" if section else f"; tables: {table_list}"
    return JTCSEError(f"{where}: unknown key {key!r}{_close(key, list(here))}; {valid}{tail}.")


# ---------------------------------------------------------------------------------------------------- writing
def to_mapping(instance: Any) -> dict[str, Any]:
    """``{key: value, section: {key: value}}`` of ``instance`` (the values a recipe would give: a table with a base
    holds only its differences from it)."""
    out: dict[str, Any] = {name: get(instance, key) for name, key in keys(type(instance)).items()}
    for name, (section_cls, meta) in sections(type(instance)).items():
        out[name] = _table_values(instance, name, section_cls, meta)
    return out


def _table_values(instance: Any, name: str, section_cls: type, meta: Mapping[str, Any]) -> dict[str, Any]:
    inner, base = getattr(instance, name), getattr(instance, meta["base"]) if meta["base"] else None
    values = {k: get(inner, key) for k, key in keys(section_cls, meta["exclude"]).items()}
    return values if base is None else {k: v for k, v in values.items() if get(base, keys(section_cls)[k]) != v}


def toml_value(value: Any) -> str:
    """``value`` as a TOML value (strings with JSON's escapes, which TOML's basic strings share)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return (
            repr(value) if math.isfinite(value) else ("nan" if math.isnan(value) else f"{'-' if value < 0 else ''}inf")
        )
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def to_toml(instance: Any, header: str = "") -> str:
    """``instance`` as a commented TOML file: each key under its help, an unset key (``None``) commented out with
    what unset means; the tables after the top-level keys (a table with a base: only what differs from it)."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]

    def write(cls: type, owner: Any, exclude: Sequence[str], only: Mapping[str, Any] | None = None) -> None:
        for name, key in keys(cls, exclude).items():
            if only is not None and name not in only:
                continue
            value = get(owner, key)
            lines.append("")
            lines.extend(f"# {line}" for line in _wrap(_first_sentence(key.help)))
            if value is None:
                unset = _wrap(f"{name} =    (unset: {key.meta['unset'] or 'none'})")
                lines.extend(f"# {line}" if i == 0 else f"#     {line}" for i, line in enumerate(unset))
            else:
                lines.append(f"{name} = {toml_value(value)}")

    write(type(instance), instance, ())
    for name, (section_cls, meta) in sections(type(instance)).items():
        lines += ["", "", f"[{name}]", *(f"# {line}" for line in _wrap(meta["help"]))]
        only = _table_values(instance, name, section_cls, meta) if meta["base"] else None
        if only == {}:
            lines.append(f"# (nothing differs from [{meta['base']}])")
        write(section_cls, getattr(instance, name), meta["exclude"], only)
    return "\n".join(lines).lstrip("\n") + "\n"


def _first_sentence(text: str) -> str:
    """The help's first sentence (a recipe's comment; ``--help`` shows it all)."""
    return re.split(r"(?<!e\.g\.)(?<!i\.e\.)(?<=\.)\s+(?=[A-Z])", text, maxsplit=1)[0]


def _wrap(text: str, width: int = 110) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width) or [""]
