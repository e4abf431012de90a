"""Reading corpora: plain text (one sentence per line) with clear errors for bad files, or a table or dataset
(:mod:`jtcse.text_inputs`) by one column (:func:`read_texts`); the distinct sentences a trainer trains on
(:func:`read_training_sentences`), and those joined into passages (:func:`passages`)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jtcse.defaults import default_corpus_sentences
from jtcse.errors import JTCSEError


@dataclass
class Corpus:
    """Sentences of a corpus file and what was skipped on the way."""

    sentences: list[str]
    path: str | None = None
    skipped_empty: int = 0
    skipped_lines: list[int] = field(default_factory=list)


def decode_line(raw: bytes, path: str | Path, line_no: int) -> str:
    """``raw`` as UTF-8 text; a :class:`JTCSEError` naming the file, line, byte and column otherwise. Line 1 loses a
    leading byte order mark (editors on Windows write one), which would otherwise start its first sentence."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise JTCSEError(
            f"{path}: line {line_no} is not valid UTF-8 (byte {raw[err.start]:#04x} at column "
            f"{err.start + 1}). Re-encode the file as UTF-8."
        ) from None
    return text.removeprefix("\ufeff") if line_no == 1 else text


def utf8_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """``(line_no, line)`` for every line of a UTF-8 text file (1-based, line ending removed), streamed."""
    with Path(path).open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            yield line_no, decode_line(raw, path, line_no).rstrip("\r\n")


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_ .-]*")
PAIR_COLUMNS = frozenset(
    ["original", "paraphrase", "sentence1", "sentence2", "sentence_a", "sentence_b", "anchor", "positive", "text",
     "text1", "text2", "source", "target", "query", "document"]
)  # fmt: skip
"""Column names a header line of a table of sentence pairs uses (what no pair of sentences is)."""


def header_row(fields: Sequence[str], *, numbers: Sequence[int] = (), names: Iterable[str] = ()) -> bool:
    """Whether the first row of a table (its ``fields``) is a header line rather than data, the one detection of
    every reader of tables (STS-B, SICK, pairs, local MTEB tables): each field at ``numbers`` (where a data row
    holds a number: an id, a score) holds a name (a word, not a number, nor ``n/a``-like text), or each field is
    one of the column ``names`` (a table without numbers). A data row is never taken for one: a first row with a
    bad score (``n/a``) stays a row, to be refused as one."""
    cells = [field.strip() for field in fields]
    if numbers:
        return all(i < len(cells) and _is_name(cells[i]) for i in numbers)
    known = {name.lower() for name in names}
    return bool(known) and bool(cells) and all(cell.lower() in known for cell in cells)


def _is_name(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return bool(_WORD.fullmatch(cell)) and any(c.isalpha() for c in cell)
    return False


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


EMBEDDED_CORPUS = "<embedded stdlib prose>"


def read_table_sentences(source: str | Path, column: str | None = None, what: str = "corpus") -> Corpus:
    """The texts of a table or dataset (:mod:`jtcse.text_inputs`: jsonl, csv/tsv, parquet, a saved dataset,
    ``hf:NAME``) in ``column`` (default: :func:`~jtcse.text_inputs.text_column`), streamed; blank and missing
    texts are skipped and counted (``skipped_lines``: their 1-based rows)."""
    from jtcse.text_inputs import iter_table_texts

    sentences: list[str] = []
    skipped: list[int] = []
    row = 0
    for texts in iter_table_texts(source, column, what)[1]:
        for text in texts:
            row += 1
            text = text.strip() if isinstance(text, str) else ""
            if text:
                sentences.append(text)
            else:
                skipped.append(row)
    if not sentences:
        raise JTCSEError(f"{what} {source} has no sentences (no row has a text).")
    return Corpus(sentences=sentences, path=str(source), skipped_empty=len(skipped), skipped_lines=skipped)


def read_texts(source: str | Path, column: str | None = None, what: str = "corpus") -> Corpus:
    """A text input of any kind: a table or dataset (:func:`read_table_sentences`, its ``column``) or a text file
    (:func:`read_corpus`; a column is then an error)."""
    from jtcse.text_inputs import is_table

    if is_table(source):
        return read_table_sentences(source, column, what)
    if column is not None:
        raise JTCSEError(f"--text-column {column} names a column, but {source} is a text file (one sentence a line).")
    return read_corpus(source)


def read_training_sentences(
    source: str | Path | Sequence[str] | None, what: str = "corpus", text_column: str | None = None
) -> tuple[list[str], dict[str, Any]]:
    """Distinct sentences to train on, and their counts for the run summary's ``data``.

    ``source``: a one-sentence-a-line file (missing / empty / non-UTF-8 errors from
    :func:`read_corpus`), a table or dataset (its ``text_column``: :func:`read_texts`), a list of sentences (blank
    entries dropped), or ``None`` (the standard library's prose, :func:`jtcse.defaults.default_corpus_sentences`).
    Repeats are kept once.
    """
    if source is None:
        raw, label, skipped = default_corpus_sentences(), EMBEDDED_CORPUS, 0
    elif isinstance(source, (str, Path)):
        read = read_texts(source, text_column, what)
        label = read.path if str(source).startswith("hf:") else str(Path(read.path).resolve())
        raw, skipped = read.sentences, read.skipped_empty
    else:
        raw = [s.strip() for s in source if s and s.strip()]
        label, skipped = f"<{len(raw)} sentences given in memory>", 0
    if not raw:
        raise JTCSEError(f"the {what} has no sentences.")
    sentences = list(dict.fromkeys(raw))
    counts = {
        "source": label,
        "lines": len(raw),
        "skipped_blank_lines": skipped,
        "duplicates_dropped": len(raw) - len(sentences),
        "sentences": len(sentences),
    }
    return sentences, counts


def passages(sentences: Sequence[str], size: int) -> list[str]:
    """``sentences`` joined ``size`` at a time in their order, a space apart, into passages (the last one may hold
    fewer); ``size`` 1 leaves them as they are."""
    if size < 1:
        raise ValueError(f"a passage holds at least one sentence, not {size}.")
    return [" ".join(sentences[i : i + size]) for i in range(0, len(sentences), size)]
