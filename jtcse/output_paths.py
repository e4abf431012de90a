"""May a command write (or replace, or delete) here? The one answer, for every command that writes
(``docs/runs.md``, "Every output owned").

A command declares its output up front, before it loads a model or reads its data:

* :class:`FolderOutput`: a folder (a trained model, an ensemble, an export, an index, an RTT run, a fetch,
  diagnostics, MTEB results);
* :class:`FileOutput`: a file and the side files beside it (``encode``'s ``OUT.npy``, ``STEM.rows.npy`` and
  progress file ``OUT.npy.json``; ``eval sts -o``; ``index search -o``; ``index mine -o``).

Its ``check()`` reads only, and refuses in one ``JTCSEError`` line naming the path:

* an output that is one of the command's inputs, a folder holding one, or another name of one (a hard link:
  ``st_dev``/``st_ino``) (:func:`check_output_apart`; ``~``, ``.``, ``..`` and links resolved), or the root folder;
* a file where a folder is wanted or the reverse, a path under a file, a link (jtcse never writes through one);
* anything there that jtcse did not write: **a file its output's record does not list, or one whose content
  changed since jtcse wrote it, is the user's and is never replaced or deleted, ``--overwrite`` or not**; a
  record that lists anything outside its output is refused whole (:mod:`jtcse.output_record`);
* beside a folder replaced whole, a ``NAME.tmp`` that jtcse did not make (it holds no record of the command's).

**The record** (:class:`~jtcse.output_record.Record`) lists each file with its size and content digest, taken when
jtcse finished writing it (:meth:`FolderOutput.seal`); a name is entered as being written before its file is
(``add``), so a run killed while writing leaves nothing unlisted. ``--overwrite`` removes only what the record
proves is jtcse's, file by file (``clear``); a folder goes only once it is empty, and whatever of the user's is
in it stays (and is named). Temporaries are jtcse's only when it made them: ``.NAME.tmp-PID`` beside a name being
written, a record's own temporary (its first bytes say so), a ``NAME.tmp`` folder holding jtcse's record, a lock
file holding jtcse's holder record (:func:`jtcse.locking.is_jtcse_lock`). A folder replaced whole is written
beside the old one (``NAME.tmp``) and swapped in only when it is complete (:meth:`FolderOutput.replacing`), so a
failed write keeps the old output; an ``OSError`` while writing is one line naming the path and what was kept
(:func:`write_errors`).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_path, atomic_write_json, atomic_write_text, output_lock
from jtcse.output_record import RECORD, WRITING, Record, checked_entry, content, fingerprint, is_fingerprint
from jtcse.output_rules import (
    PathLike,
    changed_since,
    check_output_apart,
    delete_owned,
    file_leftover,
    leftover,
    marked_temporary,
    missing_entries,
    not_written,
    refuse_foreign_temporary,
    refuse_link,
    refuse_root,
    refuse_special,
    refuse_under_file,
    resolved,
    temporary_of,
    write_errors,
    write_text_in_place,
)

__all__ = [
    "RECORD",
    "FileOutput",
    "FolderOutput",
    "check_output_apart",
    "fingerprint",
    "is_fingerprint",
    "missing_entries",
    "resolved",
    "write_text_in_place",
    "write_errors",
]
logger = logging.getLogger(__name__)
SCRATCH = ".jtcse-saving"
"""A folder output's scratch folder (a model saved whole before it is moved in: :meth:`FolderOutput.moved_in`)."""
WORKING_FOLDERS = ("checkpoints", "teacher_cache")
"""What a jtcse trainer keeps in its output beside the model (its checkpoints, a teacher's cached vectors): not
read by loading the model, so not part of its fingerprint (``fingerprint(model, ignore=WORKING_FOLDERS)``)."""


class FolderOutput:
    """A folder a command writes (see the module docstring). ``made_by``: the command (``"jtcse rtt"``);
    ``inputs``: what it reads; ``whole``: it replaces the folder whole (:meth:`replacing`: fetch, ensemble, export,
    index), so it is never the working directory, a folder holding it or the home folder; ``record``: the record's
    name; ``beside``: further paths it writes beside the folder (checked apart from the inputs); ``parts``: names of
    folders in it that are outputs of their own, each checked by what writes it (a pipeline's stage folders: one
    trained by hand is a stage's); ``earlier``: the files that a folder of this command's written by jtcse before
    records were kept holds (``None``: it is not one), which then stand for its record; ``live``: names that jtcse
    keeps writing to from run to run (an SQLite cache), which stay listed as being written."""

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
        live: Iterable[str] = (),
    ) -> None:
        self.path, self.made_by, self.inputs, self.whole = Path(path), made_by, tuple(inputs), whole
        self.record_path = self.path / record
        self.beside, self.parts, self.earlier = tuple(Path(p) for p in beside), tuple(parts), earlier
        self.live = tuple(live)

    def record(self) -> Record | None:
        """The output's record (every entry checked: :meth:`~jtcse.output_record.Record.read`; else what ``earlier``
        finds), or ``None`` when there is none."""
        record = Record.read(self.record_path, self.path)
        if record is None and self.earlier is not None and self.path.is_dir():
            files = self.earlier(self.path)
            if files is not None:
                checked = [checked_entry(self.record_path, self.path, name) for name in files]
                return Record(self.record_path, self.path, self.made_by, dict.fromkeys(checked, WRITING))
        return record

    def _own(self) -> Record:
        """This command's record, or a new one (another's was refused by :meth:`check` already)."""
        record = self.record()
        if record is None and (self.record_path.exists() or self.record_path.is_symlink()):
            raise not_written(self.record_path, self.made_by, self.record_path)  # never written over
        if record is None:
            return Record(self.record_path, self.path, self.made_by)
        if record.written_by != self.made_by:
            raise JTCSEError(f"{self.path} holds the output of {record.written_by}, not of {self.made_by}.")
        return record

    @property
    def files(self) -> list[str]:
        """The names the record lists (none when there is no record of this command's)."""
        record = self.record()
        return list(record.files) if record and record.written_by == self.made_by else []

    def check(self) -> None:
        """Refuse (reading only) an output this command may not write: see the module docstring."""
        refuse_root(self.path, self.made_by)
        if self.path.is_symlink() or (self.path.exists() and not self.path.is_dir()):
            refuse_link(self.path)
            raise JTCSEError(f"{self.path} is a file; -o/--output names the folder {self.made_by} writes.")
        refuse_under_file(self.path)
        if self.whole:
            refuse_special(self.path, self.made_by)
            refuse_foreign_temporary(self.path, self.made_by)
        check_output_apart([self.path, *self.beside], self.inputs)
        if not self.path.is_dir():
            return
        record = self.record()
        if record is None and (self.record_path.exists() or self.record_path.is_symlink()):
            raise not_written(self.record_path, self.made_by, self.record_path)
        if record is not None and record.written_by != self.made_by:
            raise JTCSEError(
                f"{self.path} holds the output of {record.written_by}; give {self.made_by} a folder of its own."
            )
        self._check_entries(self.path, "", record)

    def _check_entries(self, folder: Path, prefix: str, record: Record | None) -> None:
        """Refuse an entry of ``folder`` that is not jtcse's by ``record`` (see the module docstring), or a link."""
        for entry in sorted(folder.iterdir()):
            name = prefix + entry.name
            if entry == self.record_path:
                refuse_link(entry)
            elif name in self.parts:
                refuse_link(entry)
                if not entry.is_dir():
                    raise JTCSEError(f"{entry} is a file; {self.made_by} writes a folder there.")
            elif record is not None and leftover(entry, name, record):
                continue
            elif entry.is_symlink():
                refuse_link(entry)
            elif entry.is_dir() and record is not None and (record.holds_folder(name) or record.writing(name)):
                self._check_entries(entry, f"{name}/", record)
            elif entry.is_dir() or record is None or record.whose(name) is None:
                raise not_written(entry, self.made_by, self.record_path)
            elif record.whose(name) == "changed":
                raise changed_since(entry, self.made_by, self.record_path)
            else:
                refuse_link(entry)  # a second name (hard link) of a file of jtcse's

    @contextmanager
    def writing(self) -> Iterator[FolderOutput]:
        """Check, hold the output's lock (:func:`jtcse.locking.output_lock`), check again and make the folder (one
        replaced ``whole`` is made by :meth:`replacing`); on success, seal what it wrote (:meth:`seal`)."""
        self.check()
        with output_lock(self.path):
            self.check()
            if not self.whole:
                self.path.mkdir(parents=True, exist_ok=True)
            with write_errors(self.path, "What was finished is kept; run the same command again once it can write."):
                yield self
                if self.record_path.is_file():
                    self.seal()

    def add(self, *names: str) -> None:
        """Enter ``names`` in the record as being written (the record is made with the folder when there is none):
        call before writing them."""
        record = self._own()
        if record.path.is_file() and all(record.files.get(name, 0) is WRITING for name in names):
            return
        record.enter(*names)
        self.path.mkdir(parents=True, exist_ok=True)
        record.save()

    def seal(self, *names: str) -> None:
        """Record the size and digest of ``names`` as written now (every name being written when none is given;
        what is not there is dropped), once jtcse has finished writing them, and remove what their writing left."""
        record = self._own()
        names = names or tuple(
            n for n, v in record.files.items() if v is WRITING and n not in (*self.parts, *self.live)
        )
        self._sweep(record)
        record.seal(*names)
        record.save()

    def _sweep(self, record: Record) -> None:
        """Remove the temporaries a killed write left in the folder (those :meth:`_leftover` proves jtcse's)."""
        for top, _, names in os.walk(self.path):
            for name in names:
                path = Path(top) / name
                if file_leftover(path, path.relative_to(self.path).as_posix(), record):
                    path.unlink(missing_ok=True)

    def drop(self, *names: str) -> None:
        """Take ``names`` out of the record (after removing them)."""
        record = self.record()
        if record is not None and record.written_by == self.made_by and any(n in record.files for n in names):
            record.drop(*names)
            record.save()

    def fields(self, *names: str) -> dict:
        """A record listing ``names`` as being written, for a command whose own file is the record."""
        return {"written_by": self.made_by, "files": dict.fromkeys(names, WRITING)}

    def remove(self, *names: str) -> None:
        """Delete what the record proves is jtcse's of the listed entries ``names`` (a folder: file by file, and the
        folder once empty), take them out of the record, and name what of the user's was kept."""
        record = self.record()
        if record is None or record.written_by != self.made_by:
            return
        listed = [n for n in names if record.writing(n) or any(k == n or k.startswith(f"{n}/") for k in record.files)]
        kept = [path for name in listed for path in delete_owned(self.path, name, record)]
        record.drop(*listed)
        if self.record_path.is_file():
            record.save()
        if kept:
            logger.warning(
                "Kept %s in %s: not written by %s (or changed since), so never deleted.",
                ", ".join(str(p.relative_to(self.path)) for p in kept),
                self.path,
                self.made_by,
            )

    def clear(self) -> None:
        """``--overwrite``: delete what the record proves is jtcse's, nothing else."""
        record = self.record()
        if record is not None and record.written_by == self.made_by:
            self._sweep(record)
            self.remove(*{name.split("/")[0]: None for name in record.files})

    def file(self, name: str) -> Path:
        """``FOLDER/name``, entered in the record first."""
        self.add(name)
        return self.path / name

    @contextmanager
    def atomic(self, name: str) -> Iterator[Path]:
        """A temporary path to write ``name`` to, renamed into place and sealed on success (entered in the record
        first)."""
        with atomic_path(self.file(name)) as tmp:
            yield tmp
        self.seal(name)

    def write_json(self, name: str, data: object) -> Path:
        path = atomic_write_json(self.file(name), data)
        self.seal(name)
        return path

    def write_text(self, name: str, text: str) -> Path:
        path = atomic_write_text(self.file(name), text)
        self.seal(name)
        return path

    @contextmanager
    def replacing(self, *, resume: bool = False) -> Iterator[FolderOutput]:
        """The output's new content, written beside it (``NAME.tmp``, marked as jtcse's by its record from the start)
        and swapped in once complete: every file in it sealed, the old output (checked again) removed file by file
        by its record, then one rename. A failure keeps the old output and removes the new one (``resume``: keeps
        it, for the same command to go on from: an index build's vectors)."""
        tmp = temporary_of(self.path)
        new = FolderOutput(tmp, self.made_by, record=self.record_path.name)
        if not (resume and marked_temporary(tmp, self.made_by)):
            self._remove_temporary(tmp)
            tmp.mkdir(parents=True)
            Record(new.record_path, tmp, self.made_by).save()
        try:
            yield new
            self.swap_in(tmp)
        except BaseException:
            if not resume:
                self._remove_temporary(tmp)
            raise

    def _remove_temporary(self, tmp: Path) -> None:
        if tmp.exists() or tmp.is_symlink():
            refuse_foreign_temporary(self.path, self.made_by)  # never one jtcse did not make
            shutil.rmtree(tmp)

    def swap_in(self, new: Path) -> None:
        """Put the complete folder ``new`` (jtcse's, beside the output) in the output's place: every file in it sealed
        in its record, the old output (checked again) removed file by file by its record, then one rename."""
        found = Record.read(new / self.record_path.name, new)
        record = Record(new / self.record_path.name, new, self.made_by, rest=found.rest if found else {})
        record.seal(*sorted(p.name for p in new.iterdir() if p != record.path))
        record.save()
        self.check()
        self._remove_old(new)
        new.rename(self.path)

    def _remove_old(self, tmp: Path) -> None:
        """Remove the old output (only what its record proves is jtcse's); refuse if anything else is left."""
        if not self.path.exists():
            return
        self.clear()
        self.record_path.unlink(missing_ok=True)
        for entry in self.path.iterdir():  # a stale lock, a temporary jtcse left
            if leftover(entry, entry.name, Record(self.record_path, self.path, self.made_by)):
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        left = sorted(p.name for p in self.path.iterdir())
        if left:
            raise JTCSEError(
                f"{self.path} still holds {', '.join(left)}, which {self.made_by} did not write, so it is not "
                f"replaced; the new output was in {tmp}. Move those away and run the same command again."
            )
        self.path.rmdir()

    @contextmanager
    def moved_in(self) -> Iterator[Path]:
        """A scratch folder inside the output (entered in its record) to save a model into; on success each entry
        is moved into the output in place of the one of that name (a folder: emptied by the record first), then
        sealed."""
        scratch = self.path / SCRATCH
        self.add(SCRATCH)
        shutil.rmtree(scratch, ignore_errors=True)
        try:
            yield scratch
            names = sorted(p.name for p in scratch.iterdir())
            record = self._own()
            for name in names:
                target = self.path / name
                if target.is_dir() and not target.is_symlink() and delete_owned(self.path, name, record):
                    raise not_written(target, self.made_by, self.record_path)  # (check() refused it before)
            self.add(*names)
            for name in names:
                os.replace(scratch / name, self.path / name)
            self.seal(*names)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
            self.drop(SCRATCH)


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

    def record(self) -> Record | None:
        """The record of this command's (every entry checked), or ``None``."""
        if self.record_path is None:
            return None
        found = Record.read(self.record_path, self.path.parent)
        return found if found is not None and found.written_by == self.made_by else None

    def fields(self, *, sealed: bool = False) -> dict:
        """The record's keys, for the command's own JSON (the progress file, the summary, the result): its files
        as being written, or (``sealed``) with the size and digest of each that is there now."""
        if self.record_path == self.path:
            return {"written_by": self.made_by}
        files = {p.name: WRITING for p in (self.path, *self.side)}
        if sealed:
            files = {p.name: content(p) for p in (self.path, *self.side) if p.is_file()}
        return {"written_by": self.made_by, "files": files}

    def whose(self, path: Path, record: Record | None = None) -> str | None:
        """``"jtcse"``, ``"changed"`` or ``None`` for one of :attr:`written` (see :meth:`Record.whose`)."""
        record = self.record() if record is None else record
        if record is None:
            return None
        return "jtcse" if path == self.record_path else record.whose(path.name)

    def owns(self, path: Path) -> bool:
        return self.whose(path) == "jtcse"

    def check(self) -> None:
        """Refuse (reading only) an output this command may not write: see the module docstring."""
        refuse_root(self.path, self.made_by)
        if self.path.is_dir() and not self.path.is_symlink():
            raise JTCSEError(f"{self.path} is a folder; -o/--output names the file {self.made_by} writes.")
        refuse_under_file(self.path)
        check_output_apart(self.written, self.inputs)
        record = self.record()
        for path in self.written:
            if not (path.exists() or path.is_symlink()):
                continue
            refuse_link(path)
            whose = self.whose(path, record)
            if whose == "changed":
                raise changed_since(path, self.made_by, self.record_path)
            if whose != "jtcse" and not (self.appends and path == self.path):
                raise not_written(path, self.made_by, self.record_path or path)

    @contextmanager
    def writing(self) -> Iterator[FileOutput]:
        """Check, hold the output's lock, check again and make the folder it goes in; an ``OSError`` of writing is
        one line (:func:`write_errors`)."""
        self.check()
        with output_lock(self.path):
            self.check()
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with write_errors(self.path, f"{self.path} is as it was; run the same command again once it can write."):
                yield self

    def add(self, *, sealed: bool = False) -> None:
        """Write the record (``beside``) before the files it lists are written (``sealed``: after, with their
        digests)."""
        if self.record_path is not None and self.record_path != self.path:
            record = Record.read(self.record_path, self.path.parent)
            rest = record.to_json() if record is not None else {}
            atomic_write_json(self.record_path, {**rest, **self.fields(sealed=sealed)})

    def clear(self) -> None:
        """``--overwrite``: delete the file and side files the record proves are jtcse's (the record last)."""
        record = self.record()
        for path in (*self.side, self.path, *([self.record_path] if self.record_path else [])):
            if path.exists() and not path.is_symlink() and self.whose(path, record) == "jtcse":
                shutil.rmtree(path) if path.is_dir() else path.unlink()

    @contextmanager
    def atomic(self) -> Iterator[Path]:
        """A temporary path (with the file's suffix) to write the file to, renamed into place on success."""
        tmp = self.path.with_name(f".{self.path.stem}.tmp-{os.getpid()}{self.path.suffix}")
        try:
            yield tmp
            os.replace(tmp, self.path)
        finally:
            tmp.unlink(missing_ok=True)
