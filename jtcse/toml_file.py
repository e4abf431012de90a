"""Reading a TOML file (``data/manifest.toml``, the recipes in ``models/``): ``tomllib``, ``tomli`` on Python 3.10.

A file that is not TOML is one ``JTCSEError`` line naming it and where it breaks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError

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
