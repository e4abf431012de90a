"""Crash-safe outputs: one writer per output (:func:`output_lock`), all-or-nothing files
(:func:`atomic_path`, :func:`atomic_write_text`) and a test hook that kills the process at a named
point (:func:`crash_point`).

**The lock.** Every command that writes an output (a file such as ``corpus.npy`` or a folder such as
an RTT or model output directory) holds ``<output>.lock`` — a file *beside* the output, for files
and folders alike — while it writes. Beside rather than inside, so that a folder can be replaced
(``--overwrite``) without losing its lock and a saved model folder never carries a stray lock file.
The lock is an OS lock (``flock``, taken through the ``filelock`` package): the kernel drops it
the moment its process dies, however it dies, so a lock can never outlive its holder. The file
holds the holder's PID, host, start time and command line, which is what a second process names in
its one-line refusal, behind the marker ``"written_by": "jtcse"``. A clean exit deletes the file; a file that is
found *unlocked* but still filled in by jtcse was left by a process that was killed, and is taken over with a
warning naming it. A file there that jtcse did not write (no such record in it) is never taken over nor deleted:
the command is refused in one line.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from jtcse.errors import JTCSEError
from jtcse.processes import is_main_process

logger = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])

LOCK_SUFFIX = ".lock"
CRASH_ENV = "JTCSE_CRASH_AT"
CRASH_ONCE_ENV = "JTCSE_CRASH_ONCE"


class OutputLockedError(JTCSEError):
    """Another live process holds the output's lock; ``holder`` is what its lock file says."""

    def __init__(self, message: str, holder: dict) -> None:
        super().__init__(message)
        self.holder = holder


def lock_path_for(output: str | Path) -> Path:
    """``<output>.lock``, beside the output (absolute, so two spellings of one path share a lock)."""
    output = Path(output).expanduser().absolute()
    if not output.name:
        raise JTCSEError(
            f"{output} is the root folder; jtcse writes an output of its own (files, folders, a lock beside it): give "
            "a new folder or file, e.g. -o runs/out."
        )
    return output.with_name(output.name + LOCK_SUFFIX)


def _describe(holder: dict) -> str:
    if not holder.get("pid"):
        return "another process (its lock file names none)"
    started = holder.get("started")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if started else "?"
    command = f", running `{holder['command']}`" if holder.get("command") else ""
    return f"PID {holder['pid']} on {holder.get('host', '?')} (started {when}{command})"


def _read_holder(source: int | Path) -> dict:
    """The holder record in a lock file (by descriptor or path); {} when empty or unreadable."""
    try:
        if isinstance(source, int):
            os.lseek(source, 0, os.SEEK_SET)
            raw = os.read(source, 65536)
        else:
            raw = source.read_bytes()
        holder = json.loads(raw.decode("utf-8")) if raw.strip() else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {"pid": None}
    return holder if isinstance(holder, dict) else {"pid": None}


def _command_line() -> str:
    """How this process was started, as a user would type it (``jtcse encode ...``)."""
    if not sys.argv or not sys.argv[0]:
        return ""
    program = Path(sys.argv[0]).name
    return " ".join(["jtcse" if program in ("__main__.py", "jtcse") else program, *sys.argv[1:]])


def is_jtcse_lock(path: str | Path) -> bool:
    """Whether the file ``path`` is a lock file jtcse wrote: its holder record (``"written_by": "jtcse"``, or the
    PID, host, start and output of a jtcse before that key)."""
    path = Path(path)
    if path.is_symlink() or not path.is_file():
        return False
    return _marked(_read_holder(path))


def _marked(holder: dict) -> bool:
    return holder.get("written_by") == "jtcse" or {"pid", "host", "started", "output"} <= set(holder)


def _not_a_lock(output: Path, path: Path, what: str) -> JTCSEError:
    path = output.with_name(output.name + LOCK_SUFFIX)  # as the user named the output
    return JTCSEError(
        f"{path} is in the way: it is where jtcse keeps the lock of {output}, and {what}, so jtcse neither takes it "
        "over nor deletes it. Move it away, or give another -o/--output."
    )


def _check_lock_file(output: Path, path: Path) -> tuple[int, int] | None:
    """Refuse a lock path that is a link, a folder or a file jtcse did not write; ``(st_dev, st_ino)`` of the file
    there (``None``: none is)."""
    if path.is_symlink():
        raise _not_a_lock(output, path, f"it is a link (to {os.readlink(path)})")
    if not path.exists():
        return None
    if not path.is_file():
        raise _not_a_lock(output, path, "it is a folder, not a lock file")
    stat = path.stat()
    if stat.st_size and not is_jtcse_lock(path):
        raise _not_a_lock(output, path, "jtcse did not write it (it holds no jtcse lock record)")
    return stat.st_dev, stat.st_ino


@contextmanager
def output_lock(output: str | Path) -> Iterator[Path]:
    """Hold the exclusive lock on ``output`` (a file or a folder, existing or not) for the block.

    Yields the lock file's path. Raises :class:`OutputLockedError` (a one-line ``JTCSEError``
    naming the holder's PID) at once, without waiting, when another process — or another
    ``output_lock`` in this one — holds it. A file at the lock's path that jtcse did not write (no holder record
    of jtcse's in it; an empty one left before this process came) is refused in one line and left as it is; one
    that a killed jtcse left is taken over with a warning naming it. Usage, for any command that writes ``out``::

        with output_lock(out):
            ...  # write out
    """
    from filelock import FileLock, Timeout

    output = Path(output)
    path = lock_path_for(output)
    if not path.parent.is_dir():
        if path.parent.exists():
            raise JTCSEError(f"Cannot write {output}: {path.parent} is a file, not a folder.")
        path.parent.mkdir(parents=True, exist_ok=True)
    there_before = _check_lock_file(output, path)
    left_behind: dict = {}
    foreign: list[str] = []
    me = {
        "written_by": "jtcse",
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.time(),
        "command": _command_line(),
        "output": str(output),
    }

    def claim(fd: int) -> None:  # runs with the OS lock held
        stat = os.fstat(fd)
        holder = _read_holder(fd) if stat.st_size else {}
        if (stat.st_size and not _marked(holder)) or (not stat.st_size and there_before == (stat.st_dev, stat.st_ino)):
            foreign.append("jtcse did not write it (it holds no jtcse lock record)")
            return  # not ours: left as it is
        left_behind.update(holder)
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (json.dumps(me) + "\n").encode("utf-8"))

    lock = FileLock(path, timeout=0, thread_local=False, fallback_to_soft=False, on_acquired=claim)
    try:
        lock.acquire()
    except Timeout:
        holder = _read_holder(path)
        raise OutputLockedError(
            f"{output} is being written by {_describe(holder)}; wait for it to finish or stop it (its lock: {path}).",
            holder,
        ) from None
    except OSError as err:
        raise JTCSEError(f"Cannot lock {output} ({path}): {err.strerror or err}") from None
    if foreign:
        lock.release()
        raise _not_a_lock(output, path, foreign[0])
    if left_behind:
        logger.warning(
            "Taking over the lock on %s left by %s, which ended without releasing it (killed?).",
            output,
            _describe(left_behind),
        )
    try:
        yield path
    finally:
        # Delete while still locked: a contender that opened the old file sees it unlinked and retries.
        try:
            path.unlink()
        except OSError:
            pass
        lock.release()


def locks_output(parameter: str) -> Callable[[F], F]:
    """Decorator: run the function under :func:`output_lock` on its argument named ``parameter``::

        @locks_output("index_dir")
        def build_index(model, input_path, index_dir, ...): ...

    Under a multi-process launch (``torchrun``, ``accelerate launch``) the N processes are one job that
    writes through rank 0 (:mod:`jtcse.processes`): rank 0 holds the lock, the other ranks take
    none (they would be refused by rank 0's), so a second job is still refused by rank 0's lock.
    """

    def decorate(func: F) -> F:
        signature = inspect.signature(func)

        @functools.wraps(func)
        def locked(*args, **kwargs):
            if not is_main_process():
                return func(*args, **kwargs)
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()  # a defaulted output (e.g. runs/jtcse) is locked too
            with output_lock(bound.arguments[parameter]):
                return func(*args, **kwargs)

        return locked  # type: ignore[return-value]

    return decorate


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary sibling of ``path`` to write; on success it replaces ``path`` in one rename.

    On an exception the temporary file is removed and ``path`` is left as it was, so readers see
    the old file or the new one, never half of one::

        with atomic_path(out) as tmp:
            np.save(tmp, array)
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path`` through :func:`atomic_path`."""
    path = Path(path)
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8", newline="\n")
    return path


def atomic_write_json(path: str | Path, data: object) -> Path:
    """``data`` as indented JSON (plus a final newline, :func:`json_text`), written atomically."""
    return atomic_write_text(path, json_text(data, where=Path(path).name))


def json_text(data: object, *, where: str = "JSON", indent: int | None = 2) -> str:
    """``data`` as JSON text (with a final newline when indented), the one way jtcse writes JSON: strict JSON, so a
    NaN or infinite number is a ``JTCSEError`` naming the key that holds it (``where``: what is being written),
    never a bare ``NaN`` that no JSON reader accepts."""
    try:
        text = json.dumps(data, indent=indent, ensure_ascii=False, default=str, allow_nan=False)
    except ValueError:
        key = next(_non_finite(data), "?")
        raise JTCSEError(
            f"Cannot write {where}: {key} is not a finite number, and JSON holds none (no NaN, no infinity)."
        ) from None
    return text + "\n" if indent is not None else text


def _non_finite(data: object, key: str = "") -> Iterator[str]:
    """The key paths (``dev_spearman_by_step.2``) of the NaN and infinite numbers in ``data``."""
    if isinstance(data, float) and not math.isfinite(data):
        yield f"{key or 'the value'} ({data})"
    elif isinstance(data, dict):
        for name, value in data.items():
            yield from _non_finite(value, f"{key}.{name}" if key else str(name))
    elif isinstance(data, (list, tuple)):
        for i, value in enumerate(data):
            yield from _non_finite(value, f"{key}[{i}]")


def crash_point(name: str) -> None:
    """Test hook: at the N-th pass through the point ``name``, SIGKILL (or SIGSTOP) this process.

    Active only when the environment variable ``JTCSE_CRASH_AT`` is ``NAME:N`` (kill) or
    ``NAME:N:STOP`` (freeze, e.g. to hold a lock while a second process tries it, until the test
    sends SIGCONT); otherwise it costs one dictionary lookup. Crash tests use it to stop a real
    subprocess at a chosen, reproducible moment. Points: ``encode-chunk`` (a chunk's vectors and
    progress are on disk), ``rtt-translation`` (one translation committed to the cache),
    ``rtt-pivot`` (a pivot's pairs and drop files written), ``pool-start`` (the encoding pool's parent, pickling
    the model for a worker it starts), ``checkpoint-save`` (inside a trainer
    checkpoint save: weights, optimizer and RNG states written, ``trainer_state.json`` not yet),
    ``final-save`` (a trainer's final model saved, its run summary not yet written).

    With ``JTCSE_CRASH_ONCE=PATH`` as well, only the first process to get there dies: it creates ``PATH``
    first, and a process that finds ``PATH`` already there goes on. That is for workers that are started
    again after they die (Ray actors), which would otherwise die at the same point forever.
    """
    wanted = os.environ.get(CRASH_ENV)
    if not wanted:
        return
    target, count, *how = wanted.split(":")
    if target != name:
        return
    passes = _crash_passes[name] = _crash_passes.get(name, 0) + 1
    if passes == int(count):
        once = os.environ.get(CRASH_ONCE_ENV)
        if once:
            try:
                os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return
        sys.stdout.flush()
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGSTOP if how == ["STOP"] else signal.SIGKILL)


_crash_passes: dict[str, int] = {}
