"""MTEB tasks read from local files, one per task type, on mteb's own task classes (every score is mteb's).

| layout | type | mteb class | main score |
| --- | --- | --- | --- |
| a BEIR folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/test.tsv`` | ``retrieval`` | ``AbsTaskRetrieval`` | nDCG@10 |
| ``text``, ``label``, ``split`` rows (train and test), or a folder of ``train.jsonl`` and ``test.jsonl`` | ``classification`` | ``AbsTaskClassification`` | accuracy |
| ``sentence1``, ``sentence2``, ``label`` (0/1) rows | ``pair-classification`` | ``AbsTaskPairClassification`` | max AP |
| ``sentence1``, ``sentence2``, ``score`` rows (also a ``.parquet``, ``save_to_disk`` folder or ``hf:NAME``), or an STS-B file | ``sts`` | ``AbsTaskSTS`` | cosine Spearman |
| an STS file read as retrieval (:func:`stsb_retrieval_task`) | ``retrieval-pairs`` | ``AbsTaskRetrieval`` | nDCG@10 |

Rows are JSON lines or a tab- or comma-separated table with a header. :func:`local_task` takes ``PATH`` (the type
comes from the layout) or ``TYPE:PATH`` (where the layout is ambiguous, or for ``retrieval-pairs``), either one
after ``NAME=`` to name the task. Unnamed, a task is ``Local_<file stem or folder name>`` (:func:`default_task_name`:
a generic stem such as ``test`` takes its folder's name, ``BIOSSES/test.jsonl`` → ``Local_BIOSSES``, and a subset
folder its task's, ``STS17/en-en/test.jsonl`` → ``Local_STS17_en-en``). Its dataset revision is a hash of what it
read, so MTEB's result cache never serves a result computed on other data. Every bad layout is one :class:`JTCSEError` line naming the file and what
is missing.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path

from jtcse.corpus import utf8_lines
from jtcse.errors import JTCSEError
from jtcse.output_paths import fingerprint
from jtcse.text_inputs import is_dataset

#: The columns that tell a file's task type (a file fitting two types needs ``TYPE:PATH``).
FILE_COLUMNS = {
    "sts": ("sentence1", "sentence2", "score"),
    "pair-classification": ("sentence1", "sentence2", "label"),
    "classification": ("text", "label", "split"),
}
BEIR_FILES = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")
CLASSIFICATION_FILES = ("train.jsonl", "test.jsonl")
CLASSIFICATION_SPLITS = ("train", "test")
TASK_TYPES = ("retrieval", "classification", "pair-classification", "sts", "retrieval-pairs")
#: mteb's task class of each mteb task type.
TASK_CLASSES = {
    "Retrieval": "mteb.abstasks.retrieval.AbsTaskRetrieval",
    "Classification": "mteb.abstasks.classification.AbsTaskClassification",
    "PairClassification": "mteb.abstasks.pair_classification.AbsTaskPairClassification",
    "STS": "mteb.abstasks.sts.AbsTaskSTS",
}
_KNOWN_COLUMNS = {column for columns in FILE_COLUMNS.values() for column in columns}
_READ_COLUMNS = _KNOWN_COLUMNS | {"_id", "title", "query-id", "corpus-id"}
"""Every column a local task reads (a BEIR folder's files too)."""


def read_records(path: Path) -> tuple[list[str], list[tuple[int, dict]]]:
    """``(columns, [(line number, row)])`` of a JSON-lines file (a ``{`` starts its first line) or of a tab- or
    comma-separated table with a header line. Blank lines are skipped."""
    if not path.is_file():
        raise JTCSEError(f"local MTEB task file not found: {path}")
    lines = [(no, line) for no, line in utf8_lines(path) if line.strip()]
    if not lines:
        raise JTCSEError(f"{path} is empty.")
    if lines[0][1].lstrip().startswith("{"):
        rows = []
        for no, line in lines:
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise JTCSEError(f"{path}: line {no} is not JSON ({err.msg}).") from None
            if not isinstance(row, dict):
                raise JTCSEError(f"{path}: line {no} is not a JSON object.")
            rows.append((no, row))
        return list(rows[0][1]), rows
    tab = "\t" in lines[0][1]
    dialect = {"delimiter": "\t", "quoting": csv.QUOTE_NONE} if tab else {"delimiter": ","}
    header, *body = [[field.strip() for field in next(csv.reader([line], **dialect))] for _, line in lines]
    if not set(header) & _READ_COLUMNS:  # a header line names the columns: a data row is never taken for one
        raise JTCSEError(
            f"{path}: its first line ({lines[0][1][:60]!r}) names none of the columns a local task reads "
            f"({', '.join(sorted(_KNOWN_COLUMNS))}); a table starts with a header line naming them."
        )
    if not body:
        raise JTCSEError(f"{path} has a header but no rows.")
    rows = [(no, dict(zip(header, values, strict=False))) for (no, _), values in zip(lines[1:], body, strict=True)]
    return header, rows


def column_values(path: Path, rows: list[tuple[int, dict]], column: str, empty: bool = False) -> list:
    """The ``column`` of every row; a row without it (or with ``""``, unless ``empty``) is an error naming the file
    and line."""
    values = []
    for no, row in rows:
        value = row.get(column)
        if value is None or (value == "" and not empty):
            raise JTCSEError(f"{path}: line {no} has no {column!r} (the columns are {', '.join(map(str, row))}).")
        values.append(value)
    return values


def _header_columns(path: Path) -> set[str] | None:
    """The first line's column names when it is a header (a JSON object's keys, or a tab- or comma-separated line
    naming a known column); ``None`` for a headerless file (an STS-B file)."""
    if not path.is_file():
        raise JTCSEError(f"local MTEB task file not found: {path}")
    first = next((line for _, line in utf8_lines(path) if line.strip()), "")
    try:
        columns = set(json.loads(first)) if first.lstrip().startswith("{") else set(re.split(r"[\t,]", first))
    except (json.JSONDecodeError, TypeError):
        raise JTCSEError(f"{path}: line 1 is not JSON.") from None
    columns = {column.strip() for column in columns}
    return columns if _KNOWN_COLUMNS & columns else None


def infer_task_type(path: Path) -> str:
    """The task type of ``path`` from its layout (see the module table)."""
    if is_dataset(path):  # a .parquet, a saved dataset, hf:NAME: the one kind read from them (columns checked then)
        return "sts"
    if not path.exists():
        raise JTCSEError(f"local MTEB task not found: {path}")
    if path.is_dir():
        missing = {
            kind: [name for name in names if not (path / name).is_file()]
            for kind, names in (("retrieval", BEIR_FILES), ("classification", CLASSIFICATION_FILES))
        }
        fits = [kind for kind, absent in missing.items() if not absent]
        if len(fits) == 1:
            return fits[0]
        if fits:
            raise JTCSEError(
                f"{path} is both a BEIR folder and a classification folder: say which, e.g. retrieval:{path}"
            )
        raise JTCSEError(
            f"{path} is neither a BEIR retrieval folder (missing {', '.join(missing['retrieval'])}) nor a "
            f"classification folder (missing {', '.join(missing['classification'])})."
        )
    columns = _header_columns(path)
    if columns is None:
        return "sts"  # an STS-B file: genre, file, year, id, score, sentence1, sentence2
    fits = [kind for kind, needed in FILE_COLUMNS.items() if set(needed) <= columns]
    if len(fits) > 1:
        raise JTCSEError(f"{path} fits {' and '.join(fits)}: say which, e.g. {fits[0]}:{path}")
    if not fits:
        expected = "; ".join(f"{', '.join(needed)} ({kind})" for kind, needed in FILE_COLUMNS.items())
        raise JTCSEError(
            f"{path}: cannot tell the task type from its columns ({', '.join(sorted(columns))}); expected {expected}."
        )
    return fits[0]


#: A task name given as ``NAME=PATH``: what mteb can use as a result file's name.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
#: File stems and folder names that say nothing about the task: the name comes from the folder above.
GENERIC_NAMES = frozenset({"test", "train", "dev", "validation", "data", "corpus", "default", "qrels", "queries"})
#: A subset folder (a language or a language pair, as mteb names subsets: ``en``, ``en-en``, ``eng-Latn``,
#: ``eng_Latn-deu_Latn``): named with the task folder above it.
_SUBSET = re.compile(r"[a-z]{2,3}([-_][A-Z][a-z]{3})?(-[a-z]{2,3}([-_][A-Z][a-z]{3})?)?")


def split_task_name(spec: str | Path) -> tuple[str | None, str]:
    """``NAME=REST`` → ``(NAME, REST)``; anything else (an existing path holding ``=`` too) → ``(None, spec)``."""
    name, sep, rest = str(spec).partition("=")
    if not sep or Path(spec).exists():
        return None, str(spec)
    if not _NAME.fullmatch(name) or not rest:
        raise JTCSEError(
            f"--local-task {spec!r}: NAME=PATH takes a name of letters, digits, '_', '.' and '-' (not starting "
            "with '_', '.' or '-') and a path, e.g. MyTask=data/test.jsonl."
        )
    return name, rest


def parse_task_spec(spec: str | Path) -> tuple[str | None, Path]:
    """``TYPE:PATH`` → ``(TYPE, PATH)``; a plain path → ``(None, PATH)``; a leading ``NAME=`` is dropped
    (:func:`split_task_name`)."""
    spec = split_task_name(spec)[1]
    if str(spec).startswith("hf:"):  # a dataset's name (jtcse.text_inputs), not a type
        return None, Path(spec)
    kind, sep, rest = str(spec).partition(":")
    if sep and kind in TASK_TYPES:
        return kind, Path(rest)
    if sep and not Path(spec).exists() and re.fullmatch(r"[a-z-]+", kind):
        raise JTCSEError(f"unknown local task type {kind!r} in {spec!r}; the types are {', '.join(TASK_TYPES)}.")
    return None, Path(spec)


def local_task(spec: str | Path, name: str | None = None):
    """The MTEB task (an ``AbsTask`` instance) of ``PATH`` or ``TYPE:PATH`` (either after ``NAME=``), read now (a
    bad file raises here). ``name`` (else the spec's ``NAME``, else :func:`default_task_name`) names the task."""
    name = name or split_task_name(spec)[0]
    kind, path = parse_task_spec(spec)
    kind = kind or infer_task_type(path)
    builders = {
        "retrieval": beir_task,
        "classification": classification_task,
        "pair-classification": pair_classification_task,
        "sts": local_sts_task,
        "retrieval-pairs": stsb_retrieval_task,
    }
    return builders[kind](path, name=name)


def default_task_name(path: str | Path, suffix: str = "") -> str:
    """``Local_<name>``: a file's stem or a folder's name; a generic one (:data:`GENERIC_NAMES`) gives way to the
    folder above, and a subset folder found so (``en-en``) is joined to its task folder's name (``STS17_en-en``)."""
    path = Path(path).absolute()
    named = [path.stem if path.is_file() else path.name, *(parent.name for parent in path.parents)]
    parts = [part for part in named if part and part.lower() not in GENERIC_NAMES]
    moved_up = bool(parts) and parts[0] != named[0]
    chosen = parts[:2] if moved_up and len(parts) > 1 and _SUBSET.fullmatch(parts[0]) else parts[:1]
    name = "_".join(reversed(chosen))
    return "Local_" + (re.sub(r"[^0-9A-Za-z_.-]+", "_", name) or "task") + suffix


def _content(path: Path) -> bytes:
    """What a task's revision hashes of one input: a file's bytes, a dataset's content fingerprint."""
    return path.read_bytes() if path.is_file() else fingerprint(path).encode()


def _revision(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:16]


def make_task(name: str, path: Path, revision: str, task_type: str, main_score: str, load, **attrs):
    """An instance of a new subclass of mteb's task class of ``task_type`` (:data:`TASK_CLASSES`), named ``name``,
    whose ``load_data`` sets ``dataset`` to ``load()`` (built from what was read already). ``attrs``: class attributes
    (``min_score`` ...)."""
    import importlib

    from mteb.abstasks.task_metadata import TaskMetadata

    module, class_name = TASK_CLASSES[task_type].rsplit(".", 1)
    base = getattr(importlib.import_module(module), class_name)

    metadata = TaskMetadata(
        name=name,
        description=f"{task_type} task read from the local path {path}.",
        dataset={"path": str(path), "revision": revision},
        type=task_type,
        category="t2c" if task_type == "Classification" else "t2t",
        modalities=["text"],
        eval_splits=["test"],
        eval_langs=["eng-Latn"],
        main_score=main_score,
    )

    def load_data(self, num_proc=None, **kwargs) -> None:
        if not self.data_loaded:
            self.dataset = load()
            self.data_loaded = True

    return type(name, (base,), {"metadata": metadata, "load_data": load_data, **attrs})()


def read_sts_pairs(path: Path) -> tuple[list[str], list[str], list[float]]:
    """Sentence pairs and scores of an STS file: rows with ``sentence1``, ``sentence2``, ``score`` (a table with a
    header, or JSON lines; or a dataset, :func:`jtcse.text_inputs.is_dataset`), or an STS-B file."""
    if is_dataset(path):
        from jtcse.evaluation.sts import read_sts_table

        pairs = read_sts_table(path, normalize=False)  # sentences as written, as mteb reads them
        return pairs.sentences1, pairs.sentences2, [float(s) for s in pairs.scores]
    if _header_columns(path) is None:
        from jtcse.evaluation.sts import read_stsb_file

        pairs = read_stsb_file(path)  # STS-B layout: genre, file, year, id, score, s1, s2
        return pairs.sentences1, pairs.sentences2, [float(s) for s in pairs.scores]
    _, rows = read_records(path)
    s1, s2 = column_values(path, rows, "sentence1"), column_values(path, rows, "sentence2")
    scores = []
    for (no, _), score in zip(rows, column_values(path, rows, "score"), strict=True):
        try:
            scores.append(float(score))
        except (TypeError, ValueError):
            raise JTCSEError(f"{path}: line {no}: score {score!r} is not a number") from None
    return s1, s2, scores


def local_sts_task(path: str | Path, name: str | None = None):
    """An MTEB STS task (``AbsTaskSTS``) whose test split is the pairs of ``path`` (:func:`read_sts_pairs`)."""
    path = Path(path)
    s1, s2, scores = read_sts_pairs(path)
    columns = {"sentence1": s1, "sentence2": s2, "score": scores}
    return make_task(
        name or default_task_name(path),
        path,
        _revision(_content(path)),
        "STS",
        "cosine_spearman",
        lambda: _splits({"test": columns}),
        min_score=min(scores),
        max_score=max(scores),
    )


def pair_classification_task(path: str | Path, name: str | None = None):
    """An MTEB pair-classification task (``AbsTaskPairClassification``): rows of ``sentence1``, ``sentence2`` and a
    0/1 ``label``, all in the test split."""
    path = Path(path)
    _, rows = read_records(path)
    labels = []
    for (no, _), label in zip(rows, column_values(path, rows, "label"), strict=True):
        if str(label).strip() not in ("0", "1"):
            raise JTCSEError(f"{path}: line {no}: label {label!r} is not 0 or 1.")
        labels.append(int(str(label).strip()))
    columns = {
        "sentence1": column_values(path, rows, "sentence1"),
        "sentence2": column_values(path, rows, "sentence2"),
        "label": labels,
    }
    return make_task(
        name or default_task_name(path),
        path,
        _revision(_content(path)),
        "PairClassification",
        "max_ap",
        lambda: _splits({"test": columns}),
        label_column_name="label",
    )


def _labelled(path: Path, rows: list[tuple[int, dict]]) -> dict[str, list]:
    return {"text": column_values(path, rows, "text"), "label": column_values(path, rows, "label")}


def classification_task(path: str | Path, name: str | None = None, splits: tuple[str, ...] = CLASSIFICATION_SPLITS):
    """An MTEB classification task (``AbsTaskClassification``, its logistic regression on ``samples_per_label``
    training texts per label, ``n_experiments`` times): a folder of ``train.jsonl`` and ``test.jsonl``, or one file
    of ``text``, ``label``, ``split`` rows (other splits are ignored). Text labels become a ``datasets.ClassLabel``
    (numbered in sorted order, as mteb numbers its tasks' labels). ``splits``: the splits read (choosing reads
    ``("train",)`` alone and divides it, :func:`jtcse.evaluation.selection_scoring.train_split_only`)."""
    path = Path(path)
    if path.is_dir():
        files = [path / f"{split}.jsonl" for split in splits]
        columns = {file.stem: _labelled(file, read_records(file)[1]) for file in files}
    else:
        files = [path]
        _, rows = read_records(path)
        by_split: dict[str, list] = {split: [] for split in splits}
        for (no, row), split in zip(rows, column_values(path, rows, "split"), strict=True):
            if split in by_split:  # other splits are ignored
                by_split[split].append((no, row))
        columns = {split: _labelled(path, by_split[split]) for split in splits}
    empty = [split for split, values in columns.items() if not values["text"]]
    if empty:
        raise JTCSEError(f"{path}: no {' or '.join(empty)} rows; classification trains on train and scores on test.")
    labels = {label for values in columns.values() for label in values["label"]}
    if len({type(label) for label in labels}) > 1:
        raise JTCSEError(f"{path}: the labels mix numbers and strings; use one kind.")
    _check_classes(path, *(set(columns[split]["label"]) if split in columns else set() for split in ("train", "test")))
    names = sorted(labels) if isinstance(next(iter(labels)), str) else None
    return make_task(
        name or default_task_name(path),
        path,
        _revision(*(file.read_bytes() for file in files)),
        "Classification",
        "accuracy",
        lambda: _splits(columns, label_names=names),
        _calculate_scores=_scores_of_gold_array,
    )


def _check_classes(path: Path, train: set, test: set) -> None:
    """Refuse labels a classifier trained on ``train`` cannot score ``test`` with: a single class, or test labels
    that train never has (``0.0``/``1.0`` in one split, ``0``/``1`` in the other)."""
    shown = lambda labels: ", ".join(sorted(map(repr, labels))[:6])  # noqa: E731
    if len(train) < 2:
        raise JTCSEError(
            f"{path}: every train row has the label {shown(train)}; a classifier learns to tell labels apart, so "
            "train needs two labels at least."
        )
    unseen = test - train
    if unseen:
        raise JTCSEError(
            f"{path}: the test labels {shown(unseen)} never occur in train (its labels: {shown(train)}); write each "
            "label the same way in both splits (e.g. 0 and 1 in both, not 0.0 in one)."
        )


def _scores_of_gold_array(self, y_test, y_pred):
    """mteb's classification scores, the gold labels read out of the dataset once: a ``datasets`` column is read
    item by item by each of the eight metrics in each experiment (two minutes of a TREC half on two busy cores)."""
    import numpy as np
    from mteb.abstasks.classification import AbsTaskClassification

    return AbsTaskClassification._calculate_scores(self, np.asarray(y_test[:]), y_pred)


def _splits(columns: dict[str, dict[str, list]], label_names: list[str] | None = None):
    """A ``datasets.DatasetDict`` of ``{split: {column: values}}``; with ``label_names``, its ``label`` column a
    ``ClassLabel`` of those names."""
    from datasets import ClassLabel, Dataset, DatasetDict

    splits = DatasetDict({split: Dataset.from_dict(values) for split, values in columns.items()})
    return splits if label_names is None else splits.cast_column("label", ClassLabel(names=label_names))


def _retrieval_split(corpus: dict[str, tuple[str, str]], queries: dict[str, str], qrels: dict[str, dict[str, int]]):
    from datasets import Dataset

    return {
        "corpus": Dataset.from_dict(
            {"id": list(corpus), "text": [t for t, _ in corpus.values()], "title": [h for _, h in corpus.values()]}
        ),
        "queries": Dataset.from_dict({"id": list(queries), "text": list(queries.values())}),
        "relevant_docs": qrels,
        "top_ranked": None,
    }


def _jsonl_texts(path: Path) -> dict[str, tuple[str, str]]:
    """``{_id: (text, title)}`` of a BEIR ``corpus.jsonl`` / ``queries.jsonl`` (``title`` optional)."""
    _, rows = read_records(path)
    ids = [str(value) for value in column_values(path, rows, "_id")]
    texts = column_values(path, rows, "text", empty=path.name == "corpus.jsonl")  # a document may be its title alone
    titles = [str(row.get("title") or "") for _, row in rows]
    return dict(zip(ids, zip(texts, titles, strict=True), strict=True))


def read_qrels(path: Path, queries: dict, corpus: dict) -> dict[str, dict[str, int]]:
    """``{query-id: {corpus-id: score}}`` of a BEIR qrels file (``query-id``, ``corpus-id``, ``score``, tab-separated,
    with its header); every id must be one of ``queries`` / ``corpus``."""
    _, rows = read_records(path)
    qrels: dict[str, dict[str, int]] = {}
    columns = [column_values(path, rows, name) for name in ("query-id", "corpus-id", "score")]
    for (no, _), query, doc, score in zip(rows, *columns, strict=True):
        if str(query) not in queries:
            raise JTCSEError(f"{path}: line {no}: query-id {query!r} is not in queries.jsonl.")
        if str(doc) not in corpus:
            raise JTCSEError(f"{path}: line {no}: corpus-id {doc!r} is not in corpus.jsonl.")
        try:
            qrels.setdefault(str(query), {})[str(doc)] = int(score)
        except ValueError:
            raise JTCSEError(f"{path}: line {no}: score {score!r} is not a whole number.") from None
    return qrels


def beir_task(path: str | Path, name: str | None = None):
    """An MTEB retrieval task (``AbsTaskRetrieval``) from a BEIR folder: ``corpus.jsonl`` (``_id``, ``text``,
    optional ``title``), ``queries.jsonl`` (``_id``, ``text``) and ``qrels/test.tsv``."""
    path = Path(path)
    if not path.is_dir():
        raise JTCSEError(f"{path} is not a folder; a BEIR retrieval task is a folder holding {', '.join(BEIR_FILES)}.")
    missing = [name for name in BEIR_FILES if not (path / name).is_file()]
    if missing:
        raise JTCSEError(f"{path} is not a BEIR retrieval folder: {', '.join(missing)} missing.")
    corpus = _jsonl_texts(path / "corpus.jsonl")
    queries = {query: text for query, (text, _) in _jsonl_texts(path / "queries.jsonl").items()}
    qrels = read_qrels(path / "qrels" / "test.tsv", queries, corpus)
    revision = _revision(*((path / name).read_bytes() for name in BEIR_FILES))
    return make_task(
        name or default_task_name(path),
        path,
        revision,
        "Retrieval",
        "ndcg_at_10",
        lambda: {"default": {"test": _retrieval_split(corpus, queries, qrels)}},
    )


def pairs_as_retrieval(path: Path, min_score: float = 4.0):
    """``(corpus, queries, qrels)`` of an STS file read as retrieval: every distinct sentence is a document (ids
    ``s0``, ``s1``, ... in order of first appearance, first sentences first); each pair of two different sentences
    scoring at least ``min_score`` makes ``sentence1`` a query (its document id) with ``sentence2`` relevant."""
    s1, s2, scores = read_sts_pairs(path)
    ids: dict[str, str] = {}
    for sentence in s1 + s2:
        ids.setdefault(sentence, f"s{len(ids)}")
    qrels: dict[str, dict[str, int]] = {}
    for first, second, score in zip(s1, s2, scores, strict=True):
        if score >= min_score and ids[first] != ids[second]:
            qrels.setdefault(ids[first], {})[ids[second]] = 1
    if not qrels:
        raise JTCSEError(
            f"{path}: no pair of two different sentences scores {min_score:g} or more; nothing to retrieve."
        )
    corpus = {doc: (sentence, "") for sentence, doc in ids.items()}
    queries = {ids[sentence]: sentence for sentence in s1 if ids[sentence] in qrels}
    return corpus, queries, qrels


def stsb_retrieval_task(path: str | Path, min_score: float = 4.0, name: str | None = None):
    """An MTEB retrieval task (``AbsTaskRetrieval``) made from an STS file (:func:`pairs_as_retrieval`): the close
    pairs' first sentences find their partners among every distinct sentence of the file, a query's own sentence left
    out of its ranking (mteb's ``ignore_identical_ids``). Named ``Local_<file stem>_retrieval``."""
    path = Path(path)
    corpus, queries, qrels = pairs_as_retrieval(path, min_score)
    return make_task(
        name or default_task_name(path, "_retrieval"),
        path,
        _revision(_content(path), repr(float(min_score)).encode()),
        "Retrieval",
        "ndcg_at_10",
        lambda: {"default": {"test": _retrieval_split(corpus, queries, qrels)}},
        ignore_identical_ids=True,
    )
