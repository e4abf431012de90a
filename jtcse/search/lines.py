"""Streaming a one-sentence-per-line file in bounded chunks, keeping where every sentence lives.

A *row* is a non-empty line (after stripping whitespace). Blank lines are skipped but still counted
in line numbers and byte offsets, so row ``i`` can always be found again by seeking to
``offsets[i]`` in the file it came from (:func:`read_line_at`). Nothing here holds more than one
chunk of text in memory, whatever the file size.

A table or dataset (:mod:`jtcse.text_inputs`: jsonl, csv/tsv, parquet, a saved dataset, ``hf:NAME``) is read the
same way by its text column (``column``): row ``i`` is its ``i``-th row (``line`` ``i + 1``, ``offset`` ``i``), a
chunk a range of rows of the memory-mapped Arrow table; a row without a text is an error naming it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jtcse.corpus import decode_line
from jtcse.errors import JTCSEError

#: One record per row: its 1-based line number and the byte offset of the line's start.
ROW_DTYPE = np.dtype([("line", "<i8"), ("offset", "<i8")])


@dataclass
class LineChunk:
    """Up to ``chunk_size`` consecutive rows of a file."""

    texts: list[str]
    rows: np.ndarray  # ROW_DTYPE records, one per text
    end_byte: int  # byte offset just after the last line read for this chunk
    next_line: int  # 1-based number of the line that follows this chunk


@dataclass
class LineCount:
    """What a first pass over a file found."""

    rows: int
    empty_lines: int
    size: int


def _decode(raw: bytes, path: Path, line_no: int) -> str:
    return decode_line(raw, path, line_no).strip()


def _check_file(path: str | Path) -> Path:
    path = Path(path)
    if not path.is_file():
        raise JTCSEError(f"Input file not found: {path}")
    return path


def _table(path: str | Path, column: str | None):
    """``(dataset, its text column)`` of a table input; a column holding anything but text, or a missing text, is
    an error (Arrow's null count: no pass over the rows)."""
    from jtcse.text_inputs import open_table, text_column

    dataset = open_table(path)
    chosen = text_column(dataset, column, path)
    dtype = getattr(dataset.features[chosen], "dtype", None)
    if dtype not in ("string", "large_string"):
        raise JTCSEError(f"{path}: column {chosen!r} holds {dtype or dataset.features[chosen]}, not text.")
    if dataset.data.column(chosen).null_count:
        row = dataset.data.column(chosen).to_pylist().index(None)
        raise JTCSEError(f"{path}: row {row + 1} has no text in column {chosen!r}; every row needs a text.")
    if len(dataset) == 0:
        raise JTCSEError(f"Input {path} has no rows.")
    return dataset, chosen


def _table_chunk(dataset, column: str, start: int, rows: int) -> LineChunk:
    texts = dataset.data.column(column).slice(start, rows).to_pylist()
    numbers = list(range(start, start + len(texts)))
    return _chunk(texts, [n + 1 for n in numbers], numbers, start + len(texts), start + len(texts) + 1)


def count_rows(path: str | Path, column: str | None = None) -> LineCount:
    """Count non-empty lines (checking every line is UTF-8) in one streaming pass.

    Raises :class:`JTCSEError` for a missing file, a non-UTF-8 line (naming it) or a file with no
    non-empty line. A table: its rows (``column``: :func:`_table`).
    """
    from jtcse.text_inputs import input_stat, is_table

    if is_table(path):
        return LineCount(rows=len(_table(path, column)[0]), empty_lines=0, size=input_stat(path)[0])
    path = _check_file(path)
    rows = empty = 0
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            if _decode(raw, path, line_no):
                rows += 1
            else:
                empty += 1
    if rows == 0:
        raise JTCSEError(f"Input file {path} has no sentences (it is empty or only blank lines).")
    return LineCount(rows=rows, empty_lines=empty, size=path.stat().st_size)


def iter_chunks(
    path: str | Path, chunk_size: int, *, start_byte: int = 0, start_line: int = 1, column: str | None = None
) -> Iterator[LineChunk]:
    """Yield the rows of ``path`` from ``start_byte`` (the start of line ``start_line``) in chunks.

    Each chunk holds at most ``chunk_size`` rows; the last may hold fewer. Blank lines are skipped. A table: from
    row ``start_byte``, by its ``column``.
    """
    from jtcse.text_inputs import is_table

    if chunk_size < 1:
        raise JTCSEError(f"chunk size must be at least 1, not {chunk_size}")
    if is_table(path):
        dataset, chosen = _table(path, column)
        for start in range(start_byte, len(dataset), chunk_size):
            yield _table_chunk(dataset, chosen, start, chunk_size)
        return
    path = _check_file(path)
    texts: list[str] = []
    lines: list[int] = []
    offsets: list[int] = []
    position = start_byte
    line_no = start_line
    with path.open("rb") as handle:
        handle.seek(start_byte)
        for raw in handle:
            text = _decode(raw, path, line_no)
            if text:
                texts.append(text)
                lines.append(line_no)
                offsets.append(position)
            position += len(raw)
            line_no += 1
            if len(texts) == chunk_size:
                yield _chunk(texts, lines, offsets, position, line_no)
                texts, lines, offsets = [], [], []
    if texts:
        yield _chunk(texts, lines, offsets, position, line_no)


@dataclass
class ChunkSpan:
    """Where one chunk of :func:`iter_chunks` lies in its file: enough to read it again on its own."""

    start_row: int  # 0-based index of its first row
    rows: int
    start_byte: int
    end_byte: int
    start_line: int
    next_line: int  # 1-based number of the line after it (as LineChunk.next_line)
    column: str | None = None  # a table's text column (its "bytes" and "lines" are then row numbers)

    def read(self, path: str | Path) -> LineChunk:
        """The chunk's rows, checked against the span (a file edited since the span was made is an error)."""
        starts = dict(start_byte=self.start_byte, start_line=self.start_line, column=self.column)
        chunk = next(iter_chunks(path, self.rows, **starts), None)
        # (the last chunk of a sequential read also took in the blank lines after it: end_byte may lie past ours)
        if chunk is None or len(chunk.texts) != self.rows or chunk.end_byte > self.end_byte:
            raise JTCSEError(f"{path} changed while it was being encoded; run again with --overwrite.")
        return chunk


def plan_chunks(path: str | Path, chunk_size: int, column: str | None = None) -> tuple[list[ChunkSpan], LineCount]:
    """One streaming pass: the spans of the chunks :func:`iter_chunks` yields, and the :func:`count_rows` count.

    Several workers can then read their chunks independently (``ChunkSpan.read``) and still number
    rows and lines exactly as one sequential reader does. A table: row ranges of its text ``column``.
    """
    from jtcse.text_inputs import input_stat, is_table

    if is_table(path):
        dataset, chosen = _table(path, column)
        total = len(dataset)
        spans = [
            ChunkSpan(
                start,
                min(chunk_size, total - start),
                start,
                min(start + chunk_size, total),
                start + 1,
                min(start + chunk_size, total) + 1,
                chosen,
            )
            for start in range(0, total, chunk_size)
        ]
        return spans, LineCount(rows=total, empty_lines=0, size=input_stat(path)[0])
    path = _check_file(path)
    spans: list[ChunkSpan] = []
    row, byte, line = 0, 0, 1
    for chunk in iter_chunks(path, chunk_size):
        spans.append(ChunkSpan(row, len(chunk.texts), byte, chunk.end_byte, line, chunk.next_line))
        row, byte, line = row + len(chunk.texts), chunk.end_byte, chunk.next_line
    if row == 0:
        raise JTCSEError(f"Input file {path} has no sentences (it is empty or only blank lines).")
    with path.open("rb") as handle:  # the blank lines after the last chunk
        handle.seek(byte)
        trailing = sum(1 for _ in handle)
    return spans, LineCount(rows=row, empty_lines=line - 1 + trailing - row, size=path.stat().st_size)


def _chunk(texts: list[str], lines: list[int], offsets: list[int], end: int, next_line: int) -> LineChunk:
    rows = np.empty(len(texts), dtype=ROW_DTYPE)
    rows["line"] = lines
    rows["offset"] = offsets
    return LineChunk(texts=texts, rows=rows, end_byte=end, next_line=next_line)


def read_line_at(handle, offset: int) -> str:
    """The stripped text of the line starting at byte ``offset`` of an open binary file."""
    handle.seek(int(offset))
    return handle.readline().decode("utf-8").strip()
