"""Streaming, resumable encoding of a one-sentence-per-line file with a SentenceTransformer.

The file is read twice: a cheap first pass counts the non-empty lines (and checks UTF-8), so the
output can be allocated at its final size; the second pass reads ``chunk_size`` lines at a time,
encodes each chunk with ``SentenceTransformer.encode`` (which sorts the chunk by length and batches
it) and writes the vectors straight to disk. Memory holds one chunk, never the whole file.

Outputs (``OUT`` is the path given, ``STEM`` the path without its extension):

* ``.npy``: ``OUT`` is an ``(rows, dim)`` array written through ``numpy.lib.format.open_memmap``;
  ``STEM.rows.npy`` holds, per row, the 1-based source line number and its byte offset.
* ``.parquet``: one table with columns ``line``, ``offset``, ``text`` and ``embedding`` (a
  fixed-size list). Chunks go to ``OUT.parts/`` first and are joined into ``OUT`` at the end.

``OUT.json`` records the model, the input's path/size/mtime, normalisation, dtype and how
far encoding got. An interrupted run started again with the same settings resumes after the last
finished chunk; ``complete: true`` marks a finished output. While a run writes, it holds the lock
``OUT.lock`` (:func:`jtcse.locking.output_lock`): a second run into the same ``OUT`` is refused with
the first one's PID instead of "resuming" its progress file.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_path, atomic_write_json, crash_point, output_lock
from jtcse.search.lines import ROW_DTYPE, LineChunk, count_rows, iter_chunks

META_FORMAT = "jtcse-embeddings"
META_VERSION = 1
OUTPUT_FORMATS = {".npy": "npy", ".parquet": "parquet"}
# Settings that must agree for a run to continue a previous one.
_RESUME_KEYS = ("model", "input", "input_size", "input_mtime_ns", "output_format", "dtype", "normalized")


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


def model_identity(model: str) -> str:
    """How an index or embedding file names its model: an absolute path for a local directory,
    the name as given otherwise (a hub id)."""
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else model


def model_name_of(model: Any, model_name: str | None = None) -> str:
    """The identity to record for ``model``: ``model_name`` if given, else that of a name/path.

    A loaded SentenceTransformer does not know where it came from, so it needs ``model_name``.
    """
    if model_name:
        return model_name
    if isinstance(model, (str, os.PathLike)):
        return model_identity(str(model))
    raise JTCSEError(
        "A loaded SentenceTransformer was given without model_name=...: pass the name or path it "
        "was loaded from, so the output records which model made it."
    )


def resolve_model(model: Any, model_name: str | None = None, device: str | None = None) -> tuple[Any, str]:
    """Accept a model name/path or a loaded SentenceTransformer; return (model, identity)."""
    from jtcse.modeling.loading import load_model

    name = model_name_of(model, model_name)
    if isinstance(model, (str, os.PathLike)):
        return load_model(str(model), device=device), name
    return model, name


def meta_path_for(output: str | Path) -> Path:
    """``OUT.json``: settings and progress of the run that writes ``OUT``."""
    output = Path(output)
    return output.with_name(output.name + ".json")


def rows_path_for(output: str | Path) -> Path:
    """``STEM.rows.npy``: line number and byte offset of each row of a ``.npy`` output."""
    output = Path(output)
    return output.with_name(output.stem + ".rows.npy")


def output_files(output: str | Path) -> list[Path]:
    """The files a finished run into ``output`` leaves: its progress file ``OUT.json``, ``OUT`` and, for
    ``.npy``, the row table ``STEM.rows.npy`` (progress file first, the order to delete them in)."""
    output = Path(output)
    npy = OUTPUT_FORMATS.get(output.suffix.lower()) == "npy"
    return [meta_path_for(output), output] + ([rows_path_for(output)] if npy else [])


def _read_meta(path: str | Path) -> dict:
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise JTCSEError(f"Cannot read progress file {path}: {err}. Delete it or pass --overwrite.") from None


class _NpySink:
    """Rows go straight into memory-mapped ``.npy`` files of their final size."""

    def __init__(self, output: Path, rows: int, dim: int, dtype: str, resume: bool):
        from numpy.lib.format import open_memmap

        mode = "r+" if resume else "w+"
        kwargs = {} if resume else {"dtype": dtype, "shape": (rows, dim)}
        self.vectors = open_memmap(output, mode=mode, **kwargs)
        row_kwargs = {} if resume else {"dtype": ROW_DTYPE, "shape": (rows,)}
        self.rows = open_memmap(rows_path_for(output), mode=mode, **row_kwargs)
        if self.vectors.shape != (rows, dim) or self.rows.shape != (rows,):
            raise JTCSEError(f"{output} does not have the shape its progress file promises; pass --overwrite.")

    @staticmethod
    def can_resume(output: Path) -> bool:
        return output.is_file() and rows_path_for(output).is_file()

    def write(self, start: int, chunk: LineChunk, vectors: np.ndarray) -> None:
        stop = start + len(chunk.texts)
        self.vectors[start:stop] = vectors
        self.rows[start:stop] = chunk.rows
        self.vectors.flush()
        self.rows.flush()

    def finish(self) -> None:
        del self.vectors, self.rows


class _ParquetSink:
    """Each chunk becomes one part file; ``finish`` joins the parts (one at a time) into the output."""

    def __init__(self, output: Path, rows: int, dim: int, dtype: str, resume: bool):
        try:
            import pyarrow as pa
        except ImportError:  # pragma: no cover - pyarrow comes with datasets
            raise JTCSEError("Parquet output needs pyarrow: pip install pyarrow") from None
        self.pa = pa
        self.output = output
        self.parts = output.with_name(output.name + ".parts")
        if not resume and self.parts.exists():
            shutil.rmtree(self.parts)
        self.parts.mkdir(parents=True, exist_ok=True)
        self.dim = dim
        value_type = pa.float16() if dtype == "float16" else pa.float32()
        self.schema = pa.schema(
            [
                ("line", pa.int64()),
                ("offset", pa.int64()),
                ("text", pa.string()),
                ("embedding", pa.list_(value_type, dim)),
            ]
        )

    @staticmethod
    def can_resume(output: Path) -> bool:
        return output.with_name(output.name + ".parts").is_dir()

    def write(self, start: int, chunk: LineChunk, vectors: np.ndarray) -> None:
        import pyarrow.parquet as pq

        pa = self.pa
        flat = pa.array(np.ascontiguousarray(vectors).reshape(-1), type=self.schema.field("embedding").type.value_type)
        table = pa.Table.from_arrays(
            [
                pa.array(chunk.rows["line"]),
                pa.array(chunk.rows["offset"]),
                pa.array(chunk.texts, type=pa.string()),
                pa.FixedSizeListArray.from_arrays(flat, self.dim),
            ],
            schema=self.schema,
        )
        with atomic_path(self.parts / f"part-{start:012d}.parquet") as tmp:
            pq.write_table(table, tmp)

    def finish(self) -> None:
        import pyarrow.parquet as pq

        with atomic_path(self.output) as tmp, pq.ParquetWriter(tmp, self.schema) as writer:
            for part in sorted(self.parts.glob("part-*.parquet")):
                writer.write_table(pq.read_table(part, schema=self.schema))
        shutil.rmtree(self.parts)


_SINKS = {"npy": _NpySink, "parquet": _ParquetSink}


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
    overwrite: bool = False,
    show_progress: bool = True,
    model_name: str | None = None,
    on_chunk: Callable[[int, int], None] | None = None,
    reuse: bool = False,
) -> EncodeResult:
    """Encode every non-empty line of ``input_path`` into ``output_path`` (``.npy`` or ``.parquet``).

    ``model`` is a name/path or a loaded ``SentenceTransformer`` (then ``model_name`` is required).
    ``normalize`` makes every vector unit-length; ``fp16`` stores float16. An unfinished earlier run
    with the same settings is resumed; a finished output is only replaced with ``overwrite``.
    ``on_chunk(rows_done, rows_total)`` is called after each chunk is safely on disk.

    ``reuse`` is for an output that is a caller's own working file (``jtcse index build``'s
    ``embeddings.npy``): a finished output made with the same settings is returned as it is (nothing is
    encoded), and whatever else is there (other settings, no progress file) is started over instead of refused.
    """
    from tqdm.auto import tqdm

    started = time.perf_counter()
    input_path = Path(input_path)
    output = Path(output_path)
    fmt = OUTPUT_FORMATS.get(output.suffix.lower())
    if fmt is None:
        raise JTCSEError(f"Output {output} must end in .npy or .parquet.")
    if batch_size < 1:
        raise JTCSEError(f"batch size must be at least 1, not {batch_size}")
    if chunk_size < 1:
        raise JTCSEError(f"chunk size must be at least 1, not {chunk_size}")
    if not input_path.is_file():
        raise JTCSEError(f"Input file not found: {input_path}")
    identity = model_name_of(model, model_name)
    wanted = _run_settings(identity, input_path, output, fp16=fp16, normalize=normalize)

    _check_output_location(output)
    with output_lock(output):
        meta_file = meta_path_for(output)
        if reuse and not overwrite:
            previous = _read_meta(meta_file) if meta_file.is_file() else None
            if previous is None or not _same_settings(previous, wanted):
                overwrite = True
            elif previous.get("complete") and output.is_file():
                return _result_from_meta(output, previous)
        meta = _resumable_meta(meta_file, output, fmt, wanted, overwrite)
        if meta is None:
            counted = count_rows(input_path)
            meta = {
                "format": META_FORMAT,
                "format_version": META_VERSION,
                **wanted,
                "rows": counted.rows,
                "dim": None,
                "empty_lines": counted.empty_lines,
                "rows_done": 0,
                "next_byte": 0,
                "next_line": 1,
                "complete": False,
            }
        resumed_from = meta["rows_done"]

        st_model, _ = resolve_model(model, identity, device)
        if overwrite:
            _remove_previous(output)
        if meta["dim"] is None:
            meta["dim"] = st_model.get_embedding_dimension() or int(
                st_model.encode(["probe"], convert_to_numpy=True).shape[-1]
            )
        elif st_model.get_embedding_dimension() not in (None, meta["dim"]):
            raise JTCSEError(
                f"{output} holds {meta['dim']}-d vectors but {identity} makes "
                f"{st_model.get_embedding_dimension()}-d ones; pass --overwrite to start over."
            )
        sink = _SINKS[fmt](output, meta["rows"], meta["dim"], meta["dtype"], resume=resumed_from > 0)
        atomic_write_json(meta_file, meta)

        chunks = 0
        with tqdm(total=meta["rows"], initial=resumed_from, unit="sent", desc="Encoding", disable=not show_progress) as bar:
            for chunk in iter_chunks(input_path, chunk_size, start_byte=meta["next_byte"], start_line=meta["next_line"]):
                if meta["rows_done"] + len(chunk.texts) > meta["rows"]:
                    raise JTCSEError(f"{input_path} grew while it was being encoded; run again with --overwrite.")
                vectors = st_model.encode(
                    chunk.texts,
                    batch_size=batch_size,
                    normalize_embeddings=normalize,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                if vectors.shape[-1] != meta["dim"]:
                    raise JTCSEError(f"{identity} returned {vectors.shape[-1]}-d vectors, expected {meta['dim']}-d.")
                sink.write(meta["rows_done"], chunk, vectors.astype(meta["dtype"], copy=False))
                meta.update(
                    rows_done=meta["rows_done"] + len(chunk.texts), next_byte=chunk.end_byte, next_line=chunk.next_line
                )
                atomic_write_json(meta_file, meta)
                chunks += 1
                bar.update(len(chunk.texts))
                if on_chunk is not None:
                    on_chunk(meta["rows_done"], meta["rows"])
                crash_point("encode-chunk")
        if meta["rows_done"] != meta["rows"]:
            raise JTCSEError(
                f"{input_path} changed while it was being encoded ({meta['rows_done']} rows read, {meta['rows']} "
                "counted); run again with --overwrite."
            )
        sink.finish()
        meta["complete"] = True
        atomic_write_json(meta_file, meta)
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


def _run_settings(identity: str, input_path: str | Path, output: str | Path, *, fp16: bool, normalize: bool) -> dict:
    """The settings a run must share with an unfinished one to continue it (``_RESUME_KEYS``)."""
    input_path = Path(input_path)
    stat = input_path.stat()
    return {
        "model": identity,
        "input": str(input_path.resolve()),
        "input_size": stat.st_size,
        "input_mtime_ns": stat.st_mtime_ns,
        "output_format": OUTPUT_FORMATS[Path(output).suffix.lower()],
        "dtype": "float16" if fp16 else "float32",
        "normalized": bool(normalize),
    }


def _same_settings(meta: dict, wanted: dict) -> bool:
    return all(meta.get(key) == wanted[key] for key in _RESUME_KEYS)


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


def _check_output_location(output: Path) -> None:
    """Refuse, before anything is written, an output that is a folder or sits under a file."""
    if output.is_dir():
        raise JTCSEError(f"{output} is a folder; -o names the .npy or .parquet file to write (e.g. {output / 'vectors.npy'}).")
    for parent in output.parents:
        if parent.exists():
            if not parent.is_dir():
                raise JTCSEError(f"Cannot write {output}: {parent} is a file, not a folder.")
            break
    output.parent.mkdir(parents=True, exist_ok=True)


def _remove_previous(output: Path) -> None:
    """Delete what an earlier run into ``output`` left (``--overwrite``)."""
    for path in output_files(output):
        path.unlink(missing_ok=True)
    parts = output.with_name(output.name + ".parts")
    if parts.is_dir():
        shutil.rmtree(parts)


def _resumable_meta(meta_file: Path, output: Path, fmt: str, wanted: dict, overwrite: bool) -> dict | None:
    """The progress of an unfinished run to continue, or None to start fresh (after checks)."""
    if overwrite:
        return None  # the old files go only once the model has loaded (_remove_previous)
    if not meta_file.is_file():
        if output.exists():
            raise JTCSEError(f"{output} already exists; pass --overwrite to replace it.")
        return None
    meta = _read_meta(meta_file)
    if meta.get("complete"):
        raise JTCSEError(f"{output} is already complete ({meta.get('rows')} rows); pass --overwrite to redo it.")
    differences = [
        f"{key}: {meta.get(key)!r} then, {wanted[key]!r} now" for key in _RESUME_KEYS if meta.get(key) != wanted[key]
    ]
    if differences:  # _same_settings(), spelt out for the message
        raise JTCSEError(
            f"An unfinished run into {output} used other settings ({'; '.join(differences)}); "
            "run with those settings to resume, or pass --overwrite to start over."
        )
    if meta.get("rows_done", 0) == 0 or not _SINKS[fmt].can_resume(output) or meta.get("dim") is None:
        return None
    return meta


def result_dict(result: EncodeResult) -> dict:
    return asdict(result)
