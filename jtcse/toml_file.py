"""TOML files, read and written: :func:`read_toml` (``data/manifest.toml``, the recipes in ``models/``: ``tomllib``,
``tomli`` on Python 3.10) and :func:`settings_toml` (declared settings as a commented file: ``jtcse pipeline
--dump-recipe``), which reads back to the same settings.

A file that is not TOML is one ``JTCSEError`` line naming it and where it breaks.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError
from jtcse.schema import get, keys, sections, table_values

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def read_toml(path: str | Path) -> dict[str, Any]:
    """The tables of the TOML file ``path`` (a missing file is the caller's to report)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        if text.startswith("\ufeff"):
            raise JTCSEError(
                f"{path} starts with a byte order mark (BOM, the bytes EF BB BF some editors add), which TOML does not "
                "allow: save it as UTF-8 without BOM."
            )
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise JTCSEError(f"{path} is not valid TOML: {err}") from None


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


def settings_toml(instance: Any, header: str = "") -> str:
    """Declared settings (:mod:`jtcse.schema`) as a commented TOML file: each key under the first sentence of its
    help, an unset key (``None``) commented out with what unset means; the tables after the top-level keys (a table
    with a base: only what differs from it)."""
    lines = [f"# {line}".rstrip() for line in header.splitlines()]

    def write(cls: type, owner: Any, exclude: tuple[str, ...], only: Mapping[str, Any] | None = None) -> None:
        for name, key in keys(cls, exclude).items():
            if only is not None and name not in only:
                continue
            value = get(owner, key)
            lines.append("")
            lines.extend(f"# {line}" for line in _wrap(_first_sentence(key.help)))
            if value is None:
                unset = _wrap(f"{name} =    (unset: {key.extra.get('unset') or 'none'})")
                lines.extend(f"# {line}" if i == 0 else f"#     {line}" for i, line in enumerate(unset))
            else:
                lines.append(f"{name} = {toml_value(value)}")

    write(type(instance), instance, ())
    for name, table in sections(type(instance)).items():
        lines += ["", "", f"[{name}]", *(f"# {line}" for line in _wrap(table.help))]
        only = table_values(instance, name) if table.base else None
        if only == {}:
            lines.append(f"# (nothing differs from [{table.base}])")
        write(table.cls, getattr(instance, name), table.exclude, only)
    return "\n".join(lines).lstrip("\n") + "\n"


def _first_sentence(text: str) -> str:
    """The help's first sentence (a recipe's comment; ``--help`` shows it all)."""
    return re.split(r"(?<!e\.g\.)(?<!i\.e\.)(?<=\.)\s+(?=[A-Z])", text, maxsplit=1)[0]


def _wrap(text: str, width: int = 110) -> list[str]:
    return textwrap.wrap(text, width) or [""]
