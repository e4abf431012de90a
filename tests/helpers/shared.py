"""Test artefacts made once per test run and shared by every pytest-xdist worker (the session fixtures of
tests/conftest.py: tiny towers, saved twins and ensembles, trained runs).

Under xdist each worker runs its own session fixtures; :func:`built_once` makes the first worker that asks
build the artefact, in the run's shared temporary folder, under a file lock, and the others wait for it and
reuse it (the pattern of the pytest-xdist docs, "Making session-scoped fixtures execute only once"). The
artefacts are read-only for the tests: a test that changes one works on a copy (``shutil.copytree``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

DONE = ".built"


def run_root(tmp_path_factory) -> Path:
    """The temporary folder of this test run that every worker sees: the base temp folder, or under xdist
    its parent (``pytest-N/``, whose ``popen-gwK/`` are the workers' own)."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    root.mkdir(exist_ok=True)
    return root


def built_once(root: Path, name: str, build: Callable[[Path], object]) -> Path:
    """``root/name``, made by ``build(root/name)`` by the first process that asks; the others wait on the lock.

    A build that failed (or a worker killed while building) leaves no marker: the next process builds afresh.
    """
    from filelock import FileLock

    folder = root / name
    with FileLock(str(root / f"{name}.lock")):
        if not (folder / DONE).is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            build(folder)
            (folder / DONE).touch()
    return folder
