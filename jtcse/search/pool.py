"""Every device of one machine: sentence-transformers' multi-process pool, started and stopped safely.

``jtcse encode --devices cuda:0,cuda:1`` (or ``--processes N`` on the CPU) starts one worker process per
device with ``SentenceTransformer.start_multi_process_pool`` and encodes each chunk with
``model.encode(texts, pool=pool)``, which splits the chunk between the workers and returns the vectors in
order. Two things are added around the pool, nothing inside it:

* threads: each worker gets ``cores // processes`` OpenMP/MKL threads (the environment a spawned worker
  starts with), so N CPU workers do not each start one thread per core and fight over them;
* jtcse's own modules (twins, ensembles): their classes are named ``twin.TwinTowers`` / ``ensemble.Ensemble``
  so that a checkpoint opens without jtcse (:mod:`jtcse.modeling.portable`), which is not a module pickle can
  import in a worker; they are sent by their jtcse module path instead (``ForkingPickler.register``);
* the split: sentence-transformers cuts a list into pieces in the order given, and each worker sorts its
  piece by length before batching; a piece of a few hundred sentences of mixed lengths pads every batch to
  its longest sentence (measured: a third of the speed lost on wiki sentences). :func:`pool_encode` sorts the
  chunk by length first, so each piece holds sentences of similar length, longest pieces first (the workers
  that finish early take the next), and puts the vectors back in order;
* orphans: the workers block on their queue forever if the parent is killed (SIGKILL, the OOM killer) and
  would hold their memory (or GPU) until someone notices. Each worker is started with ``JTCSE_POOL_PARENT`` in
  its environment, so the first ``import jtcse`` in it (run as ``jtcse``: at once; as ``python -m jtcse`` or from
  a script: before the model is unpickled) asks the kernel to kill it with its parent
  (:func:`jtcse.processes.die_with_parent`, Linux), also while the pool is still starting; with the workers
  gone, multiprocessing's resource tracker sees its pipe close and exits too. Where that is not available a
  tiny watchdog process, started once the pool is up, kills them when the parent is gone.
"""

from __future__ import annotations

import importlib
import math
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jtcse.errors import JTCSEError
from jtcse.locking import crash_point
from jtcse.processes import POOL_PARENT_ENV

_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
_WATCHDOG = """\
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
parent, pids = int(sys.argv[1]), [int(pid) for pid in sys.argv[2:]]
while os.getppid() == parent:
    time.sleep(0.5)
for pid in pids:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
"""


def worker_devices(devices: str | list[str] | None = None, processes: int | None = None) -> list[str] | None:
    """The device of each worker process (one worker: no pool is needed), or None when neither is given.

    ``devices``: ``"cuda:0,cuda:1"`` or a list; each is checked against this machine
    (:func:`jtcse.devices.resolve_device`: a device that does not exist is a one-line error).
    ``processes``: that many CPU workers. Give one or the other.
    """
    from jtcse.devices import resolve_device

    if devices is not None and processes is not None:
        raise JTCSEError("Give --devices or --processes, not both.")
    if processes is not None:
        if processes < 1:
            raise JTCSEError(f"--processes must be at least 1, not {processes}")
        return ["cpu"] * processes
    if devices is None:
        return None
    names = [name.strip() for name in devices.split(",")] if isinstance(devices, str) else [str(d) for d in devices]
    if not names or not all(names):
        raise JTCSEError(f"--devices must be a comma-separated list such as cuda:0,cuda:1; got {devices!r}.")
    return [resolve_device(name) for name in names]


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS, Windows
        return os.cpu_count() or 1


def threads_per_worker(workers: int) -> int:
    return max(1, available_cores() // workers)


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _rebuild(module: str, name: str) -> Any:
    cls = getattr(importlib.import_module(module), name)
    return cls.__new__(cls)


def _class_path(cls: type) -> tuple[str, str]:
    """Where ``cls`` can be imported from: a portable class's ``source_module``, else its own module."""
    return getattr(cls, "source_module", cls.__module__), cls.__name__


def _import_classes(paths: dict) -> dict:
    return {key: getattr(importlib.import_module(module), name) for key, (module, name) in paths.items()}


def _reduce_portable(obj: Any) -> tuple:
    """Pickle a :func:`~jtcse.modeling.portable.portable` module by its class's import path."""
    return _rebuild, _class_path(type(obj)), obj.__getstate__()


def _reduce_model(model: Any) -> tuple:
    """Pickle a SentenceTransformer whose loader resolved jtcse classes (``_module_classes``, a mapping of
    ``twin.TwinTowers`` to the class) with that mapping as import paths. (The pool pickles the model once per
    worker it starts: the crash point ``pool-start`` is a kill while the pool starts.)"""
    crash_point("pool-start")
    state = dict(model.__getstate__())
    if state.get("_module_classes"):
        classes = {key: _class_path(cls) for key, cls in state.pop("_module_classes").items()}
        return _rebuild_model, (*_class_path(type(model)), classes), state
    return _rebuild, _class_path(type(model)), state


def _rebuild_model(module: str, name: str, classes: dict) -> Any:
    model = _rebuild(module, name)
    model._module_classes = _import_classes(classes)
    return model


def _register_for_pool(model: Any) -> None:
    """Let the spawn pickler send ``model`` (and the jtcse modules in it) to a worker, which imports jtcse."""
    from multiprocessing.reduction import ForkingPickler

    from jtcse.modeling.checkpoint_code import portable_classes

    for cls in portable_classes():
        ForkingPickler.register(cls, _reduce_portable)
    ForkingPickler.register(type(model), _reduce_model)


def pool_encode(model: Any, texts: list[str], pool: dict, **kwargs: Any):
    """``model.encode(texts, pool=pool, **kwargs)`` on length-sorted pieces (see the module docstring): vectors in
    the order of ``texts``. Deterministic: the same texts always make the same pieces."""
    import numpy as np

    order = np.argsort([-len(text) for text in texts], kind="stable")
    workers = len(pool["processes"])
    piece = max(kwargs.get("batch_size", 32), math.ceil(len(texts) / (workers * 4)))
    vectors = model.encode([texts[i] for i in order], pool=pool, chunk_size=piece, **kwargs)
    restored = np.empty_like(vectors)
    restored[order] = vectors
    return restored


@contextmanager
def encode_pool(model: Any, devices: list[str]) -> Iterator[dict]:
    """A started multi-process pool of ``model`` on ``devices`` (``model.encode(..., pool=pool)``), stopped on exit.

    ``start_multi_process_pool`` leaves the model on the CPU, in shared memory (the CPU workers share its weights).
    """
    _register_for_pool(model)
    threads = str(threads_per_worker(len(devices)))
    started = {**dict.fromkeys(_THREAD_VARIABLES, threads), POOL_PARENT_ENV: str(os.getpid())}
    with _environment(**started):  # spawned workers read these as they start
        pool = model.start_multi_process_pool(list(devices))
    watchdog = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), *(str(p.pid) for p in pool["processes"])],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield pool
    finally:
        model.stop_multi_process_pool(pool)
        watchdog.send_signal(signal.SIGTERM)
        watchdog.wait()
