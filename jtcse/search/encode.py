"""Streaming, resumable encoding of a one-sentence-per-line file with a SentenceTransformer.

The file is read twice: a cheap first pass counts the non-empty lines (and checks UTF-8) and records where
each chunk of ``chunk_size`` rows starts (:func:`jtcse.search.lines.plan_chunks`), so the output can be
allocated at its final size; then each chunk not yet on disk is read again on its own, encoded with
``SentenceTransformer.encode`` (which sorts the chunk by length and batches it) and written straight to disk.
Memory holds one chunk, never the whole file.

Outputs (:mod:`jtcse.search.sinks`): ``OUT.npy`` (+ ``STEM.rows.npy``), ``OUT.parquet``, or a folder of
parquet shards (``OUT`` without a suffix).

Engines: one process (``device``); every device of the machine through sentence-transformers'
multi-process pool (``devices``/``processes``, :mod:`jtcse.search.pool`); or a Ray cluster
(``engine=RayEngine(...)``, :mod:`jtcse.search.ray_encode`), whose actors encode chunks in parallel and
write them as parquet parts. The same driver (:func:`_encode`) plans, keeps and records for all three.

``OUT.json`` (``OUT/_jtcse.json`` for a shards folder, :mod:`jtcse.search.progress`) records the model and the
input, each by path and by content, normalisation, dtype and how far encoding got, and is the output's record
(each file it wrote, with its size and digest once complete). An interrupted run started again with the same
settings and inputs keeps every finished chunk (``.npy``: those before its progress mark; parquet: every part
that reads back whole) and encodes the rest; one with another model or corpus (their content) is refused, never
resumed; ``complete: true`` marks a finished output. A finished output is not encoded again, unless a part of it
is missing (a deleted shard): the same command then encodes just the rows it lacks (an ``.npy`` or one
``.parquet`` file: all of it); a file whose content is no longer what encode wrote is the user's, never replaced.
``--overwrite`` writes the new output beside the old one and swaps it in when complete. While a run writes, it holds the
lock ``OUT.lock`` (:func:`jtcse.locking.output_lock`): a second run into the same ``OUT`` is refused with the
first one's PID instead of "resuming" its progress file.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_write_json, crash_point, output_lock
from jtcse.output_paths import FileOutput, FolderOutput
from jtcse.search.lines import plan_chunks
from jtcse.search.model_identity import model_name_of, resolve_model
from jtcse.search.progress import (
    check_output,
    damage,
    meta_path_for,
    new_meta,
    output_files,
    read_meta,
    resumable_meta,
    run_settings,
    same_settings,
    sealed,
    swapped_in,
    write_failures,
)
from jtcse.search.ray_encode import RayEngine
from jtcse.search.sinks import (
    SHARD_META_FILE,
    SINKS,
    keep_parts,
    list_parts,
    output_format,
    part_name,
    parts_folder,
    rows_path_for,
)
from jtcse.text_inputs import is_table

logger = logging.getLogger(__name__)

__all__ = ["EncodeResult", "RayEngine", "encode_file", "meta_path_for", "rows_path_for", "result_dict"]


@dataclass
class EncodeResult:
    """Summary of one ``encode_file`` run (also written, with progress fields, to the meta file)."""

    output: str
    meta: str
    rows: int
    dim: int
    dtype: str
    normalized: bool
    empty_lines: int
    resumed_from: int
    chunks_encoded: int
    seconds: float


def encode_output(output: str | Path, inputs=()) -> FileOutput | FolderOutput:
    """``output`` as what ``jtcse encode`` writes (:mod:`jtcse.output_paths`): ``OUT.npy`` with ``STEM.rows.npy``, or
    ``OUT.parquet`` with its ``OUT.parquet.parts/``, recorded in the progress file ``OUT.json``; or a shards folder
    recorded in its ``_jtcse.json`` (every ``part-*.parquet`` in it)."""
    output = Path(output)
    fmt = output_format(output)
    if fmt == "shards":
        return FolderOutput(output, "jtcse encode", inputs=inputs, record=SHARD_META_FILE)
    return FileOutput(output, "jtcse encode", inputs=inputs, side=output_files(output)[2:] or [parts_folder(output)])


def encode_file(
    model: Any,
    input_path: str | Path,
    output_path: str | Path,
    *,
    batch_size: int = 64,
    chunk_size: int = 8192,
    normalize: bool = False,
    fp16: bool = False,
    device: str | None = None,
    devices: str | list[str] | None = None,
    processes: int | None = None,
    engine: RayEngine | None = None,
    overwrite: bool = False,
    show_progress: bool = True,
    model_name: str | None = None,
    on_chunk: Callable[[int, int], None] | None = None,
    reuse: bool = False,
    text_column: str | None = None,
) -> EncodeResult:
    """Encode every non-empty line of ``input_path`` into ``output_path`` (``.npy``, ``.parquet`` or a shards folder).

    ``input_path`` may be a table or dataset (:mod:`jtcse.text_inputs`): row ``i`` is its row ``i``'s ``text_column``.
    ``model`` is a name/path or a loaded ``SentenceTransformer`` (then ``model_name`` is required).
    ``normalize`` makes every vector unit-length; ``fp16`` stores float16. An unfinished earlier run
    with the same settings is resumed; a finished output is only replaced with ``overwrite``.
    ``on_chunk(rows_done, rows_total)`` is called after each chunk is safely on disk.

    Where it runs: ``device`` (one process); ``devices`` (``"cuda:0,cuda:1"``: one worker process per
    device) or ``processes`` (N CPU workers) through sentence-transformers' multi-process pool; or
    ``engine=RayEngine(...)`` (Ray actors; a shards folder or ``.parquet`` output, a model name or path).

    ``output_path`` is checked as an output (:func:`encode_output`): never the input or the model, never a file
    that jtcse did not write (``--overwrite`` replaces only what its progress file lists).
    ``reuse`` is for an output that is a caller's own working file (``jtcse index build``'s
    ``embeddings.npy``, in a folder the caller checked): a finished output made with the same settings is returned
    as it is (nothing is encoded), and whatever else is there (other settings, no progress file) is started over
    instead of refused.
    """
    from jtcse.search.pool import worker_devices

    started = time.perf_counter()
    input_path = Path(input_path)
    output = Path(output_path)
    fmt = output_format(output)
    if batch_size < 1:
        raise JTCSEError(f"batch size must be at least 1, not {batch_size}")
    if chunk_size < 1:
        raise JTCSEError(f"chunk size must be at least 1, not {chunk_size}")
    workers = worker_devices(devices, processes)
    if workers is not None and device is not None:
        raise JTCSEError("Give --device (one process) or --devices/--processes (several), not both.")
    if engine is not None:
        from jtcse.search.ray_encode import check_request

        check_request(model, fmt, device, workers)
    if not is_table(input_path) and not input_path.is_file():
        raise JTCSEError(f"Input file not found: {input_path}")
    if text_column is not None and not is_table(input_path):
        raise JTCSEError(f"--text-column {text_column} names a column, but {input_path} is a text file.")
    out = encode_output(output, [input_path, model])
    identity = model_name_of(model, model_name)
    wanted = run_settings(identity, model, input_path, output, fp16=fp16, normalize=normalize, column=text_column)

    check_output(out, reuse)
    with output_lock(output):
        check_output(out, reuse)
        meta_file = meta_path_for(output)
        if reuse and not overwrite:
            previous = read_meta(meta_file) if meta_file.is_file() else None
            if previous is None or not same_settings(previous, wanted):
                overwrite = True
            elif previous.get("complete") and damage(output, fmt, previous) is None:
                return _result_from_meta(output, previous)
        meta = resumable_meta(meta_file, output, wanted, overwrite)
        beside = overwrite and not reuse and any(path.exists() for path in _written(out))
        failures = nullcontext() if reuse else write_failures(output, beside)  # (a caller's file: the caller says)
        with failures, swapped_in(out) if beside else nullcontext(output) as target:
            target_out = encode_output(target) if beside else out
            fresh = meta is None
            meta = new_meta(target_out, wanted) if fresh else meta
            chunks, resumed_from = _encode(
                model,
                identity,
                input_path,
                target_out,
                fmt,
                meta,
                fresh=fresh,
                batch_size=batch_size,
                chunk_size=chunk_size,
                normalize=normalize,
                device=device,
                workers=workers,
                engine=engine,
                show_progress=show_progress,
                on_chunk=on_chunk,
            )
            meta = sealed(target_out, meta)
            atomic_write_json(meta_path_for(target), meta)
        return EncodeResult(
            output=str(output),
            meta=str(meta_file),
            rows=meta["rows"],
            dim=meta["dim"],
            dtype=meta["dtype"],
            normalized=meta["normalized"],
            empty_lines=meta["empty_lines"],
            resumed_from=resumed_from,
            chunks_encoded=chunks,
            seconds=round(time.perf_counter() - started, 3),
        )


def _written(out: FileOutput | FolderOutput) -> list[Path]:
    """The paths of an output that an earlier run may have left."""
    return list(out.written) if isinstance(out, FileOutput) else [path for path in list_parts(out.path).values()]


def _result_from_meta(output: str | Path, meta: dict) -> EncodeResult:
    """The result of a finished run, from its ``OUT.json`` (nothing encoded now)."""
    return EncodeResult(
        output=str(output),
        meta=str(meta_path_for(output)),
        rows=meta["rows"],
        dim=meta["dim"],
        dtype=meta["dtype"],
        normalized=meta["normalized"],
        empty_lines=meta["empty_lines"],
        resumed_from=meta["rows"],
        chunks_encoded=0,
        seconds=0.0,
    )


def _sink_info(meta: dict) -> dict:
    """What every parquet shard records about itself (schema metadata ``jtcse``)."""
    return {"model": meta["model"], "normalized": meta["normalized"], "input": meta["input"]}


def _encode(
    model,
    identity,
    input_path,
    out,
    fmt,
    meta,
    *,
    fresh,
    batch_size,
    chunk_size,
    normalize,
    device,
    workers,
    engine,
    show_progress,
    on_chunk,
) -> tuple[int, int]:
    """Plan the chunks (one pass over the input), keep those already on disk (:func:`_kept_chunks`) and encode the
    others: in this process, on a multi-process pool of this machine, or on Ray actors (in any order). The
    progress file counts the unbroken prefix of finished chunks after each. Returns (chunks encoded, rows kept
    before the first chunk encoded)."""
    from tqdm.auto import tqdm

    from jtcse.search.pool import encode_pool

    output = out.path
    meta_file = meta_path_for(output)
    spans, counted = plan_chunks(input_path, chunk_size, meta.get("text_column"))
    if meta["rows"] is None:
        meta.update(rows=counted.rows, empty_lines=counted.empty_lines)
    elif meta["rows"] != counted.rows:
        raise JTCSEError(f"{input_path} changed since this output was started; run again with --overwrite.")
    pooled = engine is None and workers is not None and len(workers) > 1
    st_model = None
    if engine is None:
        device = workers[0] if workers is not None and not pooled else device
        st_model, _ = resolve_model(model, identity, "cpu" if pooled else device)
    if st_model is not None:
        _check_dim(meta, st_model, identity, output)
    done = _kept_chunks(output, fmt, meta, spans, fresh)
    position = {span.start_row: i for i, span in enumerate(spans)}
    meta.update(rows_done=0, next_byte=0, next_line=1, parts_done=len(done))  # counted again from the chunks kept
    _advance_prefix(meta, done, spans, position)
    resumed_from = meta["rows_done"]
    info = _sink_info(meta)
    planned = [part_name(span.start_row) for span in spans] if isinstance(out, FolderOutput) else []
    meta["files"] = out.fields(*planned)["files"]  # being written, entered before anything is
    meta_file.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(meta_file, meta)
    sink = None if engine else SINKS[fmt](output, meta["rows"], meta["dim"], meta["dtype"], not fresh, info)
    if engine:
        parts_folder(output).mkdir(parents=True, exist_ok=True)
    todo = [span for span in spans if span.start_row not in done]
    bar = tqdm(total=meta["rows"], initial=sum(done.values()), unit="sent", desc="Encoding", disable=not show_progress)
    with bar, encode_pool(st_model, workers) if pooled else nullcontext() as pool:
        settings = dict(batch_size=batch_size, normalize_embeddings=normalize, show_progress_bar=False)
        if engine is None:
            encoded = _encode_chunks(st_model, pool, input_path, todo, sink, meta, identity, settings)
        else:
            from jtcse.search.ray_encode import encode_spans

            encoded = encode_spans(
                identity,
                input_path,
                todo,
                parts_folder(output),
                info=info,
                dtype=meta["dtype"],
                dim=meta["dim"],
                batch_size=batch_size,
                normalize=normalize,
                engine=engine,
                show_progress=show_progress,
            )
        for start, rows, dim in encoded:
            meta["dim"] = meta["dim"] or dim
            done[start] = rows
            _advance_prefix(meta, done, spans, position)
            meta["parts_done"] = len(done)
            atomic_write_json(meta_file, meta)
            bar.update(rows)
            if on_chunk is not None:
                on_chunk(sum(done.values()), meta["rows"])
    if len(done) != len(spans):  # pragma: no cover - the encoders raise first
        raise JTCSEError(f"Only {len(done)} of {len(spans)} chunks of {input_path} were encoded; run again to finish.")
    (sink or SINKS[fmt](output, meta["rows"], meta["dim"], meta["dtype"], True, info)).finish()
    return len(todo), resumed_from


def _encode_chunks(st_model, pool, input_path, spans, sink, meta, identity, settings):
    """Encode ``spans`` in this process (or on ``pool``) and write them to ``sink``; yield ``(first row, rows, dim)``
    per chunk. The crash point ``encode-chunk`` is passed once the caller has recorded the chunk's progress."""
    from jtcse.search.pool import pool_encode

    for span in spans:
        chunk = span.read(input_path)
        if pool is None:
            vectors = st_model.encode(chunk.texts, convert_to_numpy=True, **settings)
        else:
            vectors = pool_encode(st_model, chunk.texts, pool, convert_to_numpy=True, **settings)
        if vectors.shape[-1] != meta["dim"]:
            raise JTCSEError(f"{identity} returned {vectors.shape[-1]}-d vectors, expected {meta['dim']}-d.")
        sink.write(span.start_row, chunk, vectors.astype(meta["dtype"], copy=False))
        yield span.start_row, span.rows, meta["dim"]
        crash_point("encode-chunk")


def _kept_chunks(output: Path, fmt: str, meta: dict, spans: list, fresh: bool) -> dict[int, int]:
    """``{first row: rows}`` of the planned chunks already on disk: for ``.npy``, those before the progress mark;
    for parquet, the parts that read back whole with their chunk's rows (:func:`~jtcse.search.sinks.keep_parts`)."""
    keep = not fresh and meta["dim"] is not None
    if fmt == "npy":
        return {s.start_row: s.rows for s in spans if s.start_row + s.rows <= meta["rows_done"]} if keep else {}
    return keep_parts(parts_folder(output), {span.start_row: span.rows for span in spans} if keep else {})


def _advance_prefix(meta: dict, done: dict[int, int], spans: list, position: dict[int, int]) -> None:
    """Move ``rows_done``/``next_byte``/``next_line`` past the chunks finished without a gap before them
    (``position``: a span's index by its first row; ``rows_done`` is always a span's first row or the end)."""
    at = position.get(meta["rows_done"], len(spans))
    moved = at
    while moved < len(spans) and spans[moved].start_row in done:
        moved += 1
    if moved > at:
        last = spans[moved - 1]
        following = spans[moved] if moved < len(spans) else None
        meta.update(
            rows_done=last.start_row + last.rows,
            next_byte=following.start_byte if following else last.end_byte,
            next_line=following.start_line if following else last.next_line,
        )


def _check_dim(meta: dict, st_model: Any, identity: str, output: Path) -> None:
    """Set the output's dimension from the model, or check the model still makes vectors of it."""
    dim = st_model.get_embedding_dimension()
    if meta["dim"] is None:
        meta["dim"] = dim or int(st_model.encode(["probe"], convert_to_numpy=True).shape[-1])
    elif dim not in (None, meta["dim"]):
        raise JTCSEError(
            f"{output} holds {meta['dim']}-d vectors but {identity} makes {dim}-d ones; pass --overwrite to start over."
        )


def result_dict(result: EncodeResult) -> dict:
    return asdict(result)
