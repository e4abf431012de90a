"""The rules that say whether jtcse may write, replace or delete a path, shared by the outputs of
:mod:`jtcse.output_paths`: an output apart from every input (:func:`check_output_apart`), never the root folder, a
link or a path under a file; whose a file is (:class:`~jtcse.output_record.Record`: listed, sealed, changed) and
what a killed write left (:func:`file_leftover`, :func:`marked_temporary`); deleting only what a record proves is
jtcse's (:func:`delete_owned`); an ``OSError`` of writing as one line (:func:`write_errors`). Each refusal is one
``JTCSEError`` line naming the path and what to do.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from jtcse.errors import JTCSEError
from jtcse.locking import LOCK_SUFFIX, atomic_write_text, is_jtcse_lock
from jtcse.output_record import RECORD, Record, looks_like_a_record

PathLike = str | os.PathLike

TEMPORARY = ".tmp"
"""``NAME.tmp``: the new content of a folder replaced whole, beside it until it is complete."""
FILE_TEMPORARY = re.compile(r"\.(?P<name>.+)\.tmp-\d+")
"""What :func:`jtcse.locking.atomic_path` writes ``NAME`` through: ``.NAME.tmp-PID``."""
WRITE_ERRORS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EACCES, errno.EROFS, errno.EPERM}


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
    for output in outputs:
        refuse_root(Path(output))
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


@contextmanager
def write_errors(path: PathLike, kept: str) -> Iterator[None]:
    """Turn an ``OSError`` of writing (no space, file too large, quota, permission, read-only) raised in the block
    into one ``JTCSEError`` line naming the file and saying what was ``kept``."""
    try:
        yield
    except OSError as err:
        if err.errno not in WRITE_ERRORS:
            raise
        where = err.filename or path
        raise JTCSEError(f"{where}: {err.strerror or err} [{errno.errorcode[err.errno]}]. {kept}") from None


def refuse_root(path: Path, made_by: str = "jtcse") -> None:
    if not resolved(path).name:
        raise JTCSEError(
            f"{path} is the root folder; {made_by} writes an output of its own there (files, folders, a lock beside "
            "it): give a new folder, e.g. -o runs/out."
        )


def refuse_link(path: Path) -> None:
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


def refuse_under_file(path: Path) -> None:
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise JTCSEError(f"Cannot write {path}: {parent} is a file, not a folder.")
            return


def not_written(path: Path, made_by: str, listed_in: Path) -> JTCSEError:
    unlisted = f" ({listed_in.name} does not list it)" if listed_in != path else ""
    return JTCSEError(
        f"{path} was not written by {made_by}{unlisted}, so it is never replaced or deleted, --overwrite or not: "
        "move it away, or give another -o/--output."
    )


def changed_since(path: Path, made_by: str, listed_in: Path) -> JTCSEError:
    return JTCSEError(
        f"{path} is not what {made_by} wrote there: its content changed since ({listed_in.name} holds the size and "
        "digest it had), so it is yours and is never replaced or deleted, --overwrite or not. Move it away (delete "
        "it if it is a damaged copy of jtcse's), or give another -o/--output."
    )


def missing_entries(folder: PathLike, record: str = RECORD) -> list[str]:
    """The names the record of ``folder`` lists that are not there (a finished output missing one is not finished),
    each by the first part of its path that is gone (a deleted folder once: ``member_1``)."""
    folder = Path(folder)
    found, missing = Record.read(folder / record, folder), []
    for name in found.files if found else {}:
        if (folder / name).exists():
            continue
        parts = name.split("/")
        gone = next("/".join(parts[:i]) for i in range(1, len(parts) + 1) if not folder.joinpath(*parts[:i]).exists())
        if gone not in missing:
            missing.append(gone)
    return missing


def temporary_of(path: Path) -> Path:
    return path.with_name(path.name + TEMPORARY)


def marked_temporary(folder: Path, made_by: str | None = None) -> bool:
    """Whether ``folder`` is a ``NAME.tmp`` jtcse made (of ``made_by``): a folder, no link, holding its record."""
    if folder.is_symlink() or not folder.is_dir():
        return False
    record = Record.read(folder / RECORD, folder)
    return record is not None and (record.written_by == made_by if made_by else record.written_by.startswith("jtcse"))


def delete_owned(root: Path, name: str, record: Record) -> list[Path]:
    """Delete what ``record`` proves is jtcse's under ``root/name``, folders once empty; the paths kept."""
    path, kept = root / name, []
    if path.is_symlink() or (path.is_file() and record.whose(name) != "jtcse"):
        return [path]
    if path.is_file():
        path.unlink()
        return []
    for top, folders, files in os.walk(path, topdown=False):
        for entry in [*files, *(f for f in folders if (Path(top) / f).is_symlink())]:
            file = Path(top) / entry
            rel = file.relative_to(root).as_posix()
            if file.is_symlink() or not (record.whose(rel) == "jtcse" or file_leftover(file, rel, record)):
                kept.append(file)
            else:
                file.unlink()
        try:
            os.rmdir(top)
        except OSError:  # something of the user's is in it
            pass
    return kept


def file_leftover(path: Path, name: str, record: Record) -> bool:
    """Whether ``path`` (``name`` in the output) is the temporary jtcse writes a file being written through, or a
    temporary of the record itself (its first bytes are a record's)."""
    match = FILE_TEMPORARY.fullmatch(path.name)
    if not match or path.is_symlink() or not path.is_file():
        return False
    target = f"{name.rpartition('/')[0]}/{match['name']}".lstrip("/")
    if record.root / target == record.path:
        return looks_like_a_record(path, record.written_by)
    return record.writing(target)


def write_text_in_place(folder: PathLike, name: str, text: str) -> Path:
    """Write ``text`` over ``folder/name`` (atomically: a model card updated with scores); when jtcse wrote that file
    (the record of the output ``folder`` holds its size and digest, and they match), the record takes the new ones,
    so it stays jtcse's (a file you edited stays yours)."""
    folder = Path(folder)
    try:
        record = Record.read(folder / RECORD, folder)
    except JTCSEError:  # a record that cannot be trusted is the output's check to refuse, not this write's
        record = None
    ours = record is not None and record.files.get(name) is not None and record.whose(name) == "jtcse"
    path = atomic_write_text(folder / name, text)
    if ours:
        record.seal(name)
        record.save()
    return path


def leftover(entry: Path, name: str, record: Record) -> bool:
    """A temporary or lock that jtcse left in the folder (a run killed while writing), by what proves it."""
    if entry.name.endswith(LOCK_SUFFIX):
        return is_jtcse_lock(entry)
    if entry.name.endswith(TEMPORARY):
        return marked_temporary(entry)
    return file_leftover(entry, name, record)


def refuse_foreign_temporary(path: Path, made_by: str) -> None:
    """Refuse a ``NAME.tmp`` beside ``path`` that jtcse did not make (a folder replaced whole is written there)."""
    tmp = temporary_of(path)
    if (tmp.exists() or tmp.is_symlink()) and not marked_temporary(tmp, made_by):
        what = f"a link (to {os.readlink(tmp)})" if tmp.is_symlink() else "not a folder jtcse made"
        raise JTCSEError(
            f"{tmp} is in the way: {made_by} writes its new output there before it replaces {path}, and "
            f"this one is {what} (no record of {made_by}'s in it), so it is never deleted. Move it away."
        )


def refuse_special(path: Path, made_by: str) -> None:
    """Refuse a folder that cannot be replaced whole: home, the working directory, a folder holding it."""
    target = resolved(path)
    cwd, home = Path.cwd().resolve(), Path.home().resolve()
    if target == home or target == cwd or target in cwd.parents:
        what = {home: "your home folder", cwd: "the working directory"}.get(
            target, "a folder holding the working directory"
        )
        raise JTCSEError(
            f"{path} is {what} ({target}); {made_by} replaces its output folder whole, so it only "
            "writes a folder of its own: give a new folder (e.g. one inside it)."
        )
