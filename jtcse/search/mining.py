"""Hard-negative mining for (anchor, positive) training sets: file in, file out.

The mining itself is ``sentence_transformers.util.mine_hard_negatives`` (embed anchors and the
candidate corpus, take each anchor's nearest candidates that are not its positive, optionally within
a rank window and a margin below the positive's score). This module only reads and checks the pairs
file, passes the options through, and writes the mined set; see that function's documentation for
what each option means.

Input formats (chosen by extension): ``.csv`` / ``.tsv`` with a header row, ``.jsonl`` (one object per
line) and ``.parquet``. Outputs: ``.jsonl``, ``.parquet``, ``.csv``, ``.tsv``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError
from jtcse.locking import atomic_write_json
from jtcse.output_paths import FileOutput

PAIR_FORMATS = (".csv", ".tsv", ".jsonl", ".parquet")
OUTPUT_FORMATS = (".jsonl", ".parquet", ".csv", ".tsv")


def read_pairs(path: str | Path, anchor_column: str | None = None, positive_column: str | None = None):
    """Read a pairs file as a ``datasets.Dataset`` of just its anchor and positive columns (in that order).

    Without column names, the file's first two columns are anchor and positive.
    """
    import pyarrow as pa
    from datasets import Dataset

    path = Path(path)
    if not path.is_file():
        raise JTCSEError(f"Pairs file not found: {path}")
    suffix = path.suffix.lower()
    if suffix not in PAIR_FORMATS:
        raise JTCSEError(f"Pairs file {path} must end in one of {', '.join(PAIR_FORMATS)}.")
    if path.stat().st_size == 0:
        raise JTCSEError(f"Pairs file {path} is empty.")
    try:
        table = _read_table(path, suffix)
    except (pa.ArrowInvalid, UnicodeDecodeError) as err:
        raise JTCSEError(f"Cannot read {path}: {str(err).splitlines()[0]}") from None
    columns = table.column_names
    if len(columns) < 2 and not (anchor_column and positive_column):
        raise JTCSEError(f"{path} has columns {columns}; mining needs an anchor and a positive column.")
    anchor_column = anchor_column or columns[0]
    positive_column = positive_column or next(c for c in columns if c != anchor_column)
    if table.num_rows == 0:
        raise JTCSEError(f"Pairs file {path} has a header but no rows.")
    for role, name in (("anchor", anchor_column), ("positive", positive_column)):
        if name not in columns:
            raise JTCSEError(f"{path} has no {role} column {name!r}; its columns are {columns}.")
        if not pa.types.is_string(table.schema.field(name).type) and not pa.types.is_large_string(
            table.schema.field(name).type
        ):
            raise JTCSEError(f"Column {name!r} of {path} holds {table.schema.field(name).type}, not text.")
    if anchor_column == positive_column:
        raise JTCSEError("The anchor and positive columns must differ.")
    table = table.select([anchor_column, positive_column])
    for name in (anchor_column, positive_column):
        if table.column(name).null_count:
            raise JTCSEError(f"Column {name!r} of {path} has {table.column(name).null_count} empty cell(s).")
    return Dataset(table)


def _read_table(path: Path, suffix: str):
    if suffix in (".csv", ".tsv"):
        import pyarrow.csv as pacsv

        # TSV: tabs only, no quoting (sentences often hold quote marks); CSV: standard quoting.
        parse = pacsv.ParseOptions(delimiter="\t", quote_char=False) if suffix == ".tsv" else pacsv.ParseOptions()
        return pacsv.read_csv(path, parse_options=parse)
    if suffix == ".jsonl":
        import pyarrow.json as pajson

        return pajson.read_json(path)
    import pyarrow.parquet as pq

    return pq.read_table(path)


def write_dataset(dataset, path: str | Path) -> None:
    """Write a ``datasets.Dataset`` in the format named by ``path``'s extension."""
    path = Path(path)
    suffix = path.suffix.lower()
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".jsonl":
        dataset.to_json(path, lines=True, force_ascii=False)
    elif suffix == ".parquet":
        dataset.to_parquet(path)
    elif suffix in (".csv", ".tsv"):
        import csv

        import pyarrow as pa
        import pyarrow.compute as pc

        schema = dataset.data.schema
        list_columns = [f.name for f in schema if pa.types.is_nested(f.type)]
        if list_columns:
            raise JTCSEError(f"Columns {list_columns} hold lists; write {path.stem}.jsonl or .parquet instead.")
        if suffix == ".csv":
            dataset.to_csv(path, index=False)
            return
        # TSV mirrors how read_pairs reads it: no quoting, so a tab or newline inside a text cannot be written.
        for field in schema:
            if (
                pa.types.is_string(field.type)
                and pc.any(pc.match_substring_regex(dataset.data.column(field.name), "[\t\r\n]")).as_py()
            ):
                raise JTCSEError(
                    f"Column {field.name!r} has texts with tabs or line breaks; write .jsonl or .parquet instead."
                )
        dataset.to_csv(path, sep="\t", index=False, quoting=csv.QUOTE_NONE)
    else:
        raise JTCSEError(f"Output {path} must end in one of {', '.join(OUTPUT_FORMATS)}.")


def mine_hard_negatives_file(
    model: Any,
    pairs_path: str | Path,
    output_path: str | Path,
    *,
    corpus_path: str | Path | None = None,
    anchor_column: str | None = None,
    positive_column: str | None = None,
    num_negatives: int = 3,
    range_min: int = 0,
    range_max: int | None = None,
    max_score: float | None = None,
    min_score: float | None = None,
    absolute_margin: float | None = None,
    relative_margin: float | None = None,
    sampling_strategy: str = "top",
    output_format: str = "triplet",
    output_scores: bool = False,
    batch_size: int = 64,
    use_faiss: bool = True,
    device: str | None = None,
    model_name: str | None = None,
    verbose: bool = True,
) -> dict:
    """Mine hard negatives for the pairs in ``pairs_path`` and write the result to ``output_path``.

    ``corpus_path`` (one sentence per line) adds candidate negatives beyond the positives. Returns
    (and writes next to the output as ``OUT.json``, the output's record: :class:`~jtcse.output_paths.FileOutput`) a
    summary: rows in and out, columns, settings. An existing ``OUT`` is replaced only when that record lists it.
    """
    from sentence_transformers.util import mine_hard_negatives

    from jtcse.corpus import read_corpus
    from jtcse.search.model_identity import resolve_model

    if sampling_strategy not in ("top", "random"):
        raise JTCSEError(f"sampling strategy must be 'top' or 'random', not {sampling_strategy!r}")
    output_path = Path(output_path)
    if output_path.suffix.lower() not in OUTPUT_FORMATS:
        raise JTCSEError(f"Output {output_path} must end in one of {', '.join(OUTPUT_FORMATS)}.")
    out = FileOutput(output_path, "jtcse index mine", inputs=[pairs_path, corpus_path, model])
    out.check()  # before anything is read or loaded
    pairs = read_pairs(pairs_path, anchor_column, positive_column)
    corpus = read_corpus(corpus_path).sentences if corpus_path is not None else None
    st_model, identity = resolve_model(model, model_name, device)
    options = dict(
        num_negatives=num_negatives,
        range_min=range_min,
        range_max=range_max,
        max_score=max_score,
        min_score=min_score,
        absolute_margin=absolute_margin,
        relative_margin=relative_margin,
        sampling_strategy=sampling_strategy,
        output_format=output_format,
        output_scores=output_scores,
    )
    try:
        mined = mine_hard_negatives(
            pairs,
            st_model,
            corpus=corpus,
            batch_size=batch_size,
            use_faiss=use_faiss,
            verbose=verbose,
            **options,
        )
    except ValueError as err:  # the library's checks of the options above
        raise JTCSEError(f"Hard-negative mining: {err}") from None
    summary = {
        **out.fields(),
        "model": identity,
        "pairs": str(pairs_path),
        "corpus": None if corpus_path is None else str(corpus_path),
        "output": str(output_path),
        "rows_in": len(pairs),
        "rows_out": len(mined),
        "columns": mined.column_names,
        **options,
    }
    with out.writing():
        out.add()  # the record first: the file it lists is written next
        with out.atomic() as tmp:
            write_dataset(mined, tmp)
        atomic_write_json(out.record_path, summary)
    return summary
