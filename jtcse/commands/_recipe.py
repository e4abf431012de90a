"""``--recipe FILE``: a TOML file of a command's options, read as their defaults, so that options given on the
command line override it (click's ``default_map``, set by the eager ``--recipe`` callback).

The keys are the command's own options, so a new option is a new recipe key and nothing is declared twice.
An option named for a stage (``--twin-learning-rate``) is that stage's key (``learning_rate`` under ``[twin]``);
the command names the few options that belong to a stage under another name (``renamed``: ``--student`` is
``student`` under ``[distill]``); every other option is a top-level key (``corpus``, ``seed`` ...). A TOML
array gives a repeatable option (``--ensemble-with``) or a comma-separated one (an option whose metavar is
``A,B,...``). Paths are read as on the command line: relative to the working directory. The output folder,
hidden (deprecated) names and ``--recipe`` itself are not recipe keys.

Every mistake is one line naming the key and the valid ones: an unknown key, a key of another stage, a table
that is not a stage, a value of the wrong type. The command reads what it needs to record with
:func:`recipe_record`: the file, its sha256 and each option given on top of it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, get_args

import typer

from jtcse.errors import JTCSEError

_META = "jtcse.recipe"
_NOT_KEYS = {"output", "recipe"}
_KINDS = {"integer": "a whole number", "float": "a number", "text": "a string", "path": "a path (string)",
          "boolean": "true or false"}  # fmt: skip


def recipe_keys(
    command, sections: tuple[str, ...], renamed: Mapping[str, tuple[str, str]]
) -> dict[str, dict[str, Any]]:
    """``{section: {key: click parameter}}`` of ``command`` (``""``: the top-level keys), as the module docstring
    says."""
    keys: dict[str, dict[str, Any]] = {"": {}, **{section: {} for section in sections}}
    for param in command.params:
        if param.name in _NOT_KEYS or getattr(param, "hidden", False) or param.name.endswith("_alias"):
            continue
        prefix, _, rest = param.name.partition("_")
        if param.name in renamed:
            section, key = renamed[param.name]
        elif prefix in sections and rest:
            section, key = prefix, rest
        else:
            section, key = "", param.name
        keys[section][key] = param
    return keys


def _is_list_option(param) -> bool:
    return "," in (getattr(param, "metavar", None) or "")


def _kind(param) -> str:
    """What the option takes: ``integer``, ``float``, ``boolean``, ``path`` or ``text`` (of each item, for a
    repeatable option); from typer's annotation (typer 0.2x) or click's type."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None:
        return param.type.name if param.type.name in _KINDS else "text"
    annotation = get_args(descriptor.annotation)[0] if descriptor.is_list else descriptor.annotation
    return {int: "integer", float: "float", bool: "boolean"}.get(annotation, "path" if descriptor.is_path else "text")


def _what(param) -> str:
    kind = _KINDS[_kind(param)]
    if param.multiple:
        return f"an array of {kind.removeprefix('a ').removeprefix('an ')}s"
    return "an array of numbers" if _is_list_option(param) else kind


def _fits(value: Any, kind: str) -> bool:
    if kind == "boolean":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "integer":
        return isinstance(value, int)
    if kind == "float":
        return isinstance(value, (int, float))
    return isinstance(value, str)


def _value(value: Any, param, where: str, key: str) -> Any:
    """``value`` as the option takes it (checked against its type), or one line naming ``key``."""
    if param.multiple or _is_list_option(param):
        kind = _kind(param) if param.multiple else "float"
        if not isinstance(value, list) or not all(_fits(v, kind) for v in value):
            raise JTCSEError(f"{where}: {key} must be {_what(param)}, not {value!r}.")
        return list(value) if param.multiple else ",".join(repr(v) for v in value)
    if not _fits(value, _kind(param)):
        raise JTCSEError(f"{where}: {key} must be {_what(param)}, not {value!r}.")
    return value


def read_recipe(path: str | Path, command, sections: tuple[str, ...], renamed: Mapping[str, tuple[str, str]]) -> dict:
    """``{option name: value}``: the recipe at ``path`` checked against ``command``'s options (module docstring)."""
    from jtcse.toml_file import read_toml

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"recipe not found: {path}")
    keys = recipe_keys(command, sections, renamed)
    stage_list = ", ".join(f"[{s}]" for s in sections)
    values: dict[str, Any] = {}

    def check(section: str, table: Mapping[str, Any]) -> None:
        where = f"recipe {path}" + (f" [{section}]" if section else "")
        valid = keys[section]
        for key, value in table.items():
            if key not in valid:
                others = [s for s in sections if key in keys[s] and s != section]
                if others:
                    raise JTCSEError(
                        f"{where}: {key!r} belongs to {' or '.join(f'[{s}]' for s in others)}"
                        f"{'' if section else ' (a stage)'}; valid {'here' if section else 'top-level keys'}: "
                        f"{', '.join(sorted(valid))}."
                    )
                raise JTCSEError(f"{where}: unknown key {key!r}; valid {'here' if section else 'top-level keys'}: "
                                 f"{', '.join(sorted(valid))}{'' if section else f'; stages: {stage_list}'}.")  # fmt: skip
            values[valid[key].name] = _value(value, valid[key], where, key)

    raw = read_toml(path)
    top = {key: value for key, value in raw.items() if not isinstance(value, dict)}
    for name, table in raw.items():
        if not isinstance(table, dict):
            if name in sections:
                raise JTCSEError(f"recipe {path}: {name} must be a table ([{name}]), not {table!r}.")
            continue
        if name not in sections:
            hint = f" ({name!r} is a top-level key: put it before the first [stage])" if name in keys[""] else ""
            raise JTCSEError(f"recipe {path}: [{name}] is not a stage; stages: {stage_list}{hint}.")
        check(name, table)
    check("", top)
    return values


def recipe_option(sections: tuple[str, ...], renamed: Mapping[str, tuple[str, str]],
                  check: Callable[[dict[str, Any]], None] | None = None):  # fmt: skip
    """``--recipe FILE``: eager; reads and checks the file (``check``: the command's own check of every option's
    value, the recipe's on top of the defaults) and makes its values the command's defaults for this call, under
    any given before it (an old option name's value)."""

    def load(ctx: typer.Context, value: Any) -> Any:
        if value is None:
            return value
        values = read_recipe(value, ctx.command, sections, renamed)
        if check is not None:
            check({**{param.name: param.default for param in ctx.command.params}, **values})
        content = Path(value).read_bytes()
        ctx.meta[_META] = {"path": str(value), "sha256": hashlib.sha256(content).hexdigest(), "values": values}
        ctx.default_map = {**values, **(ctx.default_map or {})}
        return value

    return typer.Option(
        None, "--recipe", is_eager=True, callback=load, metavar="FILE",
        help="A TOML file of this command's options (models/*/recipe.toml): its values become the defaults, and "
        "options given on the command line override them; the summary records the file, its sha256 and each "
        "override.",
    )  # fmt: skip


def recipe_record(ctx: typer.Context) -> dict[str, Any] | None:
    """``{"path", "sha256", "overrides"}`` when ``--recipe`` was given (else ``None``): ``overrides`` maps each
    option given on the command line to ``{"value", "recipe"}`` (``recipe``: the file's value, absent if it had
    none)."""
    loaded = ctx.meta.get(_META)
    if loaded is None:
        return None
    overrides = {}
    for param in ctx.command.params:
        if param.name in _NOT_KEYS or param.name.endswith("_alias"):
            continue
        if ctx.get_parameter_source(param.name).name != "COMMANDLINE":
            continue
        entry = {"value": ctx.params.get(param.name)}
        if param.name in loaded["values"]:
            entry["recipe"] = loaded["values"][param.name]
        overrides[max(param.opts, key=len)] = entry
    return {"path": loaded["path"], "sha256": loaded["sha256"], "overrides": overrides}
