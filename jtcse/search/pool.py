"""Every device of one machine: sentence-transformers' multi-process pool, started and stopped safely.

``jtcse encode --devices cuda:0,cuda:1`` (or ``--processes N`` on the CPU) starts one worker process per
device with ``SentenceTransformer.start_multi_process_pool`` and encodes each chunk with
``model.encode(texts, pool=pool)``, which splits the chunk between the workers and returns the vectors in
order. Two things are added around the pool, nothing inside it:

* threads: each worker gets ``cores // processes`` OpenMP/MKL threads (the environment a spawned worker
  starts with), so N CPU workers do not each start one thread per core and fight over them;
* orphans: the workers block on their queue forever if the parent is killed (SIGKILL, the OOM killer) and
  would hold their memory (or GPU) until someone notices. A tiny watchdog process kills them when the
  parent is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jtcse.errors import JTCSEError

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


@contextmanager
def encode_pool(model: Any, devices: list[str]) -> Iterator[dict]:
    """A started multi-process pool of ``model`` on ``devices`` (``model.encode(..., pool=pool)``), stopped on exit.

    ``start_multi_process_pool`` leaves the model on the CPU, in shared memory (the CPU workers share its weights).
    """
    threads = str(threads_per_worker(len(devices)))
    with _environment(**dict.fromkeys(_THREAD_VARIABLES, threads)):  # spawned workers read these as they start
        pool = model.start_multi_process_pool(list(devices))
    watchdog = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), *(str(p.pid) for p in pool["processes"])],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        yield pool
    finally:
        model.stop_multi_process_pool(pool)
        watchdog.send_signal(signal.SIGTERM)
        watchdog.wait()
