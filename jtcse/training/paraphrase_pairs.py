"""Reading a paraphrase-pairs file: UTF-8 TSV ``original<TAB>paraphrase``, one pair a line, no header.

This is the format ``jtcse rtt`` writes (one file per pivot language). Pairs whose paraphrase equals the
original after whitespace/case normalisation carry no signal beyond dropout; they, and pairs with an
empty side, are counted and dropped, never silently used.

(Minimal reader for the warm-up; to be unified with ``jtcse.rtt.pairs.read_pairs`` once that lands.)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jtcse.errors import JTCSEError


def normalise_for_comparison(text: str) -> str:
    """Collapse whitespace and case, the equivalence under which a round trip counts as unchanged."""
    return " ".join(text.split()).casefold()


@dataclass
class ParaphrasePairs:
    """Usable (original, paraphrase) pairs and what was dropped on the way."""

    originals: list[str]
    paraphrases: list[str]
    path: str
    dropped_identical: int = 0
    dropped_empty: int = 0
    skipped_blank_lines: int = 0

    def __len__(self) -> int:
        return len(self.originals)


def read_paraphrase_pairs(path: str | Path) -> ParaphrasePairs:
    """Read ``path``; raise :class:`JTCSEError` for a missing/empty/malformed file or no usable pair."""
    path = Path(path)
    if not path.is_file():
        raise JTCSEError(f"pairs file not found: {path}")
    originals: list[str] = []
    paraphrases: list[str] = []
    identical = empty = blank = 0
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise JTCSEError(f"{path}: line {line_no} is not valid UTF-8.") from None
            if not line.strip():
                blank += 1
                continue
            fields = line.split("\t")
            if len(fields) != 2:
                raise JTCSEError(
                    f"{path}: line {line_no} has {len(fields)} tab-separated fields; a pairs file has exactly "
                    "two per line: original<TAB>paraphrase."
                )
            original, paraphrase = fields[0].strip(), fields[1].strip()
            if not original or not paraphrase:
                empty += 1
            elif normalise_for_comparison(original) == normalise_for_comparison(paraphrase):
                identical += 1
            else:
                originals.append(original)
                paraphrases.append(paraphrase)
    if not originals and not (identical or empty):
        raise JTCSEError(f"pairs file {path} is empty (no original<TAB>paraphrase lines).")
    if not originals:
        raise JTCSEError(
            f"pairs file {path} has no usable pair: {identical} paraphrase(s) equal their original and "
            f"{empty} have an empty side."
        )
    return ParaphrasePairs(
        originals, paraphrases, str(path), dropped_identical=identical, dropped_empty=empty, skipped_blank_lines=blank
    )
