"""STS scoring: Spearman correlation between cosine similarity and gold scores.

One implementation serves ``jtcse eval sts`` and the dev-set evaluation during training.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sentence_transformers.base.evaluation.evaluator import BaseEvaluator

from jtcse.corpus import header_row, utf8_lines
from jtcse.errors import JTCSEError


@dataclass
class STSPairs:
    """Sentence pairs with gold similarity scores, and each pair's genre when the file has one (STS-B:
    ``main-captions``, ``main-news``, ``main-forums``)."""

    sentences1: list[str]
    sentences2: list[str]
    scores: np.ndarray
    genres: list[str] | None = None

    def __len__(self) -> int:
        return len(self.scores)

    def take(self, indices) -> STSPairs:
        """The pairs at ``indices`` (in that order), genres included."""
        indices = [int(i) for i in indices]
        return STSPairs(
            [self.sentences1[i] for i in indices],
            [self.sentences2[i] for i in indices],
            self.scores[indices],
            None if self.genres is None else [self.genres[i] for i in indices],
        )


def normalize_whitespace(sentence: str) -> str:
    """SentEval tokenises with ``s.split()`` and SimCSE's batcher re-joins with single spaces."""
    return " ".join(sentence.split())


def scored_pairs(
    rows: Iterable[tuple[int, str, str, str]],
    score_file: str | Path,
    source: str,
    unit: str = "line",
    normalize: bool = True,
) -> STSPairs:
    """``STSPairs`` from ``(line number, sentence1, sentence2, score text)`` rows, sentences whitespace-normalised
    (unless ``normalize`` is false: as written, as mteb reads its tasks).

    A score that is not a number is an error naming ``score_file`` and the line (``unit``: ``row`` for a table);
    no rows at all is an error naming ``source``. Every STS reader (STS-B, SICK, the SemEval years, tables) goes
    through here.
    """
    s1: list[str] = []
    s2: list[str] = []
    scores: list[float] = []
    for line_no, first, second, score_text in rows:
        try:
            score = float(score_text)
        except ValueError:
            raise JTCSEError(f"{score_file}: {unit} {line_no}: score {score_text!r} is not a number.") from None
        if not math.isfinite(score):  # float("nan") reads: one would make every Spearman NaN
            raise JTCSEError(f"{score_file}: {unit} {line_no}: score {score_text!r} is not a finite number.")
        scores.append(score)
        s1.append(normalize_whitespace(first) if normalize else first)
        s2.append(normalize_whitespace(second) if normalize else second)
    if not scores:
        raise JTCSEError(f"{source} has no scored pairs.")
    return STSPairs(s1, s2, np.asarray(scores, dtype=np.float64))


STSB_NUMBERS = (3, 4)
"""Where an STS-B data line holds numbers: its id and its score."""


def read_stsb_file(path: str | Path) -> STSPairs:
    """Read an STS Benchmark file (tab-separated: genre, file, year, id, score, s1, s2[, source…]), with or without a
    header line (a first line whose id and score are names: :func:`jtcse.corpus.header_row`).

    Extra trailing columns (licence/source fields present on some rows) are ignored; sentences are
    whitespace-normalised as SentEval reads them (:func:`normalize_whitespace`); the first column is kept
    as each pair's genre (:attr:`STSPairs.genres`).
    """
    path = Path(path)
    if not path.is_file():
        raise JTCSEError(f"STS-B file not found: {path}")
    genres: list[str] = []

    def rows():
        first = True
        for line_no, line in utf8_lines(path):
            if not line.strip():
                continue
            fields = line.split("\t")
            if first and header_row(fields, numbers=STSB_NUMBERS):
                first = False
                continue
            first = False
            if len(fields) < 7:
                raise JTCSEError(
                    f"{path}: line {line_no} has {len(fields)} tab-separated fields; an STS-B line has "
                    "genre, file, year, id, score, sentence1, sentence2."
                )
            genres.append(fields[0].strip())
            yield line_no, fields[5], fields[6], fields[4]

    pairs = scored_pairs(rows(), path, f"STS-B file {path}")
    pairs.genres = genres
    return pairs


#: The columns of an STS table when none are named: the first of these triples (sentence, sentence, score) it has.
STS_TABLE_COLUMNS = (("sentence1", "sentence2", "score"), ("sentence_A", "sentence_B", "relatedness_score"))
GENRE_COLUMN = "genre"
"""A table's optional column of each pair's genre (as an STS-B file's first field)."""


def is_sts_table(spec: str | Path) -> bool:
    """Whether an STS input is a table or dataset (:func:`jtcse.text_inputs.is_table`: ``.jsonl``, ``.csv``/``.tsv``
    with a header, ``.parquet``, a ``save_to_disk`` folder, ``hf:NAME``) rather than an STS-B text file. A ``.csv`` or
    ``.tsv`` file is a table only when its first line is a header naming the columns of one (:data:`STS_TABLE_COLUMNS`,
    split at tabs or else commas) other than at the places an STS-B line holds them; any other stays an STS-B file
    (the STS Benchmark ships its tab-separated files as ``sts-*.csv``), read as it always was."""
    from jtcse.text_inputs import is_table

    if not is_table(spec):
        return False
    path = Path(spec)
    if path.suffix.lower() not in (".csv", ".tsv") or not path.is_file():
        return True
    first = next((line for _, line in utf8_lines(path) if line.strip()), "")
    fields = [field.strip().strip('"') for field in first.split("\t" if "\t" in first else ",")]
    names = next((names for names in STS_TABLE_COLUMNS if set(names) <= set(fields)), None)
    return names is not None and (fields[5:7] + fields[4:5]) != list(names)


def read_sts_table(spec: str | Path, normalize: bool = True) -> STSPairs:
    """The pairs of an STS table or dataset (read by :func:`jtcse.text_inputs.open_table`): its columns of
    :data:`STS_TABLE_COLUMNS` (and :data:`GENRE_COLUMN`, when it has one), read as an STS-B file is
    (:func:`scored_pairs`: sentences whitespace-normalised unless ``normalize`` is false, a score that is not a
    number an error naming its row). A table without those columns is one error line naming the columns it has."""
    from jtcse.text_inputs import checked_texts, columns_of, listed_columns, open_table

    dataset = open_table(spec, "STS file")
    columns = columns_of(dataset)
    names = next((names for names in STS_TABLE_COLUMNS if set(names) <= set(columns)), None)
    if names is None:
        found = listed_columns(columns)
        wanted = " or ".join(", ".join(names) for names in STS_TABLE_COLUMNS)
        raise JTCSEError(f"{spec}: an STS table needs the columns {wanted}; its columns are {found}.")
    values = {name: dataset.data.column(name).to_pylist() for name in names}
    first, second = (checked_texts(values[name], spec, name, 0) for name in names[:2])
    scores = ["" if score is None else str(score) for score in values[names[2]]]
    pairs = scored_pairs(
        zip(range(1, len(scores) + 1), first, second, scores, strict=True),
        spec,
        f"STS file {spec}",
        unit="row",
        normalize=normalize,
    )
    if GENRE_COLUMN in columns:
        pairs.genres = [str(genre) for genre in dataset.data.column(GENRE_COLUMN).to_pylist()]
    return pairs


def read_sts_input(spec: str | Path) -> STSPairs:
    """The pairs of an STS input (a dev or selection file): a table or dataset (:func:`read_sts_table`) or an
    STS-B text file (:func:`read_stsb_file`), told apart by :func:`is_sts_table`."""
    return read_sts_table(spec) if is_sts_table(spec) else read_stsb_file(spec)


def pair_keys(pairs: STSPairs) -> list[tuple[str, str]]:
    """Each pair as an order-free key (the two sentences sorted), to compare the pairs of two files."""
    return [tuple(sorted(pair)) for pair in zip(pairs.sentences1, pairs.sentences2, strict=True)]


def without_pairs_of(pairs: STSPairs, other: STSPairs) -> tuple[STSPairs, int]:
    """``(pairs without those that also occur in other, how many were dropped)``; a pair is the same in either
    order. STS-B itself repeats 11 pairs of dev in train, so a split drawn from train is made disjoint this way."""
    seen = set(pair_keys(other))
    keep = [i for i, key in enumerate(pair_keys(pairs)) if key not in seen]
    return pairs.take(keep), len(pairs) - len(keep)


def encode_unique(
    model, sentences: list[str], batch_size: int = 64, show_progress_bar: bool = False
) -> dict[str, np.ndarray]:
    """Encode each distinct sentence once (sorted by length so batches pad little)."""
    unique = sorted(set(sentences), key=len)
    embeddings = model.encode(unique, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=show_progress_bar)
    return dict(zip(unique, embeddings, strict=True))


def paired_cosine(table: dict[str, np.ndarray], pairs: STSPairs) -> np.ndarray:
    """cos(f(s1_i), f(s2_i)) for every pair, from a sentence → embedding table.

    As in SentEval, a zero embedding gives cosine 0 rather than NaN.
    """
    a = np.stack([table[s] for s in pairs.sentences1]).astype(np.float64)
    b = np.stack([table[s] for s in pairs.sentences2]).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1))
    return np.nan_to_num(cos)


def cosine_spearman(model, pairs: STSPairs, batch_size: int = 64, show_progress_bar: bool = False) -> float:
    """Spearman ρ (as a fraction) between cos(f(s1), f(s2)) and the gold scores; a ``JTCSEError`` saying why when
    it has none (every gold score equal, :func:`check_correlatable`; or the model gives every pair one cosine)."""
    from scipy.stats import spearmanr

    check_correlatable(pairs, "these pairs")
    table = encode_unique(model, pairs.sentences1 + pairs.sentences2, batch_size, show_progress_bar)
    cosines = paired_cosine(table, pairs)
    if np.ptp(cosines) == 0:
        raise JTCSEError(
            f"the model gives all {len(pairs)} pairs the same cosine ({cosines[0]:.4f}), so their Spearman is "
            "undefined: its embeddings have collapsed (a learning rate too high?)."
        )
    return float(spearmanr(cosines, pairs.scores).statistic)


def check_correlatable(pairs: STSPairs, source: str | Path) -> None:
    """A ``JTCSEError`` naming ``source`` when its pairs can have no Spearman, whatever the model: fewer than two, one
    gold score, or pairs every model gives one cosine (each pair a sentence and itself, or one pair repeated). The
    file alone decides it, so a trainer checks it before its first step."""
    if len(pairs) < 2 or np.ptp(pairs.scores) == 0:
        raise JTCSEError(
            f"{source}: every one of its {len(pairs)} pairs has the gold score {pairs.scores[0]:g}, so no Spearman "
            "can be computed on it; give a file with varied scores."
        )
    rows = zip(pair_keys(pairs), pairs.sentences1, pairs.sentences2, strict=True)
    kinds = {"itself" if first == second else key for key, first, second in rows}
    if len(kinds) == 1:
        what = "pairs a sentence with itself" if kinds == {"itself"} else "is the same pair"
        raise JTCSEError(
            f"{source}: each of its {len(pairs)} pairs {what}, so every model gives them all one cosine and no "
            "Spearman can be computed on it (the file decides it, whatever the model); give a file of varied pairs."
        )


ALL_GENRES = "all"
"""The key of the score over every pair in :func:`spearman_by_genre`."""


def spearman_by_genre(cosines: np.ndarray, pairs: STSPairs) -> dict[str, float]:
    """``{"all": ρ, genre: ρ, ...}``: Spearman ρ (fractions) of ``cosines`` (one per pair) against the gold
    scores, over every pair and over each genre's pairs (genres in order of first appearance; only
    ``"all"`` when the pairs carry no genres). A genre of fewer than two pairs, or whose gold scores or
    cosines are all equal, has no correlation: NaN."""
    from scipy.stats import spearmanr

    cosines = np.asarray(cosines, dtype=np.float64)
    if cosines.shape != (len(pairs),):
        raise ValueError(f"{cosines.shape[0] if cosines.ndim else 0} cosines for {len(pairs)} pairs")
    groups = {ALL_GENRES: np.arange(len(pairs))}
    for genre in dict.fromkeys(pairs.genres or []):
        groups[genre] = np.flatnonzero(np.asarray(pairs.genres) == genre)
    out = {}
    for genre, rows in groups.items():
        if len(rows) < 2 or np.ptp(pairs.scores[rows]) == 0 or np.ptp(cosines[rows]) == 0:
            out[genre] = float("nan")
        else:
            out[genre] = float(spearmanr(cosines[rows], pairs.scores[rows]).statistic)
    return out


def genre_spearman(
    model, pairs: STSPairs | str | Path, batch_size: int = 64, show_progress_bar: bool = False
) -> dict[str, float]:
    """Spearman ρ of ``model`` on an STS-B-format file (or its pairs) per genre, plus ``"all"``
    (:func:`spearman_by_genre`; each sentence encoded once). ``"all"`` equals :func:`cosine_spearman`."""
    if not isinstance(pairs, STSPairs):
        pairs = read_stsb_file(pairs)
    table = encode_unique(model, pairs.sentences1 + pairs.sentences2, batch_size, show_progress_bar)
    return spearman_by_genre(paired_cosine(table, pairs), pairs)


class STSDevEvaluator(BaseEvaluator):
    """sentence-transformers evaluator on an STS dev file (STS-B text or a table, :func:`read_sts_input`); primary
    metric ``spearman_cosine``.

    Usable as ``SentenceTransformerTrainer(evaluator=...)`` so the trainer keeps the best
    checkpoint by dev Spearman.
    """

    def __init__(self, path: str | Path, name: str = "sts-dev", batch_size: int = 64):
        super().__init__()
        self.pairs = read_sts_input(path)
        check_correlatable(self.pairs, path)  # read (and checked) before training: never a NaN dev score
        self.path = str(path)
        self.name = name
        self.batch_size = batch_size
        self.primary_metric = "spearman_cosine"
        self.greater_is_better = True

    def __call__(self, model, output_path: str | None = None, epoch: int = -1, steps: int = -1) -> dict[str, float]:
        metrics = {"spearman_cosine": cosine_spearman(model, self.pairs, self.batch_size)}
        metrics = self.prefix_name_to_metrics(metrics, self.name)
        if hasattr(model, "model_card_data"):
            self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        return metrics
