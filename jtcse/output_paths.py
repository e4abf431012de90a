"""Where an output may go, checked before anything is written (``docs/runs.md``, "Nothing lost on a wrong path").

* :func:`check_output_apart`: an output is never one of the command's inputs, nor a folder holding one. Every
  command that reads files and writes another (``encode``, ``index build``, ``rtt``, ``export``, ``ensemble``,
  ``data fetch``) calls it from its library entry point, so that ``--overwrite`` (or a plain write) can never
  delete what the command was asked to read.
* :func:`check_replaceable_folder`: a folder that a command replaces whole (``data fetch``, ``export``,
  ``ensemble``) is empty or was made by that command (it holds the command's marker file), and never the
  working directory, a folder holding it, the home folder or the root.

Paths are compared after resolving ``~``, ``.``, ``..`` and links; two names of one file (a hard link) are the
same file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from jtcse.errors import JTCSEError

PathLike = str | os.PathLike


def resolved(path: PathLike) -> Path:
    """``path`` absolute, with ``~``, ``.``, ``..`` and links resolved (it need not exist)."""
    return Path(path).expanduser().resolve()


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return a == b


def check_output_apart(outputs: PathLike | Iterable[PathLike], inputs: Iterable[object]) -> None:
    """Raise :class:`JTCSEError` when an output is one of ``inputs`` or a folder holding one. ``outputs``: the
    output, or every path it is made of (``OUT.npy`` and its ``OUT.npy.json`` ...). ``inputs``: what the command
    reads; what is not an existing path (``None``, a Hub model name, a loaded model) cannot be harmed and is
    skipped."""
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
                    f"The output {output} is the input {source}: writing it would destroy what is read. "
                    "Give another -o/--output."
                )
            if written in read.parents:
                raise JTCSEError(
                    f"The output folder {output} holds the input {source}: writing (or --overwrite) there could "
                    "delete it. Give an -o/--output outside it."
                )


def check_replaceable_folder(output: PathLike, *, marker: str, made_by: str) -> None:
    """Raise :class:`JTCSEError` unless the folder ``output`` may be replaced whole by the command ``made_by``, which
    leaves the file ``marker`` in every folder it writes: never the working directory, a folder holding it or the
    home folder; an existing folder only when it is empty or holds ``marker``. (Whether a marked folder needs
    ``--overwrite`` is the caller's rule.)"""
    target = resolved(output)
    cwd, home = Path.cwd().resolve(), Path.home().resolve()
    if target == home or target == cwd or target in cwd.parents:
        what = {home: "your home folder", cwd: "the working directory"}.get(
            target, "a folder holding the working directory"
        )
        raise JTCSEError(
            f"{output} is {what} ({target}); {made_by} replaces its output folder whole, so it only writes a "
            "folder of its own: give a new folder (e.g. one inside it)."
        )
    if target.is_dir() and any(target.iterdir()) and not (target / marker).is_file():
        held = ", ".join(sorted(p.name for p in target.iterdir())[:5])
        raise JTCSEError(
            f"{output} holds files that {made_by} did not write ({held}), and it never replaces those, --overwrite "
            "or not: choose an empty or new folder."
        )
