"""Self-contained checkpoints: a module class that travels with its own source files.

sentence-transformers writes ``<type(module).__module__>.<ClassName>`` into ``modules.json``; a type of
the form ``file.Class`` is loaded from ``file.py`` in the checkpoint folder by transformers'
dynamic-module loader when ``trust_remote_code=True`` (relative imports between such files included).
:func:`portable` gives a class that short name, and :func:`write_source_files` copies the file that
defines it plus every file it imports relatively, so the checkpoint opens where jtcse is not installed.

This file is one of the copied files: it imports only the standard library and transformers.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def portable(cls: type) -> type:
    """Class decorator: name ``cls`` as ``<file>.<Class>`` (e.g. ``twin.TwinTowers``) in ``modules.json``.

    The package path it was imported under stays in ``cls.source_module`` (old checkpoints name
    ``<source_module>.<Class>``).
    """
    cls.source_module = cls.__module__
    cls.source_file = str(Path(sys.modules[cls.__module__].__file__).resolve())
    cls.__module__ = cls.__module__.rsplit(".", 1)[-1]
    return cls


def source_files(cls: type) -> list[Path]:
    """The file defining a :func:`portable` class and, recursively, the files it imports relatively."""
    from transformers.dynamic_module_utils import get_relative_import_files

    main = Path(cls.source_file)
    return [main, *sorted(Path(f) for f in get_relative_import_files(main))]


def write_source_files(cls: type, folder: str | Path) -> list[Path]:
    """Copy :func:`source_files` of ``cls`` into ``folder``; returns the written paths."""
    written = []
    for source in source_files(cls):
        target = Path(folder) / source.name
        shutil.copyfile(source, target)
        written.append(target)
    return written
