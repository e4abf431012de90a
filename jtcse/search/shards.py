"""Precomputed embeddings as one source of rows: ``jtcse index build --embeddings PATH``.

``PATH`` is one finished ``jtcse encode`` output (``FILE.npy`` or ``FILE.parquet``), a shards folder
(``jtcse encode -o DIR``, any engine), or a folder holding several of those (files and shards folders,
taken in name order). Row ``i`` of the source is the ``i``-th row of that concatenation.

Each shard says what made it: a parquet file in its schema metadata (``jtcse``: model, dim, dtype,
normalisation), an ``.npy`` in its progress file ``FILE.npy.json``. Shards of another width, model or
normalisation than the first are refused by name, and so are unfinished outputs. An ``.npy`` holds no
text: its sentences are read again from the input file its progress file names, which must be
unchanged (size and modification time).

Nothing here holds more than one block of rows: :class:`ShardVectors` reads the rows asked for (a
slice, or a sample of row numbers) from the shards that hold them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jtcse.errors import JTCSEError
from jtcse.output_paths import fingerprint
from jtcse.search.lines import iter_chunks
from jtcse.search.sinks import METADATA_KEY, SHARD_META_FILE, check_tiling, npy_layout, open_parquet, rows_path_for
from jtcse.text_inputs import input_stat

_TEXT_BLOCK = 8192


@dataclass
class Shard:
    """One file of vectors: an ``.npy`` (with its row table and source file) or a parquet file."""

    path: Path
    kind: str  # "npy" or "parquet"
    rows: int
    dim: int
    model: str
    normalized: bool
    empty_lines: int = 0
    source: Path | None = None  # npy: the text file (or table) it was encoded from
    column: str | None = None  # npy of a table: its text column

    def describe(self) -> str:
        norm = "normalised" if self.normalized else "not normalised"
        return f"{self.path} ({self.dim}-d, {norm}, model {self.model})"


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise JTCSEError(f"Cannot read {path}: {err}") from None


def _progress_file(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _finished(meta: dict, path: Path) -> dict:
    if not meta.get("complete"):
        raise JTCSEError(
            f"{path} is unfinished ({meta.get('rows_done', 0)} of {meta.get('rows')} rows); run its `jtcse encode` again to finish it."
        )
    return meta


def _same_input(source: str, meta: dict) -> bool:
    """Whether ``source`` (a file, a table, ``hf:NAME``) is the input the progress file ``meta`` encoded: by content
    (:func:`fingerprint`; a jtcse before that recorded its size and time)."""
    if "input_content" in meta:
        return fingerprint(source) == meta["input_content"]
    return input_stat(source) == (meta.get("input_size"), meta.get("input_mtime_ns"))


def _npy_shard(path: Path) -> Shard:
    progress = _progress_file(path)
    if not progress.is_file() or not rows_path_for(path).is_file():
        raise JTCSEError(
            f"{path} has no {progress.name} or {rows_path_for(path).name} beside it; shards are `jtcse encode` outputs."
        )
    meta = _finished(_read_json(progress), path)
    shape = npy_layout(path)[1]
    source = Path(meta["input"])
    try:
        stale = not _same_input(meta["input"], meta)
    except (OSError, JTCSEError):  # gone
        stale = True
    if stale:
        raise JTCSEError(
            f"{path} holds no text and its input {source} is gone or changed since it was encoded; "
            "encode to .parquet or a shards folder (they keep the text), or encode the file again."
        )
    empty = meta.get("empty_lines", 0)
    return Shard(
        path, "npy", shape[0], shape[1], meta["model"], bool(meta["normalized"]), empty, source, meta.get("text_column")
    )


def _parquet_shard(path: Path, empty_lines: int = 0) -> Shard:

    handle = open_parquet(path)  # a file cut short (no footer) is named, with what to do
    metadata = handle.schema_arrow.metadata or {}
    if METADATA_KEY in metadata:
        info = json.loads(metadata[METADATA_KEY])
    elif _progress_file(path).is_file():  # written before the shards carried their metadata
        info = _finished(_read_json(_progress_file(path)), path)
        empty_lines = info.get("empty_lines", 0)
    else:
        raise JTCSEError(
            f"{path} does not say which model made it (no jtcse metadata); make shards with `jtcse encode`."
        )
    if _progress_file(path).is_file():
        meta = _finished(_read_json(_progress_file(path)), path)
        empty_lines = meta.get("empty_lines", empty_lines)
    names = handle.schema_arrow.names
    if "embedding" not in names or "text" not in names:
        raise JTCSEError(f"{path} has no embedding or text column; make shards with `jtcse encode`.")
    dim = handle.schema_arrow.field("embedding").type.list_size
    return Shard(path, "parquet", handle.metadata.num_rows, dim, info["model"], bool(info["normalized"]), empty_lines)


def _folder_shards(folder: Path) -> list[Shard]:
    """The parts of a shards folder, in row order (the folder's run must be finished)."""
    meta = _finished(_read_json(folder / SHARD_META_FILE), folder)
    parts = check_tiling(folder, meta["rows"])
    shards = [_parquet_shard(part) for part in parts]
    if shards:
        shards[0].empty_lines = meta.get("empty_lines", 0)
    return shards


def find_shards(path: str | Path) -> list[Shard]:
    """The shards of ``path`` in row order (see the module docstring), checked to agree with each other."""
    path = Path(path)
    if not path.exists():
        raise JTCSEError(f"Embeddings not found: {path}")
    if path.is_file():
        found = [_one(path)]
    elif (path / SHARD_META_FILE).is_file():
        found = [_folder_shards(path)]
    else:
        found = [_one(child) for child in sorted(path.iterdir()) if _is_shard(child)]
    shards = [shard for group in found for shard in (group if isinstance(group, list) else [group])]
    if not shards:
        raise JTCSEError(f"{path} holds no embeddings (.npy or .parquet outputs of `jtcse encode`, or shards folders).")
    first = shards[0]
    for shard in shards[1:]:
        if (shard.dim, shard.model, shard.normalized) != (first.dim, first.model, first.normalized):
            raise JTCSEError(
                f"Shards disagree: {shard.describe()} vs {first.describe()}. One index needs vectors of one model, "
                "width and normalisation."
            )
    return shards


def _is_shard(path: Path) -> bool:
    if path.name.startswith((".", "_")):
        return False
    if path.is_dir():
        return (path / SHARD_META_FILE).is_file()
    return path.suffix == ".parquet" or (path.suffix == ".npy" and not path.name.endswith(".rows.npy"))


def _one(path: Path) -> Shard | list[Shard]:
    if path.is_dir():
        return _folder_shards(path)
    if path.suffix == ".npy":
        return _npy_shard(path)
    if path.suffix == ".parquet":
        return _parquet_shard(path)
    raise JTCSEError(f"{path} is not an embeddings file (.npy or .parquet).")


class ShardVectors:
    """The rows of several shards as one read-only ``(rows, dim)`` float32 array: ``view[a:b]`` and
    ``view[row_numbers]`` read just those rows, each row group or run of rows once, into the array returned
    (no memory map, no cache: memory holds what was asked for). ``normalize`` scales rows of unnormalised
    shards to unit length."""

    dtype = np.dtype(np.float32)

    def __init__(self, shards: list[Shard], normalize: bool = False):
        self.shards = shards
        self.normalize = normalize
        self.starts = np.cumsum([0] + [shard.rows for shard in shards])
        self.shape = (int(self.starts[-1]), shards[0].dim)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step != 1:
                raise ValueError("ShardVectors slices take no step")
            return self._sorted(np.arange(start, max(start, stop)))
        rows = np.asarray(key, dtype=np.int64).reshape(-1)
        if len(rows) and np.all(np.diff(rows) > 0):
            return self._sorted(rows)
        wanted, where = np.unique(rows, return_inverse=True)
        return self._sorted(wanted)[where.reshape(-1)]

    def _sorted(self, rows: np.ndarray) -> np.ndarray:
        """Rows given in increasing order, without repeats."""
        out = np.empty((len(rows), self.shape[1]), dtype=np.float32)
        if len(rows) == 0:
            return out
        if rows[0] < 0 or rows[-1] >= len(self):
            raise IndexError(f"row out of range 0..{len(self) - 1}")
        bounds = np.searchsorted(rows, self.starts)
        for number, shard in enumerate(self.shards):
            low, high = bounds[number], bounds[number + 1]
            if low == high:
                continue
            target = out[low:high]
            local = rows[low:high] - self.starts[number]
            if shard.kind == "npy":
                _read_npy_into(shard, local, target)
            else:
                _read_parquet_into(shard, local, target)
            if self.normalize and not shard.normalized:
                norms = np.linalg.norm(target, axis=1)
                target /= np.where(norms == 0, 1, norms)[:, None]
        return out


def _read_npy_into(shard: Shard, local: np.ndarray, target: np.ndarray) -> None:
    """Rows ``local`` (increasing) of an ``.npy`` shard into ``target``, run by run with plain reads."""
    offset, _, dtype = npy_layout(shard.path)
    row_bytes = shard.dim * dtype.itemsize
    runs = np.split(np.arange(len(local)), np.flatnonzero(np.diff(local) != 1) + 1)
    with shard.path.open("rb") as handle:
        for run in runs:
            handle.seek(offset + int(local[run[0]]) * row_bytes)
            data = handle.read(len(run) * row_bytes)
            target[run[0] : run[-1] + 1] = np.frombuffer(data, dtype=dtype).reshape(len(run), shard.dim)


def _read_parquet_into(shard: Shard, local: np.ndarray, target: np.ndarray) -> None:
    """Rows ``local`` (increasing) of a parquet shard into ``target``, each row group holding some read once;
    pyarrow's pool is asked to give the memory back after each."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    handle = pq.ParquetFile(shard.path)
    meta = handle.metadata
    group_starts = np.cumsum([0] + [meta.row_group(i).num_rows for i in range(meta.num_row_groups)])
    bounds = np.searchsorted(local, group_starts)
    for group in range(meta.num_row_groups):
        low, high = bounds[group], bounds[group + 1]
        if low == high:
            continue
        column = handle.read_row_group(group, columns=["embedding"]).column("embedding")
        position = 0
        for piece in column.chunks:  # usually one
            values = piece.values.to_numpy(zero_copy_only=False).reshape(-1, shard.dim)
            wanted = local[low:high] - group_starts[group] - position
            inside = (wanted >= 0) & (wanted < len(values))
            target[low:high][inside] = values[wanted[inside]]
            position += len(values)
        del column, piece, values
        pa.default_memory_pool().release_unused()


def iter_texts(shards: list[Shard]) -> Iterator[tuple[list[str], np.ndarray]]:
    """``(texts, line numbers)`` of every row, in row order, a block at a time (parquet: its ``text`` and
    ``line`` columns; ``.npy``: its input file read again, checked against its row table)."""
    import pyarrow.parquet as pq

    for shard in shards:
        if shard.kind == "parquet":
            handle = pq.ParquetFile(shard.path)
            for batch in handle.iter_batches(batch_size=_TEXT_BLOCK, columns=["line", "text"]):
                yield batch.column("text").to_pylist(), batch.column("line").to_numpy(zero_copy_only=False)
            continue
        table = np.load(rows_path_for(shard.path), mmap_mode="r")
        done = 0
        for chunk in iter_chunks(shard.source, _TEXT_BLOCK, column=shard.column):
            lines = chunk.rows["line"]
            if not np.array_equal(lines, table["line"][done : done + len(lines)]):
                raise JTCSEError(f"{shard.source} no longer matches {shard.path}; encode it again.")
            done += len(lines)
            yield chunk.texts, lines
        if done != shard.rows:
            raise JTCSEError(f"{shard.source} no longer matches {shard.path}; encode it again.")
