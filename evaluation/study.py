"""A study file read (``evaluation/studies/NAME.toml``, the schema in ``evaluation/README.md``): its settings, the
splits every row is scored on, its rows (an entry is a template over the seeds and its ``each`` lists) and its
choices, every value in them a template that names settings, definitions, seeds, choices and rows."""

from __future__ import annotations

import importlib
import itertools
import re
import string
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from jtcse.toml_file import read_toml

REPO = Path(__file__).resolve().parents[1]
STUDIES = REPO / "evaluation" / "studies"
_WHOLE = re.compile(r"\{([^{}:!]+)\}")
_INDEX = re.compile(r"\[([^\]]+)\]")


class Waiting(Exception):
    """What a row or a choice needs is not there yet (rows of an earlier stage are missing)."""


@dataclass(frozen=True)
class Row:
    """One row to make: its ``name``, the ``[[rows]]`` ``entry`` it comes from and the ``names`` its templates see
    (``seed``, ``next``, ``seed_b``, ``first``, the ``each`` variables and the ``let`` values)."""

    name: str
    entry: dict
    names: dict


def merged(value: Any) -> Any:
    """``value`` with every list of tables in it merged in order (a list of such lists flattened; nested tables key by
    key, later layers winning)."""
    if isinstance(value, dict):
        return {key: merged(item) for key, item in value.items()}
    if not isinstance(value, list) or not value:
        return value
    layers = [merged(item) for item in value]
    if not all(isinstance(layer, dict) for layer in layers):
        return layers
    out: dict = {}
    for layer in layers:
        for key, item in layer.items():
            out[key] = merged([out[key], item]) if isinstance(item, dict) and isinstance(out.get(key), dict) else item
    return out


class _Rows(dict):
    """The rows as templates see them: a missing one is :class:`Waiting`."""

    def __missing__(self, name: str):
        raise Waiting(f"row {name}")


class _Formatter(string.Formatter):
    """``str.format`` whose fields are the names of ``scope`` (with ``names``); an index that is itself a name
    (``{grid[tag]}``) is that name's value. A setting or definition is resolved after it is indexed, so that only
    the part a row uses has to be ready."""

    def __init__(self, scope: Scope, names: dict):
        self.scope, self.names = scope, names

    def value(self, field: str, keys_only: bool = False) -> Any:
        """``field``'s value; ``keys_only``: a table's keys, its values left as they are (templates that may name
        what is not there yet)."""
        head = re.match(r"[^\[]*", field)[0]
        value, raw = self.scope.raw(head, self.names)
        for key in _INDEX.findall(field[len(head) :]):
            try:
                key = self.scope.lookup(key, self.names)
            except KeyError:
                key = int(key) if key.lstrip("-").isdigit() else key
            value = value[key]
        if keys_only and isinstance(value, dict):
            return list(value)
        return self.scope.resolve(value, self.names) if raw else value

    def get_field(self, field_name, args, kwargs):
        return self.value(field_name), field_name


class Study:
    """A study file (``quick``: its ``[quick]`` tables over its ``[settings]`` and ``[define]``), with the module of
    the same name beside it when there is one (its table layout, choice rules and row kinds)."""

    def __init__(self, path: str | Path, quick: bool = False):
        self.path = Path(path).resolve()
        self.file = read_toml(self.path)
        self.name, self.quick = self.path.stem, quick
        over = self.file.get("quick", {}) if quick else {}
        settings = {**self.file.get("settings", {}), **over.get("settings", {})}
        self.settings = {key: None if value == "none" else value for key, value in settings.items()}
        self.define = {**self.file.get("define", {}), **over.get("define", {})}
        self.seeds: list[int] = self.settings["seeds"]
        self.splits: dict[str, dict] = self.file.get("splits", {})
        self.selection: list[str] = self.file.get("selection", [])
        self.entries: list[dict] = self.file.get("rows", [])
        self.choices: dict[str, dict] = self.file.get("choices", {})
        self.imports: dict[str, str] = self.file.get("imports", {})
        module = self.path.with_suffix(".py")
        found = module.parent == STUDIES and module.exists()
        self.module: ModuleType | None = importlib.import_module(f"evaluation.studies.{self.name}") if found else None

    def get(self, key: str, default: Any = None) -> Any:
        """A top-level key of the file (``results``, ``writeup``, ``marker``, ``work``, ``threads``, ``start``)."""
        return self.file.get(key, default)

    def hook(self, name: str, fallback: ModuleType | None = None):
        """The study module's function ``name``, else ``fallback``'s; ``None`` when neither has one."""
        found = getattr(self.module, name, None) if self.module else None
        return found or (getattr(fallback, name, None) if fallback else None)


class Scope:
    """The study's templates resolved against its rows (``rows``: name -> row, as saved so far)."""

    def __init__(self, study: Study, rows: dict[str, dict]):
        self.study, self.rows = study, rows

    def raw(self, name: str, names: dict) -> tuple[Any, bool]:
        """``(value, whether it is still a template)`` of a name: a row's own names first, then ``rows``, the
        settings, the definitions, the imports, the choices and the study module's functions of that name (called
        with this scope and the names); ``KeyError`` for none of them."""
        study = self.study
        if name in names:
            return names[name], False
        if name == "rows":
            return _Rows(self.rows), False
        for table in (study.settings, study.define):
            if name in table:
                return table[name], True
        if name in study.imports:  # a value of jtcse's, by its dotted path
            module, _, attribute = study.imports[name].rpartition(".")
            return getattr(importlib.import_module(module), attribute), False
        if name in study.choices:
            from evaluation.choices import choice

            return choice(self, name), False
        hook = study.hook(name)
        if hook is None:
            raise KeyError(name)
        return hook(self, names), False

    def lookup(self, name: str, names: dict) -> Any:
        """A name's value (:meth:`raw`, resolved)."""
        value, raw = self.raw(name, names)
        return self.resolve(value, names) if raw else value

    def resolve(self, value: Any, names: dict | None = None) -> Any:
        """``value`` with every template in it filled: ``"{x}"`` alone is ``x``'s value as it is (a number, a list, a
        table), else ``str.format``; tables and lists item by item; a row entry's ``args`` and ``values`` are lists
        of tables merged (:func:`merged`)."""
        names = {"first": self.study.seeds[0], **(names or {})}
        if isinstance(value, dict):
            return {key: self.resolve(item, names) for key, item in value.items()}
        if isinstance(value, list):
            return [self.resolve(item, names) for item in value]
        if not isinstance(value, str) or "{" not in value:
            return value
        formatter = _Formatter(self, names)
        whole = _WHOLE.fullmatch(value)
        return formatter.value(whole[1]) if whole else formatter.vformat(value, (), {})

    def seed_names(self, seed: int | None) -> dict:
        seeds = self.study.seeds
        names = {"first": seeds[0]}
        if seed is not None:
            following = seeds[(seeds.index(seed) + 1) % len(seeds)] if seed in seeds else seed + 1
            names.update(seed=seed, next=following, seed_b=seed + 1)
        return names

    def combos(self, each: dict, names: dict) -> list[dict]:
        """Every combination of the ``each`` variables' values (a table's keys, its values left unresolved: they
        may name what only a row has; repeats dropped), in order."""
        values = []
        for items in each.values():
            whole = _WHOLE.fullmatch(items) if isinstance(items, str) else None
            found = _Formatter(self, {"first": self.study.seeds[0], **names}).value(whole[1], True) if whole else None
            values.append(list(dict.fromkeys(found if whole else self.resolve(items, names))))
        return [dict(zip(each, combo, strict=True)) for combo in itertools.product(*values)]

    def seeds_of(self, entry: dict) -> list[int | None]:
        seeds, spec = self.study.seeds, entry.get("seeds", "all" if "{seed" in entry["name"] else "none")
        if isinstance(spec, list):
            return spec
        with_b = sorted({*seeds, *(s + 1 for s in seeds)})
        return {"all": seeds, "first": seeds[:1], "rest": seeds[1:], "with_b": with_b, "none": [None]}[spec]

    def expand(self, entry: dict) -> list[Row]:
        """The rows of a ``[[rows]]`` entry: one per seed and combination of its ``each`` values."""
        out = []
        for seed in self.seeds_of(entry):
            for combo in self.combos(entry.get("each", {}), self.seed_names(seed)):
                names = {**self.seed_names(seed), **combo}
                for key, value in entry.get("let", {}).items():
                    names[key] = merged(self.resolve(value, names))
                out.append(Row(self.resolve(entry["name"], names), entry, names))
        return out

    def value(self, row: Row, key: str, default: Any = None) -> Any:
        """A key of ``row``'s entry, resolved in its names (lists of tables merged)."""
        return merged(self.resolve(row.entry.get(key, default), row.names))

    def seeded(self, pattern: str, names: dict | None = None) -> list[str]:
        """The row names of ``pattern``: one a seed when it names ``{seed}``, else the one."""
        names = names or {}
        seeds = self.study.seeds if "{seed" in pattern else [None]
        return [self.resolve(pattern, {**self.seed_names(s), **names}) for s in seeds]
