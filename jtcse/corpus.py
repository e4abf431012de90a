"""Reading plain-text corpora (one sentence per line) with clear errors for bad files."""

from __future__ import annotations

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
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                raise JTCSEError(
                    f"{path}: line {line_no} is not valid UTF-8 (byte {raw[err.start]:#04x} at column "
                    f"{err.start + 1}). Re-encode the file as UTF-8."
                ) from None
            text = text.strip()
            if text:
                sentences.append(text)
            else:
                skipped.append(line_no)
    if not sentences:
        raise JTCSEError(f"Corpus file {path} has no sentences (it is empty or only blank lines).")
    return Corpus(sentences=sentences, path=str(path), skipped_empty=len(skipped), skipped_lines=skipped)
