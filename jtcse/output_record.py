"""What proves that a file is jtcse's: an output's record, confined to its output, with each file's size and content
digest; and the one content fingerprint of what a command reads (:func:`fingerprint`).

**A record** is a JSON object: ``jtcse_outputs.json`` inside a folder output, or a command's own JSON file that
carries its keys (``encode``'s progress file ``OUT.json``, ``eval mteb``'s ``summary.json``)::

    {"written_by": "jtcse ensemble",
     "files": {"modules.json": {"bytes": 349, "sha256": "5f1c..."},   # written: its size and content digest
               "member_1/model.safetensors": {"bytes": 90868376, "sha256": "..."},
               "checkpoints": null}}                                    # being written (a file or a folder)

An entry is a ``/``-separated path relative to the folder the record describes. :meth:`Record.read` refuses, in
one ``JTCSEError`` line naming the record and the entry, every entry that does not name a path strictly inside it:
a non-string, an empty name, an absolute path, ``.`` or ``..`` parts, a glob pattern, a backslash, or a path
through a link (links are followed: where it leads must lie inside, and jtcse never lists a link). So nothing a
record lists can reach outside its output, whoever wrote the record.

**Whose a file is** (:meth:`Record.whose`): listed with a digest, it is jtcse's while its size and digest match
and the user's once its content changed; listed as being written (``null``), or inside a folder listed so, it is
jtcse's (the run writing it was stopped); anything else is not jtcse's. An entry is entered as being written
before its file is written (a run killed meanwhile leaves nothing unlisted) and sealed (:meth:`Record.seal`, its
digest taken) when jtcse has finished writing it. A record of jtcse before digests (``"files": [names]``) reads as
every name being written. SHA-256 is the digest: with the SHA instructions of current CPUs it is the fastest of
``hashlib``'s (``scripts/bench_digest.py`` measures it against BLAKE2b and against loading the model it reads).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_write_json

RECORD = "jtcse_outputs.json"
"""The record inside a folder output."""
WRITING = None
"""A record's value for an entry being written."""
FINGERPRINTS = ("sha256:", "weights:", "files:")
"""How the fingerprints a run records start (``files:`` is jtcse's older one of a folder, by sizes and times)."""
_GLOB = set("*?[")


def file_digest(path: str | os.PathLike) -> str:
    """The SHA-256 of the bytes of ``path`` (hex), read in blocks (``hashlib.file_digest`` where there is one)."""
    with open(path, "rb") as handle:
        if hasattr(hashlib, "file_digest"):  # Python 3.11+
            return hashlib.file_digest(handle, "sha256").hexdigest()
        digest = hashlib.sha256()
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
        return digest.hexdigest()


def content(path: str | os.PathLike) -> dict:
    """What a record holds of a file jtcse has finished writing: its size and digest."""
    return {"bytes": os.stat(path).st_size, "sha256": file_digest(path)}


def _files_in(folder: Path, ignore: Iterable[str] = (), *, every: bool = False) -> Iterator[tuple[str, Path]]:
    """``(relative name, path)`` of every file under ``folder`` in name order, links followed (each folder once),
    without hidden names (``.git``, jtcse's temporaries), records, or the top-level names in ``ignore``; ``every``:
    hidden names and records too (what jtcse wrote into a folder of its own)."""
    seen: set[tuple[int, int]] = set()
    skip = (lambda name: False) if every else (lambda name: name.startswith(".") or name == RECORD)
    for top, folders, names in os.walk(folder, followlinks=not every):  # (jtcse writes no link: never its own)
        stat = os.stat(top)
        if (stat.st_dev, stat.st_ino) in seen:  # a link back up the tree
            folders[:] = []
            continue
        seen.add((stat.st_dev, stat.st_ino))
        at = Path(top).relative_to(folder)
        folders[:] = sorted(d for d in folders if not skip(d) and not (at == Path(".") and d in ignore))
        for name in sorted(names):
            if not skip(name) and not (at == Path(".") and name in ignore):
                path = Path(top) / name
                if path.is_file() and not (every and path.is_symlink()):
                    yield (at / name).as_posix(), path


def fingerprint(source, *, ignore: Iterable[str] = (), missing_ok: bool = False, what: str = "input") -> str | None:
    """What a run records of an input, by its content: the one fingerprint of every file, folder and model jtcse
    reads (a corpus, pairs, a dev or selection file, a model folder, a data folder), so that one replaced or edited
    at the same path is another input and one moved or copied is the same.

    * ``None`` → ``None``;
    * a file → ``sha256:`` and the first 16 hex digits of the SHA-256 of its bytes;
    * a folder → ``sha256:`` over every file in it (its name inside the folder, and its digest), links followed;
      hidden names, records and the top-level names in ``ignore`` are not counted (a trained model's
      ``checkpoints/``: what loading it does not read);
    * ``hf:NAME[:CONFIG][:SPLIT]`` (a Hub dataset, :mod:`jtcse.text_inputs`) → ``sha256:`` over the Arrow files of
      its copy in the cache (their names and digests);
    * a path that is not there → an error naming it (``what`` it is), or with ``missing_ok`` (a Hub name) the name;
    * a loaded model (anything with a ``state_dict``) → ``weights:`` over its tensors' names and bytes.
    """
    if source is None:
        return None
    if isinstance(source, (str, os.PathLike)) and str(source).startswith("hf:"):
        from jtcse.text_inputs import table_files

        return _digest_of((file.name, file) for file in table_files(str(source)))
    if isinstance(source, (str, os.PathLike)):
        path = Path(source).expanduser()
        if path.is_file():
            return f"sha256:{file_digest(path)[:16]}"
        if path.is_dir():
            return _digest_of(_files_in(path, ignore))
        if missing_ok:
            return str(source)
        raise JTCSEError(f"{what} not found: {source}")
    return _weights_fingerprint(source)


def _digest_of(files: Iterable[tuple[str, Path]]) -> str:
    digest = hashlib.sha256()
    for name, file in files:
        digest.update(f"{name}\0{file_digest(file)}\n".encode())
    return f"sha256:{digest.hexdigest()[:16]}"


def _weights_fingerprint(model) -> str:
    import torch

    digest = hashlib.sha256(type(model).__name__.encode())
    for name, tensor in model.state_dict().items():
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu").contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return f"weights:{digest.hexdigest()[:16]}"


def is_fingerprint(value) -> bool:
    """Whether a recorded ``value`` (or a list of them) holds a fingerprint (:func:`fingerprint`): what differs there
    is an input that changed (a file edited, a model trained again), not a setting."""
    return any(
        isinstance(v, str) and v.startswith(FINGERPRINTS) for v in (value if isinstance(value, list) else [value])
    )


class DamagedRecord(JTCSEError):
    """A record jtcse wrote that no longer reads (cut short, edited into something else)."""


def looks_like_a_record(path: Path, written_by: str | None = None) -> bool:
    """Whether the file ``path`` starts as a record of jtcse's (of ``written_by``) starts: the marker of a record's
    temporary copy and of one cut short."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    key = b'"written_by": "' + (f'{written_by}"' if written_by else "jtcse").encode()
    return head.lstrip().startswith(b"{") and (key in head or b'"format": "jtcse-' in head)


def _entry_error(record: Path, entry, why: str) -> JTCSEError:
    shown = json.dumps(entry, ensure_ascii=False) if not isinstance(entry, str) else repr(entry)
    return JTCSEError(
        f"{record} lists {shown}, which {why}; a record names only files inside its output, so jtcse deletes and "
        "replaces nothing it lists: remove that entry (or the record) by hand, or give another -o/--output."
    )


def checked_entry(record: Path, root: Path, entry) -> str:
    """``entry`` of ``record`` (the output's folder: ``root``) when it names a path strictly inside ``root``, else a
    ``JTCSEError`` naming both (see the module docstring)."""
    if not isinstance(entry, str):
        raise _entry_error(record, entry, "is not a file name")
    parts = entry.split("/")
    if not entry or entry.startswith("/") or any(part in ("", ".", "..") for part in parts) or "\\" in entry:
        raise _entry_error(record, entry, "is not a path inside the output (absolute, empty, or with . or ..)")
    if _GLOB & set(entry):
        raise _entry_error(record, entry, "is a pattern, not a file name")
    at = root
    for part in parts:
        at = at / part
        if at.is_symlink():
            raise _entry_error(record, entry, f"goes through the link {at} (to {os.readlink(at)})")
    top = root.resolve()
    if (root / entry).resolve() == top or top not in (root / entry).resolve().parents:
        raise _entry_error(record, entry, "lies outside the output")
    return entry


def _checked_value(record: Path, entry: str, value) -> dict | None:
    if value is WRITING or (
        isinstance(value, dict) and isinstance(value.get("bytes"), int) and isinstance(value.get("sha256"), str)
    ):
        return value
    raise _entry_error(record, entry, f"is recorded as {json.dumps(value)[:40]}, not a size and digest")


def _within(name: str, folder: str) -> bool:
    return name == folder or name.startswith(folder + "/")


@dataclass
class Record:
    """A record (see the module docstring): its file ``path``, the folder ``root`` its entries are in, who wrote it,
    its ``files`` (entry → content, or ``None`` while being written) and its other keys (``rest``)."""

    path: Path
    root: Path
    written_by: str
    files: dict[str, dict | None] = field(default_factory=dict)
    rest: dict = field(default_factory=dict)

    @classmethod
    def read(cls, path: str | os.PathLike, root: str | os.PathLike | None = None) -> Record | None:
        """The record at ``path`` (entries inside ``root``, by default its folder), every entry checked
        (:func:`checked_entry`). ``None``: no file there, or one that is not a record (no ``written_by``: the
        user's); :class:`DamagedRecord` for one of jtcse's that no longer reads as JSON."""
        path = Path(path)
        root = path.parent if root is None else Path(root)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError):
            return None if not looks_like_a_record(path) else cls._damaged(path, "not UTF-8 text")
        try:
            data = json.loads(text)
        except ValueError as err:
            return (
                cls._damaged(path, f"not JSON: {err.msg} at line {err.lineno}") if looks_like_a_record(path) else None
            )
        if not isinstance(data, dict) or not isinstance(data.get("written_by"), str):
            return None
        rest = {k: v for k, v in data.items() if k not in ("written_by", "files")}
        listed = data.get("files") or {}
        if isinstance(listed, list):  # jtcse before digests: every name being written
            files = {checked_entry(path, root, name): WRITING for name in listed}
        elif isinstance(listed, dict):
            files = {checked_entry(path, root, k): _checked_value(path, k, v) for k, v in listed.items()}
        else:
            raise _entry_error(path, listed, "is not a table of files")
        return cls(path, root, data["written_by"], files, rest)

    @staticmethod
    def _damaged(path: Path, why: str):
        raise DamagedRecord(
            f"{path} is damaged ({why}; cut short?): it is the record of what jtcse wrote there, so jtcse cannot "
            "tell its files from yours and replaces none. Delete it and the files it was listing to start over, "
            "or give another -o/--output."
        )

    def to_json(self) -> dict:
        """The record as written: ``written_by`` first (the marker :func:`looks_like_a_record` reads), then the
        command's own keys, then ``files``."""
        return {"written_by": self.written_by, **self.rest, "files": dict(self.files)}

    def save(self) -> Path:
        return atomic_write_json(self.path, self.to_json())

    def whose(self, name: str) -> str | None:
        """``"jtcse"``, ``"changed"`` (listed, its content changed since: the user's) or ``None`` (not listed) for
        the file ``name`` (``/``-separated, inside ``root``)."""
        if name in self.files and self.files[name] is not WRITING:
            return "jtcse" if self.matches(name) else "changed"
        return "jtcse" if self.writing(name) else None

    def writing(self, name: str) -> bool:
        """Whether ``name`` is listed as being written, or lies in a folder listed so."""
        return any(self.files.get(folder, 0) is WRITING for folder in _prefixes(name))

    def matches(self, name: str) -> bool:
        recorded, path = self.files[name], self.root / name
        try:
            return (
                path.is_file() and path.stat().st_size == recorded["bytes"] and file_digest(path) == recorded["sha256"]
            )
        except OSError:
            return False

    def holds_folder(self, name: str) -> bool:
        """Whether jtcse made the folder ``name``: it is listed, or holds a listed entry."""
        return name in self.files or any(_within(entry, name) for entry in self.files)

    def enter(self, *names: str) -> None:
        """List ``names`` as being written (before they are)."""
        for name in names:
            self.files[checked_entry(self.path, self.root, name)] = WRITING

    def drop(self, *names: str) -> None:
        """Take ``names`` (and whatever is listed inside them) out of the record."""
        self.files = {k: v for k, v in self.files.items() if not any(_within(k, name) for name in names)}

    def seal(self, *names: str) -> None:
        """Record the content of ``names`` (all entries being written when none is given) as it is now: a file its
        size and digest, a folder each file in it; what is not there is dropped."""
        names = names or tuple(k for k, v in self.files.items() if v is WRITING)
        for name in names:
            path = self.root / name
            self.drop(name)
            if path.is_file():
                self.files[name] = content(path)
            elif path.is_dir():
                for inner, file in _files_in(path, every=True):
                    if file != self.path:
                        self.files[f"{name}/{inner}"] = content(file)


def _prefixes(name: str) -> Iterator[str]:
    """``a``, ``a/b``, ``a/b/c`` of ``a/b/c``."""
    parts = name.split("/")
    for i in range(1, len(parts) + 1):
        yield "/".join(parts[:i])
