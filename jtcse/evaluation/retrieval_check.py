"""A retrieval check from data at hand: an STS file's close pairs as queries and answers, scored by mteb.

Each pair of an STS-B-format file scoring at least ``min_score`` (default 4: "mostly equivalent") makes its first
sentence a query whose one relevant document is its second sentence; the corpus is every distinct sentence of the
file, the query's own sentence left out of its ranking
(:func:`jtcse.evaluation.mteb_local_tasks.stsb_retrieval_task`). mteb's ``AbsTaskRetrieval`` and its evaluator
score it (nDCG@10 is the main score), so a model that wins on STS and loses on finding a sentence's paraphrase
among thousands shows. ``jtcse eval mteb MODEL --local-task retrieval-pairs:FILE`` runs the same task.
"""

from __future__ import annotations

from pathlib import Path


def retrieval_check(model, stsb_file: str | Path, min_score: float = 4.0, batch_size: int = 64) -> dict:
    """Score ``model`` (a ``SentenceTransformer``) on the retrieval task made from ``stsb_file``.

    Returns ``{"ndcg_at_10", "main_score", "metric", "recall_at_10", "mrr_at_10", "queries", "corpus",
    "relevant_pairs", "min_score", "file"}`` (scores as fractions, from mteb's own scores of the test split).
    """
    import mteb

    from jtcse.evaluation.mteb_local_tasks import stsb_retrieval_task
    from jtcse.evaluation.mteb_runner import mteb_model

    task = stsb_retrieval_task(stsb_file, min_score)
    task.load_data()
    result = mteb.evaluate(
        mteb_model(model, "retrieval-check"),
        task,
        cache=None,
        encode_kwargs={"batch_size": batch_size},
        show_progress_bar=False,
        raise_error=True,
    ).task_results[0]
    scores = result.scores["test"][0]
    split = task.dataset["default"]["test"]
    return {
        "ndcg_at_10": float(scores["ndcg_at_10"]),
        "main_score": float(result.get_score()),
        "metric": task.metadata.main_score,
        "recall_at_10": float(scores["recall_at_10"]),
        "mrr_at_10": float(scores["mrr_at_10"]),
        "queries": len(split["queries"]),
        "corpus": len(split["corpus"]),
        "relevant_pairs": sum(len(docs) for docs in split["relevant_docs"].values()),
        "min_score": float(min_score),
        "file": str(stsb_file),
    }
