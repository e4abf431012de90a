"""The data manifest (``data/manifest.toml``): what ``jtcse data fetch NAME`` downloads, from where, with which checksum.

One ``[datasets.NAME]`` table per dataset (``summary``, ``approx_size``, ``licence``, ``source``, ``layout``; or
``available = false`` with a ``reason``) and one ``[[datasets.NAME.files]]`` entry per file (``name``, ``url``,
``sha256``, ``size``, ``unpack`` = ``copy`` | ``tar``, and for tar ``keep`` / ``also``). A file without
``sha256`` is *unpinned*: no published checksum was found for it, and it is fetched only when the caller
allows it. Every mistake in the file is a :class:`JTCSEError` naming the key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.toml_file import read_toml

#: The manifest of a source checkout (``data/manifest.toml`` beside the ``jtcse`` package).
DEFAULT_MANIFEST = Path(__file__).resolve().parents[2] / "data" / "manifest.toml"

_SHA256 = re.compile(r"[0-9a-f]{64}")
_DATASET_KEYS = {"summary", "approx_size", "licence", "source", "layout", "files", "available", "reason"}
_FILE_KEYS = {"name", "url", "sha256", "size", "unpack", "keep", "also"}
UNPACKERS = ("copy", "tar")


@dataclass(frozen=True)
class SourceFile:
    """One file to download. ``sha256`` None: unpinned (no published checksum)."""

    name: str
    url: str
    sha256: str | None = None
    size: int | None = None
    unpack: str = "copy"
    keep: tuple[str, ...] = ()
    also: tuple[str, ...] = ()

    @property
    def pinned(self) -> bool:
        return self.sha256 is not None


@dataclass(frozen=True)
class Dataset:
    """A manifest entry: what it is, where it comes from, and the files that make it."""

    name: str
    summary: str
    files: tuple[SourceFile, ...] = ()
    approx_size: str = ""
    licence: str = ""
    source: str = ""
    layout: str = ""
    available: bool = True
    reason: str = ""

    @property
    def unpinned(self) -> list[SourceFile]:
        return [f for f in self.files if not f.pinned]


@dataclass(frozen=True)
class Manifest:
    path: Path
    datasets: dict[str, Dataset] = field(default_factory=dict)

    def dataset(self, name: str) -> Dataset:
        """The entry called ``name``; an unknown name or one that cannot be fetched is one line naming why."""
        if name not in self.datasets:
            raise JTCSEError(f"unknown dataset {name!r}; {self.path.name} lists: {', '.join(self.datasets)}")
        entry = self.datasets[name]
        if not entry.available:
            raise JTCSEError(f"{name} cannot be fetched: {entry.reason}")
        return entry


def _check_keys(table: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise JTCSEError(f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(sorted(allowed))}")


def _string(table: dict, key: str, where: str, required: bool = False) -> str:
    value = table.get(key, "")
    if not isinstance(value, str) or (required and not value):
        raise JTCSEError(f"{where}: {key!r} must be a {'non-empty ' if required else ''}string")
    return value


def _names(table: dict, key: str, where: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v and "/" not in v for v in value):
        raise JTCSEError(f"{where}: {key!r} must be a list of entry names (no '/')")
    return tuple(value)


def _source_file(table: dict, where: str) -> SourceFile:
    _check_keys(table, _FILE_KEYS, where)
    name = _string(table, "name", where, required=True)
    if "/" in name or name in (".", ".."):
        raise JTCSEError(f"{where}: 'name' must be a plain file name, not {name!r}")
    url = _string(table, "url", where, required=True)
    if not url.startswith(("https://", "http://")):
        raise JTCSEError(f"{where}: 'url' must be an http(s) URL, not {url!r}")
    sha256 = table.get("sha256")
    if sha256 is not None and (not isinstance(sha256, str) or not _SHA256.fullmatch(sha256)):
        raise JTCSEError(f"{where}: 'sha256' must be 64 lower-case hex digits (leave it out when unknown)")
    size = table.get("size")
    if size is not None and (not isinstance(size, int) or isinstance(size, bool) or size < 0):
        raise JTCSEError(f"{where}: 'size' must be a whole number of bytes (leave it out when unknown)")
    unpack = table.get("unpack", "copy")
    if unpack not in UNPACKERS:
        raise JTCSEError(f"{where}: 'unpack' must be one of {', '.join(UNPACKERS)}, not {unpack!r}")
    keep, also = _names(table, "keep", where), _names(table, "also", where)
    if unpack == "tar" and not keep:
        raise JTCSEError(f'{where}: a tar needs \'keep\', the entries to write (e.g. keep = ["STS", "SICK"])')
    if unpack == "copy" and (keep or also):
        raise JTCSEError(f"{where}: 'keep' and 'also' apply to unpack = \"tar\" only")
    return SourceFile(name, url, sha256, size, unpack, keep, also)


def load_manifest(path: str | Path | None = None) -> Manifest:
    """Read and check a manifest (default: :data:`DEFAULT_MANIFEST`)."""
    path = Path(path) if path is not None else DEFAULT_MANIFEST
    if not path.is_file():
        hint = "" if path != DEFAULT_MANIFEST else " (it ships with the source checkout; pass --manifest FILE)"
        raise FileNotFoundError(f"data manifest not found: {path}{hint}")
    raw = read_toml(path)
    _check_keys(raw, {"schema", "datasets"}, str(path))
    if raw.get("schema") != 1:
        raise JTCSEError(f"{path}: 'schema' must be 1")
    datasets = {}
    for name, table in raw.get("datasets", {}).items():
        where = f"{path.name} [datasets.{name}]"
        if not isinstance(table, dict):
            raise JTCSEError(f"{where} must be a table")
        _check_keys(table, _DATASET_KEYS, where)
        available = table.get("available", True)
        if not isinstance(available, bool):
            raise JTCSEError(f"{where}: 'available' must be true or false")
        files = tuple(
            _source_file(entry, f"{where} files[{i}]") if isinstance(entry, dict) else _source_file({}, where)
            for i, entry in enumerate(table.get("files", []))
        )
        if available and not files:
            raise JTCSEError(f"{where}: no [[datasets.{name}.files]] entry")
        if not available and not table.get("reason"):
            raise JTCSEError(f"{where}: 'available = false' needs a 'reason'")
        if len({f.name for f in files}) != len(files):
            raise JTCSEError(f"{where}: two files share a name")
        datasets[name] = Dataset(
            name=name,
            summary=_string(table, "summary", where, required=True),
            files=files,
            approx_size=_string(table, "approx_size", where),
            licence=_string(table, "licence", where),
            source=_string(table, "source", where),
            layout=_string(table, "layout", where),
            available=available,
            reason=_string(table, "reason", where),
        )
    if not datasets:
        raise JTCSEError(f"{path}: no [datasets.NAME] table")
    return Manifest(path, datasets)
