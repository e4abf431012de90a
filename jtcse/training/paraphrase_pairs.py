"""Reading a paraphrase-pairs file: UTF-8 TSV ``original<TAB>paraphrase``, one pair a line (a first line of column
names, ``original<TAB>paraphrase``, is a header and skipped: :func:`jtcse.corpus.header_row`); or a table or
dataset (jsonl, csv, parquet, a saved dataset, ``hf:NAME``; a tsv with a header when columns are named:
:mod:`jtcse.text_inputs`) by two columns.

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


def _table_pairs(path: str | Path, columns: str | None) -> list[tuple[str, str]]:
    """The pairs of a table or dataset (:mod:`jtcse.text_inputs`): ``columns`` ``"A,B"``, else the default pair."""
    from jtcse.text_inputs import pair_columns, stream_table

    dataset = stream_table(path, "pairs file")
    first, second = pair_columns(dataset, columns, path)
    pairs = []
    for rows in dataset.select_columns([first, second]).iter(batch_size=4096):
        pairs += [(a or "", b or "") for a, b in zip(rows[first], rows[second], strict=True)]
    if not pairs:
        raise JTCSEError(f"pairs file {path} is empty (no rows).")
    return pairs


def read_paraphrase_pairs(path: str | Path, columns: str | None = None) -> ParaphrasePairs:
    """Read ``path`` (a TSV, or a table or dataset by its ``columns``); raise :class:`JTCSEError` for a
    missing/empty/malformed file or no usable pair."""
    from jtcse.rtt.pairs import normalise_for_comparison, read_pairs_counted
    from jtcse.text_inputs import is_table

    # a .tsv is the headerless original<TAB>paraphrase file jtcse rtt writes, unless columns are named
    if is_table(path) and (columns is not None or Path(path).suffix.lower() != ".tsv"):
        read_pairs, blank_lines = _table_pairs(path, columns), 0
    elif columns is not None:
        raise JTCSEError(f"--columns {columns} names columns, but {path} is a TSV of original<TAB>paraphrase lines.")
    else:
        read = read_pairs_counted(path, allow_empty_side=True)
        read_pairs, blank_lines = read.pairs, read.blank_lines
    originals: list[str] = []
    paraphrases: list[str] = []
    identical = empty = 0
    for original, paraphrase in read_pairs:
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
        skipped_blank_lines=blank_lines,
    )
