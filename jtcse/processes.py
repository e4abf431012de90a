"""Multi-process launches (``torchrun``, ``accelerate launch``): which process is which, and what only rank 0 does.

A launcher starts the same command in N processes with ``RANK``, ``LOCAL_RANK`` and ``WORLD_SIZE`` set
(a training job is then one DDP job: :mod:`jtcse.training.distributed`, docs/distributed.md). Everything
around the training happens once, on rank 0, and the other ranks take its result:

* holding the output's lock (:func:`jtcse.locking.locks_output` takes it on rank 0 only);
* planning the output directory (resume, nothing to do, start afresh; read only) and, once the model
  is built, opening it (:func:`run_on_main`); removing what a run that failed before its first
  checkpoint created;
* computing, checking and caching the distillation teacher's embeddings: rank 0 first, the others
  then read its cache, :func:`main_process_first`;
* scoring and saving the final model, writing the model card and the run summary, removing the
  checkpoints (:func:`run_on_main`);
* printing: the other ranks run without progress bars, logs or warnings (:func:`quiet_replica`).

An error on rank 0 is passed to the other ranks, which stop with it (:class:`MainProcessFailed`) instead of
waiting forever. Importing this module is cheap (no torch) so that the CLI can call :func:`quiet_replica` first.

A worker process that must not outlive the process that started it (the encoding pool's,
:mod:`jtcse.search.pool`) is started with ``JTCSE_POOL_PARENT=<that PID>`` in its environment: importing
``jtcse`` there calls :func:`die_with_parent` first.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

from jtcse.errors import JTCSEError

T = TypeVar("T")

POOL_PARENT_ENV = "JTCSE_POOL_PARENT"
"""Set (to its PID) by a process while it starts worker processes that must die with it."""
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

DDP_TIMEOUT_SECONDS = 1800
"""How long a rank waits for the others (transformers' ``ddp_timeout`` default)."""


class MainProcessFailed(JTCSEError):
    """Raised on ranks > 0 when the work rank 0 did for all of them failed (rank 0 reports the error)."""


def world_size() -> int:
    """Processes in this launch (``WORLD_SIZE``, set by torchrun and accelerate launch); 1 otherwise."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    """This process's global rank (``RANK``); 0 outside a multi-process launch."""
    return int(os.environ.get("RANK", "0")) if world_size() > 1 else 0


def is_main_process() -> bool:
    return rank() == 0


def quiet_replica() -> None:
    """On a rank other than 0: no progress bars, no log lines below ERROR, no Python warnings.

    Call it before transformers, datasets or tqdm are imported (the CLI does, first thing); the
    trainer already keeps its own bars and logs on rank 0.
    """
    if is_main_process():
        return
    import logging
    import warnings

    os.environ.update(
        TQDM_DISABLE="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        HF_DATASETS_DISABLE_PROGRESS_BARS="1",
        TRANSFORMERS_VERBOSITY="error",
        TRANSFORMERS_NO_ADVISORY_WARNINGS="1",
    )
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)


def ensure_process_group() -> None:
    """Join this launch's process group now, the way the trainer will (accelerate's ``PartialState``).

    Needed before the trainer exists, for the ranks to wait on rank 0; the trainer's own set-up then
    finds the group initialised and keeps it.
    """
    import torch.distributed as dist

    if world_size() == 1 or dist.is_initialized():
        return
    import torch
    from accelerate import PartialState

    cpu = not torch.cuda.is_available()
    PartialState(cpu=cpu, **({"backend": "gloo"} if cpu else {}), timeout=timedelta(seconds=DDP_TIMEOUT_SECONDS))


def leave_process_group() -> None:
    """Destroy this launch's process group, if this process joined one, before it exits (the CLI does).

    torch asks for it; a gloo group left to the interpreter's exit can abort a rank ("terminate called
    without an active exception") when another rank has already gone, e.g. after rank 0 refused a run.
    Imports nothing when torch was never loaded.

    Unreachable objects still holding the group (a finished trainer's ``DistributedDataParallel`` reducer, kept
    alive by reference cycles) are collected first: freed after the group is destroyed, the group's gloo
    destructor can wait forever on threads that talked to a rank that has exited.
    """
    import gc
    import sys

    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        gc.collect()
        dist.destroy_process_group()


def run_on_main(fn: Callable[[], T]) -> T:
    """Run ``fn`` on rank 0 alone; every rank returns its (picklable) result.

    If ``fn`` raises on rank 0, rank 0 re-raises it and the other ranks raise
    :class:`MainProcessFailed`. In one process this is just ``fn()``.
    """
    if world_size() == 1:
        return fn()
    import torch.distributed as dist

    ensure_process_group()
    box: list[Any] = [None]
    if is_main_process():
        try:
            result = fn()
        except Exception as error:
            dist.broadcast_object_list([("error", f"{type(error).__name__}: {error}")], src=0)
            raise
        box = [("ok", result)]
    dist.broadcast_object_list(box, src=0)
    status, payload = box[0]
    if status == "error":
        raise MainProcessFailed(f"rank 0 failed ({payload})")
    return payload


def wait_for_every_rank() -> None:
    """Each rank waits here until every rank has come (a barrier); in one process, nothing. For a file rank 0 is
    about to change or remove while the other ranks may still be reading it."""
    if world_size() == 1:
        return
    import torch.distributed as dist

    ensure_process_group()
    dist.barrier()


def main_process_first(fn: Callable[[], T]) -> T:
    """Run ``fn`` on rank 0, then (if it succeeded) on the other ranks; each returns its own result.

    For work whose result rank 0 leaves on disk for the others, e.g. a cache they then read.
    """
    if world_size() == 1:
        return fn()
    if is_main_process():
        return run_on_main(fn)
    run_on_main(lambda: None)
    return fn()


def die_with_parent() -> None:
    """In a process started with ``JTCSE_POOL_PARENT=PID``: have the kernel SIGKILL it the moment PID dies
    (Linux ``prctl(PR_SET_PDEATHSIG)``), and exit at once if PID is already gone. Elsewhere, nothing.

    The variable is removed, so that processes this one starts are not tied to PID. Without ``prctl`` (not Linux)
    only the exit applies; the pool's watchdog (:mod:`jtcse.search.pool`) covers the rest.
    """
    parent = os.environ.pop(POOL_PARENT_ENV, None)
    if not parent:
        return
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(parent):  # it died before the line above: no signal will come
        os._exit(1)
