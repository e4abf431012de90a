"""``jtcse encode --engine ray``: the chunks of a file encoded by a pool of Ray actors (Ray Data ``map_batches``).

The driver makes the pass over the input that ``jtcse encode`` always makes first
(:func:`jtcse.search.lines.plan_chunks`), which also records where every chunk of ``chunk_size`` rows starts
(byte offset, first line, first row). Those chunk spans are a Ray dataset (``ray.data.from_items``);
``map_batches`` runs :class:`ChunkEncoder`, a callable class, so each Ray actor loads the checkpoint once
(:func:`jtcse.modeling.loading.load_model`: any checkpoint, twins and ensembles included) and then, per span,
reads its lines, encodes them and writes them as one parquet part (``part-<first row>.parquet``, columns
``row`` ... ``embedding``, :class:`jtcse.search.sinks.PartWriter`), whole or not at all. The driver only
collects ``(first row, rows, dim)`` per part.

Why spans rather than ``ray.data.read_text``: ``read_text`` numbers nothing (no row, line or byte offset to
keep the order by), reads each file whole in one task, and splits lines as ``str.splitlines`` does (also at
``\\x0b``, ``\\x0c``, ``\\u2028``...), so its rows would not be ``jtcse encode``'s rows. Reading spans gives the
same rows, line numbers and offsets as one process, and lets a rerun keep every part already written.

Failures: a worker process that dies is restarted by Ray and its span retried (Ray Data's actor pool
retries system failures without limit); an error inside the code (a model that does not load, an input
edited meanwhile) fails the job, reported in one line. Either way the output is marked complete only by
the driver, after every span's part is on disk.

Where Ray runs: ``ray.init()`` joins the cluster named by ``RAY_ADDRESS`` or starts a local one (and shuts
it down at the end); a caller that has already called ``ray.init`` keeps its own. On a cluster, the input,
the output and the model must be at the same path on every node (a shared filesystem).

A table or dataset input (:mod:`jtcse.text_inputs`) is read the same way: each actor opens it with
:func:`~jtcse.text_inputs.open_table` (memory-mapped Arrow) and reads its spans' row ranges; an ``hf:NAME`` input is
opened by name, from the ``datasets`` cache of the node the actor runs on (on a cluster: every node's cache must
hold it, or set ``HF_DATASETS_CACHE`` to a shared folder).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from jtcse.errors import JTCSEError, ModelNotFoundError
from jtcse.locking import crash_point
from jtcse.search.lines import ChunkSpan
from jtcse.search.sinks import PartWriter
from jtcse.text_inputs import input_name

_SPAN_FIELDS = [field.name for field in fields(ChunkSpan)]


@dataclass
class RayEngine:
    """``jtcse encode --engine ray``: chunks encoded by a pool of Ray actors, each loading the model once.

    ``actors``: how many (None: Ray scales the pool to the resources there are); ``gpus_per_actor`` and
    ``cpus_per_actor``: what each actor reserves (Ray sets its CUDA devices and thread count from them).
    """

    actors: int | None = None
    gpus_per_actor: float = 0.0
    cpus_per_actor: float = 1.0

    def __post_init__(self) -> None:
        if self.actors is not None and self.actors < 1:
            raise JTCSEError(f"--actors must be at least 1, not {self.actors}")
        if self.gpus_per_actor < 0 or self.cpus_per_actor <= 0:
            raise JTCSEError(
                f"--gpus-per-actor must be 0 or more and --cpus-per-actor more than 0 "
                f"(got {self.gpus_per_actor}, {self.cpus_per_actor})."
            )


def import_ray():
    """The ``ray`` module (with Ray Data), or a one-line error naming the extra to install."""
    try:
        import ray
        import ray.data  # noqa: F401 - Ray Data is what the engine needs (ray[data])
    except ImportError:
        raise JTCSEError("--engine ray needs Ray Data: pip install 'jtcse[ray]' (ray[data]).") from None
    return ray


def check_request(model: Any, fmt: str, device: str | None, workers: list[str] | None) -> None:
    """Refuse, before anything runs, what the Ray engine cannot do (an .npy output, devices, a loaded model)."""
    if fmt == "npy":
        raise JTCSEError("--engine ray writes parquet: give -o FILE.parquet or a folder for parquet shards, not .npy.")
    if device is not None or workers is not None:
        raise JTCSEError(
            "--engine ray places its own actors: use --actors and --gpus-per-actor, not --device/--devices/--processes."
        )
    if not isinstance(model, (str, os.PathLike)):
        raise JTCSEError("--engine ray loads the model in every actor: give its name or path, not a loaded model.")
    path = Path(model).expanduser()
    if not path.exists() and (path.is_absolute() or str(model).startswith((".", "~"))):
        raise ModelNotFoundError(f"model not found: {path} (give a sentence-transformers directory).")


class ChunkEncoder:
    """The ``map_batches`` callable class: one model per actor; each call encodes spans and writes their parts."""

    def __init__(
        self,
        model: str,
        input_path: str,
        folder: str,
        info: dict,
        dtype: str,
        dim: int | None,
        batch_size: int,
        normalize: bool,
    ):
        from jtcse.modeling.loading import load_model

        self.model = load_model(model)
        self.dim = self.model.get_embedding_dimension() or int(self.model.encode(["probe"]).shape[-1])
        if dim is not None and dim != self.dim:
            raise JTCSEError(f"The output holds {dim}-d vectors but {model} makes {self.dim}-d ones; pass --overwrite.")
        self.input = input_path  # a path, or an hf: name (a Path would not keep it)
        self.writer = PartWriter(Path(folder), self.dim, dtype, info)
        self.dtype = dtype
        self.batch_size = batch_size
        self.normalize = normalize

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        spans = [
            ChunkSpan(*(batch[name][i] if name == "column" else int(batch[name][i]) for name in _SPAN_FIELDS))
            for i in range(len(batch["start_row"]))
        ]
        for span in spans:
            chunk = span.read(self.input)
            vectors = self.model.encode(
                chunk.texts,
                batch_size=self.batch_size,
                normalize_embeddings=self.normalize,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            self.writer.write(span.start_row, chunk, vectors.astype(self.dtype, copy=False))
            crash_point("encode-chunk")
        return {
            "start_row": np.array([s.start_row for s in spans], dtype=np.int64),
            "rows": np.array([s.rows for s in spans], dtype=np.int64),
            "dim": np.full(len(spans), self.dim, dtype=np.int64),
        }


def encode_spans(
    model: str,
    input_path: Path,
    spans: list[ChunkSpan],
    folder: Path,
    *,
    info: dict,
    dtype: str,
    dim: int | None,
    batch_size: int,
    normalize: bool,
    engine: Any,
    show_progress: bool = True,
) -> Iterator[tuple[int, int, int]]:
    """Encode ``spans`` of ``input_path`` into parts in ``folder`` on Ray; yield ``(first row, rows, dim)`` per part
    as it lands (in any order). ``engine``: a :class:`RayEngine`."""
    if not spans:
        return
    ray = import_ray()
    # Ray prints its workers' and raylet's lines (a worker that died, a retry) to stdout, some of them as late as
    # ray.shutdown(): they go to stderr, stdout is the command's own (the JSON summary).
    with contextlib.redirect_stdout(sys.stderr):
        started_here = not ray.is_initialized()
        if started_here:
            ray.init(include_dashboard=False, logging_level="WARNING")
        try:
            yield from _run(
                ray,
                spans,
                engine,
                show_progress,
                dict(
                    model=model,
                    input_path=input_name(input_path),  # an hf: name as written: each actor opens it by name
                    folder=str(Path(folder).resolve()),
                    info=info,
                    dtype=dtype,
                    dim=dim,
                    batch_size=batch_size,
                    normalize=normalize,
                ),
            )
        finally:
            if started_here:
                ray.shutdown()


def _run(
    ray: Any, spans: list[ChunkSpan], engine: Any, show_progress: bool, arguments: dict
) -> Iterator[tuple[int, int, int]]:
    ray.data.DataContext.get_current().enable_progress_bars = False  # the driver's own bar counts parts
    if not show_progress:
        logging.getLogger("ray.data").setLevel(logging.WARNING)
    pool = ray.data.ActorPoolStrategy(size=engine.actors) if engine.actors else ray.data.ActorPoolStrategy(min_size=1)
    dataset = ray.data.from_items([asdict(span) for span in spans]).map_batches(
        ChunkEncoder,
        fn_constructor_kwargs=arguments,
        batch_size=1,
        batch_format="numpy",
        compute=pool,
        num_gpus=engine.gpus_per_actor or None,
        num_cpus=engine.cpus_per_actor,
    )
    try:
        for batch in dataset.iter_batches(batch_size=None, batch_format="numpy"):
            for start, rows, width in zip(batch["start_row"], batch["rows"], batch["dim"], strict=True):
                yield int(start), int(rows), int(width)
    except Exception as err:  # noqa: BLE001 - a failed Ray job, said in one line with its cause
        raise JTCSEError(
            f"The Ray job failed ({_root_cause(err)}); the parts already written are kept: run again to resume."
        ) from err


def _root_cause(err: BaseException) -> str:
    """The innermost error of a Ray failure that says something, as one line (Ray wraps a worker's exception,
    traceback included, in exceptions of its own)."""
    chain = []
    while err is not None and err not in chain:
        chain.append(err)
        err = err.__cause__ or getattr(err, "cause", None)
    for error in reversed(chain):
        lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", str(error)).splitlines() if line.strip()]
        if lines:
            return lines[-1] if len(lines) > 1 else f"{type(error).__name__}: {lines[0]}"
    return type(chain[-1]).__name__
