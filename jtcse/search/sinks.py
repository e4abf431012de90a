"""Where ``jtcse encode`` puts its vectors: one ``.npy``, one ``.parquet``, or a folder of parquet shards.

* ``.npy``: ``OUT`` is an ``(rows, dim)`` array written through ``numpy.lib.format.open_memmap``;
  ``STEM.rows.npy`` holds, per row, the 1-based source line number and its byte offset.
* ``.parquet``: columns ``row``, ``line``, ``offset``, ``text``, ``embedding`` (a fixed-size list). Each
  chunk goes to ``OUT.parts/part-<first row>.parquet`` first; the parts are joined into ``OUT`` at the end.
* a folder (``OUT`` without a suffix): the parts themselves are the output, ``OUT/part-<first row>.parquet``,
  the layout Ray Data and Spark read as one dataset; ``row`` (0-based, global) keeps the order.

Every parquet file carries the model, dimension, dtype and normalisation in its schema metadata (key
``jtcse``), so a shard says what made it wherever it is copied (``jtcse index build --embeddings``).
A part file is written whole or not at all (:func:`jtcse.locking.atomic_path`), which is what lets
several writers (Ray actors) fill one folder and a rerun keep the parts already there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import numpy as np

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_path
from jtcse.search.lines import ROW_DTYPE, LineChunk

OUTPUT_FORMATS = {".npy": "npy", ".parquet": "parquet", "": "shards"}
SHARD_META_FILE = "_jtcse.json"  # a shards folder's progress file (a leading "_": parquet readers skip it)
METADATA_KEY = b"jtcse"
_PART = re.compile(r"part-(\d{12})\.parquet")


def output_format(output: str | Path) -> str:
    """``npy``, ``parquet`` or ``shards`` (a path without a suffix); a clear error for anything else."""
    suffix = Path(output).suffix.lower()
    if suffix not in OUTPUT_FORMATS:
        raise JTCSEError(
            f"Output {output} must end in .npy or .parquet, or be a folder name without a suffix "
            "(a folder of parquet shards)."
        )
    return OUTPUT_FORMATS[suffix]


def rows_path_for(output: str | Path) -> Path:
    """``STEM.rows.npy``: line number and byte offset of each row of a ``.npy`` output."""
    output = Path(output)
    return output.with_name(output.stem + ".rows.npy")


def parts_folder(output: str | Path) -> Path:
    """Where the part files of a parquet output go: ``OUT.parts/``, or the shards folder itself."""
    output = Path(output)
    return output if output_format(output) == "shards" else output.with_name(output.name + ".parts")


def part_name(start: int) -> str:
    return f"part-{start:012d}.parquet"


def part_start(path: Path) -> int | None:
    """The first row of a part file, from its name (None for a file that is not a part)."""
    match = _PART.fullmatch(path.name)
    return int(match.group(1)) if match else None


def list_parts(folder: Path) -> dict[int, Path]:
    """``{first row: path}`` of the part files in ``folder``."""
    if not folder.is_dir():
        return {}
    return {start: path for path in folder.iterdir() if (start := part_start(path)) is not None}


class DamagedOutput(JTCSEError):
    """A finished ``jtcse encode`` output with a part missing or damaged; ``problem`` says which (the message adds
    what to do: the same ``jtcse encode`` again encodes just what is missing; a damaged file, whose content is no
    longer what jtcse wrote, is the user's to delete first)."""

    def __init__(self, problem: str):
        super().__init__(
            f"{problem}; delete a damaged file, then run the `jtcse encode` that wrote it again (the same command): "
            "it encodes just the missing rows again."
        )
        self.problem = problem


def open_parquet(path: Path):
    """``pyarrow.parquet.ParquetFile(path)``; :class:`DamagedOutput` naming the file when it cannot be read (a file cut
    short has no footer)."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path)
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError, its IOError an OSError
        reason = str(err).splitlines()[0].split(". ")[0]
        raise DamagedOutput(f"{path} is damaged or not a parquet file ({reason})") from None


def part_rows(path: Path) -> int:
    """Rows in a part file (read from its footer); :class:`DamagedOutput` when it cannot be read."""
    return open_parquet(path).metadata.num_rows


class PartWriter:
    """Writes one chunk as one parquet part file (whole or not at all); used by the sinks and by Ray actors."""

    def __init__(self, folder: Path, dim: int, dtype: str, info: dict):
        try:
            import pyarrow as pa
        except ImportError:  # pragma: no cover - pyarrow is a dependency
            raise JTCSEError("Parquet output needs pyarrow: pip install pyarrow") from None
        self.pa = pa
        self.folder = Path(folder)
        self.dim = dim
        value_type = pa.float16() if dtype == "float16" else pa.float32()
        self.schema = pa.schema(
            [
                ("row", pa.int64()),
                ("line", pa.int64()),
                ("offset", pa.int64()),
                ("text", pa.string()),
                ("embedding", pa.list_(value_type, dim)),
            ],
            metadata={METADATA_KEY: json.dumps({**info, "dim": dim, "dtype": dtype}, allow_nan=False).encode("utf-8")},
        )

    def write(self, start: int, chunk: LineChunk, vectors: np.ndarray) -> Path:
        import pyarrow.parquet as pq

        pa = self.pa
        count = len(chunk.texts)
        flat = pa.array(np.ascontiguousarray(vectors).reshape(-1), type=self.schema.field("embedding").type.value_type)
        table = pa.Table.from_arrays(
            [
                pa.array(np.arange(start, start + count, dtype=np.int64)),
                pa.array(chunk.rows["line"]),
                pa.array(chunk.rows["offset"]),
                pa.array(chunk.texts, type=pa.string()),
                pa.FixedSizeListArray.from_arrays(flat, self.dim),
            ],
            schema=self.schema,
        )
        path = self.folder / part_name(start)
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
        return path


def keep_parts(folder: Path, planned: dict[int, int]) -> dict[int, int]:
    """``{first row: rows}`` of the parts in ``folder`` that ``planned`` (first row -> rows) names and that read back
    whole with those rows; every other part (damaged, cut otherwise, not planned) is deleted, to be written again."""
    kept = {}
    for start, path in list_parts(folder).items():
        try:
            rows = part_rows(path)
        except DamagedOutput:
            rows = None
        if planned.get(start) == rows:
            kept[start] = rows
        else:
            path.unlink()
    return kept


def check_tiling(folder: Path, rows: int) -> list[Path]:
    """The part files of ``folder`` in row order, checked to cover rows ``0..rows-1`` once each."""
    parts = sorted(list_parts(folder).items())
    expected = 0
    for start, path in parts:
        if start != expected:
            raise DamagedOutput(f"{folder} has no part holding row {expected} (the next is {path.name})")
        expected += part_rows(path)
    if expected != rows:
        raise DamagedOutput(f"{folder} holds {expected} rows, {rows} expected")
    return [path for _, path in parts]


class NpySink:
    """Rows are written in place into ``.npy`` files of their final size (``os.pwrite`` at each row's offset,
    then ``fsync``): nothing is memory-mapped, so the process's memory does not grow with the output."""

    def __init__(self, output: Path, rows: int, dim: int, dtype: str, resume: bool, info: dict):
        from numpy.lib.format import open_memmap

        self.files = {"vectors": output, "rows": rows_path_for(output)}
        if not resume:  # allocate both files (headers, final sizes; the maps are dropped at once, no data touched)
            open_memmap(output, mode="w+", dtype=dtype, shape=(rows, dim))
            open_memmap(self.files["rows"], mode="w+", dtype=ROW_DTYPE, shape=(rows,))
        self.layout = {name: npy_layout(path) for name, path in self.files.items()}
        expected = {"vectors": ((rows, dim), np.dtype(dtype)), "rows": ((rows,), ROW_DTYPE)}
        if any(self.layout[name][1:] != expected[name] for name in self.files):
            raise JTCSEError(f"{output} does not have the shape its progress file promises; pass --overwrite.")
        self.handles = {name: os.open(path, os.O_RDWR) for name, path in self.files.items()}

    @staticmethod
    def can_resume(output: Path) -> bool:
        return output.is_file() and rows_path_for(output).is_file()

    @staticmethod
    def check_whole(output: Path, rows: int) -> None:
        """Raise :class:`DamagedOutput` unless both files of a finished ``output`` hold ``rows`` rows, all there."""
        for path in (output, rows_path_for(output)):
            if npy_layout(path)[1][:1] != (rows,):
                raise DamagedOutput(f"{path} does not hold {rows} rows")

    def write(self, start: int, chunk: LineChunk, vectors: np.ndarray) -> None:
        for name, values in (("vectors", vectors), ("rows", chunk.rows)):
            offset, _, dtype = self.layout[name]
            data = np.ascontiguousarray(values, dtype=dtype)
            row_bytes = data.nbytes // max(len(data), 1)
            os.pwrite(self.handles[name], data.tobytes(), offset + start * row_bytes)
            os.fsync(self.handles[name])

    def finish(self) -> None:
        for handle in self.handles.values():
            os.close(handle)
        self.handles = {}


def npy_layout(path: Path) -> tuple[int, tuple, np.dtype]:
    """(byte offset of the data, shape, dtype) of a C-ordered ``.npy`` file (its header only is read);
    :class:`DamagedOutput` when it is missing or shorter than its header says."""
    try:
        mapped = np.load(path, mmap_mode="r")
    except (OSError, ValueError) as err:  # missing, cut short ("mmap length is greater than file size"), not .npy
        raise DamagedOutput(f"{path} is damaged or missing ({str(err).splitlines()[0]})") from None
    if not mapped.flags.c_contiguous:
        raise JTCSEError(f"{path} is not a C-ordered array; pass --overwrite.")
    return mapped.offset, mapped.shape, mapped.dtype


class ParquetSink:
    """Each chunk becomes one part file; ``finish`` joins the parts (one at a time) into ``OUT``."""

    def __init__(self, output: Path, rows: int, dim: int, dtype: str, resume: bool, info: dict):
        self.output = output
        self.rows = rows
        self.parts = parts_folder(output)
        if not resume and self.parts.exists():
            shutil.rmtree(self.parts)
        self.parts.mkdir(parents=True, exist_ok=True)
        self.writer = PartWriter(self.parts, dim, dtype, info)

    @classmethod
    def can_resume(cls, output: Path) -> bool:
        return parts_folder(output).is_dir()

    @staticmethod
    def check_whole(output: Path, rows: int) -> None:
        """Raise :class:`DamagedOutput` unless the finished ``output`` reads back with ``rows`` rows."""
        if part_rows(output) != rows:
            raise DamagedOutput(f"{output} does not hold {rows} rows")

    def write(self, start: int, chunk: LineChunk, vectors: np.ndarray) -> None:
        self.writer.write(start, chunk, vectors)

    def finish(self) -> None:
        import pyarrow.parquet as pq

        schema = self.writer.schema
        parts = check_tiling(self.parts, self.rows)
        with atomic_path(self.output) as tmp, pq.ParquetWriter(tmp, schema) as writer:
            for part in parts:
                writer.write_table(pq.read_table(part, schema=schema))
        shutil.rmtree(self.parts)


class ShardsSink(ParquetSink):
    """The part files are the output: nothing to join, only the tiling to check."""

    def __init__(self, output: Path, rows: int, dim: int, dtype: str, resume: bool, info: dict):
        if not resume:
            for path in list_parts(output).values():
                path.unlink()
        super().__init__(output, rows, dim, dtype, True, info)

    def finish(self) -> None:
        check_tiling(self.parts, self.rows)

    @staticmethod
    def check_whole(output: Path, rows: int) -> None:
        """Raise :class:`DamagedOutput` unless the parts of ``output`` cover its ``rows`` rows, each readable."""
        check_tiling(output, rows)


SINKS = {"npy": NpySink, "parquet": ParquetSink, "shards": ShardsSink}
