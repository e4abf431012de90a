"""Command-line options generated from declared settings (pydantic models: :mod:`jtcse.schema`,
:mod:`jtcse.training.settings`): the bridge between a settings class and a typer command.

Each key of a settings class becomes one option: ``--KEY`` (``--max-steps``), or ``--STAGE-KEY`` for a pipeline
stage's table (``--twin-learning-rate``); a stage's on/off switch is ``--STAGE/--no-STAGE``. The help is the
key's help, the shown default the value of the defaults the command runs with (or what unset means). Every
generated option defaults to "not given", so a command can lay what was typed over a recipe's values and the
declared defaults (:func:`jtcse.schema.build`); a value that fails its check is one line naming its option. An old
spelling declared on the key (``aliases``) is a hidden option that still works, with a deprecation warning
(:func:`jtcse.commands._options.alias_option`).

A command declares its own arguments as usual and adds the generated ones with :func:`with_settings`.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import typer

from jtcse.commands._options import alias_option, given_once
from jtcse.errors import SettingError
from jtcse.schema import Key, Layer, build, get, keys


@dataclass(frozen=True)
class Options:
    """The options of one settings table: the keys of ``cls`` (less ``exclude``), shown with the values of
    ``defaults`` (an instance), named ``--PREFIX-KEY`` when ``prefix`` is set, in the help panel ``panel``. A table
    whose keys default to another table's (``same_as``: that table's prefix) shows ``as --OTHER-KEY``."""

    cls: type
    defaults: Any
    prefix: str = ""
    exclude: tuple[str, ...] = ()
    panel: str | None = None
    same_as: str | None = None

    @property
    def keys(self) -> dict[str, Key]:
        return keys(self.cls, self.exclude)

    def parameter(self, name: str) -> str:
        """The command parameter of key ``name`` (``twin_learning_rate``)."""
        return f"{self.prefix}_{name}" if self.prefix else name

    def flag(self, name: str) -> str:
        """The option of key ``name`` as typed (``--twin-learning-rate``, ``--twin`` for a stage's switch)."""
        key = self.keys[name]
        return f"--{self.prefix}" if key.extra.get("switch") else self._dashed(key.extra.get("flag") or name)

    def old_flags(self, name: str) -> list[str]:
        """The old spellings of key ``name``'s option, as typed: an old key spelled as the key is (``steps``:
        ``--twin-steps``), a whole option as it is (``--student``)."""
        return [old if old.startswith("--") else self._dashed(old) for old in self.keys[name].extra.get("aliases", ())]

    def _dashed(self, spelling: str) -> str:
        dashed = spelling.replace("_", "-")
        return f"--{self.prefix.replace('_', '-')}-{dashed}" if self.prefix else f"--{dashed}"

    def label(self, _section: str, name: str) -> str:
        return self.flag(name)


def _shown(key: Key, value: Any) -> str:
    if value is None:
        return key.extra.get("unset") or "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ",".join(_shown(key, v) for v in value) if value else "none"
    return str(value)


def _text(text: str) -> str:
    """``text`` as typer shows it: it reads help as rich markup, where ``[twin]`` would vanish."""
    return text.replace("[", "\\[")


def _option(options: Options, name: str, key: Key) -> inspect.Parameter:
    flag, extra = options.flag(name), key.extra
    if key.kind is bool:
        annotation: Any = bool | None
        declared = f"{flag}/--no-{flag[2:]}"
        metavar = None
    elif key.sequence and extra.get("repeat"):
        annotation, declared = list[str] | None, flag
        metavar = extra.get("metavar") or "TEXT"
    elif key.sequence:
        annotation, declared = str | None, flag
        item = {int: "N", float: "X", str: "TEXT"}[key.kind]
        metavar = extra.get("metavar") or f"{item}1,{item}2,..."
    else:
        annotation, declared = key.kind | None, flag
        metavar = extra.get("metavar") or (
            "|".join(key.choices) if key.choices else {int: "INTEGER", float: "FLOAT"}.get(key.kind, "TEXT")
        )
    short = () if options.prefix or not extra.get("short") else (extra["short"],)
    option = typer.Option(
        None,
        declared,
        *short,
        help=_text(key.help),
        show_default=(
            f"as --{options.same_as}-{(extra.get('flag') or name).replace('_', '-')}"
            if options.same_as
            else _shown(key, get(options.defaults, key))
        ),
        metavar=metavar,
        rich_help_panel=_text(options.panel) if options.panel else None,
        callback=given_once,
    )
    return inspect.Parameter(
        options.parameter(name), inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation
    )


def _typed(key: Key, value: Any) -> Any:
    """A comma-separated option's text as the list it stands for (an item that is not of the key's kind is left as
    text, for the key's check to name)."""
    if not (key.sequence and isinstance(value, str)):
        return value
    return [_item(key.kind, item.strip()) for item in value.split(",") if item.strip()]


def _item(kind: type, text: str) -> Any:
    try:
        return {int: int, float: float}.get(kind, str)(text)
    except ValueError:
        return text


def given(options: Options, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``{key: value}`` of the options typed on the command line among a command's ``arguments``."""
    out = {}
    for name, key in options.keys.items():
        value = arguments.get(options.parameter(name))
        if value is not None:
            out[name] = _typed(key, value)
    return out


def settings_from(options: Options, arguments: Mapping[str, Any]) -> Any:
    """The settings the command runs with: ``options.defaults`` with the options typed on top, each checked."""
    return build(options.cls, [Layer(given(options, arguments), where="", label=options.label)], base=options.defaults)


def with_settings(*groups: Options) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add the options of ``groups`` to a typer command function, which takes them as ``**options`` beside its
    own arguments (read them with :func:`given` / :func:`settings_from`); the old spellings declared on the keys
    are hidden options standing in for theirs. A :class:`~jtcse.errors.SettingError` the command raises names each
    setting by its option (:func:`option_name`)."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(command)  # in the command's module: its annotations may be strings
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints.get(p.name, p.annotation))
            for p in inspect.signature(command).parameters.values()
            if p.kind is not inspect.Parameter.VAR_KEYWORD
        ]
        generated = [_option(options, name, key) for options in groups for name, key in options.keys.items()]
        old = _old_spellings(groups)
        names = [p.name for p in own + generated + old]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise TypeError(f"{command.__name__}: generated options clash with its own: {', '.join(duplicated)}")

        @functools.wraps(command)
        def wrapper(**arguments: Any) -> Any:
            for parameter in old:  # each stood in for its option as it was parsed
                arguments.pop(parameter.name)
            try:
                return command(**arguments)
            except SettingError as err:  # raised by a check, a trainer or a loss: named by its option here
                raise err.renamed(option_name(groups, err.table)) from None

        parameters = own + generated + old
        wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        del wrapper.__wrapped__  # typer reads the signature above, not the undecorated function's
        return wrapper

    return decorate


def _old_spellings(groups: Sequence[Options]) -> list[inspect.Parameter]:
    """A hidden parameter for each old spelling of a generated option that is not an option of its own here (the
    pipeline's old ``--objective`` is ``jtcse distill``'s own)."""
    current = set(flags(groups).values())
    out = []
    for options in groups:
        for name in options.keys:
            for old in (flag for flag in options.old_flags(name) if flag not in current):
                parameter = "old_" + old.lstrip("-").replace("-", "_")
                option = alias_option(old, options.flag(name), options.parameter(name))
                out.append(
                    inspect.Parameter(parameter, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=str | None)
                )
    return out


def option_name(groups: Sequence[Options], table: str | None) -> Callable[[str], str | None]:
    """The option of a key of ``table`` among ``groups`` (a key of no table, or of none of ``groups``' tables, is
    looked for among the unprefixed options; ``None``: it has no option here)."""
    named = flags(groups)
    return lambda key: named.get((table or "", key)) or named.get(("", key))


def flags(groups: Sequence[Options]) -> dict[tuple[str, str], str]:
    """``{(table, key): --option}`` of ``groups`` (``""``: the top-level table of an unprefixed group)."""
    return {(options.prefix, name): options.flag(name) for options in groups for name in options.keys}
