"""Declared settings on pydantic, and the bridge to recipe files and command lines.

A settings class is a :class:`Settings`, a frozen, strict pydantic model. Each field is declared once: its type
(choices as a ``Literal``, lists as an :data:`Array`, what no constraint says as a validator: :func:`checked`) and,
with :func:`setting`, its default, help (the description), constraints (``ge=2``) and what a command line and a
recipe need beyond pydantic, kept in the field's ``json_schema_extra`` as HfArgumentParser keeps it in a dataclass
field's ``metadata`` (the option's name, its old spellings, what unset means ...); a check across fields is a
``model_validator`` raising a :class:`~jtcse.errors.JTCSEError`. A nested class whose keys read as the owner's is
a :func:`group`, one that is a table of its own a :func:`section`. Here:

* :func:`keys` / :func:`sections`: what a recipe or a command line may set, flattened over groups;
* :func:`build`: an instance from layers of plain values (defaults, a recipe, the options typed), each mistake one
  line naming where it came from (a recipe's file and table, or the option) and the valid keys;
* :meth:`Settings.replace`: the one way to change settings, checked like new ones;
* pydantic's own message about a value, on one line after the key or option it is about
  (``--twin-batch-size: Input should be greater than or equal to 2``), for a single value too (:func:`check`).

A class may name, in a ``NOT_KEYS`` class attribute, words a user might take for keys, each with what to do
instead. Settings as a commented TOML file: :func:`jtcse.toml_file.settings_toml`.
"""

from __future__ import annotations

import difflib
import functools
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from jtcse.errors import JTCSEError, SettingError

T = TypeVar("T")
Array = Annotated[tuple[T, ...], Strict(False)]
"""A list of values (a TOML array, a comma-separated or repeated option), kept as a tuple; its items stay strict."""
Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
"""A positive, finite number."""
_STRICT = ConfigDict(strict=True)


def checked(problem: Callable[[Any], str | None]) -> AfterValidator:
    """A validator (``Annotated[str, checked(part_problem)]``) from a function that says what is wrong with a value
    (``"must be all or K/N ..."``) or returns ``None``."""

    def validate(value: Any) -> Any:
        found = problem(value)
        if found:
            raise PydanticCustomError("jtcse_check", found)  # pydantic's message is the text itself
        return value

    return AfterValidator(validate)


# ---------------------------------------------------------------------------------------------------- fields
def setting(
    default: Any,
    help: str,
    *,
    unset: str | None = None,
    key: str | None = None,
    flag: str | None = None,
    aliases: Sequence[str] = (),
    repeat: bool = False,
    metavar: str | None = None,
    switch: bool = False,
    short: str | None = None,
    extra: Mapping[str, Any] | None = None,
    **constraints: Any,
) -> Any:
    """A declared value: pydantic's ``Field`` with ``help`` as its description and ``constraints`` (``ge=2``,
    ``min_length=1``). ``unset``: what ``None`` means (shown as the default); ``key``: its name in recipes and on the
    command line when the attribute cannot have it (``with``: the field's alias); ``flag``: its option's name when
    that differs from the key (``--regularizer`` for ``regularizers``); ``aliases``: the option's old spellings,
    still accepted with a warning: an old key (``"steps"``: ``--steps``, ``--twin-steps`` in a table) or a whole
    option (``"--student"``); ``repeat``: a list given by repeating the option (else comma-separated); ``switch``: a
    table's on/off (``[twin] enabled`` is ``--twin/--no-twin``); ``short``: a one-letter option name too (``-r``),
    where the option has no table prefix; ``extra``: what the owner of the settings says about the value (a
    trainer's roles). All but the help and constraints are the field's ``json_schema_extra`` (:attr:`Key.extra`)."""
    declared = dict(unset=unset, flag=flag, aliases=list(aliases), repeat=repeat, metavar=metavar, switch=switch)
    declared.update(short=short, **(extra or {}))
    extra_schema = {name: value for name, value in declared.items() if value}
    return Field(default, alias=key, description=help, json_schema_extra=extra_schema, **constraints)


def group(default: Any) -> Any:
    """A nested settings instance whose keys read as the owner's own (a stage's :class:`TrainingSettings`)."""
    return Field(default)


def section(default: Any, help: str, *, exclude: Sequence[str] = (), base: str | None = None) -> Any:
    """A nested settings instance that is a table of its own (``[twin]``) whose ``exclude`` keys are not set there
    (the owner sets them, e.g. a pipeline's seed). With ``base`` (an earlier table of the same class) the table holds
    only what differs from that one: every key it does not set is the base table's (``[warmup_b]``: warm-up II's
    settings, those of ``[warmup]`` but for what it says)."""
    table = {"table": True, "exclude": list(exclude), **({"base": base} if base else {})}
    return Field(default, description=help, json_schema_extra=table)


@dataclass(frozen=True)
class Table:
    """A :func:`section` of a settings class: its settings ``cls``, its ``help``, the keys not set there
    (``exclude``) and the table whose values it holds the differences from (``base``)."""

    cls: type
    help: str
    exclude: tuple[str, ...]
    base: str | None


def _extra(info: FieldInfo) -> dict[str, Any]:
    extra = info.json_schema_extra
    return extra if isinstance(extra, dict) else {}


def _is_group(info: FieldInfo) -> bool:
    return isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel) and not _extra(info)


def _bare(annotation: Any) -> Any:
    while typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _shape(annotation: Any) -> tuple[type, bool, tuple[Any, ...]]:
    """``(kind, sequence, choices)`` of a declared type (``None`` allowed or not): ``int``, ``float | None``,
    ``Array[str]``, ``Literal["a", "b"]`` (kind ``str``, its choices) ..."""
    annotation = _bare(annotation)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        annotation = _bare(next(a for a in typing.get_args(annotation) if a is not type(None)))
    sequence = typing.get_origin(annotation) is tuple
    if sequence:
        annotation = _bare(typing.get_args(annotation)[0])
    choices = typing.get_args(annotation) if typing.get_origin(annotation) is typing.Literal else ()
    return (type(choices[0]) if choices else annotation), sequence, choices


def _full_type(info: FieldInfo) -> Any:
    """The field's type with its constraints and validators, as pydantic checks it."""
    return Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation


class Settings(BaseModel):
    """Declared settings: frozen (hashable, equal when their values are), strict, no keys but the declared ones. A
    value that fails its check is one :class:`~jtcse.errors.SettingError` line, pydantic's message after the key; a
    check across keys raises its own."""

    model_config = ConfigDict(frozen=True, strict=True, extra="forbid", validate_by_name=True, validate_by_alias=True)

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as err:
            raise _one_line(err) from None

    def replace(self, **values: Any) -> Settings:
        """These settings with ``values`` changed, checked as new settings are: by key (a group's keys read as this
        class's own: ``twin.replace(max_steps=2)``), or a group whole by its attribute (``replace(training=...)``).
        The one way to change settings: pydantic's ``model_copy(update=...)``, which checks nothing, is refused."""
        return replace_keys(self, values)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Settings:
        if update:
            raise TypeError(f"{type(self).__name__}: change settings with .replace(...), which checks them")
        return super().model_copy(deep=deep)


# ---------------------------------------------------------------------------------------------------- keys
@dataclass(frozen=True)
class Key:
    """One settable value: its ``name`` (recipe key; ``--name`` with dashes), its attribute ``path`` from the
    owner (through groups) and its pydantic field ``info``."""

    name: str
    path: tuple[str, ...]
    info: FieldInfo = field(compare=False, repr=False)

    extra = property(lambda self: _extra(self.info), doc="What :func:`setting` declared beyond the value.")
    help = property(lambda self: self.info.description or "", doc="The help text: the field's description.")

    @functools.cached_property
    def shape(self) -> tuple[type, bool, tuple[Any, ...]]:
        """``(kind, sequence, choices)``: ``(float, True, ())`` for an ``Array[float]`` (:func:`_shape`)."""
        return _shape(self.info.annotation)

    kind = property(lambda self: self.shape[0])
    sequence = property(lambda self: self.shape[1])
    choices = property(lambda self: self.shape[2])

    def check(self, value: Any, label: str) -> Any:
        """``value`` as stored (lists as tuples, whole numbers of a float key as floats), or a ``JTCSEError``
        naming it ``label`` (:func:`check`)."""
        return check(value, _full_type(self.info), label)


def keys(cls: type, exclude: Sequence[str] = ()) -> dict[str, Key]:
    """The settable keys of ``cls`` in declaration order (a table's switch first), groups flattened, sections left
    out."""
    return dict(_keys(cls, tuple(exclude)))


@functools.cache
def _keys(cls: type, exclude: tuple[str, ...]) -> dict[str, Key]:
    out: dict[str, Key] = {}
    for name, info in cls.model_fields.items():
        if _is_group(info):
            found = [Key(k, (name, *key.path), key.info) for k, key in keys(info.annotation).items()]
        else:
            found = [] if _extra(info).get("table") else [Key(info.alias or name, (name,), info)]
        for key in found:
            if key.name in out:
                raise TypeError(f"{cls.__name__}: two settings are called {key.name!r}")
            out[key.name] = key
    ordered = sorted(out.items(), key=lambda item: not item[1].extra.get("switch"))
    return {name: key for name, key in ordered if name not in exclude}


def sections(cls: type) -> dict[str, Table]:
    """``{name: its Table}`` of the tables of ``cls``, in declaration order."""
    return {
        name: Table(info.annotation, info.description or "", tuple(extra["exclude"]), extra.get("base"))
        for name, info in cls.model_fields.items()
        if (extra := _extra(info)).get("table")
    }


def get(instance: Any, key: Key) -> Any:
    for attribute in key.path:
        instance = getattr(instance, attribute)
    return instance


def replace_keys(
    instance: Any, values: Mapping[str, Any], caller: str | None = None, exclude: Sequence[str] = ()
) -> Any:
    """``instance`` with the keys in ``values`` changed (a flattened key reaches into its group; a group's attribute
    replaces it whole), checked as new settings are. An unknown key is a ``TypeError`` naming ``caller`` (as Python
    names an unexpected keyword argument), or a ``JTCSEError`` naming the valid keys when no caller is given."""
    known = keys(type(instance), exclude)
    groups = {name: (name,) for name, info in type(instance).model_fields.items() if _is_group(info)}
    paths = {**groups, **{n: k.path for n, k in known.items()}}
    unknown = sorted(set(values) - set(paths))
    if unknown:
        if caller:
            raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}")
        raise JTCSEError(f"unknown setting {unknown[0]!r}{_close(unknown[0], known)}; valid: {', '.join(known)}.")
    return _replace(instance, {paths[name]: value for name, value in values.items()})


def _replace(instance: Any, changes: Mapping[tuple[str, ...], Any]) -> Any:
    own = {path[0]: value for path, value in changes.items() if len(path) == 1}
    nested: dict[str, dict[tuple[str, ...], Any]] = {}
    for path, value in changes.items():
        if len(path) > 1:
            nested.setdefault(path[0], {})[path[1:]] = value
    own.update({name: _replace(getattr(instance, name), inner) for name, inner in nested.items()})
    return type(instance)(**{**dict(instance), **own}) if own else instance


def _close(name: str, known: Sequence[str], form: str = "{!r}") -> str:
    match = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {form.format(match[0])}?)" if match else ""


def to_mapping(instance: Any) -> dict[str, Any]:
    """``{key: value, section: {key: value}}`` of ``instance`` (the values a recipe would give: a table with a base
    holds only its differences from it)."""
    out: dict[str, Any] = {name: get(instance, key) for name, key in keys(type(instance)).items()}
    return {**out, **{name: table_values(instance, name) for name in sections(type(instance))}}


def table_values(instance: Any, name: str) -> dict[str, Any]:
    """``{key: value}`` of the table ``name`` of ``instance`` (a table with a base: what differs from the base)."""
    table = sections(type(instance))[name]
    inner = getattr(instance, name)
    base = getattr(instance, table.base) if table.base else None
    values = {k: get(inner, key) for k, key in keys(table.cls, table.exclude).items()}
    return values if base is None else {k: v for k, v in values.items() if get(base, keys(table.cls)[k]) != v}


# ---------------------------------------------------------------------------------------------------- messages
def _message(error: Mapping[str, Any], label: str) -> str:
    """One pydantic ``error`` about ``label`` as one line, its words pydantic's: ``--twin-batch-size: Input should be
    greater than or equal to 2``; an item of a list is named by its index (``--ensemble-weights[1]: ...``)."""
    items = "".join(f"[{part}]" for part in error["loc"] if isinstance(part, int))
    return f"{label}{items}: {error['msg']}"


def _one_line(err: ValidationError) -> JTCSEError:
    """The first of ``err``'s errors: a check across keys (a ``model_validator``'s) as it raised it, a value's as a
    :class:`~jtcse.errors.SettingError` about its key (so that each caller names the key its own way)."""
    error = err.errors()[0]
    raised = (error.get("ctx") or {}).get("error")
    if isinstance(raised, JTCSEError):
        return raised
    names = [part for part in error["loc"] if isinstance(part, str)]
    if not names:
        return JTCSEError(error["msg"])
    return SettingError("{" + names[-1] + "}" + _message(error, "").replace("{", "{{").replace("}", "}}"), names[-1:])


@functools.cache
def _adapter(annotation: Any) -> TypeAdapter:
    return TypeAdapter(annotation, config=_STRICT)


def check(value: Any, annotation: Any, label: str) -> Any:
    """``value`` as a value of the declared type ``annotation`` (``Pooling | None``, ``Objective`` ...), or a
    ``JTCSEError``: pydantic's message after ``label`` (``--pooling: Input should be 'cls' or 'mean'``)."""
    try:
        return _adapter(annotation).validate_python(value)
    except ValidationError as err:
        raise JTCSEError(_message(err.errors()[0], label)) from None


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
    nested: dict[str, list[tuple[Layer, dict[str, Any]]]] = {name: [] for name in tables}
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
                changes[top[name].path] = top[name].check(value, layer.name("", name))
            else:
                raise _unknown(cls, layer, "", name, value)
        for name, values in inner.items():
            allowed = keys(tables[name].cls, tables[name].exclude)
            for key in values:
                if key not in allowed:
                    raise _unknown(cls, layer, name, key, values[key])
            nested[name].append((layer, values))
    instance = base if base is not None else cls()
    built: dict[str, Any] = {}
    for name, given in nested.items():  # in declaration order: a table's base is built before it
        table = tables[name]
        start = built[table.base] if table.base else getattr(instance, name)
        built[name] = _build_section(start, given, table.exclude, name) if given else start
        if given or table.base:
            changes[(name,)] = built[name]
    try:
        return _replace(instance, changes)
    except SettingError as err:
        raise err.within(None, _origin(layers, "")) from None
    except JTCSEError as err:
        raise JTCSEError(_where(layers, "", err)) from None


def _build_section(instance: Any, given: list[tuple[Layer, dict[str, Any]]], exclude: Sequence[str], name: str) -> Any:
    """The table ``name`` (``instance``) with the values each layer gives it (``given``) on top."""
    known = keys(type(instance), exclude)
    changes = {}
    for layer, values in given:
        for key, value in values.items():
            changes[known[key].path] = known[key].check(value, layer.name(name, key))
    layers = [layer for layer, _ in given]
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
    here = keys(tables[section].cls, tables[section].exclude) if section else top
    others = [s for s, table in tables.items() if s != section and key in keys(table.cls, table.exclude)]
    where = f"{layer.where}{f' [{section}]' if section else ''}"
    valid = f"valid {'here' if section else 'top-level keys'}: {', '.join(here)}"
    table_list = ", ".join(f"[{s}]" for s in tables)
    if not section and isinstance(value, Mapping):
        return JTCSEError(f"{where}: [{key}] is not a table{_close(key, list(tables), '[{}]')}; tables: {table_list}.")
    if others:
        return JTCSEError(f"{where}: {key!r} belongs to {' or '.join(f'[{s}]' for s in others)}; {valid}.")
    if section and key in top:
        return JTCSEError(f"{where}: {key!r} is a top-level key (put it before the first table); {valid}.")
    if section and key in keys(tables[section].cls):
        return JTCSEError(f"{where}: {key!r} is set by the pipeline for every stage (a top-level key); {valid}.")
    hint = getattr(tables[section].cls if section else cls, "NOT_KEYS", {}).get(key)
    if hint:
        return JTCSEError(f"{where}: {key!r} is not a setting: {hint}.")
    tail = "" if section else f"; tables: {table_list}"
    return JTCSEError(f"{where}: unknown key {key!r}{_close(key, list(here))}; {valid}{tail}.")
