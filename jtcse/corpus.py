"""Reading plain-text corpora (one sentence per line) with clear errors for bad files."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from jtcse.errors import JTCSEError


@dataclass
class Corpus:
    """Sentences of a corpus file and what was skipped on the way."""

    sentences: list[str]
    path: str | None = None
    skipped_empty: int = 0
    skipped_lines: list[int] = field(default_factory=list)


def decode_line(raw: bytes, path: str | Path, line_no: int) -> str:
    """``raw`` as UTF-8 text; a :class:`JTCSEError` naming the file, line, byte and column otherwise."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise JTCSEError(
            f"{path}: line {line_no} is not valid UTF-8 (byte {raw[err.start]:#04x} at column "
            f"{err.start + 1}). Re-encode the file as UTF-8."
        ) from None


def utf8_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """``(line_no, line)`` for every line of a UTF-8 text file (1-based, line ending removed), streamed."""
    with Path(path).open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            yield line_no, decode_line(raw, path, line_no).rstrip("\r\n")


def read_corpus(path: str | Path) -> Corpus:
    """Read one sentence per line; blank/whitespace lines are skipped and counted.

    Raises :class:`JTCSEError` for a missing file, a file with no sentences, or bytes that are
    not UTF-8 (naming the line).
    """
    path = Path(path)
    if not path.is_file():
        raise JTCSEError(f"Corpus file not found: {path}")
    sentences: list[str] = []
    skipped: list[int] = []
    for line_no, line in utf8_lines(path):
        text = line.strip()
        if text:
            sentences.append(text)
        else:
            skipped.append(line_no)
    if not sentences:
        raise JTCSEError(f"Corpus file {path} has no sentences (it is empty or only blank lines).")
    return Corpus(sentences=sentences, path=str(path), skipped_empty=len(skipped), skipped_lines=skipped)
