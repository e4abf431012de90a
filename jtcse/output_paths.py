"""May a command write (or replace, or delete) here? The one answer, for every command that writes
(``docs/runs.md``, "Every output owned").

A command declares its output up front, before it loads a model or reads its data:

* :class:`FolderOutput`: a folder (a trained model, an ensemble, an export, an index, an RTT run, a fetch,
  diagnostics, MTEB results);
* :class:`FileOutput`: a file and the side files beside it (``encode``'s ``OUT.npy``, ``STEM.rows.npy`` and
  progress file ``OUT.npy.json``; ``eval sts -o``; ``index search -o``; ``index mine -o``).

Its ``check()`` reads only, and refuses in one ``JTCSEError`` line naming the path:

* an output that is one of the command's inputs, a folder holding one, or another name of one (a hard link:
  ``st_dev``/``st_ino``) (:func:`check_output_apart`; ``~``, ``.``, ``..`` and links resolved);
* a file where a folder is wanted or the reverse, a path under a file, a link (jtcse never writes through one);
* anything already there that jtcse did not write: **a file its output's record does not list is never
  replaced or deleted, ``--overwrite`` or not**, and a listed file with a second name (a hard link) is not
  written either.

**The record** of an output is a JSON object ``{"written_by": "jtcse encode", "files": [names]}``: inside a
folder (:data:`RECORD`, or a file of the command's own that carries the two keys: a shards folder's
``_jtcse.json``), beside a file (``OUT.json``: ``encode``'s progress file, ``index mine``'s and ``index
search``'s summary), or in a JSON result itself (``eval sts -o``: ``written_by`` only). A name is entered before
its file is written (``add``), so a run killed while writing leaves nothing unlisted; ``--overwrite`` removes
only what the record lists (``clear``), and a finished folder missing a file it lists is not finished
(:func:`missing_entries`). Writes go to a temporary name renamed into place (:mod:`jtcse.locking`), under the
output's lock (``writing``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from fnmatch import fnmatchcase
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_folder, atomic_path, atomic_write_json, atomic_write_text, output_lock

PathLike = str | os.PathLike
RECORD = "jtcse_outputs.json"
"""The record inside a folder output."""
SCRATCH = ".jtcse-saving"
"""A folder output's scratch folder (a model saved whole before it is moved in: :meth:`FolderOutput.moved_in`)."""
_BELONGS = re.compile(r"\.(?P<tmp>.+)\.tmp-\d+|(?P<folder>.+)\.tmp|(?P<lock>.+)\.lock")
"""What jtcse leaves beside a name it writes when killed: ``.NAME.tmp-PID``, ``NAME.tmp``, ``NAME.lock``."""


def resolved(path: PathLike) -> Path:
    """``path`` absolute, with ``~``, ``.``, ``..`` and links resolved (it need not exist)."""
    return Path(path).expanduser().resolve()


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)  # st_dev and st_ino: two names of one file are one file
    except OSError:  # one of them does not exist
        return a == b


def check_output_apart(outputs: PathLike | Iterable[PathLike], inputs: Iterable[object]) -> None:
    """Raise :class:`JTCSEError` when an output is one of ``inputs`` (or a hard link to one) or a folder holding one.
    ``outputs``: the output, or every path it is made of (``OUT.npy`` and its ``OUT.npy.json`` ...). ``inputs``:
    what the command reads; what is not an existing path (``None``, a Hub model name, a loaded model) cannot be
    harmed and is skipped."""
    if isinstance(outputs, (str, os.PathLike)):
        outputs = [outputs]
    outputs = list(outputs)
    for source in inputs:
        if not isinstance(source, (str, os.PathLike)) or not Path(source).expanduser().exists():
            continue
        read = resolved(source)
        for output in outputs:
            written = resolved(output)
            if _same_file(read, written):
                raise JTCSEError(
                    f"The output {output} is the input {source}: writing it would destroy what is read, "
                    "--overwrite or not. Give another -o/--output."
                )
            if written in read.parents:
                raise JTCSEError(
                    f"The output folder {output} holds the input {source}: writing (or --overwrite) there could "
                    "delete it. Give an -o/--output outside it."
                )


def read_record(path: PathLike) -> dict | None:
    """The record at ``path`` (a JSON object with ``written_by``), or ``None`` when there is none."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("written_by"), str) else None


def _listed(name: str, files: Iterable[str]) -> bool:
    """Whether ``name`` (``/``-separated inside the output) is a listed name (or matches a listed pattern such as
    ``part-*.parquet``), or what jtcse leaves beside one when killed (a temporary, a lock)."""
    files = set(files)
    if name in files or name == SCRATCH or any("*" in f and fnmatchcase(name, f) for f in files):
        return True
    folder, _, base = name.rpartition("/")
    match = _BELONGS.fullmatch(base)
    if not match:
        return False
    group = next(group for group in match.groups() if group)
    return _listed(f"{folder}/{group}" if folder else group, files)


def _refuse_link(path: Path) -> None:
    if path.is_symlink():
        raise JTCSEError(
            f"{path} is a link (to {os.readlink(path)}); jtcse never writes through or replaces one: give the "
            "path of a new file or folder."
        )
    if path.is_file() and path.stat().st_nlink > 1:
        raise JTCSEError(
            f"{path} has {path.stat().st_nlink} names (hard links); writing it would change the other names' file "
            "too: give another -o/--output."
        )


def _refuse_under_file(path: Path) -> None:
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise JTCSEError(f"Cannot write {path}: {parent} is a file, not a folder.")
            return


def _not_written(path: Path, made_by: str, listed_in: Path) -> JTCSEError:
    unlisted = f" ({listed_in.name} does not list it)" if listed_in != path else ""
    return JTCSEError(
        f"{path} was not written by {made_by}{unlisted}, so it is never replaced or deleted, --overwrite or not: "
        "move it away, or give another -o/--output."
    )


def missing_entries(folder: PathLike, record: str = RECORD) -> list[str]:
    """The names the record of ``folder`` lists that are not there (a finished output missing one is not finished)."""
    folder = Path(folder)
    listed = (read_record(folder / record) or {}).get("files") or []
    return [name for name in listed if "*" not in name and not (folder / name).exists()]


class FolderOutput:
    """A folder a command writes (see the module docstring). ``made_by``: the command (``"jtcse rtt"``);
    ``inputs``: what it reads; ``whole``: it replaces the folder whole (:meth:`replacing`: fetch, ensemble, export),
    so it is never the working directory, a folder holding it or the home folder; ``record``: the record's name;
    ``beside``: further paths it writes beside the folder (checked apart from the inputs); ``parts``: names of
    folders in it that are outputs of their own, each checked by what writes it (a pipeline's stage folders: one
    trained by hand is a stage's); ``earlier``: the files that a folder of this command's written by jtcse before
    records were kept holds (``None``: it is not one), which then stand for its record."""

    def __init__(
        self,
        path: PathLike,
        made_by: str,
        *,
        inputs: Iterable[object] = (),
        whole: bool = False,
        record: str = RECORD,
        beside: Iterable[PathLike] = (),
        parts: Iterable[str] = (),
        earlier: Callable[[Path], list[str] | None] | None = None,
    ) -> None:
        self.path, self.made_by, self.inputs, self.whole = Path(path), made_by, tuple(inputs), whole
        self.record_path = self.path / record
        self.beside, self.parts, self.earlier = tuple(Path(p) for p in beside), tuple(parts), earlier

    def record(self) -> dict | None:
        """The output's record (:func:`read_record`; else what ``earlier`` finds), or ``None`` when there is none."""
        record = read_record(self.record_path)
        if record is None and self.earlier is not None and self.path.is_dir():
            files = self.earlier(self.path)
            return None if files is None else {"written_by": self.made_by, "files": files}
        return record

    @property
    def files(self) -> list[str]:
        """The names the record lists (none when there is no record of this command's)."""
        record = self.record()
        return list(record.get("files") or []) if record and record["written_by"] == self.made_by else []

    def check(self) -> None:
        """Refuse (reading only) an output this command may not write: see the module docstring."""
        if self.path.is_symlink() or (self.path.exists() and not self.path.is_dir()):
            _refuse_link(self.path)
            raise JTCSEError(f"{self.path} is a file; -o/--output names the folder {self.made_by} writes.")
        _refuse_under_file(self.path)
        if self.whole:
            self._refuse_special()
        check_output_apart([self.path, *self.beside], self.inputs)
        if not self.path.is_dir():
            return
        record = self.record()
        if record is None and (self.record_path.exists() or self.record_path.is_symlink()):
            raise _not_written(self.record_path, self.made_by, self.record_path)
        if record is not None and record["written_by"] != self.made_by:
            raise JTCSEError(
                f"{self.path} holds the output of {record['written_by']}; give {self.made_by} a folder of its own."
            )
        self._check_entries(self.path, "", [*(record or {}).get("files", []), self.record_path.name])

    def _check_entries(self, folder: Path, prefix: str, files: list[str]) -> None:
        """Refuse an entry of ``folder`` the record does not list (a folder some listed name is inside: each of
        its entries), or a link."""
        for entry in sorted(folder.iterdir()):
            name = prefix + entry.name
            if name in self.parts:
                _refuse_link(entry)
                if not entry.is_dir():
                    raise JTCSEError(f"{entry} is a file; {self.made_by} writes a folder there.")
            elif _listed(name, files):
                _refuse_link(entry)
            elif entry.is_dir() and not entry.is_symlink() and any(f.startswith(f"{name}/") for f in files):
                self._check_entries(entry, f"{name}/", files)
            else:
                raise _not_written(entry, self.made_by, self.record_path)

    def _refuse_special(self) -> None:
        target = resolved(self.path)
        cwd, home = Path.cwd().resolve(), Path.home().resolve()
        if target == home or target == cwd or target in cwd.parents:
            what = {home: "your home folder", cwd: "the working directory"}.get(
                target, "a folder holding the working directory"
            )
            raise JTCSEError(
                f"{self.path} is {what} ({target}); {self.made_by} replaces its output folder whole, so it only "
                "writes a folder of its own: give a new folder (e.g. one inside it)."
            )

    @contextmanager
    def writing(self) -> Iterator[FolderOutput]:
        """Check, hold the output's lock (:func:`jtcse.locking.output_lock`), check again and make the folder (one
        replaced ``whole`` is made by :meth:`replacing`)."""
        self.check()
        with output_lock(self.path):
            self.check()
            if not self.whole:
                self.path.mkdir(parents=True, exist_ok=True)
            yield self

    def add(self, *names: str) -> None:
        """Enter ``names`` in the record (made with the folder when there is none): call before writing them."""
        record = self.record() or {}
        if record and record["written_by"] != self.made_by:  # (check() refused it already: never rewrite another's)
            raise JTCSEError(f"{self.path} holds the output of {record['written_by']}, not of {self.made_by}.")
        files = list(self.files)
        if record and all(name in files for name in names):
            return
        self.path.mkdir(parents=True, exist_ok=True)
        atomic_write_json(
            self.record_path, {**record, "written_by": self.made_by, "files": list(dict.fromkeys([*files, *names]))}
        )

    def drop(self, *names: str) -> None:
        """Take ``names`` out of the record (after removing them)."""
        record = self.record()
        if record is not None and any(name in self.files for name in names):
            atomic_write_json(self.record_path, {**record, "files": [n for n in self.files if n not in names]})

    def fields(self, *names: str) -> dict:
        """A record listing ``names`` (patterns allowed), for a command whose own file is the record."""
        return {"written_by": self.made_by, "files": list(names)}

    def remove(self, *names: str) -> None:
        """Delete the listed entries ``names`` (none that the record does not list; a listed pattern: every entry it
        matches) and take them out of the record."""
        listed = [name for name in names if name in self.files]
        for name in listed:
            for path in self.path.glob(name) if "*" in name else [self.path / name]:
                _delete(path)
        self.drop(*listed)

    def clear(self) -> None:
        """``--overwrite``: delete every entry the record lists, nothing else."""
        self.remove(*self.files)

    def file(self, name: str) -> Path:
        """``FOLDER/name``, entered in the record first."""
        self.add(name)
        return self.path / name

    @contextmanager
    def atomic(self, name: str) -> Iterator[Path]:
        """A temporary path to write ``name`` to, renamed into place on success (entered in the record first)."""
        with atomic_path(self.file(name)) as tmp:
            yield tmp

    def write_json(self, name: str, data: object) -> Path:
        return atomic_write_json(self.file(name), data)

    def write_text(self, name: str, text: str) -> Path:
        return atomic_write_text(self.file(name), text)

    @contextmanager
    def replacing(self) -> Iterator[Path]:
        """A fresh folder to fill, which replaces the output in one rename (:func:`jtcse.locking.atomic_folder`),
        its record listing everything in it; the old folder (checked again first) holds only what it listed."""
        with atomic_folder(self.path) as tmp:
            yield tmp
            tmp.mkdir(exist_ok=True)
            names = sorted(p.name for p in tmp.iterdir() if p.name != self.record_path.name)
            atomic_write_json(tmp / self.record_path.name, {"written_by": self.made_by, "files": names})
            self.check()

    @contextmanager
    def moved_in(self) -> Iterator[Path]:
        """A scratch folder inside the output to save a model into; on success each entry is entered in the record
        and moved into the output in place of the listed one of that name."""
        scratch = self.path / SCRATCH
        shutil.rmtree(scratch, ignore_errors=True)
        try:
            yield scratch
            names = sorted(p.name for p in scratch.iterdir())
            self.add(*names)
            for name in names:
                target = self.path / name
                if target.is_dir() or (target.exists() and (scratch / name).is_dir()):
                    _delete(target)
                os.replace(scratch / name, target)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _delete(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


class FileOutput:
    """A file a command writes, with its ``side`` files and folders beside it (see the module docstring).

    ``record``: ``"beside"`` (``OUT.json`` lists the files; the command writes it, with :meth:`fields` among its own
    keys), ``"self"`` (a JSON result carrying :meth:`fields` itself) or ``None`` (no record: an existing file is
    never replaced; ``appends``: the command only appends to one that it recognises itself, ``eval sts
    --output-csv``)."""

    def __init__(
        self,
        path: PathLike,
        made_by: str,
        *,
        inputs: Iterable[object] = (),
        side: Iterable[PathLike] = (),
        record: str | None = "beside",
        appends: bool = False,
    ) -> None:
        self.path, self.made_by, self.inputs, self.appends = Path(path), made_by, tuple(inputs), appends
        self.side = tuple(Path(p) for p in side)
        self.record_path = {"beside": self.path.with_name(self.path.name + ".json"), "self": self.path}.get(record)

    @property
    def written(self) -> tuple[Path, ...]:
        """Every path it writes: the file, its side files and its record."""
        paths = (self.path, *self.side, *([self.record_path] if self.record_path else []))
        return tuple(dict.fromkeys(paths))

    def fields(self) -> dict:
        """The record's keys, for the command's own JSON (the progress file, the summary, the result)."""
        if self.record_path == self.path:
            return {"written_by": self.made_by}
        return {"written_by": self.made_by, "files": [p.name for p in (self.path, *self.side)]}

    def owns(self, path: Path) -> bool:
        record = read_record(self.record_path) if self.record_path else None
        if record is None or record["written_by"] != self.made_by:
            return False
        return path == self.record_path or path.name in (record.get("files") or [])

    def check(self) -> None:
        """Refuse (reading only) an output this command may not write: see the module docstring."""
        if self.path.is_dir() and not self.path.is_symlink():
            raise JTCSEError(f"{self.path} is a folder; -o/--output names the file {self.made_by} writes.")
        _refuse_under_file(self.path)
        check_output_apart(self.written, self.inputs)
        for path in self.written:
            if not (path.exists() or path.is_symlink()):
                continue
            _refuse_link(path)
            if not self.owns(path) and not (self.appends and path == self.path):
                raise _not_written(path, self.made_by, self.record_path or path)

    @contextmanager
    def writing(self) -> Iterator[FileOutput]:
        """Check, hold the output's lock, check again and make the folder it goes in."""
        self.check()
        with output_lock(self.path):
            self.check()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            yield self

    def add(self) -> None:
        """Write the record (``beside``) before the files it lists are written."""
        if self.record_path is not None and self.record_path != self.path:
            record = read_record(self.record_path) or {}
            atomic_write_json(self.record_path, {**record, **self.fields()})

    def clear(self) -> None:
        """``--overwrite``: delete the file and side files the record lists (the record last), nothing else."""
        for path in (*self.side, self.path, *([self.record_path] if self.record_path else [])):
            if path.exists() and self.owns(path):
                _delete(path)

    @contextmanager
    def atomic(self) -> Iterator[Path]:
        """A temporary path (with the file's suffix) to write the file to, renamed into place on success."""
        tmp = self.path.with_name(f".{self.path.stem}.tmp-{os.getpid()}{self.path.suffix}")
        try:
            yield tmp
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)
