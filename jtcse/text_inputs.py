"""Text inputs held as tables or datasets: which inputs are tables, how they open, which column holds the text.

Beside a text file (one sentence a line, :mod:`jtcse.corpus`), every text input may be

| input | read by |
| --- | --- |
| ``FILE.jsonl`` (or ``.json``: JSON lines) | ``datasets.load_dataset("json", data_files=FILE)`` |
| ``FILE.csv`` / ``FILE.tsv`` (a header line) | ``datasets.load_dataset("csv", data_files=FILE[, delimiter="\\t"])`` |
| ``FILE.parquet`` | ``datasets.load_dataset("parquet", data_files=FILE)`` |
| a folder written by ``Dataset.save_to_disk`` (or a ``DatasetDict``'s: its ``train`` split, or its only one) | ``datasets.load_from_disk`` |
| ``hf:NAME[:CONFIG][:SPLIT]`` (split default ``train``) | ``datasets.load_dataset(NAME, CONFIG, split=SPLIT)``: offline, from the cache |

No reader of jtcse's own: ``datasets`` (Arrow, pyarrow) reads them all. :func:`open_table` gives a memory-mapped
``datasets.Dataset`` (rows read by range: encoding, indexing); :func:`stream_table` an ``IterableDataset`` (the
training corpus, read once in order; files are streamed, not converted). The text is one column: the one named
(``--text-column``), else the first of :data:`TEXT_COLUMNS` the table has, else its only string column; pairs are
two (``--columns A,B``; default the first of :data:`PAIR_COLUMNS` it has). A wrong name is one error line listing
the columns found.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from jtcse.errors import JTCSEError

#: ``suffix: (datasets builder, its options)`` of a table file.
TABLE_FILES: dict[str, tuple[str, dict[str, Any]]] = {
    ".jsonl": ("json", {}),
    ".json": ("json", {}),
    ".csv": ("csv", {}),
    ".tsv": ("csv", {"delimiter": "\t"}),
    ".parquet": ("parquet", {}),
}
HF_PREFIX = "hf:"
#: The text column when none is named: the first of these a table has.
TEXT_COLUMNS = ("text", "sentence", "sentence1", "anchor", "query")
#: The pair columns when none are named: the first of these a table has.
PAIR_COLUMNS = (("sentence1", "sentence2"), ("anchor", "positive"), ("original", "paraphrase"))
#: What an STS input (a dev or selection file, :func:`jtcse.evaluation.sts.read_sts_input`) may be, as help texts say it.
STS_INPUTS = (
    "an STS-B file (tab-separated genre, file, year, id, score, sentence1, sentence2: sts-dev.csv) or a table or "
    "dataset with sentence1, sentence2, score columns (and genre, if any): .jsonl, .csv/.tsv, .parquet, a "
    "save_to_disk folder or hf:NAME[:CONFIG][:SPLIT]"
)
_SAVED_DATASET = ("state.json", "dataset_dict.json")  # what Dataset / DatasetDict.save_to_disk write


def is_table(spec: str | Path | None) -> bool:
    """Whether ``spec`` is a table or dataset (see the module table) rather than a text file."""
    if spec is None:
        return False
    text = str(spec)
    if text.startswith(HF_PREFIX):
        return True
    path = Path(text)
    if path.is_dir():
        return any((path / name).is_file() for name in _SAVED_DATASET)
    return path.suffix.lower() in TABLE_FILES


def is_dataset(spec: str | Path | None) -> bool:
    """Whether ``spec`` is a table only ``datasets`` reads (a ``.parquet`` file, a saved dataset, ``hf:NAME``), not
    a text file (``.jsonl``, ``.csv``, ``.tsv``: text a reader of lines may read too)."""
    return is_table(spec) and (
        str(spec).startswith(HF_PREFIX) or Path(spec).is_dir() or Path(spec).suffix == ".parquet"
    )


def table_files(spec: str | Path) -> list[Path]:
    """The files a table is read from (its content fingerprint, its size and age): the file itself, a saved
    dataset's files, or the Arrow files of an ``hf:`` dataset in the cache."""
    text = str(spec)
    if text.startswith(HF_PREFIX):
        return sorted(Path(entry["filename"]) for entry in open_table(text).cache_files)
    path = Path(text)
    return sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]


def input_name(spec: str | Path) -> str:
    """How a run records an input: an ``hf:`` name as written, a path made absolute."""
    return str(spec) if str(spec).startswith(HF_PREFIX) else str(Path(spec).resolve())


def input_stat(spec: str | Path) -> tuple[int, int]:
    """``(bytes, newest modification time in ns)`` of the files an input is read from (a text file: its own)."""
    stats = [path.stat() for path in (table_files(spec) if is_table(spec) else [Path(spec)])]
    return sum(stat.st_size for stat in stats), max((stat.st_mtime_ns for stat in stats), default=0)


def _parse_hf(spec: str) -> tuple[str, str | None, str]:
    parts = spec[len(HF_PREFIX) :].split(":")
    if not parts[0] or len(parts) > 3:
        raise JTCSEError(
            f"{spec!r}: write hf:NAME, hf:NAME:CONFIG or hf:NAME:CONFIG:SPLIT (e.g. hf:stsb_multi_mt:en:train)."
        )
    name, config, split = (parts + [None, None])[:3]
    return name, config or None, split or "train"


def _loaded(spec: str | Path, what: str, streaming: bool):
    """The table ``spec`` as a ``datasets`` dataset (``streaming``: an ``IterableDataset``)."""
    import datasets

    text = str(spec)
    if not text.startswith(HF_PREFIX) and not Path(text).exists():
        raise JTCSEError(f"{what} not found: {text}")
    try:
        if text.startswith(HF_PREFIX):
            name, config, split = _parse_hf(text)
            loaded = datasets.load_dataset(name, config, split=split)
        elif Path(text).is_dir():
            loaded = _saved_split(datasets.load_from_disk(text), text)
        else:
            path = Path(text)
            builder, options = TABLE_FILES[path.suffix.lower()]
            return datasets.load_dataset(builder, data_files=str(path), split="train", streaming=streaming, **options)
    except JTCSEError:
        raise
    except Exception as err:  # noqa: BLE001 - datasets raises many kinds; the user gets one line naming the input
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise JTCSEError(f"cannot read {what} {text}: {message}") from None
    return loaded.to_iterable_dataset() if streaming else loaded


def _saved_split(loaded, path: str):
    """A saved ``Dataset``, or the ``train`` (or only) split of a saved ``DatasetDict``."""
    if not hasattr(loaded, "keys"):
        return loaded
    splits = list(loaded.keys())
    if len(splits) == 1 or "train" in splits:
        return loaded[splits[0] if len(splits) == 1 else "train"]
    raise JTCSEError(f"{path} holds the splits {', '.join(splits)} and none is 'train'; save the one to read alone.")


def open_table(spec: str | Path, what: str = "input"):
    """``spec`` as a memory-mapped ``datasets.Dataset`` (row ranges read on demand); opened once while its files
    stay as they are (a chunked reader asks for it chunk after chunk)."""
    text = str(spec)
    stamp = None if text.startswith(HF_PREFIX) or not Path(text).exists() else input_stat(text)
    return _open_cached(text, what, stamp)


@functools.lru_cache(maxsize=4)
def _open_cached(spec: str, what: str, stamp):
    return _loaded(spec, what, streaming=False)


def stream_table(spec: str | Path, what: str = "input"):
    """``spec`` as a ``datasets.IterableDataset`` (rows read once, in order; a file is streamed as it is read)."""
    return _loaded(spec, what, streaming=True)


def columns_of(dataset) -> dict[str, str]:
    """``{column: its Arrow type}`` of a dataset (a streamed file that does not know them yet: from its first row)."""
    if dataset.features is None:
        first = next(iter(dataset), {})
        return {name: "string" if isinstance(value, str) else type(value).__name__ for name, value in first.items()}
    return {name: str(getattr(feature, "dtype", type(feature).__name__)) for name, feature in dataset.features.items()}


def text_column(dataset, requested: str | None, spec: str | Path, option: str = "--text-column") -> str:
    """The column holding the text: ``requested``, else the first of :data:`TEXT_COLUMNS` present, else the only
    string column; otherwise one error line naming the columns found and the option to choose with."""
    columns = columns_of(dataset)
    if requested is not None:
        if requested not in columns:
            raise JTCSEError(f"{spec} has no column {requested!r}; its columns are {listed_columns(columns)}.")
        return requested
    found = next((name for name in TEXT_COLUMNS if name in columns), None)
    strings = [name for name, dtype in columns.items() if dtype in ("string", "large_string")]
    if found is None and len(strings) == 1:
        found = strings[0]
    if found is None:
        raise JTCSEError(
            f"{spec}: which column holds the text? Its columns are {listed_columns(columns)}; name one with {option} "
            f"(without it: the first of {', '.join(TEXT_COLUMNS)}, or the only string column)."
        )
    return found


def pair_columns(dataset, requested: str | None, spec: str | Path) -> tuple[str, str]:
    """The two columns of a pair: ``requested`` (``"A,B"``), else the first of :data:`PAIR_COLUMNS` present."""
    columns = columns_of(dataset)
    if requested is not None:
        names = tuple(name.strip() for name in requested.split(","))
        if len(names) != 2 or not all(names):
            raise JTCSEError(
                f"--columns takes two column names, e.g. --columns sentence1,sentence2, not {requested!r}."
            )
        missing = [name for name in names if name not in columns]
        if missing:
            raise JTCSEError(f"{spec} has no column {missing[0]!r}; its columns are {listed_columns(columns)}.")
        return names  # type: ignore[return-value]
    found = next((pair for pair in PAIR_COLUMNS if set(pair) <= set(columns)), None)
    if found is None:
        defaults = "; ".join(",".join(pair) for pair in PAIR_COLUMNS)
        raise JTCSEError(
            f"{spec}: which two columns hold the pairs? Its columns are {listed_columns(columns)}; name them with "
            f"--columns A,B (without it: {defaults})."
        )
    return found


def listed_columns(columns: dict[str, str]) -> str:
    """``{column: type}`` as an error names them: ``a (string), b (int64)``."""
    return ", ".join(f"{name} ({dtype})" for name, dtype in columns.items()) or "none"


def checked_texts(values: list, spec: str | Path, column: str, first_row: int) -> list[str]:
    """``values`` of ``column`` as texts; a missing or non-text value is an error naming its row (1-based)."""
    for offset, value in enumerate(values):
        if not isinstance(value, str):
            raise JTCSEError(
                f"{spec}: row {first_row + offset + 1} has {'no text' if value is None else repr(value)} in column "
                f"{column!r}; every row needs a text."
            )
    return values


def iter_table_texts(spec: str | Path, column: str | None, what: str = "corpus", batch: int = 4096):
    """``(column, batches of texts)`` of a table read once in order (:func:`stream_table`); ``None`` stays ``None``
    (the caller decides what a missing text means)."""
    dataset = stream_table(spec, what)
    chosen = text_column(dataset, column, spec)
    return chosen, (rows[chosen] for rows in dataset.select_columns([chosen]).iter(batch_size=batch))
