"""A BEIR retrieval folder made from an STS file, and an independent count of its nDCG@10 (no mteb): the yardstick
``tests/test_local_retrieval.py`` holds ``jtcse eval mteb --local-task`` and mteb's own task object to, and the
plain encode + exact search that ``scripts/bench_local_retrieval.py`` times ``eval mteb`` against.

The folder (:func:`write_beir_folder`): each pair scoring at least ``min_score`` makes its first sentence a query
whose relevant document is its second sentence (relevance 2 from 4.6 up, else 1: graded qrels); every distinct
second sentence of the file is a document. Every other document has a title (the pair's genre and source file),
so mteb's title rule is exercised, and every ``long_every``-th document puts a paragraph of filler text before its
sentence (``filler``: lines of a text file), long enough that a 256-token model's truncation cuts the sentence off
(and short enough that 512 tokens keep it).
Query and document ids never overlap (``q…`` / ``d…``), and no document text repeats.

The count (:func:`independent_count`): each document read as ``title + " " + text`` (stripped; the text alone
without a title), queries and documents encoded by ``SentenceTransformer.encode`` as the model is saved (its own
``max_seq_length``), cosine similarity, an exact ranking of the whole corpus, and nDCG@10 from ``pytrec_eval``
(the trec_eval measure ``ndcg_cut.10``; ``ndcg_cut.1000`` too, which sees every rank of a small corpus).
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path


def write_beir_folder(
    sts_file: str | Path,
    folder: str | Path,
    *,
    filler: str | Path | None = None,
    min_score: float = 4.0,
    limit: int | None = None,
    long_every: int = 4,
    filler_words: int = 240,
) -> dict:
    """Write ``folder/corpus.jsonl``, ``queries.jsonl`` and ``qrels/test.tsv`` from the first ``limit`` pairs of an
    STS-B-layout file (genre, file, year, id, score, sentence1, sentence2); returns the counts."""
    from jtcse.corpus import utf8_lines
    from jtcse.evaluation.sts import read_stsb_file

    pairs = read_stsb_file(sts_file)
    fields = [line.split("\t") for _, line in utf8_lines(sts_file) if line.strip()]
    sources = [f"{row[0].strip()} {row[1].strip()}" for row in fields]  # genre and source file: the title
    rows = list(zip(pairs.sentences1, pairs.sentences2, pairs.scores, sources, strict=True))[:limit]
    padding = _filler(filler, filler_words) if filler else []
    documents: dict[str, dict] = {}
    for _, second, _, source in rows:
        if second not in documents:
            number = len(documents)
            text = second
            if padding and number % long_every == long_every - 1:
                text = " ".join([*padding[number % len(padding)], second])
            documents[second] = {"_id": f"d{number}", "title": source if number % 2 == 0 else "", "text": text}
    queries: dict[str, str] = {}
    qrels: list[tuple[str, str, int]] = []
    for first, second, score, _ in rows:
        if score >= min_score and first != second and first not in documents:
            query = queries.setdefault(first, f"q{len(queries)}")
            qrels.append((query, documents[second]["_id"], 2 if score >= 4.6 else 1))
    folder = Path(folder)
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    _write_jsonl(folder / "corpus.jsonl", documents.values())
    _write_jsonl(folder / "queries.jsonl", ({"_id": qid, "text": text} for text, qid in queries.items()))
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{d}\t{r}" for q, d, r in dict.fromkeys(qrels)]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"documents": len(documents), "queries": len(queries), "qrels": len(lines) - 1}


def _filler(path: str | Path, words: int) -> list[list[str]]:
    """Paragraphs of consecutive non-empty lines of ``path``, each just over ``words`` words (about 1.3 tokens a
    word: past 256 tokens, within 512)."""
    paragraphs, paragraph, count = [], [], 0
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            paragraph.append(line.strip())
            count += len(line.split())
            if count >= words:
                paragraphs.append(paragraph)
                paragraph, count = [], 0
    return paragraphs


def _write_jsonl(path: Path, rows) -> None:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")


def read_beir_folder(folder: str | Path) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    """``(documents, queries, qrels)`` of a BEIR folder, each document read as ``title + " " + text`` (stripped;
    its text alone when it has no title)."""
    folder = Path(folder)

    def rows(name: str) -> list[dict]:
        return [json.loads(line) for line in (folder / name).read_text(encoding="utf-8").splitlines() if line.strip()]

    documents = {
        str(row["_id"]): (f"{row['title']} {row['text']}" if row.get("title") else row["text"]).strip()
        for row in rows("corpus.jsonl")
    }
    queries = {str(row["_id"]): row["text"] for row in rows("queries.jsonl")}
    qrels: dict[str, dict[str, int]] = {}
    with open(folder / "qrels" / "test.tsv", encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            qrels.setdefault(row["query-id"], {})[row["corpus-id"]] = int(row["score"])
    return documents, queries, qrels


def encode_and_search(model, documents: dict[str, str], queries: dict[str, str], *, top_k: int = 1000, batch_size=64):
    """``({query id: {document id: cosine}}, seconds)``: the ``top_k`` documents of each query by an exact search
    (every query against every document), after one ``encode`` of the documents and one of the queries."""
    import torch

    start = time.perf_counter()
    settings = dict(batch_size=batch_size, convert_to_tensor=True, normalize_embeddings=True, show_progress_bar=False)
    document_vectors = model.encode(list(documents.values()), **settings)
    query_vectors = model.encode(list(queries.values()), **settings)
    values, indices = torch.topk(query_vectors @ document_vectors.T, min(top_k, len(documents)), dim=1)
    ids = list(documents)
    run = {
        query: {ids[i]: float(v) for i, v in zip(row_indices, row_values, strict=True)}
        for query, row_indices, row_values in zip(queries, indices.tolist(), values.tolist(), strict=True)
    }
    return run, time.perf_counter() - start


def independent_count(model, folder: str | Path, *, batch_size: int = 64) -> dict:
    """nDCG@10 and nDCG@1000 (the whole ranking of a small corpus) of ``model`` (a ``SentenceTransformer``) on a
    BEIR folder, counted without mteb (:func:`read_beir_folder`, :func:`encode_and_search`, ``pytrec_eval``):
    ``{"ndcg_at_10", "ndcg_at_1000", "queries", "documents", "seconds"}``."""
    import pytrec_eval

    documents, queries, qrels = read_beir_folder(folder)
    run, seconds = encode_and_search(model, documents, queries, batch_size=batch_size)
    per_query = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10,1000"}).evaluate(run)
    means = {k: sum(scores[f"ndcg_cut_{k}"] for scores in per_query.values()) / len(per_query) for k in (10, 1000)}
    return {
        "ndcg_at_10": means[10],
        "ndcg_at_1000": means[1000],
        "queries": len(per_query),
        "documents": len(documents),
        "seconds": seconds,
    }
