"""The RTT pairs file: UTF-8 TSV, one ``original<TAB>paraphrase`` pair per line, no header.

This is the format ``jtcse rtt`` writes and ``jtcse simcse --pairs-file`` reads. Tabs, carriage
returns and newlines inside a sentence are replaced by single spaces on writing, so every line
always splits into exactly two fields. Deliberately dependency-free (no torch) so any module can
import it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from jtcse.corpus import PAIR_COLUMNS, header_row, utf8_lines
from jtcse.errors import JTCSEError
from jtcse.locking import atomic_path

_LINE_BREAKS = re.compile(r"[\t\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]+")


def clean_field(text: str) -> str:
    """``text`` with tabs and line breaks collapsed to one space and the ends stripped."""
    return _LINE_BREAKS.sub(" ", text).strip()


def normalise_for_comparison(text: str) -> str:
    """Collapse whitespace and case, the equivalence under which a round trip counts as unchanged (such a
    pair carries no signal beyond dropout: ``jtcse rtt`` drops it as ``identical``, the warm-up skips it)."""
    return " ".join(text.split()).casefold()


def write_pairs(path: str | Path, pairs: Iterable[tuple[str, str]]) -> int:
    """Write ``(original, paraphrase)`` pairs to ``path`` atomically (:func:`jtcse.locking.atomic_path`), so a
    crash never leaves a half-written pairs file behind; returns the number written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8", newline="\n") as handle:
        for original, paraphrase in pairs:
            handle.write(f"{clean_field(original)}\t{clean_field(paraphrase)}\n")
            count += 1
    return count


def read_pairs(path: str | Path) -> list[tuple[str, str]]:
    """Read a pairs file; blank lines are skipped, any other malformed line is an error naming it."""
    return read_pairs_counted(path).pairs


@dataclass
class PairsRead:
    """The pairs of a file (fields as written, unstripped) and how many blank lines were skipped."""

    pairs: list[tuple[str, str]]
    blank_lines: int


def read_pairs_counted(path: str | Path, *, allow_empty_side: bool = False) -> PairsRead:
    """Parse a pairs file: UTF-8, two tab-separated fields a line, blank lines skipped and counted, a first line of
    column names (``original<TAB>paraphrase``, ``anchor<TAB>positive``) skipped as a header.

    A line with an empty (or all-space) side is an error unless ``allow_empty_side``, in which case it
    is returned as is for the caller to count (``jtcse simcse`` drops such pairs and reports them).
    """
    path = Path(path)
    if not path.is_file():
        raise JTCSEError(f"pairs file not found: {path}")
    pairs: list[tuple[str, str]] = []
    blank = 0
    for line_no, line in utf8_lines(path):
        if not line.strip():
            blank += 1
            continue
        fields = line.split("\t")
        if not pairs and header_row(fields, names=PAIR_COLUMNS):  # a header line (original<TAB>paraphrase)
            continue
        if len(fields) != 2:
            raise JTCSEError(
                f"{path}: line {line_no} is not 'original<TAB>paraphrase': it has {len(fields)} "
                "tab-separated fields, a pairs file has exactly two per line."
            )
        if not allow_empty_side and not (fields[0].strip() and fields[1].strip()):
            raise JTCSEError(
                f"{path}: line {line_no} is not 'original<TAB>paraphrase': one side is empty "
                "(a pairs file has two non-empty fields per line)."
            )
        pairs.append((fields[0], fields[1]))
    if not pairs and blank:
        raise JTCSEError(f"pairs file {path} has no pairs: it is empty apart from {blank} blank line(s).")
    if not pairs:
        raise JTCSEError(f"pairs file {path} is empty (no original<TAB>paraphrase lines).")
    return PairsRead(pairs, blank)
