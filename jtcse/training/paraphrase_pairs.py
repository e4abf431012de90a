"""Reading a paraphrase-pairs file: UTF-8 TSV ``original<TAB>paraphrase``, one pair a line (a first line of column
names, ``original<TAB>paraphrase``, is a header and skipped: :func:`jtcse.corpus.header_row`).

This is the format ``jtcse rtt`` writes (one file per pivot language); parsing and format errors belong to
:mod:`jtcse.rtt.pairs`. What the warm-up adds: pairs whose paraphrase equals the original after
whitespace/case normalisation carry no signal beyond dropout; they, and pairs with an empty side, are
counted and dropped, never silently used.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from jtcse.errors import JTCSEError


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
    from jtcse.rtt.pairs import normalise_for_comparison, read_pairs_counted

    read = read_pairs_counted(path, allow_empty_side=True)
    originals: list[str] = []
    paraphrases: list[str] = []
    identical = empty = 0
    for original, paraphrase in read.pairs:
        original, paraphrase = original.strip(), paraphrase.strip()
        if not original or not paraphrase:
            empty += 1
        elif normalise_for_comparison(original) == normalise_for_comparison(paraphrase):
            identical += 1
        else:
            originals.append(original)
            paraphrases.append(paraphrase)
    if not originals:
        raise JTCSEError(
            f"pairs file {path} has no usable pair: {identical} paraphrase(s) equal their original and "
            f"{empty} have an empty side."
        )
    return ParaphrasePairs(
        originals,
        paraphrases,
        str(path),
        dropped_identical=identical,
        dropped_empty=empty,
        skipped_blank_lines=read.blank_lines,
    )
